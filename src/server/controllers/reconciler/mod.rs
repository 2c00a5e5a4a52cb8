//! The reconciler: makes the host cluster match what the console stored, and
//! writes back what the host reports. One loop per console process:
//!
//! 1. **work** — claims operations from the durable queue (`cluster_operations`),
//!    and for the cluster's *current* spec applies its namespace and HelmChart
//!    ([`apply`]) or uninstalls it; transient failures are retried with
//!    exponential backoff and jitter (the claim's lease is the timer), API
//!    validation errors fail the operation with the API server's reason;
//! 2. **observe** — for every cluster whose HelmChart was rendered from its
//!    current generation, reads the host ([`gather`]), probes the public
//!    endpoint ([`probe`]) and writes the whole status ([`observe`]).
//!
//! Watches on the console's HelmCharts, helm's Jobs and the vCluster Services
//! wake it at once; a periodic pass repairs drift (level-triggered).

pub(crate) mod apply;
pub(crate) mod cache;
pub(crate) mod error;
pub(crate) mod events;
#[cfg(test)]
pub mod fixtures;
pub mod gather;
pub(crate) mod kubeconfig;
pub(crate) mod observe;
pub mod probe;
pub(crate) mod probe_schedule;
pub(crate) mod rollout;
pub(crate) mod roster;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use kube::api::{Api, ListParams};
use kube::{Client, ResourceExt};
use sqlx::AnyPool;
use tokio::sync::Notify;

use crate::domain::cluster::Cluster;
use crate::domain::gateway::RouteVersion;
use crate::domain::render::{self, AddressRequest};
use crate::domain::{ClusterStatus, Phase, Reason};
use crate::server::db::{self, clusters, operations};
use error::{Error, Result};

/// `vc-<name>` as read: when, what, and whether a probe has since doubted it.
struct SecretMemo {
    read_at: std::time::Instant,
    secret: Option<k8s_openapi::api::core::v1::Secret>,
    doubted: bool,
}

/// Everything the reconciler works with (not the web `AppState`).
pub struct Context {
    pub client: Client,
    pub pool: AnyPool,
    /// What the host's LoadBalancer provider was detected as (at start and on
    /// every periodic pass): the admin's `auto` follows it.
    detected: Mutex<AddressRequest>,
    pub resolver: probe::Resolver,
    /// This process's name in the queue's claims.
    pub worker: String,
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
    /// What the operator allows of the admin's settings: applied to them
    /// wherever they take effect on the host (`OperatorLimits::cap`).
    pub operator: crate::domain::settings::OperatorLimits,
    wake: Arc<Notify>,
    /// Whether the last pass held the observer lease.
    observing: std::sync::atomic::AtomicBool,
    full_requested: std::sync::atomic::AtomicBool,
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
    /// The watch caches, once `run` started them.
    caches: std::sync::OnceLock<cache::Caches>,
    /// `vc-<name>` per cluster. Its CA and client certificate change only when
    /// vCluster is installed anew (a values upgrade keeps them), which a probe
    /// sees as untrusted or unauthorized: only then, or on the periodic pass, is
    /// it read again. (Watching Secrets would need list/watch on every Secret of
    /// the host: `vc-<name>` carries no label to select it by.)
    secrets: Mutex<BTreeMap<i64, SecretMemo>>,
    /// This console's installation id (read from the database once).
    installation: tokio::sync::OnceCell<String>,
    /// Host calls made for a signed-in user's request (kubeconfig download,
    /// probe now, a virtual cluster's credentials): at most [`REQUEST_CALLS`]
    /// at once, each within [`REQUEST_CALL_TIMEOUT`].
    request_calls: tokio::sync::Semaphore,
    /// The same for the anonymous join script ([`Calls::Join`]): a pool of
    /// its own, [`JOIN_CALLS`] at once.
    join_calls: tokio::sync::Semaphore,
    /// Each user's share of the request pools (`service::call_budget`).
    pub(crate) user_calls: crate::server::service::call_budget::UserCalls,
    /// The endpoints' probes, run off the passes ([`probe_schedule`]).
    probes: Arc<probe_schedule::Probes>,
    /// Whether k3s's ServiceLB was seen serving one of the console's
    /// LoadBalancer Services (its finalizer on the Service).
    servicelb: std::sync::atomic::AtomicBool,
    /// The ports helm's Jobs leave by besides 443/6443: their HTTP(S)
    /// proxies', from the operator (`KUBEBYON_HELM_PROXY_PORTS`) and from the
    /// proxy env helm-controller writes into each Job it makes.
    helm_egress: Mutex<BTreeSet<u16>>,
    /// The ports each cluster's NetworkPolicy was last applied with by this
    /// process (a port learnt later: applied again, the policy alone).
    policy_egress: Mutex<BTreeMap<i64, BTreeSet<u16>>>,
    /// Kubernetes Events on the objects the console owns.
    pub(crate) events: events::Recorder,
    /// The `TLSRoute` version the host serves (none: not served), detected
    /// on every periodic pass before its work.
    route_version: Mutex<Option<RouteVersion>>,
    /// The admin's Gateway (`namespace/name`) and the address it was last seen with.
    gateway_seen: Mutex<Option<(String, String)>>,
    /// The clusters the observer works on, kept current from what changed.
    roster: tokio::sync::Mutex<roster::Roster>,
    /// Read the whole table on the next pass (the observer lease was taken).
    reload_roster: std::sync::atomic::AtomicBool,
    /// The Ready nodes as the last pass saw them (a change: every cluster is looked at).
    last_nodes: Mutex<Vec<observe::NodeAddresses>>,
}

/// Host calls on signed-in users' request paths at once, per process.
pub(crate) const REQUEST_CALLS: usize = 16;
/// Host calls for the anonymous join script at once, per process.
pub(crate) const JOIN_CALLS: usize = 8;

/// Whose request pool a host call is made from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Calls {
    /// Signed-in users (each also within `service::call_budget`).
    Users,
    /// The anonymous join script.
    Join,
}
/// How long a request waits for the host (a slot and the calls together).
pub(crate) const REQUEST_CALL_TIMEOUT: Duration = Duration::from_secs(25);
/// How long a claimed operation is a crashed replica's ([`Context::lease`]).
pub(crate) const DEFAULT_CLAIM_LEASE: Duration = Duration::from_secs(120);
/// The observer lease ([`Context::leader_lease`]).
pub(crate) const DEFAULT_LEADER_LEASE: Duration = Duration::from_secs(15);

impl Context {
    pub fn new(client: Client, pool: AnyPool, detected: AddressRequest) -> Self {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let wake = Arc::new(Notify::new());
        let worker = format!("kubebyon-{}-{n}", std::process::id());
        Self {
            pool,
            detected: Mutex::new(detected),
            resolver: probe::Resolver::default(),
            resync: Duration::from_secs(60),
            retry_base: Duration::from_secs(2),
            lease: DEFAULT_CLAIM_LEASE,
            leader_lease: DEFAULT_LEADER_LEASE,
            operator: Default::default(),
            probes: probe_schedule::Probes::new(wake.clone()),
            servicelb: std::sync::atomic::AtomicBool::new(false),
            helm_egress: Mutex::default(),
            policy_egress: Mutex::default(),
            wake,
            observing: std::sync::atomic::AtomicBool::new(false),
            full_requested: std::sync::atomic::AtomicBool::new(false),
            stale_jobs: Mutex::default(),
            workloads: gather::Workloads::default(),
            helm_runs: gather::HelmRuns::default(),
            caches: std::sync::OnceLock::new(),
            applied: Mutex::default(),
            secrets: Mutex::default(),
            installation: tokio::sync::OnceCell::new(),
            request_calls: tokio::sync::Semaphore::new(REQUEST_CALLS),
            join_calls: tokio::sync::Semaphore::new(JOIN_CALLS),
            user_calls: Default::default(),
            events: events::Recorder::new(client.clone(), &worker),
            route_version: Mutex::new(None),
            gateway_seen: Mutex::new(None),
            roster: tokio::sync::Mutex::default(),
            reload_roster: std::sync::atomic::AtomicBool::new(true),
            last_nodes: Mutex::default(),
            worker,
            client,
        }
    }

