-- Sharing (issue 42): a cluster has members — users or teams — with a role
-- (admin, edit, view); teams are named groups of users that admins manage.
-- The owner stays on the cluster row (quotas are the owner's).
CREATE TABLE teams (
    id BIGSERIAL PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    created_at BIGINT NOT NULL
);
CREATE TABLE team_members (
    team_id BIGINT NOT NULL REFERENCES teams (id) ON DELETE CASCADE,
    user_id BIGINT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    PRIMARY KEY (team_id, user_id)
);
CREATE INDEX team_members_user ON team_members (user_id);
-- Exactly one of user_id and team_id names the member.
CREATE TABLE cluster_members (
    id BIGSERIAL PRIMARY KEY,
    cluster_id BIGINT NOT NULL REFERENCES clusters (id) ON DELETE CASCADE,
    user_id BIGINT REFERENCES users (id) ON DELETE CASCADE,
    team_id BIGINT REFERENCES teams (id) ON DELETE CASCADE,
    role TEXT NOT NULL CHECK (role IN ('admin', 'edit', 'view')),
    added_by BIGINT REFERENCES users (id) ON DELETE SET NULL,
    created_at BIGINT NOT NULL,
    CHECK ((user_id IS NULL) <> (team_id IS NULL))
);
CREATE UNIQUE INDEX cluster_members_one_user ON cluster_members (cluster_id, user_id) WHERE user_id IS NOT NULL;
CREATE UNIQUE INDEX cluster_members_one_team ON cluster_members (cluster_id, team_id) WHERE team_id IS NOT NULL;
CREATE INDEX cluster_members_user ON cluster_members (user_id);
CREATE INDEX cluster_members_team ON cluster_members (team_id);
-- Every user a membership reaches, teams expanded (a user in two teams, or
-- also named directly, has a row for each: the highest role counts).
CREATE VIEW cluster_member_users AS
    SELECT cluster_id, user_id, role FROM cluster_members WHERE user_id IS NOT NULL
    UNION ALL
    SELECT m.cluster_id, t.user_id, m.role FROM cluster_members m JOIN team_members t ON t.team_id = m.team_id;
