//! What several console replicas on one database share besides the data:
//! failed sign-in counts and leases. Every statement is one atomic UPSERT or
//! conditional UPDATE, so replicas racing on the same row cannot both win.

use sqlx::AnyPool;

use super::{DbError, now_ms};
use crate::domain::sign_in::{MAX_CLIENT_FAILURES, MAX_FAILURES, WINDOW_SECS};

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
pub(crate) async fn begin_attempt(
    pool: &AnyPool,
    account: Option<&str>,
    client: &str,
    now: i64,
) -> Result<bool, DbError> {
    if count_attempt(pool, &client_key(client), now).await? > i64::from(MAX_CLIENT_FAILURES) {
        return Ok(false);
    }
    match account {
        Some(a) => Ok(count_attempt(pool, &pair_key(a, client), now).await? <= i64::from(MAX_FAILURES)),
        None => Ok(true),
    }
}

/// A successful sign-in forgives the pair and one of the client's attempts.
pub(crate) async fn attempt_succeeded(pool: &AnyPool, account: &str, client: &str) -> Result<(), DbError> {
    sqlx::query("DELETE FROM login_attempts WHERE key = $1").bind(pair_key(account, client)).execute(pool).await?;
    sqlx::query("UPDATE login_attempts SET failures = failures - 1 WHERE key = $1 AND failures > 0")
        .bind(client_key(client))
        .execute(pool)
        .await?;
    Ok(())
}

/// Wrong join-script requests one client may make per window
/// (`service::join_script`): a token's secret has 36^16 values, so this
/// stops guessing without getting in the way of a fleet joining from one NAT.
pub const MAX_JOIN_FAILURES: i64 = 20;

fn join_key(client: &str) -> String {
    format!("j\n{client}")
}

/// Starts a join-script request, counted as a failure in the database for
/// every replica until [`join_attempt_succeeded`]: false once the client has
/// used up its failures in the window.
pub(crate) async fn begin_join_attempt(pool: &AnyPool, client: &str, now: i64) -> Result<bool, DbError> {
    Ok(count_attempt(pool, &join_key(client), now).await? <= MAX_JOIN_FAILURES)
}

/// A request answered `200` gives its count back.
pub(crate) async fn join_attempt_succeeded(pool: &AnyPool, client: &str) -> Result<(), DbError> {
    sqlx::query("UPDATE login_attempts SET failures = failures - 1 WHERE key = $1 AND failures > 0")
        .bind(join_key(client))
        .execute(pool)
        .await?;
    Ok(())
}

/// Scripts one join token may fetch per window (`service::join_script`): a
/// fleet of machines joining with one token through one NAT address gets
/// through; a leaked token cannot make the console fetch without limit.
pub const MAX_TOKEN_FETCHES: i64 = 500;

/// Takes one script fetch from token `token_id` of cluster `cluster`: false
/// once it has used up [`MAX_TOKEN_FETCHES`] in the window.
pub async fn take_token_fetch(pool: &AnyPool, cluster: i64, token_id: &str, now: i64) -> Result<bool, DbError> {
    Ok(count_attempt(pool, &format!("t\n{cluster}\n{token_id}"), now).await? <= MAX_TOKEN_FETCHES)
}

/// Drops records whose window has passed (run hourly).
pub async fn purge_attempts(pool: &AnyPool, now: i64) -> Result<u64, DbError> {
    let done = sqlx::query("DELETE FROM login_attempts WHERE window_start <= $1")
        .bind(now - WINDOW_SECS)
        .execute(pool)
        .await?;
    Ok(done.rows_affected())
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

/// This console's installation id (the label `kubebyon.io/installation` on
/// what it creates on the host): generated by whichever replica asks first,
/// the same for every replica after (one atomic insert, then one read).
pub async fn installation_id(pool: &AnyPool) -> Result<String, DbError> {
    let fresh = format!("{:016x}{:016x}", rand::random::<u64>(), rand::random::<u64>());
    sqlx::query(
        "INSERT INTO installation (singleton, id, created_at) VALUES (1, $1, $2) ON CONFLICT (singleton) DO NOTHING",
    )
    .bind(&fresh)
    .bind(super::now())
    .execute(pool)
    .await?;
    Ok(sqlx::query_scalar("SELECT id FROM installation WHERE singleton = 1").fetch_one(pool).await?)
}
