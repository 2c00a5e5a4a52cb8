//! The `sessions` table. Only a SHA-256 of the cookie token is stored.

use sqlx::AnyPool;

use super::users::UserRow;
use super::{DbError, now};

pub async fn insert(pool: &AnyPool, token_hash: &str, user_id: i64, ttl_secs: i64) -> Result<(), DbError> {
    let t = now();
    sqlx::query("INSERT INTO sessions (token_hash, user_id, created_at, expires_at) VALUES ($1, $2, $3, $4)")
        .bind(token_hash)
        .bind(user_id)
        .bind(t)
        .bind(t + ttl_secs)
        .execute(pool)
        .await?;
    Ok(())
}

/// The user behind an unexpired session.
pub async fn user_for(pool: &AnyPool, token_hash: &str) -> Result<Option<UserRow>, DbError> {
    Ok(sqlx::query_as(
        "SELECT u.id, u.username, u.password_hash, u.role, u.created_at, u.quota_clusters, u.quota_cpu_millis, \
         u.quota_memory_gib, u.quota_storage_gib FROM sessions s \
         JOIN users u ON u.id = s.user_id WHERE s.token_hash = $1 AND s.expires_at > $2",
    )
    .bind(token_hash)
    .bind(now())
    .fetch_optional(pool)
    .await?)
}

pub async fn delete(pool: &AnyPool, token_hash: &str) -> Result<(), DbError> {
    sqlx::query("DELETE FROM sessions WHERE token_hash = $1").bind(token_hash).execute(pool).await?;
    Ok(())
}

pub async fn delete_expired(pool: &AnyPool) -> Result<u64, DbError> {
    let done = sqlx::query("DELETE FROM sessions WHERE expires_at <= $1").bind(now()).execute(pool).await?;
    Ok(done.rows_affected())
}
