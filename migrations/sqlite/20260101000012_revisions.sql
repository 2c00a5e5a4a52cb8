-- Work proportional to change (issue 26): every write to a cluster's row
-- (spec, status, deletion, old endpoint) and to its operations gives the
-- row the next value of one counter, so "what changed since revision N" is
-- an indexed range read. Deleted rows leave a tombstone with the revision of
-- their deletion. Written by triggers: no statement can forget it.
CREATE TABLE change_counter (id INTEGER PRIMARY KEY CHECK (id = 1), value BIGINT NOT NULL);
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

-- (SQLite leaves recursive triggers off: the inner UPDATE of a trigger does
-- not fire that trigger again; the WHEN keeps the insert's inner UPDATE from
-- counting twice.)
CREATE TRIGGER clusters_revision_insert AFTER INSERT ON clusters BEGIN
    UPDATE change_counter SET value = value + 1 WHERE id = 1;
    UPDATE clusters SET revision = (SELECT value FROM change_counter WHERE id = 1) WHERE id = NEW.id;
END;
CREATE TRIGGER clusters_revision_update AFTER UPDATE ON clusters WHEN NEW.revision = OLD.revision BEGIN
    UPDATE change_counter SET value = value + 1 WHERE id = 1;
    UPDATE clusters SET revision = (SELECT value FROM change_counter WHERE id = 1) WHERE id = NEW.id;
END;
CREATE TRIGGER clusters_tombstone AFTER DELETE ON clusters BEGIN
    UPDATE change_counter SET value = value + 1 WHERE id = 1;
    INSERT INTO cluster_tombstones (cluster_id, owner_id, revision)
        VALUES (OLD.id, OLD.owner_id, (SELECT value FROM change_counter WHERE id = 1))
        ON CONFLICT (cluster_id) DO UPDATE SET owner_id = excluded.owner_id, revision = excluded.revision;
END;
-- An operation queued, claimed, retried or finished is a change of its cluster.
CREATE TRIGGER operations_revision_insert AFTER INSERT ON cluster_operations BEGIN
    UPDATE clusters SET revision = revision WHERE id = NEW.cluster_id;
END;
CREATE TRIGGER operations_revision_update AFTER UPDATE ON cluster_operations BEGIN
    UPDATE clusters SET revision = revision WHERE id = NEW.cluster_id;
END;

-- Existing rows, in id order.
UPDATE clusters SET revision = id;
UPDATE change_counter SET value = COALESCE((SELECT MAX(id) FROM clusters), 0) WHERE id = 1;