    /// Runs host calls for a request: bounded in number and in time, so a
    /// host that does not answer ties up neither requests nor memory.
    async fn for_request<T>(&self, calls: impl std::future::Future<Output = Result<T>>) -> Result<T> {
        self.for_request_in(Calls::Users, calls).await
    }

    /// [`Self::for_request`] from pool `pool`.
    async fn for_request_in<T>(&self, pool: Calls, calls: impl std::future::Future<Output = Result<T>>) -> Result<T> {
        let semaphore = match pool {
            Calls::Users => &self.request_calls,
            Calls::Join => &self.join_calls,
        };
        let bounded = async {
            let _slot = semaphore.acquire().await.map_err(|_| Error::NotYet("shutting down"))?;
            calls.await
        };
        tokio::time::timeout(REQUEST_CALL_TIMEOUT, bounded)
            .await
            .unwrap_or(Err(Error::NotYet("the host did not answer in time")))
    }

    /// This console's installation id, the label of what it creates on the host.
    pub async fn installation(&self) -> Result<&str> {
        let id = self.installation.get_or_try_init(|| db::shared::installation_id(&self.pool)).await?;
        Ok(id.as_str())
    }

    /// Who the console is on the host for one cluster.
    async fn owner(&self, cluster_id: i64) -> Result<apply::Owner> {
        let installation = self.installation().await?.to_owned();
        let record = clusters::host_record(&self.pool, cluster_id).await?;
        Ok(apply::Owner { installation, cluster_id, record })
    }

    /// Whether a HelmChart read from the host is this cluster's, made by this
    /// console: what is read from any other is never shown or probed.
    async fn chart_is_ours(&self, cluster_id: i64, chart: Option<&kube::api::DynamicObject>) -> Result<bool> {
        let Some(chart) = chart else { return Ok(false) };
        Ok(self.label_owner(cluster_id, false).await?.created(&chart.metadata))
    }

    /// The console as an object's labels name it (nothing stored is consulted):
    /// with `adopt_legacy`, the labels of before the installation id count too.
    async fn label_owner(&self, cluster_id: i64, adopt_legacy: bool) -> Result<apply::Owner> {
        let installation = self.installation().await?.to_owned();
        let record = db::clusters::HostRecord { namespace_uid: None, adopt_legacy };
        Ok(apply::Owner { installation, cluster_id, record })
    }

    /// Wakes the loop (a change was stored).
    pub fn wake(&self) {
        self.wake.notify_one();
    }

    /// Drops what is remembered about a removed cluster.
    fn forget(&self, id: i64) {
        if let Ok(mut m) = self.secrets.lock() {
            m.remove(&id);
        }
        if let Ok(mut m) = self.applied.lock() {
            m.remove(&id);
        }
        if let Ok(mut m) = self.stale_jobs.lock() {
            m.remove(&id);
        }
    }

