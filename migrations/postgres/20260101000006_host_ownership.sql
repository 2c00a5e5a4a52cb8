-- What this console created on the host, so it never touches what it did
-- not create (docs/architecture.md, "Ownership on the host").
--
-- installation: one id per console database, generated on first start and
-- written into the label `kubebyon.io/installation` of every namespace and
-- HelmChart the console creates (replicas share it; a second console on the
-- same host has its own).
CREATE TABLE installation (
    singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
    id TEXT NOT NULL,
    created_at BIGINT NOT NULL
);

-- The UID of the namespace the console created for the cluster: it deletes
-- that namespace only with this UID as a precondition.
ALTER TABLE clusters ADD COLUMN namespace_uid TEXT;

-- Clusters applied before this migration carry no installation label on the
-- host: those the console's own records show it applied (an observed
-- generation, or a finished create/update operation) are taken over once,
-- where the namespace carries their cluster id; every other is created anew.
ALTER TABLE clusters ADD COLUMN adopt_legacy BOOLEAN NOT NULL DEFAULT FALSE;
UPDATE clusters SET adopt_legacy = TRUE
WHERE observed_generation > 0
   OR EXISTS (SELECT 1 FROM cluster_operations o
              WHERE o.cluster_id = clusters.id AND o.state = 'done' AND o.kind IN ('create', 'update'));

-- When each owner's operation was last claimed: claims go to the owner served
-- longest ago, so one owner's queue cannot starve another's
-- (operations::claim_next).
CREATE TABLE queue_turns (
    owner_id BIGINT PRIMARY KEY,
    served_ms BIGINT NOT NULL
);
