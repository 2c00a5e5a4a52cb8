//! The reconciler: makes the host cluster match what the console stored, and
//! writes back what the host reports. One loop per console process:
//!
//! 1. **work** ([`work`]) — claims operations from the durable queue
//!    (`cluster_operations`), and for the cluster's *current* spec applies its
//!    namespace and HelmChart ([`apply`]) or uninstalls it; transient failures
//!    are retried with exponential backoff and jitter (the claim's lease is the
//!    timer), API validation errors fail the operation with the API server's
//!    reason;
//! 2. **observe** ([`observer`]) — for every cluster whose HelmChart was
//!    rendered from its current generation, reads the host ([`gather`]), takes
//!    the latest probe of the public endpoint ([`probe_schedule`]) and writes
//!    the whole status ([`observe`]).
//!
//! Watches on the console's HelmCharts, helm's Jobs and the vCluster Services
//! ([`cache`]) wake it at once; a periodic pass repairs drift
//! (level-triggered). It reaches the host through [`Host`], as requests do;
//! what it keeps between passes is its own ([`Context`]).

pub(crate) mod apply;
pub(crate) mod cache;
pub(crate) mod events;
#[cfg(test)]
pub mod fixtures;
pub mod gather;
pub(crate) mod observe;
pub(crate) mod observer;
pub(crate) mod probe_schedule;
pub(crate) mod rollout;
pub(crate) mod roster;
pub(crate) mod work;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use sqlx::AnyPool;

use crate::server::host::Host;
use crate::server::host::error::Result;
use crate::server::host::facts::detect_route_version;
pub use observer::OBSERVER_LEASE;

/// Everything the reconciler works with: the host, and what it keeps for
/// itself between passes.
pub struct Context {
    pub host: Arc<Host>,
    pub pool: AnyPool,
    /// This process's name in the queue's claims.
    pub worker: String,
    pub timing: Timing,
    /// What the operator allows of the admin's settings: applied to them
    /// wherever they take effect on the host (`OperatorLimits::cap`).
    pub operator: crate::domain::operator::OperatorLimits,
    /// The watch caches, once `run` started them.
    caches: OnceLock<Arc<cache::Caches>>,
    /// The endpoints' probes, run off the passes ([`probe_schedule`]).
    probes: Arc<probe_schedule::Probes>,
    /// Kubernetes Events on the objects the console owns.
    pub(crate) events: events::Recorder,
    /// The observer's own state ([`observer::Observer`]).
    observer: observer::Observer,
    /// What the passes remember of each cluster's rollout ([`Memory`]).
    memory: Memory,
    /// The ports helm's Jobs leave by ([`Egress`]).
    egress: Egress,
}

/// How often the loop looks, retries and renews.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    /// The periodic pass.
    pub resync: Duration,
    /// The first retry delay of a failed operation (doubles per attempt).
    pub retry_base: Duration,
    /// How long a claimed operation is ours; a crashed process's claims are
    /// taken over after it.
    pub lease: Duration,
    /// The observer lease (`leases` row `reconciler-observer`): only its
    /// holder observes, probes and repairs drift; every replica works the
    /// queue. Renewed every pass (at least every third of it); a replica that
    /// dies loses it when it runs out.
    pub leader_lease: Duration,
    /// How long after a gateway cluster's route is attached an untrusted
    /// certificate through the Gateway still reads as "route waiting"
    /// ([`observe::ROUTE_GRACE`]).
    pub route_grace: Duration,
}

impl Default for Timing {
    fn default() -> Self {
        Self {
            resync: Duration::from_secs(60),
            retry_base: Duration::from_secs(2),
            lease: DEFAULT_CLAIM_LEASE,
            leader_lease: DEFAULT_LEADER_LEASE,
            route_grace: observe::ROUTE_GRACE,
        }
    }
}

/// What the passes remember of each cluster between them.
#[derive(Default)]
struct Memory {
    /// Install Jobs that predate the last values change, per cluster id.
    stale_jobs: Mutex<BTreeMap<i64, BTreeSet<String>>>,
    /// Namespaces' Events and claims while a rollout is not done (throttled).
    workloads: gather::Workloads,
    /// Install Jobs that completed without deploying their change: helm's words.
    helm_runs: gather::HelmRuns,
    /// The HelmChart spec last applied per cluster: the watch cache may lag
    /// behind an apply, which is no drift.
    /// (A digest of it: a spec is kilobytes, kept per cluster.)
    applied: Mutex<BTreeMap<i64, u64>>,
    /// The chart spec (digest) a stale failed release was last cleared for,
    /// per cluster: at most once per rendering (`observer::clear_stale_failure`).
    cleared: Mutex<BTreeMap<i64, u64>>,
    /// A gateway cluster's route: the generation it was first seen attached
    /// for, and when (the grace before an untrusted certificate through the
    /// Gateway stops being "route waiting").
    route_attached: Mutex<BTreeMap<i64, (Option<i64>, std::time::Instant)>>,
}

