-- Bring your own nodes (vCluster private nodes): chosen when a cluster is
-- created, fixed after. Existing clusters have none.
ALTER TABLE clusters ADD COLUMN own_nodes BOOLEAN NOT NULL DEFAULT FALSE;