    /// Whether k3s's ServiceLB serves the console's LoadBalancer Services
    /// (seen on one of them; the settings page warns when it runs beside
    /// MetalLB or kube-vip).
    pub(crate) fn servicelb_seen(&self) -> bool {
        self.servicelb.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The LoadBalancer provider as last detected on the host.
    pub(crate) fn detected(&self) -> AddressRequest {
        self.detected.lock().map(|d| *d).unwrap_or(AddressRequest::None)
    }

    /// How LoadBalancer Services ask for an address under these settings.
    pub(crate) fn address_request(&self, settings: &crate::domain::SystemSettings) -> AddressRequest {
        settings.load_balancer_address_request.resolve(Some(self.detected()))
    }

    /// The `TLSRoute` version the host was last seen serving.
    pub(crate) fn route_version(&self) -> Option<RouteVersion> {
        self.route_version.lock().ok().and_then(|v| *v)
    }

    /// The ports helm's Jobs leave by besides 443/6443 ([`Context::helm_egress`]).
    pub(crate) fn helm_egress(&self) -> BTreeSet<u16> {
        self.helm_egress.lock().map(|p| p.clone()).unwrap_or_default()
    }

    /// Adds ports helm's Jobs leave by; whether one was new (each cluster's
    /// NetworkPolicy is then applied again on its next pass).
    pub fn allow_helm_egress(&self, ports: impl IntoIterator<Item = u16>) -> bool {
        let Ok(mut known) = self.helm_egress.lock() else { return false };
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

    /// Gateway API on the host as the settings page shows it: the group's
    /// served versions, the `TLSRoute` version written, the Gateways (every
    /// namespace) with their listeners and addresses.
    pub(crate) async fn gateway_api_view(&self) -> Result<crate::domain::gateway::GatewayApiView> {
        use crate::domain::gateway::{self, GatewayApiView};
        let calls = async {
            let groups = self.client.list_api_groups().await.map_err(error::kube("list API groups"))?;
            let served: Vec<String> = groups
                .groups
                .iter()
                .find(|g| g.name == gateway::GROUP)
                .map(|g| g.versions.iter().map(|v| v.version.clone()).collect())
                .unwrap_or_default();
            if served.is_empty() {
                return Ok(GatewayApiView::default());
            }
            let route_version = detect_route_version(&self.client).await.flatten();
            let installation = self.installation().await?.to_owned();
            let labels =
                [(render::MANAGED_BY.0, render::MANAGED_BY.1), (render::INSTALLATION_LABEL, installation.as_str())];
            let api: Api<kube::api::DynamicObject> = Api::all_with(self.client.clone(), &gateways_resource());
            let list = api.list(&ListParams::default()).await.map_err(error::kube("list Gateways"))?;
            let gateways = list
                .items
                .iter()
                .filter_map(|g| serde_json::to_value(g).ok())
                .map(|g| gateway::gateway_view(&g, &labels))
                .collect();
            Ok(GatewayApiView { served, route_version, gateways })
        };
        self.for_request(calls).await
    }

    /// Where DNS must point for gateway clusters: the address of `gateway`
    /// (an IP, or a name for a CNAME), as the observer last saw it, else read
    /// now (bounded); `None` while it has none.
    pub(crate) async fn gateway_address(&self, gateway: &crate::domain::gateway::GatewayRef) -> Option<String> {
        let seen = self.gateway_seen.lock().ok().and_then(|g| g.clone());
        if let Some((_, address)) = seen.filter(|(key, _)| *key == gateway.key()) {
            return Some(address);
        }
        let read = async { Ok(read_gateway(self, gateway).await?.as_ref().and_then(gateway_address_of)) };
        self.for_request(read).await.ok().flatten()
    }

    /// The host's StorageClasses, the default marked.
    pub(crate) async fn storage_classes(&self) -> Result<Vec<crate::domain::settings::StorageClassView>> {
        use k8s_openapi::api::storage::v1::StorageClass;
        let calls = async {
            let api: Api<StorageClass> = Api::all(self.client.clone());
            let list = api.list(&ListParams::default()).await.map_err(error::kube("list StorageClasses"))?;
            Ok(list
                .items
                .iter()
                .map(|c| crate::domain::settings::StorageClassView {
                    name: c.name_any(),
                    provisioner: c.provisioner.clone(),
                    default: c.annotations().get("storageclass.kubernetes.io/is-default-class").map(String::as_str)
                        == Some("true"),
                })
                .collect())
        };
        self.for_request(calls).await
    }

    /// Whether the Secret `key` names exists on the host: its metadata only,
    /// the key itself is never read.
    pub(crate) async fn secret_exists(&self, key: &crate::domain::nodes::SecretRef) -> Result<bool> {
        use k8s_openapi::api::core::v1::Secret;
        let calls = async {
            let api: Api<Secret> = Api::namespaced(self.client.clone(), &key.namespace);
            let found = api.get_metadata_opt(&key.name).await.map_err(error::kube("read the platform key's Secret"))?;
            Ok(found.is_some())
        };
        self.for_request(calls).await
    }

    /// Objects and bytes kept per watch cache (empty until the watches listed once).
    pub fn cache_sizes(&self) -> Vec<(&'static str, usize, usize)> {
        self.caches.get().map(|c| c.sizes().to_vec()).unwrap_or_default()
    }

    /// Asks for a pass over every cluster (settings that affect rendering changed).
    pub fn resync_all(&self) {
        self.full_requested.store(true, std::sync::atomic::Ordering::Relaxed);
        self.wake();
    }
}

/// How the LoadBalancer provider is asked for an address: MetalLB when its
/// `IPAddressPool` CRD is served, else none (the provider picks).
pub async fn detect_address_request(client: &Client) -> AddressRequest {
    try_detect_address_request(client).await.unwrap_or(AddressRequest::None)
}

/// As [`detect_address_request`]; `None` when the host did not answer.
async fn try_detect_address_request(client: &Client) -> Option<AddressRequest> {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    match crds.get_opt("ipaddresspools.metallb.io").await.ok()? {
        Some(_) => Some(AddressRequest::MetalLb),
        None => Some(AddressRequest::None),
    }
}

/// Gateway API's `Gateway` (v1: GA since Gateway API 1.0).
pub(crate) fn gateways_resource() -> kube::api::ApiResource {
    kube::api::ApiResource {
        group: crate::domain::gateway::GROUP.into(),
        version: "v1".into(),
        api_version: format!("{}/v1", crate::domain::gateway::GROUP),
        kind: "Gateway".into(),
        plural: "gateways".into(),
    }
}

/// A Gateway's first usable address (`status.addresses`): an `IPAddress`
/// (the default type), or a `Hostname` as some implementations publish (a
/// cloud load balancer's name; gateway-api v1.6 `gateway_types.go`
/// `AddressType`). Other types are skipped.
pub(crate) fn gateway_address_of(g: &kube::api::DynamicObject) -> Option<String> {
    let addresses = g.data["status"]["addresses"].as_array()?;
    addresses.iter().find_map(|a| {
        let value = a["value"].as_str()?.trim();
        match a["type"].as_str().unwrap_or("IPAddress") {
            "IPAddress" => value.parse::<std::net::IpAddr>().ok().map(|ip| ip.to_string()),
            "Hostname" => match crate::domain::Host::parse(value).ok()? {
                crate::domain::Host::Dns(name) => Some(name),
                _ => None,
            },
            _ => None,
        }
    })
}

/// Where the probe connects for a Gateway address: the IP, or what its name
/// resolves to now (through the probe's resolver, bounded like the probe).
async fn gateway_ip(ctx: &Context, address: &str) -> Option<std::net::IpAddr> {
    if let Ok(ip) = address.parse() {
        return Some(ip);
    }
    ctx.resolver.resolve(address, 443).await?.first().map(std::net::SocketAddr::ip)
}

/// The newest version the host serves `tlsroutes` in; `None` when the host
/// did not answer (`Some(None)`: not served).
async fn detect_route_version(client: &Client) -> Option<Option<RouteVersion>> {
    use strum::VariantArray;
    let mut serving = Vec::new();
    for v in RouteVersion::VARIANTS {
        match client.list_api_group_resources(&v.api_version()).await {
            Ok(list) if list.resources.iter().any(|r| r.name == "tlsroutes") => serving.push(v.as_str()),
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(_) => return None,
        }
    }
    Some(RouteVersion::pick(serving))
}

/// How often the queue is looked at without a wake (a cheap query).
const QUEUE_POLL: Duration = Duration::from_secs(2);
/// The longest wait between checks while the host finishes an uninstall.
const NOT_YET_POLL: Duration = Duration::from_secs(5);

/// Runs until the process ends. The watch caches start beside the loop: until
/// every watch has listed once (never, while the host is unreachable) the
/// loop reads the host with GETs, so queued work is tried, and retried with
/// back-off, from the first pass.
pub async fn run(ctx: Arc<Context>) {
    let starter = ctx.clone();
    tokio::spawn(async move {
        let caches = cache::Caches::start(&starter.client, starter.wake.clone()).await;
        let _ = starter.caches.set(caches);
        starter.wake.notify_one();
    });
    let mut last_full: Option<tokio::time::Instant> = None;
    loop {
        let full = ctx.full_requested.swap(false, std::sync::atomic::Ordering::Relaxed)
            || last_full.is_none_or(|t| t.elapsed() >= ctx.resync);
        if full {
            last_full = Some(tokio::time::Instant::now());
        }
        if let Err(e) = pass(&ctx, full).await {
            tracing::warn!(error = %e, "reconcile pass failed; retrying");
        }
        tokio::select! {
            _ = ctx.wake.notified() => {}
            _ = tokio::time::sleep(QUEUE_POLL.min(ctx.resync).min(ctx.leader_lease / 3)) => {}
        }
        // Coalesce bursts of watch events into one pass.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// One pass: the queue, then the status of the clusters that are not settled
/// (all of them when `full`: the periodic pass repairs drift).
pub(crate) async fn pass(ctx: &Context, full: bool) -> Result<()> {
    // Before the work, so an apply writes the route in the version served.
    if full
        && let Some(version) = detect_route_version(&ctx.client).await
        && let Ok(mut v) = ctx.route_version.lock()
        && *v != version
    {
        tracing::info!(?version, "TLSRoute version served by the host");
        *v = version;
    }
    // The console's routes are watched in that version (once the other watches run).
    if let Some(caches) = ctx.caches.get() {
        caches.watch_routes(&ctx.client, ctx.route_version());
    }
    work(ctx).await?;
    if !observer(ctx).await? {
        return Ok(());
    }
    observe_all(ctx, full).await
}

pub const OBSERVER_LEASE: &str = "reconciler-observer";

/// Takes or renews the observer lease; true while this replica holds it.
async fn observer(ctx: &Context) -> Result<bool> {
    let ttl = ctx.leader_lease.as_millis() as i64;
    let held = db::shared::acquire_lease(&ctx.pool, OBSERVER_LEASE, &ctx.worker, ttl).await?;
    let was = ctx.observing.swap(held, std::sync::atomic::Ordering::Relaxed);
    if held && !was {
        tracing::info!(worker = %ctx.worker, "took the observer lease: observing, probing and repairing drift here");
        // What another replica applied or wrote is not known here: trust
        // only the host, and read the whole table.
        ctx.reload_roster.store(true, std::sync::atomic::Ordering::Relaxed);
        ctx.resync_all();
    } else if !held && was {
        tracing::warn!(worker = %ctx.worker, "lost the observer lease");
    }
    Ok(held)
}

/// Settled: Ready for its current generation with a working connection.
fn settled(c: &Cluster) -> bool {
    c.status.phase == Phase::Ready
        && c.status.observed_generation == c.generation
        && (!c.spec.public_access.is_enabled() || c.status.connection_status == crate::domain::ConnectionStatus::Ok)
}

async fn work(ctx: &Context) -> Result<()> {
    // The claims made in this pass: an operation retried later is not re-run now.
    let mut seen = BTreeSet::new();
    while let Some(op) = operations::claim_next(&ctx.pool, &ctx.worker, ctx.lease.as_secs().max(1) as i64).await? {
        if !seen.insert(op.id) {
            break;
        }
        let started = std::time::Instant::now();
        let outcome = handle(ctx, op.cluster_id).await;
        let metrics = crate::server::metrics::global();
        metrics.record_reconcile(
            match &outcome {
                Ok(_) => "done",
                Err(e) if e.is_permanent() => "failed",
                Err(_) => "retried",
            },
            started.elapsed(),
        );
        if let Err(e) = &outcome
            && matches!(e, Error::Kube(..))
        {
            metrics.record_host_error(e.kind());
        }
        match outcome {
            Ok(applied) => {
                operations::finish(&ctx.pool, op.id, &ctx.worker, None).await?;
                if let Some(generation) = applied {
                    operations::supersede(&ctx.pool, op.cluster_id, generation).await?;
                }
            }
            Err(e) if e.is_permanent() => {
                tracing::warn!(cluster = op.cluster_id, error = %e, "operation failed");
                let reason = e.reason();
                operations::finish(&ctx.pool, op.id, &ctx.worker, Some(&reason)).await?;
                fail_status(ctx, op.cluster_id, e.status_reason()).await?;
            }
            Err(e) => {
                // Waiting for the host to finish something (an uninstall, a
                // namespace deletion) is polled at most every few seconds;
                // failures back off exponentially.
                let delay = match e {
                    Error::NotYet(_) => retry_wait(ctx.retry_base, op.attempts).min(NOT_YET_POLL),
                    _ => retry_wait(ctx.retry_base, op.attempts),
                };
                tracing::info!(cluster = op.cluster_id, error = %e, ?delay, "operation retried later");
                operations::retry_later(&ctx.pool, op.id, &ctx.worker, delay.as_secs().max(1) as i64, &e.reason())
                    .await?;
            }
        }
    }
    Ok(())
}

/// The wait before an operation's next try, with jitter: base·2^(attempts−1)
/// (attempts counted up to 12), at most 5 min, ±25 %.
pub(crate) fn retry_wait(base: Duration, attempts: i64) -> Duration {
    let attempts = u32::try_from(attempts.clamp(1, 12)).unwrap_or(1);
    let capped = crate::server::controllers::backoff::backoff(base, attempts, Duration::from_secs(300));
    let jitter = 0.75 + rand::random::<f64>() * 0.5;
    capped.mul_f64(jitter)
}

/// Applies (or uninstalls) the cluster's current spec; the generation applied.
async fn handle(ctx: &Context, cluster_id: i64) -> Result<Option<i64>> {
    let Some(cluster) = clusters::get(&ctx.pool, cluster_id).await? else {
        return Ok(None); // already gone
    };
    if cluster.deletion_requested {
        let owner = ctx.owner(cluster.id).await?;
        apply::uninstall(&ctx.client, &cluster, &owner, Some(&ctx.operator.platform_key_namespace)).await?;
        clusters::delete_row(&ctx.pool, cluster.id).await?;
        ctx.forget(cluster.id);
        tracing::info!(cluster = %cluster.spec.name.as_str(), "uninstalled and removed");
        return Ok(None);
    }
    if let Some(raw) = &cluster.unusable_host {
        // Rendering it would drop its public access: wait for an edit.
        tracing::warn!(cluster = %cluster.spec.name.as_str(), host = %raw, "stored host is not a valid host; left alone until edited");
        return Ok(None);
    }
    let settings = ctx.operator.cap(db::settings::load(&ctx.pool).await?);
    apply_tracked(ctx, &cluster, &settings).await?;
    Ok(Some(cluster.generation))
}

/// Applies, remembering the install Job that predates a values change.
async fn apply_tracked(ctx: &Context, cluster: &Cluster, settings: &crate::domain::SystemSettings) -> Result<()> {
    let stale = current_job_uid(ctx, cluster).await;
    let cached = ctx.caches.get().map(|c| c.raw(cluster.spec.name.as_str()).chart);
    let owner = ctx.owner(cluster.id).await?;
    let request = ctx.address_request(settings);
    let egress = ctx.helm_egress();
    let host = apply::HostFacts { request, route_version: ctx.route_version(), helm_egress: &egress };
    let applied = apply::apply(&ctx.client, cluster, settings, cached, &owner, &host).await?;
    if let Some(uid) = &applied.namespace_uid
        && owner.record.namespace_uid.as_ref() != Some(uid)
    {
        clusters::record_namespace(&ctx.pool, cluster.id, uid).await?;
    }
    if owner.record.adopt_legacy {
        clusters::end_adoption(&ctx.pool, cluster.id).await?;
        tracing::info!(cluster = %cluster.spec.name.as_str(), "applied before labels of ownership: taken over once");
    }
    if let Ok(mut m) = ctx.applied.lock() {
        m.insert(cluster.id, gather::digest(&applied.spec));
    }
    if applied.policy_applied
        && let Ok(mut m) = ctx.policy_egress.lock()
    {
        m.insert(cluster.id, egress);
    }
    if applied.changed
        && let (Some(uid), Ok(mut map)) = (stale, ctx.stale_jobs.lock())
    {
        map.entry(cluster.id).or_default().insert(uid);
    }
    if applied.changed {
        ctx.helm_runs.forget(&crate::domain::render::namespace(cluster.spec.name.as_str()));
        let note = format!(
            "The console applied generation {} of cluster {} (id {}, owner {}): helm-controller installs or upgrades it",
            cluster.generation,
            cluster.spec.name.as_str(),
            cluster.id,
            cluster.owner
        );
        ctx.events.on_helm_chart(cluster.spec.name.as_str(), applied.chart_uid.clone(), events::APPLIED, note).await;
    }
    Ok(())
}

/// The cluster's NetworkPolicy applied again, alone, when helm's Jobs leave
/// by a port it was not applied with (a proxy learnt since, or this process
/// has not applied it yet while ports are known). Nothing while none is known.
async fn ensure_policy_egress(ctx: &Context, cluster: &Cluster) -> Result<()> {
    // Compared under the locks: a pass over settled clusters copies nothing.
    let egress = {
        let (Ok(known), Ok(done)) = (ctx.helm_egress.lock(), ctx.policy_egress.lock()) else { return Ok(()) };
        if known.is_empty() || done.get(&cluster.id) == Some(&*known) {
            return Ok(());
        }
        known.clone()
    };
    let owner = ctx.owner(cluster.id).await?;
    let ns = crate::domain::render::namespace(cluster.spec.name.as_str());
    apply::ensure_network_policy(&ctx.client, &ns, &owner, true, cluster.spec.own_nodes, &egress).await?;
    tracing::info!(cluster = %cluster.spec.name.as_str(), ports = ?egress, "NetworkPolicy applied again: helm's Jobs leave by these ports too");
    if let Ok(mut m) = ctx.policy_egress.lock() {
        m.insert(cluster.id, egress);
    }
    Ok(())
}

async fn current_job_uid(ctx: &Context, cluster: &Cluster) -> Option<String> {
    let name = cluster.spec.name.as_str();
    if let Some(c) = ctx.caches.get() {
        return c.raw(name).job.and_then(|j| j.uid());
    }
    let jobs: Api<Job> = Api::namespaced(ctx.client.clone(), &render::namespace(name));
    jobs.get_opt(&render::helm_job(name)).await.ok().flatten().and_then(|j| j.uid())
}

/// The keys of `vc-<name>` the console reads: the credentials, and `config`
/// (the kubeconfig vCluster writes, which repeats them).
const CREDENTIAL_KEYS: [&str; 3] = ["certificate-authority", "client-certificate", "client-key"];

/// What the memo keeps of `vc-<name>`: the three credentials when they are
/// needed (a cluster whose endpoint is probed, a request reaching the
/// cluster's API), else only that they are there; `config` only as present
/// (its text repeats them, and whoever needs the text reads the Secret). No
/// metadata (managed fields, annotations). A cluster without public access
/// keeps some 60 bytes here instead of 4 KB of PEM.
fn memo_of(s: k8s_openapi::api::core::v1::Secret, credentials: bool) -> k8s_openapi::api::core::v1::Secret {
    let data = s.data.map(|d| {
        d.into_iter()
            .filter_map(|(k, v)| match k.as_str() {
                _ if credentials && CREDENTIAL_KEYS.contains(&k.as_str()) => Some((k, v)),
                _ if k == "config" || CREDENTIAL_KEYS.contains(&k.as_str()) => {
                    Some((k, k8s_openapi::ByteString(Vec::new())))
                }
                _ => None,
            })
            .collect()
    });
    k8s_openapi::api::core::v1::Secret { data, ..Default::default() }
}

/// Whether the memo kept the credentials' text (not only that they are there).
fn kept_credentials(s: &k8s_openapi::api::core::v1::Secret) -> bool {
    s.data.as_ref().is_some_and(|d| CREDENTIAL_KEYS.iter().all(|k| d.get(*k).is_some_and(|v| !v.0.is_empty())))
}

/// `vc-<name>`: read while it does not exist yet (at most once a second), or
/// once a probe doubted it (at most once every 5 s), or when `credentials`
/// are asked for and the memo kept only that they are there; else remembered.
async fn cached_secret(
    ctx: &Context,
    id: i64,
    name: &str,
    credentials: bool,
) -> Result<Option<k8s_openapi::api::core::v1::Secret>> {
    let fresh = ctx.secrets.lock().ok().and_then(|m| {
        let memo = m.get(&id)?;
        let age = memo.read_at.elapsed();
        let stale = match (&memo.secret, memo.doubted) {
            (None, _) => age >= Duration::from_secs(1),
            (Some(s), _) if credentials && !kept_credentials(s) => true,
            (Some(_), true) => age >= Duration::from_secs(5),
            (Some(_), false) => false,
        };
        (!stale).then(|| memo.secret.clone())
    });
    if let Some(secret) = fresh {
        return Ok(secret);
    }
    let secret = gather::read_secret(&ctx.client, name).await?.map(|s| memo_of(s, credentials));
    if let Ok(mut m) = ctx.secrets.lock() {
        m.insert(id, SecretMemo { read_at: std::time::Instant::now(), secret: secret.clone(), doubted: false });
    }
    Ok(secret)
}

/// Fails the cluster's current generation for `reason`.
async fn fail_status(ctx: &Context, cluster_id: i64, reason: Reason) -> Result<()> {
    if let Some(c) = clusters::get(&ctx.pool, cluster_id).await? {
        let status = ClusterStatus {
            phase: Phase::Failed,
            reason,
            observed_generation: c.generation,
            ..ClusterStatus::default()
        };
        clusters::write_status(&ctx.pool, c.id, &status).await?;
    }
    Ok(())
}

/// Observes the clusters (all of them when `full`; else those not settled,
/// those whose rows changed and those whose host objects changed) whose
/// HelmChart carries their current generation. The clusters come from the
/// [`roster`]: a pass with nothing changed reads no cluster row.
async fn observe_all(ctx: &Context, full: bool) -> Result<()> {
    let reload = ctx.reload_roster.swap(false, std::sync::atomic::Ordering::Relaxed);
    let mut roster = ctx.roster.lock().await;
    let changed = match roster.refresh(&ctx.pool, reload).await {
        Ok(changed) => changed,
        Err(e) => {
            ctx.reload_roster.store(reload, std::sync::atomic::Ordering::Relaxed);
            return Err(e.into());
        }
    };
    let touched = ctx.caches.get().map(cache::Caches::take_touched).unwrap_or_default();
    if full {
        // A host that does not answer keeps what was detected before.
        if let Some(detected) = try_detect_address_request(&ctx.client).await
            && let Ok(mut d) = ctx.detected.lock()
            && *d != detected
        {
            tracing::info!(?detected, "LoadBalancer provider detected");
            *d = detected;
        }
        // The periodic pass trusts only the host: drift is repaired.
        if let Ok(mut m) = ctx.applied.lock() {
            m.clear();
        }
    }
    if roster.len() == 0 {
        return Ok(());
    }
    let nodes = match ctx.caches.get() {
        Some(c) => gather::ready_nodes(&c.nodes()),
        None => {
            let list = Api::<k8s_openapi::api::core::v1::Node>::all(ctx.client.clone())
                .list(&ListParams::default())
                .await
                .map_err(error::kube("list nodes"))?;
            gather::ready_nodes(&list.items)
        }
    };
    let nodes_changed =
        ctx.last_nodes.lock().map(|mut last| std::mem::replace(&mut *last, nodes.clone()) != nodes).unwrap_or(true);
    let everything = full || touched.all || nodes_changed;
    let mut wanted: BTreeSet<i64> = changed;
    for ns in &touched.namespaces {
        if let Some(id) = render::cluster_of_namespace(ns).and_then(|n| roster.id_of(n)) {
            wanted.insert(id);
        }
    }
    let observed: Vec<Cluster> = roster
        .ids()
        .filter_map(|id| roster.get(id))
        .filter(|c| everything || wanted.contains(&c.id) || !settled(c))
        .filter(|c| !c.deletion_requested && c.unusable_host.is_none())
        .cloned()
        .collect();
    if full {
        ctx.probes.retain(&roster.ids().collect());
    }
    drop(roster);
    if observed.is_empty() {
        return Ok(());
    }
    let settings = ctx.operator.cap(db::settings::load(&ctx.pool).await?);
    // The admin's Gateway, read (and a `Hostname` address resolved) once for
    // the pass, not per gateway cluster; a failed read leaves each gateway
    // cluster to read it (and say why).
    let gateway = match settings.gateway.as_ref() {
        Some(gw)
            if observed.iter().any(|c| matches!(c.spec.public_access, crate::domain::PublicAccess::Gateway { .. })) =>
        {
            gateway_view(ctx, gw).await.ok()
        }
        _ => None,
    };
    // A few clusters' host reads at once; the observer lease is renewed
    // between chunks of a long pass (a pass of thousands outlives it).
    let mut renewed = tokio::time::Instant::now();
    for chunk in observed.chunks(OBSERVE_AT_ONCE) {
        if renewed.elapsed() >= ctx.leader_lease / 3 {
            if !observer(ctx).await? {
                return Ok(());
            }
            renewed = tokio::time::Instant::now();
        }
        let (settings, nodes, gateway) = (&settings, &nodes, gateway.as_ref());
        let results = futures::future::join_all(
            chunk.iter().map(|c| async move { (c, observe_one(ctx, c, settings, nodes, gateway).await) }),
        )
        .await;
        for (cluster, result) in results {
            if let Err(e) = result {
                if matches!(e, Error::Kube(..)) {
                    crate::server::metrics::global().record_host_error(e.kind());
                }
                tracing::debug!(cluster = %cluster.spec.name.as_str(), error = %e, "observe failed");
            }
        }
    }
    Ok(())
}

/// Clusters observed at once within a pass.
const OBSERVE_AT_ONCE: usize = 8;

async fn observe_one(
    ctx: &Context,
    cluster: &Cluster,
    settings: &crate::domain::SystemSettings,
    nodes: &[observe::NodeAddresses],
    gateway: Option<&GatewayView>,
) -> Result<()> {
    let stale = ctx.stale_jobs.lock().map(|m| m.get(&cluster.id).cloned().unwrap_or_default()).unwrap_or_default();
    let name = cluster.spec.name.as_str();
    // The watch cache, unless it lags behind what we applied (a watch in
    // back-off after an outage): then read the host directly.
    let cached = ctx.caches.get().map(|c| c.raw(name)).filter(|raw| {
        let generation = raw.chart.as_ref().and_then(|h| h.annotations().get(apply::GENERATION_ANNOTATION).cloned());
        generation == Some(cluster.generation.to_string())
    });
    let (mut raw, from_cache) = match cached {
        Some(raw) => (raw, true),
        None => (gather::fetch(&ctx.client, name).await?, false),
    };
    if !ctx.chart_is_ours(cluster.id, raw.chart.as_ref()).await? {
        let chart = raw.chart.as_ref().map(|c| &c.metadata);
        let legacy_owner = ctx.label_owner(cluster.id, true).await?;
        // Applied before the console labelled what it creates (the old
        // labels name this cluster): taken over once where its records
        // allow, else failed as taken (once).
        let legacy = chart.is_some_and(|m| legacy_owner.created(m));
        if legacy && !matches!(cluster.status.reason, Reason::NamespaceTaken(_)) {
            return match apply_tracked(ctx, cluster, settings).await {
                Err(e) if e.is_permanent() => fail_status(ctx, cluster.id, e.status_reason()).await,
                other => other,
            };
        }
        return Err(Error::NotYet("no HelmChart of this cluster's on the host"));
    }
    if from_cache {
        // The credentials only for a cluster whose endpoint is probed.
        raw.secret = cached_secret(ctx, cluster.id, name, cluster.spec.public_access.is_enabled()).await?;
    }
    if raw.service.as_ref().is_some_and(gather::served_by_servicelb) {
        ctx.servicelb.store(true, std::sync::atomic::Ordering::Relaxed);
    }
    // helm's Job was told to use a proxy: its port is allowed out.
    if let Some(job) = &raw.job
        && ctx.allow_helm_egress(gather::proxy_ports(job))
    {
        ctx.wake();
    }
    // The admin switched the namespace's NetworkPolicy on or off since the
    // HelmChart was applied.
    let policy_switched =
        raw.chart.as_ref().and_then(|h| h.annotations().get(apply::NETWORK_POLICY_ANNOTATION)).map(String::as_str)
            != Some(apply::network_policy_switch(settings, cluster.spec.own_nodes));
    if !policy_switched && settings.network_policy {
        ensure_policy_egress(ctx, cluster).await?;
    }
    let mut g = gather::assemble(&ctx.client, &ctx.workloads, &ctx.helm_runs, name, raw, &stale).await;
    if g.chart_generation != Some(cluster.generation) {
        return Err(Error::NotYet("the HelmChart is not rendered from the current spec yet"));
    }
    // Settings changed, or someone edited the chart: render again (level-triggered).
    let wanted = render::desired(cluster, settings, ctx.address_request(settings));
    let differs = wanted["spec"]
        .as_object()
        .into_iter()
        .flatten()
        .any(|(k, v)| g.chart_spec.as_ref().and_then(|s| s.get(k)) != Some(&gather::digest(v)));
    let just_applied =
        ctx.applied.lock().ok().and_then(|m| m.get(&cluster.id).copied()) == Some(gather::digest(&wanted["spec"]));
    if (differs && !just_applied) || policy_switched {
        tracing::info!(cluster = %cluster.spec.name.as_str(), "HelmChart differs from its rendering; applying again");
        apply_tracked(ctx, cluster, settings).await?;
        return Ok(());
    }
    g.observation.ready_nodes = nodes.to_vec();
    if let crate::domain::PublicAccess::Gateway { .. } = &cluster.spec.public_access {
        let (facts, drift) = gateway_facts(ctx, cluster, settings, gateway).await?;
        if drift {
            tracing::info!(cluster = %cluster.spec.name.as_str(), "TLSRoute differs from its rendering; applying again");
            return match apply_tracked(ctx, cluster, settings).await {
                Err(e) if e.is_permanent() => fail_status(ctx, cluster.id, e.status_reason()).await,
                other => other,
            };
        }
        g.observation.gateway = Some(facts);
    }
    let via = g.observation.gateway.as_ref().and_then(|f| f.address);
    // Probe the endpoint this observation leads to, with the kubeconfig a user gets.
    let draft = observe::status(&cluster.spec, cluster.generation, settings, &g.observation);
    // The latest probe of it (never awaited here: probes run on their own).
    if let (Some(endpoint), Some(creds), true) = (&draft.api_endpoint, &g.credentials, draft.kubeconfig_available) {
        let outcome = ctx.probes.outcome(cluster.id, (endpoint, via), creds, &ctx.resolver);
        if matches!(
            outcome,
            Some(crate::domain::ConnectionStatus::CertificateUntrusted | crate::domain::ConnectionStatus::Unauthorized)
        ) && let Ok(mut m) = ctx.secrets.lock()
        {
            // vCluster may have new credentials (a reinstall): read them again.
            if let Some(memo) = m.get_mut(&cluster.id) {
                memo.doubted = true;
            }
        }
        g.observation.probe = outcome;
    }
    let status = observe::status(&cluster.spec, cluster.generation, settings, &g.observation);
    if status != cluster.status {
        clusters::write_status(&ctx.pool, cluster.id, &status).await?;
    }
    Ok(())
}

/// A gateway cluster's route (from the route watch; read from the host only
/// until the watch has listed) and the admin's Gateway; and whether the
/// route differs from its rendering (missing, or changed by someone, or the
/// admin named another Gateway): then it is applied again.
async fn gateway_facts(
    ctx: &Context,
    cluster: &Cluster,
    settings: &crate::domain::SystemSettings,
    read_for_pass: Option<&GatewayView>,
) -> Result<(observe::GatewayFacts, bool)> {
    use crate::domain::gateway::{Condition, RouteFacts};
    let version = ctx.route_version();
    let mut facts = observe::GatewayFacts {
        configured: settings.gateway.is_some(),
        api: version.is_some(),
        gateway_key: settings.gateway.as_ref().map(|g| g.key()).unwrap_or_default(),
        ..observe::GatewayFacts::default()
    };
    let (Some(gw), Some(version)) = (settings.gateway.as_ref(), version) else { return Ok((facts, false)) };
    let name = cluster.spec.name.as_str();
    let ns = render::namespace(name);
    let route = match ctx.caches.get().and_then(|c| c.route(version, &ns, name)) {
        Some(watched) => watched,
        None => {
            let routes: Api<kube::api::DynamicObject> =
                Api::namespaced_with(ctx.client.clone(), &ns, &apply::routes_resource(version));
            error::ignore_not_found(routes.get(name).await).map_err(error::kube("read TLSRoute"))?
        }
    };
    let wanted = apply::wanted_route(cluster, settings, Some(version), ctx.installation().await?);
    let ours =
        route.as_ref().is_some_and(|r| r.labels().get(render::CLUSTER_ID_LABEL) == Some(&cluster.id.to_string()));
    let drift = ours
        && match (&route, &wanted) {
            (Some(r), Some(w)) => !apply::carries(&r.data["spec"], &w["spec"]),
            _ => true,
        };
    // Missing, drifted, or someone else's of that name (the apply then fails it as taken).
    if route.is_none() || drift || !ours {
        return Ok((facts, true));
    }
    if let Some(r) = &route {
        let parents = r.data["status"]["parents"].as_array().cloned().unwrap_or_default();
        // The parent status for the admin's Gateway (a parentRef's namespace defaults to the route's).
        let parent = parents.iter().find(|p| {
            let pr = &p["parentRef"];
            pr["name"] == gw.name.as_str() && pr["namespace"].as_str().unwrap_or(&ns) == gw.namespace
        });
        facts.route = RouteFacts {
            exists: true,
            generation: r.metadata.generation,
            parent: parent.map(|p| Condition::list(p.get("conditions"))),
        };
    }
    let view = match read_for_pass {
        Some(view) => view.clone(),
        None => gateway_view(ctx, gw).await?,
    };
    facts.gateway_found = view.found;
    facts.address = view.ip;
    if let (Some(a), Ok(mut seen)) = (view.address, ctx.gateway_seen.lock()) {
        *seen = Some((gw.key(), a));
    }
    Ok((facts, false))
}

/// The admin's Gateway as the observer sees it: found or not, its first usable
/// address ([`gateway_address_of`]), and where the probe connects for it.
#[derive(Clone, Debug, Default)]
struct GatewayView {
    found: bool,
    address: Option<String>,
    ip: Option<std::net::IpAddr>,
}

/// The admin's Gateway read now, its address resolved now.
async fn gateway_view(ctx: &Context, gw: &crate::domain::gateway::GatewayRef) -> Result<GatewayView> {
    let found = read_gateway(ctx, gw).await?;
    let address = found.as_ref().and_then(gateway_address_of);
    let ip = match &address {
        Some(a) => gateway_ip(ctx, a).await,
        None => None,
    };
    Ok(GatewayView { found: found.is_some(), address, ip })
}

/// The admin's Gateway, read now (`None`: not found).
async fn read_gateway(
    ctx: &Context,
    gw: &crate::domain::gateway::GatewayRef,
) -> Result<Option<kube::api::DynamicObject>> {
    let gateways: Api<kube::api::DynamicObject> =
        Api::namespaced_with(ctx.client.clone(), &gw.namespace, &gateways_resource());
    error::ignore_not_found(gateways.get(&gw.name).await).map_err(error::kube("read Gateway"))
}

/// One cluster read from the host now, with GETs; `None` unless its
/// HelmChart is this console's for this cluster.
async fn gather_ours(ctx: &Context, cluster: &Cluster) -> Result<Option<gather::Gathered>> {
    let name = cluster.spec.name.as_str();
    let raw = gather::fetch(&ctx.client, name).await?;
    if !ctx.chart_is_ours(cluster.id, raw.chart.as_ref()).await? {
        return Ok(None);
    }
    Ok(Some(gather::assemble(&ctx.client, &ctx.workloads, &ctx.helm_runs, name, raw, &BTreeSet::new()).await))
}

/// The kubeconfig of a cluster, read from the host now (never stored).
pub(crate) async fn download(ctx: &Context, cluster: &Cluster) -> Result<Option<String>> {
    let Some(endpoint) = cluster.status.api_endpoint.as_deref().filter(|_| cluster.kubeconfig_downloadable()) else {
        return Ok(None);
    };
    let Some(g) = ctx.for_request(gather_ours(ctx, cluster)).await? else { return Ok(None) };
    let Some(config) = g.vcluster_config else { return Ok(None) };
    Ok(kubeconfig::render(&config, cluster.spec.name.as_str(), endpoint).ok())
}

/// The name the console reaches a cluster's control plane by inside the host:
/// its Service, `<name>.<namespace>` (cluster DNS; the name vCluster's
/// certificate carries — it has no `.svc` forms), port 443.
pub(crate) fn internal_name(cluster: &Cluster) -> String {
    let name = cluster.spec.name.as_str();
    format!("{name}.{}", render::namespace(name))
}

/// How to reach the virtual cluster's own API server, with `vc-<name>`'s
/// credentials, at [`internal_name`] (resolved by the context's resolver:
/// cluster DNS in production, fixed addresses in tests), its certificate
/// checked for that name. `None` until the reconciler has seen the cluster's
/// chart as this console's and vCluster wrote `vc-<name>` (read through the
/// reconciler's memo of that Secret: one read at most).
async fn virtual_config(ctx: &Context, cluster: &Cluster, pool: Calls) -> Result<Option<kube::Config>> {
    if !cluster.status.kubeconfig_available {
        return Ok(None);
    }
    let name = cluster.spec.name.as_str();
    let secret = ctx.for_request_in(pool, cached_secret(ctx, cluster.id, name, true)).await?;
    let Some(creds) = secret.as_ref().and_then(gather::credentials) else { return Ok(None) };
    let kc = kubeconfig::presenting(&creds);
    let mut cfg = kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
        .await
        .map_err(|_| Error::NotYet("the virtual cluster's credentials are not readable yet"))?;
    let internal = internal_name(cluster);
    let resolved = ctx.resolver.resolve(&internal, 443).await.and_then(|a| a.into_iter().next());
    let addr = match resolved {
        Some(addr) => addr,
        // A console outside the host cluster has no cluster DNS: the
        // Service's LoadBalancer address leads to the same control plane
        // (still verified as `<name>.<namespace>`).
        None => load_balancer_address(ctx, cluster)
            .await
            .ok_or(Error::NotYet("the cluster's Service name does not resolve"))?,
    };
    cfg.cluster_url =
        format!("https://{addr}").parse().map_err(|_| Error::NotYet("the cluster's Service address is not a URL"))?;
    cfg.tls_server_name = Some(internal);
    cfg.connect_timeout = Some(Duration::from_secs(5));
    cfg.read_timeout = Some(Duration::from_secs(10));
    Ok(Some(cfg))
}

/// The first LoadBalancer address of the cluster's Service, port 443.
async fn load_balancer_address(ctx: &Context, cluster: &Cluster) -> Option<std::net::SocketAddr> {
    let name = cluster.spec.name.as_str();
    let services: Api<k8s_openapi::api::core::v1::Service> =
        Api::namespaced(ctx.client.clone(), &render::namespace(name));
    let svc = tokio::time::timeout(Duration::from_secs(5), services.get_opt(name)).await.ok()?.ok().flatten()?;
    let ingress = svc.status?.load_balancer?.ingress?;
    let ip = ingress.iter().find_map(|i| i.ip.as_deref()?.parse().ok())?;
    Some(std::net::SocketAddr::new(ip, 443))
}

/// A client for the virtual cluster's own API server ([`virtual_config`]).
pub(crate) async fn virtual_client(ctx: &Context, cluster: &Cluster) -> Result<Option<Client>> {
    // Boxed: the reads and the client's setup are a deep future (a debug
    // build's request thread overflowed its stack with it inline).
    let Some(cfg) = Box::pin(virtual_config(ctx, cluster, Calls::Users)).await? else { return Ok(None) };
    Client::try_from(cfg).map(Some).map_err(|_| Error::NotYet("no client for the virtual cluster"))
}

/// [`virtual_client`] without kube's default retry of 429, 503 and 504: a
/// drain must see an eviction's 429 (a disruption budget) at once, where
/// kube-client 5 would retry it up to 15 times, each after the server's
/// `Retry-After` (10 s for an eviction) — minutes of one pass.
pub(crate) async fn virtual_client_without_retry(ctx: &Context, cluster: &Cluster) -> Result<Option<Client>> {
    let Some(mut cfg) = Box::pin(virtual_config(ctx, cluster, Calls::Users)).await? else { return Ok(None) };
    cfg.default_retry = false;
    Client::try_from(cfg).map(Some).map_err(|_| Error::NotYet("no client for the virtual cluster"))
}

/// The cluster's control plane at its internal address, as the join script
/// is fetched from it: the address, the name its certificate carries, and
/// only the CA of `vc-<name>` (no credentials are presented).
#[derive(Debug, Clone)]
pub(crate) struct InternalTarget {
    pub addr: std::net::SocketAddr,
    /// The name TLS verifies (the Service's, in vCluster's certificate).
    pub server_name: String,
    /// DER certificates.
    pub roots: Vec<Vec<u8>>,
    /// The `Host` the request carries: the cluster's public endpoint
    /// (`host:port`), which vCluster writes into the script it serves (as
    /// `vcluster token create` prints a curl against the control plane
    /// endpoint); without one, the internal name (machines cannot resolve it).
    pub host: Option<String>,
}

/// `host:port` of an endpoint URL (`https://<host>:<port>`).
pub(crate) fn endpoint_authority(endpoint: &str) -> Option<String> {
    let uri: http::Uri = endpoint.parse().ok()?;
    let authority = uri.authority()?;
    Some(format!("{}:{}", authority.host(), authority.port_u16().unwrap_or(443)))
}

/// A client for the virtual cluster's API server and, from the same read of
/// `vc-<name>`, its control plane as the join script is fetched from it.
pub(crate) async fn virtual_client_and_target(
    ctx: &Context,
    cluster: &Cluster,
) -> Result<Option<(Client, InternalTarget)>> {
    let Some(cfg) = Box::pin(virtual_config(ctx, cluster, Calls::Join)).await? else { return Ok(None) };
    let addr = cfg.cluster_url.authority().and_then(|a| a.as_str().parse().ok());
    let (Some(addr), Some(server_name), Some(roots)) = (addr, cfg.tls_server_name.clone(), cfg.root_cert.clone())
    else {
        return Ok(None);
    };
    let client = Client::try_from(cfg).map_err(|_| Error::NotYet("no client for the virtual cluster"))?;
    let host = cluster.status.api_endpoint.as_deref().and_then(endpoint_authority);
    Ok(Some((client, InternalTarget { addr, server_name, roots, host })))
}

/// The host cluster's client: `KUBECONFIG` (or `~/.kube/config`), else the
/// in-cluster service account.
pub async fn connect() -> std::result::Result<Client, String> {
    let config = kube::Config::infer().await.map_err(|e| e.to_string())?;
    Client::try_from(config).map_err(|e| e.to_string())
}

/// Probes a cluster's public endpoint now, with the kubeconfig a user would get.
pub(crate) async fn probe_now(ctx: &Context, cluster: &Cluster) -> Result<Option<probe::Report>> {
    let Some(endpoint) = cluster.status.api_endpoint.as_deref().filter(|_| cluster.spec.public_access.is_enabled())
    else {
        return Ok(None);
    };
    let report = ctx
        .for_request(async {
            let Some(g) = gather_ours(ctx, cluster).await? else { return Ok(None) };
            let Some(creds) = g.credentials else { return Ok(None) };
            Ok(Some(probe::probe(endpoint, &creds, &ctx.resolver).await))
        })
        .await?;
    let Some(report) = report else { return Ok(None) };
    crate::server::metrics::global().record_probe(report.status.as_str());
    Ok(Some(report))
}

#[cfg(test)]
mod gateway_address_tests {
    use super::gateway_address_of;

    /// `status.addresses` as implementations publish them: the first usable
    /// one, an IP or a name (for a CNAME; the probe resolves it).
    #[test]
    fn a_gateways_address_is_an_ip_or_a_name() {
        let gw = |addresses: serde_json::Value| kube::api::DynamicObject {
            types: None,
            metadata: Default::default(),
            data: serde_json::json!({"status": {"addresses": addresses}}),
        };
        for (addresses, want) in [
            (serde_json::json!([{"type": "IPAddress", "value": "203.0.113.7"}]), Some("203.0.113.7")),
            (serde_json::json!([{"value": "2001:db8::7"}]), Some("2001:db8::7")),
            (serde_json::json!([{"type": "Hostname", "value": "LB-1.Elb.Example.com"}]), Some("lb-1.elb.example.com")),
            (
                serde_json::json!([{"type": "example.com/custom", "value": "x"}, {"type": "Hostname", "value": "gw.example"}]),
                Some("gw.example"),
            ),
            (serde_json::json!([{"type": "Hostname", "value": "not a name!"}]), None),
            (serde_json::json!([{"type": "IPAddress", "value": "gw.example"}]), None),
            (serde_json::json!([]), None),
        ] {
            assert_eq!(gateway_address_of(&gw(addresses.clone())).as_deref(), want, "{addresses}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::ByteString;
    use k8s_openapi::api::core::v1::Secret;

    fn secret(keys: &[&str]) -> Secret {
        let data = keys.iter().map(|k| (k.to_string(), ByteString(format!("{k} text").into_bytes()))).collect();
        Secret {
            data: Some(data),
            metadata: kube::api::ObjectMeta { name: Some("vc-demo".into()), ..Default::default() },
            ..Default::default()
        }
    }

    #[test]
    fn the_secret_memo_keeps_credentials_only_when_asked_for() {
        let all = ["certificate-authority", "client-certificate", "client-key", "config", "token"];
        // (keys written, credentials asked for) -> (complete, credentials kept, credentials read back)
        for (keys, asked, complete, kept) in [
            (&all[..], true, true, true),
            (&all[..], false, true, false),
            (&all[..3], true, false, true),
            (&all[1..], false, false, false),
        ] {
            let memo = memo_of(secret(keys), asked);
            let what = format!("{keys:?} asked {asked}");
            assert_eq!(gather::complete(&memo), complete, "{what}");
            assert_eq!(kept_credentials(&memo), kept, "{what}");
            assert_eq!(gather::credentials(&memo).is_some(), kept, "{what}");
            let data = memo.data.unwrap_or_default();
            assert!(!data.contains_key("token"), "{what}: only what the console reads");
            assert!(data.get("config").is_none_or(|v| v.0.is_empty()), "{what}: config only as present");
            assert!(memo.metadata.name.is_none(), "{what}: no metadata");
        }
        // Read whole (not through the memo), a complete Secret gives its credentials.
        let whole = secret(&all);
        assert!(gather::complete(&whole) && gather::credentials(&whole).is_some());
    }
}
