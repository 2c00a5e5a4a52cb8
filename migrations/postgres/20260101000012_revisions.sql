-- Work proportional to change (issue 26): every write to a cluster's row
-- (spec, status, deletion, old endpoint) and to its operations gives the
-- row the next value of one counter, so "what changed since revision N" is
-- an indexed range read. Deleted rows leave a tombstone with the revision of
-- their deletion. Written by triggers: no statement can forget it.
--
-- The counter is one row, not a sequence: its row lock is held to commit,
-- so revisions commit in order and a reader that has seen N has seen every
-- revision below it. Every statement that writes clusters or operations
-- locks the counter first (statement triggers), before any row: writers
-- queue on it and never deadlock over row order.
CREATE TABLE change_counter (id INT PRIMARY KEY CHECK (id = 1), value BIGINT NOT NULL);
INSERT INTO change_counter (id, value) VALUES (1, 0);
ALTER TABLE clusters ADD COLUMN revision BIGINT NOT NULL DEFAULT 0;
CREATE INDEX clusters_revision ON clusters (revision);
CREATE TABLE cluster_tombstones (
    cluster_id BIGINT PRIMARY KEY,
    owner_id BIGINT NOT NULL,
    revision BIGINT NOT NULL
);
CREATE INDEX cluster_tombstones_revision ON cluster_tombstones (revision);
-- A user's list page's version: the newest revision among their clusters.
CREATE INDEX clusters_owner_revision ON clusters (owner_id, revision);
CREATE INDEX cluster_tombstones_owner_revision ON cluster_tombstones (owner_id, revision);

CREATE FUNCTION kubebyon_lock_counter() RETURNS trigger AS $$
BEGIN
    PERFORM 1 FROM change_counter WHERE id = 1 FOR UPDATE;
    RETURN NULL;
END $$ LANGUAGE plpgsql;
CREATE FUNCTION kubebyon_next_revision() RETURNS BIGINT AS $$
    UPDATE change_counter SET value = value + 1 WHERE id = 1 RETURNING value
$$ LANGUAGE sql;
CREATE FUNCTION clusters_revision() RETURNS trigger AS $$
BEGIN
    NEW.revision := kubebyon_next_revision();
    RETURN NEW;
END $$ LANGUAGE plpgsql;
CREATE FUNCTION clusters_tombstone() RETURNS trigger AS $$
BEGIN
    INSERT INTO cluster_tombstones (cluster_id, owner_id, revision)
        VALUES (OLD.id, OLD.owner_id, kubebyon_next_revision())
        ON CONFLICT (cluster_id) DO UPDATE SET owner_id = excluded.owner_id, revision = excluded.revision;
    RETURN OLD;
END $$ LANGUAGE plpgsql;
CREATE FUNCTION operations_revision() RETURNS trigger AS $$
BEGIN
    UPDATE clusters SET revision = revision WHERE id = NEW.cluster_id;
    RETURN NULL;
END $$ LANGUAGE plpgsql;

CREATE TRIGGER clusters_lock_counter BEFORE INSERT OR UPDATE OR DELETE ON clusters
    FOR EACH STATEMENT EXECUTE FUNCTION kubebyon_lock_counter();
CREATE TRIGGER operations_lock_counter BEFORE INSERT OR UPDATE ON cluster_operations
    FOR EACH STATEMENT EXECUTE FUNCTION kubebyon_lock_counter();
CREATE TRIGGER clusters_revision BEFORE INSERT OR UPDATE ON clusters
    FOR EACH ROW EXECUTE FUNCTION clusters_revision();
CREATE TRIGGER clusters_tombstone AFTER DELETE ON clusters
    FOR EACH ROW EXECUTE FUNCTION clusters_tombstone();
CREATE TRIGGER operations_revision AFTER INSERT OR UPDATE ON cluster_operations
    FOR EACH ROW EXECUTE FUNCTION operations_revision();

-- Existing rows, in id order (the row trigger numbers them).
UPDATE clusters SET revision = 0 WHERE id IN (SELECT id FROM clusters ORDER BY id);
