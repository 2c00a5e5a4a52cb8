-- The schema as it was before public access had a mode: NodePort was the only
-- way in. Kept as the first migration so the upgrade path is tested for real.
CREATE TABLE users (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    username TEXT NOT NULL UNIQUE,
    password_hash TEXT NOT NULL,
    role TEXT NOT NULL DEFAULT 'user' CHECK (role IN ('user', 'admin')),
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);

CREATE TABLE sessions (
    token_hash TEXT PRIMARY KEY,
    user_id BIGINT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL
);
CREATE INDEX sessions_user ON sessions (user_id);

CREATE TABLE system_settings (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL,
    updated_at BIGINT NOT NULL
);

CREATE TABLE clusters (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    owner_id BIGINT NOT NULL REFERENCES users (id),
    name TEXT NOT NULL UNIQUE,
    -- spec: written by request handlers only
    cpu_millis BIGINT NOT NULL,
    memory_gib BIGINT NOT NULL,
    storage_gib BIGINT NOT NULL,
    public_access_enabled BOOLEAN NOT NULL DEFAULT FALSE,
    control_plane_host TEXT,
    generation BIGINT NOT NULL DEFAULT 1,
    deletion_requested_at BIGINT,
    -- status: written by the reconciler only
    phase TEXT NOT NULL DEFAULT 'pending',
    message TEXT NOT NULL DEFAULT '',
    public_access_port BIGINT,
    api_endpoint TEXT,
    kubeconfig_available BOOLEAN NOT NULL DEFAULT FALSE,
    connection_status TEXT NOT NULL DEFAULT 'unknown',
    observed_generation BIGINT NOT NULL DEFAULT 0,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
CREATE INDEX clusters_owner ON clusters (owner_id);

-- Durable requests for the reconciler, and the cluster's event history.
CREATE TABLE cluster_operations (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    cluster_id BIGINT NOT NULL REFERENCES clusters (id) ON DELETE CASCADE,
    kind TEXT NOT NULL CHECK (kind IN ('create', 'update', 'delete')),
    generation BIGINT NOT NULL,
    detail TEXT NOT NULL,
    requested_by BIGINT REFERENCES users (id) ON DELETE SET NULL,
    state TEXT NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'running', 'done', 'failed')),
    attempts BIGINT NOT NULL DEFAULT 0,
    claimed_by TEXT,
    claimed_until BIGINT,
    last_error TEXT,
    created_at BIGINT NOT NULL,
    finished_at BIGINT
);
CREATE INDEX cluster_operations_queue ON cluster_operations (state, id);
CREATE INDEX cluster_operations_cluster ON cluster_operations (cluster_id, id);
