//! The `sessions` table. Only a SHA-256 of the cookie token is stored.

use sqlx::AnyPool;

use super::users::UserRow;
use super::{DbError, now};

pub async fn insert(pool: &AnyPool, token_hash: &str, user_id: i64, ttl_secs: i64) -> Result<(), DbError> {
    let t = now();
    sqlx::query(
        "INSERT INTO sessions (token_hash, user_id, created_at, expires_at, last_seen_at) VALUES ($1, $2, $3, $4, $3)",
    )
    .bind(token_hash)
    .bind(user_id)
    .bind(t)
    .bind(t + ttl_secs)
    .execute(pool)
    .await?;
    Ok(())
}

#[derive(sqlx::FromRow)]
struct Session {
    #[sqlx(flatten)]
    user: UserRow,
    last_seen_at: i64,
}

/// The user behind a session that has neither expired nor been unused for
/// `idle_secs`; its last use is written when older than `touch_secs`.
pub async fn user_for(
    pool: &AnyPool,
    token_hash: &str,
    idle_secs: i64,
    touch_secs: i64,
) -> Result<Option<UserRow>, DbError> {
    let t = now();
    let found: Option<Session> = sqlx::query_as(
        "SELECT u.id, u.username, u.password_hash, u.role, u.created_at, u.quota_clusters, u.quota_cpu_millis, \
         u.quota_memory_gib, u.quota_storage_gib, u.disabled_at, u.oidc_subject, s.last_seen_at FROM sessions s \
         JOIN users u ON u.id = s.user_id WHERE s.token_hash = $1 AND s.expires_at > $2 AND s.last_seen_at > $3 \
         AND u.disabled_at IS NULL",
    )
    .bind(token_hash)
    .bind(t)
    .bind(t - idle_secs)
    .fetch_optional(pool)
    .await?;
    let Some(found) = found else { return Ok(None) };
    if found.last_seen_at <= t - touch_secs {
        sqlx::query("UPDATE sessions SET last_seen_at = $1 WHERE token_hash = $2")
            .bind(t)
            .bind(token_hash)
            .execute(pool)
            .await?;
    }
    Ok(Some(found.user))
}

pub(crate) async fn delete(pool: &AnyPool, token_hash: &str) -> Result<(), DbError> {
    sqlx::query("DELETE FROM sessions WHERE token_hash = $1").bind(token_hash).execute(pool).await?;
    Ok(())
}

pub async fn delete_expired(pool: &AnyPool) -> Result<u64, DbError> {
    let done = sqlx::query("DELETE FROM sessions WHERE expires_at <= $1").bind(now()).execute(pool).await?;
    Ok(done.rows_affected())
}

/// Ends the sessions password sign-in made that the operator's policy no
/// longer allows (at start, with `KUBEBYON_LOCAL_SIGN_IN` `admins` or `off`):
/// those of local accounts (every session of a local account was made with
/// its password), the admins' kept when `keep_admins`. How many ended.
pub async fn end_password_sessions(pool: &AnyPool, keep_admins: bool) -> Result<u64, DbError> {
    let done = sqlx::query(
        "DELETE FROM sessions WHERE user_id IN (SELECT id FROM users WHERE oidc_subject IS NULL \
         AND NOT ($1 AND role = 'admin'))",
    )
    .bind(keep_admins)
    .execute(pool)
    .await?;
    Ok(done.rows_affected())
}
