//! Housekeeping: removes expired sessions and old failed sign-in records,
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
    }
}
