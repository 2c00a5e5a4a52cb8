//! Housekeeping: removes expired sessions, old failed sign-in records and
//! the spent `state`s of OpenID Connect sign-ins whose cookies have expired,
//! ended console admin grants,
//! once an hour (every replica; each delete is idempotent).

use sqlx::AnyPool;

use crate::server::db;

pub(crate) async fn run(pool: AnyPool) {
    let mut tick = tokio::time::interval(std::time::Duration::from_secs(3600));
    loop {
        tick.tick().await;
        if let Err(e) = db::sessions::delete_expired(&pool).await {
            tracing::warn!(error = %e, "expiring sessions failed");
        }
        if let Err(e) = db::shared::purge_attempts(&pool, db::now()).await {
            tracing::warn!(error = %e, "purging sign-in records failed");
        }
        if let Err(e) = db::users::delete_expired_grants(&pool, db::now()).await {
            tracing::warn!(error = %e, "sweeping ended console admin grants failed");
        }
        if let Err(e) = db::oidc::delete_stale(&pool, crate::server::auth::oidc::PENDING_SECS).await {
            tracing::warn!(error = %e, "sweeping spent OpenID Connect sign-in states failed");
        }
    }
}
