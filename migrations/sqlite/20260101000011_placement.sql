-- Placement (issue 24): spread across the host's machines and the control
-- plane claim's StorageClass, the admin's settings when a cluster is
-- created, kept per cluster (a claim's class never changes; a values change
-- restarts a control plane). Existing clusters were rendered with neither.
ALTER TABLE clusters ADD COLUMN spread TEXT NOT NULL DEFAULT 'off';
ALTER TABLE clusters ADD COLUMN spread_topology_key TEXT NOT NULL DEFAULT 'kubernetes.io/hostname';
ALTER TABLE clusters ADD COLUMN storage_class TEXT;
-- Moves to gateway access (issue 24): a move's target mode, each item's mode
-- before the move (what a rollback returns to), and the mode of a cluster's
-- old endpoint during its grace period (the Service keeps that type beside
-- the new route). Earlier moves were all NodePort → LoadBalancer.
ALTER TABLE migrations ADD COLUMN target TEXT NOT NULL DEFAULT 'loadbalancer';
ALTER TABLE migration_items ADD COLUMN old_mode TEXT;
ALTER TABLE clusters ADD COLUMN old_endpoint_mode TEXT;
