-- State that replicas share: failed sign-ins (throttling across replicas) and
-- leases (which replica does the work only one should do).
CREATE TABLE login_attempts (
    key TEXT PRIMARY KEY,
    failures BIGINT NOT NULL,
    window_start BIGINT NOT NULL
);

CREATE TABLE leases (
    name TEXT PRIMARY KEY,
    holder TEXT NOT NULL,
    until_ms BIGINT NOT NULL
);
