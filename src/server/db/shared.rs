//! What several console replicas on one database share besides the data:
//! failed sign-in counts and leases. Every statement is one atomic UPSERT or
//! conditional UPDATE, so replicas racing on the same row cannot both win.

use sqlx::AnyPool;

use super::DbError;
use crate::server::auth::rate_limit::{MAX_CLIENT_FAILURES, MAX_FAILURES, WINDOW_SECS};

fn pair_key(account: &str, client: &str) -> String {
    format!("p\n{account}\n{client}")
}

fn client_key(client: &str) -> String {
    format!("c\n{client}")
}

/// Counts one more attempt under `key` (a fresh window once the old one has
/// passed) and returns the count.
async fn count_attempt(pool: &AnyPool, key: &str, now: i64) -> Result<i64, DbError> {
    let n = sqlx::query_scalar(
        "INSERT INTO login_attempts (key, failures, window_start) VALUES ($1, 1, $2) \
         ON CONFLICT (key) DO UPDATE SET \
           failures = CASE WHEN $2 - login_attempts.window_start >= $3 THEN 1 ELSE login_attempts.failures + 1 END, \
           window_start = CASE WHEN $2 - login_attempts.window_start >= $3 THEN $2 ELSE login_attempts.window_start END \
         RETURNING failures",
    )
    .bind(key)
    .bind(now)
    .bind(WINDOW_SECS)
    .fetch_one(pool)
    .await?;
    Ok(n)
}

/// Starts a sign-in attempt, counted in the database for every replica: false
/// when the client, or this account from this client, has used up its
/// failures in the window (the same limits as the per-process limiter).
pub async fn begin_attempt(pool: &AnyPool, account: Option<&str>, client: &str, now: i64) -> Result<bool, DbError> {
    if count_attempt(pool, &client_key(client), now).await? > i64::from(MAX_CLIENT_FAILURES) {
        return Ok(false);
    }
    match account {
        Some(a) => Ok(count_attempt(pool, &pair_key(a, client), now).await? <= i64::from(MAX_FAILURES)),
        None => Ok(true),
    }
}

/// A successful sign-in forgives the pair and one of the client's attempts.
pub async fn attempt_succeeded(pool: &AnyPool, account: &str, client: &str) -> Result<(), DbError> {
    sqlx::query("DELETE FROM login_attempts WHERE key = $1").bind(pair_key(account, client)).execute(pool).await?;
    sqlx::query("UPDATE login_attempts SET failures = failures - 1 WHERE key = $1 AND failures > 0")
        .bind(client_key(client))
        .execute(pool)
        .await?;
    Ok(())
}

/// Drops records whose window has passed (run hourly).
pub async fn purge_attempts(pool: &AnyPool, now: i64) -> Result<u64, DbError> {
    let done = sqlx::query("DELETE FROM login_attempts WHERE window_start <= $1")
        .bind(now - WINDOW_SECS)
        .execute(pool)
        .await?;
    Ok(done.rows_affected())
}

fn now_ms() -> i64 {
    use std::time::{SystemTime, UNIX_EPOCH};
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or_default()
}

/// Takes or renews lease `name` for `holder` for `ttl_ms`: true when `holder`
/// holds it afterwards. A lease is taken over only once it has run out.
pub async fn acquire_lease(pool: &AnyPool, name: &str, holder: &str, ttl_ms: i64) -> Result<bool, DbError> {
    let now = now_ms();
    let won: Option<String> = sqlx::query_scalar(
        "INSERT INTO leases (name, holder, until_ms) VALUES ($1, $2, $3) \
         ON CONFLICT (name) DO UPDATE SET holder = $2, until_ms = $3 \
         WHERE leases.holder = $2 OR leases.until_ms < $4 \
         RETURNING holder",
    )
    .bind(name)
    .bind(holder)
    .bind(now + ttl_ms)
    .bind(now)
    .fetch_optional(pool)
    .await?;
    Ok(won.as_deref() == Some(holder))
}

/// Who holds lease `name` now, if anyone.
pub async fn lease_holder(pool: &AnyPool, name: &str) -> Result<Option<String>, DbError> {
    Ok(sqlx::query_scalar("SELECT holder FROM leases WHERE name = $1 AND until_ms >= $2")
        .bind(name)
        .bind(now_ms())
        .fetch_optional(pool)
        .await?)
}
