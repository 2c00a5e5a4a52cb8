-- Who changed platform settings, accounts and migrations, and what.
-- The actor's name is kept as it was: the entry outlives a renamed or removed account.
CREATE TABLE audit_log (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    at BIGINT NOT NULL,
    actor_id BIGINT,
    actor TEXT NOT NULL,
    action TEXT NOT NULL,
    target TEXT NOT NULL,
    detail TEXT NOT NULL
);
