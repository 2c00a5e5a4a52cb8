-- Per-user quota overrides (domain/quota.rs). NULL: the platform default
-- (`system_settings` key `quota`) applies to that dimension.
ALTER TABLE users ADD COLUMN quota_clusters BIGINT;
ALTER TABLE users ADD COLUMN quota_cpu_millis BIGINT;
ALTER TABLE users ADD COLUMN quota_memory_gib BIGINT;
ALTER TABLE users ADD COLUMN quota_storage_gib BIGINT;
