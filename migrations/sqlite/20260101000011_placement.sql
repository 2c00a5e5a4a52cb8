-- Placement (issue 24): spread across the host's machines and the control
-- plane claim's StorageClass, the admin's settings when a cluster is
-- created, kept per cluster (a claim's class never changes; a values change
-- restarts a control plane). Existing clusters were rendered with neither.
ALTER TABLE clusters ADD COLUMN spread TEXT NOT NULL DEFAULT 'off';
ALTER TABLE clusters ADD COLUMN spread_topology_key TEXT NOT NULL DEFAULT 'kubernetes.io/hostname';
ALTER TABLE clusters ADD COLUMN storage_class TEXT;
