//! Keeps every cluster's access bindings in step with the console's
//! memberships on a slow, spread schedule: each cluster with a
//! kubeconfig once every [`PERIOD`], one at a time, evenly spaced over it —
//! never in the observer's passes, which keep reading nothing when nothing
//! changed. A binding a tenant deleted or changed is put back at the latest
//! then (and at once on the next download or membership change:
//! `service::credentials::resync`). A cluster whose endpoint relays to the
//! host is skipped (nothing is written there). No lease: every write is a
//! server-side apply of what the database says, so replicas agree.

use std::time::Duration;

use sqlx::AnyPool;

use crate::server::db;
use crate::server::host::HostHandle;
use crate::server::tenant::access;

/// How often each cluster's bindings are looked at.
pub const PERIOD: Duration = Duration::from_secs(600);

/// Runs forever: a pass every [`PERIOD`], its clusters spread over it.
pub async fn run(pool: AnyPool, host: HostHandle) {
    loop {
        let started = tokio::time::Instant::now();
        let ids = match db::clusters::with_kubeconfig(&pool).await {
            Ok(ids) => ids,
            Err(e) => {
                tracing::warn!(error = %e, "access sync: listing the clusters failed");
                Vec::new()
            }
        };
        let gap = PERIOD / u32::try_from(ids.len().max(1)).unwrap_or(u32::MAX);
        for id in ids {
            one(&pool, &host, id).await;
            tokio::time::sleep(gap).await;
        }
        tokio::time::sleep_until(started + PERIOD).await;
    }
}

/// Runs forever: whenever a change that touched several clusters queued
/// them (`service::credentials::resync`), brings each one's bindings in
/// step, one at a time (a request answers before they are done).
pub async fn follow_queue(pool: AnyPool, host: HostHandle) {
    loop {
        access::drain(&pool, &host).await;
        host.access.wake.notified().await;
    }
}

/// One cluster's bindings brought in step (a failure is logged; the next
/// pass tries again). The number of bindings written.
async fn one(pool: &AnyPool, host: &HostHandle, id: i64) -> usize {
    let Ok(Some(cluster)) = db::clusters::get(pool, id).await else { return 0 };
    match Box::pin(access::resync_one(pool, host, &cluster)).await {
        Ok(written) => written,
        Err(e) => {
            tracing::warn!(cluster = id, error = %e, "access sync: the cluster's bindings could not be brought in step");
            0
        }
    }
}

/// Every cluster at once, without the spread (what a pass does; for tests
/// and operators). The number of bindings written.
pub async fn pass(pool: &AnyPool, host: &HostHandle) -> usize {
    let mut written = 0;
    for id in db::clusters::with_kubeconfig(pool).await.unwrap_or_default() {
        written += one(pool, host, id).await;
    }
    written
}
