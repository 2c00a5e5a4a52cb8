//! Background work, in one place: what runs without a request.
//!
//! - [`reconciler`]: brings the host cluster to the stored specs and writes
//!   back what it observes. Every replica works the operation queue (each
//!   operation claimed with a lease, `KUBEBYON_CLAIM_LEASE_SECS`); one replica
//!   at a time holds the observer lease (`KUBEBYON_LEADER_LEASE_SECS`) and
//!   observes, probes and repairs drift.
//! - [`move_driver`]: moves the clusters of running moves from NodePort
//!   to LoadBalancer. No lease: each of its steps is a compare-and-set in the
//!   database, so replicas driving at once cannot repeat one.
//! - [`node_removal`]: removes joined nodes as `vcluster node delete` does
//!   (cordon, evict, wait, delete), one idempotent step per pass; no lease.
//! - [`access_sync`]: each cluster's access bindings in step with the
//!   console's memberships, every 10 minutes, spread; no lease.
//! - [`housekeeping`]: expired sessions and old sign-in records, hourly.
//! - the live pages' poller (`server::push::Hub`), started with the first
//!   open page, supervised as these are.
//! - [`supervise`]: restarts a background task that panicked, and reports it.
//! - [`backoff`]: the one back-off rule they all wait by.
//!
//! Request handlers never call these; they store a change and wake the
//! reconciler (`service::wake`, through the `Host`). `start` runs them all.

pub mod access_sync;
pub(crate) mod backoff;
pub(crate) mod housekeeping;
pub mod move_driver;
pub mod node_removal;
pub mod reconciler;
pub mod supervise;

use std::time::Duration;

use self::supervise::supervise;
use crate::server::state::AppState;

/// Starts every background loop, each supervised: the reconciler (`main`
/// makes it with its host connection and its settings), the move driver, the
/// node removals (with a host) and the housekeeping. (The live pages' poller
/// starts with the first open page.)
pub fn start(state: &AppState, reconciler: Option<std::sync::Arc<reconciler::Context>>) {
    if let Some(ctx) = reconciler {
        tokio::spawn(supervise("reconciler", move || reconciler::run(ctx.clone())));
    }
    let pool = state.pool.clone();
    let timeout = i64::try_from(state.config.move_address_timeout_secs).unwrap_or(i64::MAX);
    tokio::spawn(supervise("move_driver", move || move_driver::drive(pool.clone(), Duration::from_secs(2), timeout)));
    if let Some(host) = state.host.clone() {
        let pool = state.pool.clone();
        tokio::spawn(supervise("node_removal", move || {
            node_removal::drive(pool.clone(), host.clone(), Duration::from_secs(2))
        }));
    }
    if let Some(host) = state.host.clone() {
        let pool = state.pool.clone();
        tokio::spawn(supervise("access_sync", move || access_sync::run(pool.clone(), host.clone())));
    }
    let pool = state.pool.clone();
    tokio::spawn(supervise("session_expiry", move || housekeeping::run(pool.clone())));
}
