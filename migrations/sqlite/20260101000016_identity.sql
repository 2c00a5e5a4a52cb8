-- Access bound to identity (issue 42), part 3.
-- A disabled account signs in no more, its sessions are ended and the
-- virtual clusters' bindings drop it (its certificates authorise nothing).
ALTER TABLE users ADD COLUMN disabled_at BIGINT;
-- Accounts made at an OpenID Connect sign-in: "<issuer> <sub>" (the
-- provider's immutable subject, never the name it shows). They have no
-- password (password_hash is empty and never verifies).
ALTER TABLE users ADD COLUMN oidc_subject TEXT;
CREATE UNIQUE INDEX users_oidc_subject ON users (oidc_subject);
-- A sign-in under way at the provider: the hash of its `state`, the nonce and
-- PKCE verifier it must match, where to go after. Taken (deleted) by the
-- callback, so a replayed `state` finds nothing; stale ones are swept.
CREATE TABLE oidc_logins (
    state_hash TEXT PRIMARY KEY,
    nonce TEXT NOT NULL,
    pkce_verifier TEXT NOT NULL,
    next_path TEXT NOT NULL,
    created_at BIGINT NOT NULL
);
-- Who lost sight of a cluster (taken out of its members or of a team it is
-- shared with, or its previous owner), at the revision of that change: their
-- list's version moves and their open list page drops the cluster by push,
-- as a deletion's tombstone does for the owner. One row per cluster and user.
CREATE TABLE access_losses (
    cluster_id BIGINT NOT NULL,
    user_id BIGINT NOT NULL,
    revision BIGINT NOT NULL,
    PRIMARY KEY (cluster_id, user_id)
);
CREATE INDEX access_losses_revision ON access_losses (revision);
CREATE INDEX access_losses_user_revision ON access_losses (user_id, revision);
