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
//!   console's memberships, every 10 minutes, spread; no lease. And the
//!   clusters a change queued (`access_queue`), as soon as it did.
//! - [`housekeeping`]: expired sessions and old sign-in records, hourly.
//! - the live pages' poller (`server::push::Hub::watch_database`): reads
//!   nothing while no page is open.
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

use std::sync::Arc;
use std::time::Duration;

use sqlx::AnyPool;

use self::supervise::supervise;
use crate::domain::operator::OperatorLimits;
use crate::server::host::Host;
use crate::server::push::Hub;

/// Starts every background loop, each supervised: with a host, the
/// reconciler (made here from the host and the configuration), node removals
/// and the access sync; always the move driver, the live pages' poller and
/// the housekeeping.
pub fn start(pool: &AnyPool, options: &Options, host: Option<&Arc<Host>>, push: &Arc<Hub>) {
    if let Some(host) = host {
        let ctx = Arc::new(reconciler_context(host, pool, options));
        tokio::spawn(supervise("reconciler", move || reconciler::run(ctx.clone())));
        let (p, h) = (pool.clone(), host.clone());
        tokio::spawn(supervise("node_removal", move || {
            node_removal::drive(p.clone(), h.clone(), Duration::from_secs(2))
        }));
        let (p, h) = (pool.clone(), host.clone());
        tokio::spawn(supervise("access_sync", move || access_sync::run(p.clone(), h.clone())));
        let (p, h) = (pool.clone(), host.clone());
        tokio::spawn(supervise("access_queue", move || access_sync::follow_queue(p.clone(), h.clone())));
    }
    let (p, timeout) = (pool.clone(), i64::try_from(options.move_address_timeout_secs).unwrap_or(i64::MAX));
    tokio::spawn(supervise("move_driver", move || move_driver::drive(p.clone(), Duration::from_secs(2), timeout)));
    live_updates(push);
    let pool = pool.clone();
    tokio::spawn(supervise("session_expiry", move || housekeeping::run(pool.clone())));
}

/// The live pages' poller ([`Hub::watch_database`]), supervised: part of
/// [`start`], and what a test's console without the other loops runs.
pub fn live_updates(push: &Arc<Hub>) {
    let push = push.clone();
    tokio::spawn(supervise("live_updates", move || push.clone().watch_database()));
}

/// What the background loops take from the operator's configuration
/// (`Config::workers`).
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// The observer lease and an operation's claim (`KUBEBYON_LEADER_LEASE_SECS`,
    /// `KUBEBYON_CLAIM_LEASE_SECS`).
    pub leader_lease: Duration,
    pub claim_lease: Duration,
    /// What the operator allows of the settings, where they take effect.
    pub operator: OperatorLimits,
    /// Ports helm's Jobs may leave by besides 443 (`KUBEBYON_HELM_PROXY_PORTS`).
    pub helm_proxy_ports: Vec<u16>,
    /// How long a move waits for an address (`KUBEBYON_MOVE_ADDRESS_TIMEOUT_SECS`).
    pub move_address_timeout_secs: u64,
}

/// The reconciler's context for `host`, with the operator's settings.
fn reconciler_context(host: &Arc<Host>, pool: &AnyPool, options: &Options) -> reconciler::Context {
    let mut ctx = reconciler::Context::new(host.clone(), pool.clone());
    ctx.timing.leader_lease = options.leader_lease;
    ctx.timing.lease = options.claim_lease;
    ctx.operator = options.operator.clone();
    ctx.allow_helm_egress(options.helm_proxy_ports.iter().copied());
    ctx
}
