-- Moving NodePort clusters to LoadBalancer (docs/runbooks/migrate-to-loadbalancer.md).
-- A migration is one admin's batch; each of its clusters is an item that goes
-- queued -> switching -> done | failed (-> queued on retry | rolled_back).
CREATE TABLE migrations (
    id BIGSERIAL PRIMARY KEY,
    created_by BIGINT NOT NULL REFERENCES users (id),
    -- how the hosts were given (JSON), for the record
    source TEXT NOT NULL,
    concurrency BIGINT NOT NULL CHECK (concurrency >= 1),
    -- seconds the old NodePort endpoint keeps answering after a switch
    grace_secs BIGINT NOT NULL CHECK (grace_secs >= 0),
    created_at BIGINT NOT NULL
);

CREATE TABLE migration_items (
    migration_id BIGINT NOT NULL REFERENCES migrations (id) ON DELETE CASCADE,
    cluster_id BIGINT NOT NULL REFERENCES clusters (id) ON DELETE CASCADE,
    position BIGINT NOT NULL,
    -- what the cluster had, to roll back to and to keep answering during the grace period
    was_enabled BOOLEAN NOT NULL,
    old_host TEXT,
    old_endpoint TEXT,
    new_host TEXT NOT NULL,
    state TEXT NOT NULL DEFAULT 'queued'
        CHECK (state IN ('queued', 'switching', 'done', 'failed', 'rolled_back')),
    -- the cluster generation the switch wrote
    target_generation BIGINT,
    reason TEXT NOT NULL DEFAULT '',
    started_at BIGINT,
    finished_at BIGINT,
    PRIMARY KEY (migration_id, cluster_id)
);
CREATE INDEX migration_items_state ON migration_items (state, migration_id, position);

-- A migrated cluster's old endpoint: its host stays in the certificate and its
-- node port stays open until `old_endpoint_until`; then the migration driver
-- closes it (one more values change: the host leaves extraSANs and, with
-- MetalLB or kube-vip, the Service stops allocating node ports).
ALTER TABLE clusters ADD COLUMN old_endpoint_host TEXT;
ALTER TABLE clusters ADD COLUMN old_endpoint_until BIGINT;
ALTER TABLE clusters ADD COLUMN old_endpoint_closed BOOLEAN NOT NULL DEFAULT FALSE;
-- The owner has read the "endpoint changed" notice on the detail page.
ALTER TABLE clusters ADD COLUMN old_endpoint_notice_dismissed BOOLEAN NOT NULL DEFAULT FALSE;