/// The ports helm's Jobs leave by besides 443/6443: their HTTP(S) proxies',
/// from the operator (`KUBEBYON_HELM_PROXY_PORTS`) and from the proxy env
/// helm-controller writes into each Job it makes; and the ports each
/// cluster's NetworkPolicy was last applied with by this process (a port
/// learnt later: applied again, the policy alone).
#[derive(Default)]
struct Egress {
    helm: Mutex<BTreeSet<u16>>,
    applied: Mutex<BTreeMap<i64, BTreeSet<u16>>>,
}

/// How long a claimed operation is a crashed replica's ([`Timing::lease`]).
pub(crate) const DEFAULT_CLAIM_LEASE: Duration = Duration::from_secs(120);
/// The observer lease ([`Timing::leader_lease`]).
pub(crate) const DEFAULT_LEADER_LEASE: Duration = Duration::from_secs(15);

impl Context {
    pub fn new(host: Arc<Host>, pool: AnyPool) -> Self {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let worker = format!("kubebyon-{}-{n}", std::process::id());
        Self {
            probes: probe_schedule::Probes::new(host.changes.wake.clone()),
            events: events::Recorder::new(host.client.clone(), &worker),
            pool,
            worker,
            timing: Timing::default(),
            operator: Default::default(),
            caches: OnceLock::new(),
            observer: observer::Observer::default(),
            memory: Memory::default(),
            egress: Egress::default(),
            host,
        }
    }

    /// Drops what is remembered about a removed cluster.
    fn forget(&self, id: i64) {
        self.host.secrets.forget(id);
        if let Ok(mut m) = self.memory.applied.lock() {
            m.remove(&id);
        }
        if let Ok(mut m) = self.memory.stale_jobs.lock() {
            m.remove(&id);
        }
        if let Ok(mut m) = self.memory.route_attached.lock() {
            m.remove(&id);
        }
        if let Ok(mut m) = self.memory.cleared.lock() {
            m.remove(&id);
        }
    }

    /// The ports helm's Jobs leave by besides 443/6443 ([`Egress`]).
    pub(crate) fn helm_egress(&self) -> BTreeSet<u16> {
        self.egress.helm.lock().map(|p| p.clone()).unwrap_or_default()
    }

    /// Adds ports helm's Jobs leave by; whether one was new (each cluster's
    /// NetworkPolicy is then applied again on its next pass).
    pub fn allow_helm_egress(&self, ports: impl IntoIterator<Item = u16>) -> bool {
        let Ok(mut known) = self.egress.helm.lock() else { return false };
        let mut added = false;
        for p in ports {
            if known.insert(p) {
                tracing::info!(
                    port = p,
                    "helm's Jobs leave by this proxy port: the clusters' NetworkPolicies allow it"
                );
                added = true;
            }
        }
        added
    }

    /// The watch caches, once they listed.
    fn caches(&self) -> Option<&cache::Caches> {
        self.caches.get().map(|c| &**c)
    }
}

/// How often the queue is looked at without a wake (a cheap query).
const QUEUE_POLL: Duration = Duration::from_secs(2);

/// Runs until the process ends. The watch caches start beside the loop: until
/// every watch has listed once (never, while the host is unreachable) the
/// loop reads the host with GETs, so queued work is tried, and retried with
/// back-off, from the first pass.
pub async fn run(ctx: Arc<Context>) {
    let starter = ctx.clone();
    tokio::spawn(async move {
        let host = &starter.host;
        let caches = Arc::new(cache::Caches::start(&host.client, host.changes.wake.clone()).await);
        host.watching(caches.clone());
        let _ = starter.caches.set(caches);
        host.wake();
    });
    let mut last_full: Option<tokio::time::Instant> = None;
    loop {
        let full = ctx.host.changes.take_everything() || last_full.is_none_or(|t| t.elapsed() >= ctx.timing.resync);
        if full {
            last_full = Some(tokio::time::Instant::now());
        }
        if let Err(e) = pass(&ctx, full).await {
            tracing::warn!(error = %e, "reconcile pass failed; retrying");
        }
        tokio::select! {
            _ = ctx.host.changes.wake.notified() => {}
            _ = tokio::time::sleep(QUEUE_POLL.min(ctx.timing.resync).min(ctx.timing.leader_lease / 3)) => {}
        }
        // Coalesce bursts of watch events into one pass.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// One pass: the queue, then the status of the clusters that are not settled
/// (all of them when `full`: the periodic pass repairs drift).
pub(crate) async fn pass(ctx: &Context, full: bool) -> Result<()> {
    // Before the work, so an apply writes the route in the version served.
    if full && let Some(version) = detect_route_version(&ctx.host.client).await {
        ctx.host.seen.set_route_version(version);
    }
    // The console's routes are watched in that version (once the other watches run).
    if let Some(caches) = ctx.caches() {
        caches.watch_routes(&ctx.host.client, ctx.host.seen.route_version());
    }
    work::work(ctx).await?;
    if !observer::lease(ctx).await? {
        return Ok(());
    }
    observer::observe_all(ctx, full).await
}
