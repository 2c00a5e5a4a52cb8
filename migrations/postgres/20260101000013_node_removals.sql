-- Removing a joined node is a background operation (issue 39), as
-- `vcluster node delete` does it: cordon, evict the node's pods and wait
-- until they are gone, then delete the Node. One row per removal, driven by
-- any replica (every step is idempotent; the end is a conditional UPDATE);
-- at most one running removal per node.
CREATE TABLE node_removals (
    id BIGSERIAL PRIMARY KEY,
    cluster_id BIGINT NOT NULL REFERENCES clusters (id) ON DELETE CASCADE,
    node TEXT NOT NULL,
    drain BOOLEAN NOT NULL,
    requested_by BIGINT REFERENCES users (id) ON DELETE SET NULL,
    state TEXT NOT NULL DEFAULT 'draining' CHECK (state IN ('draining', 'done', 'failed')),
    -- Pods still on the node at the last look (NULL: not looked yet).
    pods_left BIGINT,
    -- Why it waits (draining) or failed: domain::nodes::RemovalReason; '' for none.
    reason TEXT NOT NULL DEFAULT '',
    -- The pod a disruption budget keeps (namespace/name), else ''.
    pod TEXT NOT NULL DEFAULT '',
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    finished_at BIGINT
);
CREATE UNIQUE INDEX node_removals_running ON node_removals (cluster_id, node) WHERE state = 'draining';
CREATE INDEX node_removals_cluster ON node_removals (cluster_id, id);
CREATE INDEX node_removals_state ON node_removals (state);
