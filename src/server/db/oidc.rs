//! OpenID Connect sign-ins: the `oidc_spent` table (the `state` of each
//! finished sign-in, so its callback is good once) and the `console_keys`
//! table (the key that seals a sign-in under way into its browser's cookie).
//! A sign-in only started writes nothing.

use sqlx::AnyPool;

use super::{DbError, now};

/// Records a finished sign-in's `state_hash`: false when it was spent
/// already (a replayed callback; two racing, one wins).
pub(crate) async fn spend(pool: &AnyPool, state_hash: &str) -> Result<bool, DbError> {
    let done = sqlx::query("INSERT INTO oidc_spent (state_hash, created_at) VALUES ($1, $2) ON CONFLICT DO NOTHING")
        .bind(state_hash)
        .bind(now())
        .execute(pool)
        .await?;
    Ok(done.rows_affected() == 1)
}

/// Whether `state_hash` was spent (read before the code is exchanged, so a
/// replay does not reach the provider).
pub(crate) async fn spent(pool: &AnyPool, state_hash: &str) -> Result<bool, DbError> {
    let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM oidc_spent WHERE state_hash = $1")
        .bind(state_hash)
        .fetch_one(pool)
        .await?;
    Ok(n > 0)
}

/// Sweeps states spent more than `max_age_secs` ago: their cookies have
/// expired, so they can come back no more (`oidc_spent_created_at`).
pub(crate) async fn delete_stale(pool: &AnyPool, max_age_secs: i64) -> Result<u64, DbError> {
    let done =
        sqlx::query("DELETE FROM oidc_spent WHERE created_at <= $1").bind(now() - max_age_secs).execute(pool).await?;
    Ok(done.rows_affected())
}

/// The console's secret for `purpose` (hex), made from `fresh` by the first
/// caller; every later caller, on any replica, reads that one.
pub(crate) async fn key(pool: &AnyPool, purpose: &str, fresh: &str) -> Result<String, DbError> {
    sqlx::query("INSERT INTO console_keys (purpose, secret, created_at) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING")
        .bind(purpose)
        .bind(fresh)
        .bind(now())
        .execute(pool)
        .await?;
    Ok(sqlx::query_scalar("SELECT secret FROM console_keys WHERE purpose = $1").bind(purpose).fetch_one(pool).await?)
}
