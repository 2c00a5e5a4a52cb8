-- When a session was last used: a session unused for the idle time
-- (auth::session::IDLE_SECS) ends, whatever its expiry.
ALTER TABLE sessions ADD COLUMN last_seen_at BIGINT NOT NULL DEFAULT 0;
UPDATE sessions SET last_seen_at = created_at;
