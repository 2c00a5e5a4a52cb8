//! The `oidc_logins` table: OpenID Connect sign-ins under way at the
//! provider, each taken once by its callback.

use sqlx::{AnyPool, FromRow};

use super::{DbError, now};

/// A sign-in under way: what its callback must match.
#[derive(Debug, Clone, FromRow)]
pub(crate) struct Pending {
    pub nonce: String,
    pub pkce_verifier: String,
    pub next_path: String,
}

pub(crate) async fn insert(
    pool: &AnyPool,
    state_hash: &str,
    nonce: &str,
    pkce_verifier: &str,
    next: &str,
) -> Result<(), DbError> {
    sqlx::query(
        "INSERT INTO oidc_logins (state_hash, nonce, pkce_verifier, next_path, created_at) VALUES ($1, $2, $3, $4, $5)",
    )
    .bind(state_hash)
    .bind(nonce)
    .bind(pkce_verifier)
    .bind(next)
    .bind(now())
    .execute(pool)
    .await?;
    Ok(())
}

/// Takes (deletes and returns) the sign-in of `state_hash` if it started
/// within `max_age_secs`: a `state` is good once (two callbacks racing,
/// one wins).
pub(crate) async fn take(pool: &AnyPool, state_hash: &str, max_age_secs: i64) -> Result<Option<Pending>, DbError> {
    Ok(sqlx::query_as(
        "DELETE FROM oidc_logins WHERE state_hash = $1 AND created_at > $2 \
         RETURNING nonce, pkce_verifier, next_path",
    )
    .bind(state_hash)
    .bind(now() - max_age_secs)
    .fetch_optional(pool)
    .await?)
}

/// Sweeps sign-ins older than `max_age_secs` (abandoned at the provider).
pub(crate) async fn delete_stale(pool: &AnyPool, max_age_secs: i64) -> Result<u64, DbError> {
    let done =
        sqlx::query("DELETE FROM oidc_logins WHERE created_at <= $1").bind(now() - max_age_secs).execute(pool).await?;
    Ok(done.rows_affected())
}
