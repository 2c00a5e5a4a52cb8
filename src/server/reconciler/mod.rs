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

pub mod apply;
pub mod error;
pub mod gather;
pub mod kubeconfig;
pub mod observe;
pub mod probe;
pub mod render;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Service;
use kube::api::{Api, ListParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use sqlx::AnyPool;
use tokio::sync::Notify;

use crate::domain::cluster::Cluster;
use crate::domain::{ClusterStatus, Phase};
use crate::server::db::{self, clusters, operations};
use error::{Error, Result};
use render::{AddressRequest, ChartSource};

/// Everything the reconciler works with (not the web `AppState`).
pub struct Context {
    pub client: Client,
    pub pool: AnyPool,
    pub chart: ChartSource,
    /// How to ask the LoadBalancer provider for an address; detected at start.
    pub address_request: AddressRequest,
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
    wake: Arc<Notify>,
    full_requested: std::sync::atomic::AtomicBool,
    /// Install Jobs that predate the last values change, per cluster id.
    stale_jobs: Mutex<BTreeMap<i64, BTreeSet<String>>>,
}

impl Context {
    pub fn new(client: Client, pool: AnyPool, address_request: AddressRequest) -> Self {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Self {
            client,
            pool,
            chart: ChartSource::default(),
            address_request,
            resolver: probe::Resolver::default(),
            worker: format!("kubebyon-{}-{n}", std::process::id()),
            resync: Duration::from_secs(60),
            retry_base: Duration::from_secs(2),
            lease: Duration::from_secs(120),
            wake: Arc::new(Notify::new()),
            full_requested: std::sync::atomic::AtomicBool::new(false),
            stale_jobs: Mutex::default(),
        }
    }

    /// Wakes the loop (a change was stored).
    pub fn wake(&self) {
        self.wake.notify_one();
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
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    match crds.get_opt("ipaddresspools.metallb.io").await {
        Ok(Some(_)) => AddressRequest::MetalLb,
        _ => AddressRequest::None,
    }
}

/// How often the queue is looked at without a wake (a cheap query).
const QUEUE_POLL: Duration = Duration::from_secs(2);

/// Runs until the process ends.
pub async fn run(ctx: Arc<Context>) {
    spawn_watches(&ctx);
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
            _ = tokio::time::sleep(QUEUE_POLL.min(ctx.resync)) => {}
        }
        // Coalesce bursts of watch events into one pass.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn spawn_watches(ctx: &Arc<Context>) {
    let managed = format!("{}={}", render::MANAGED_BY.0, render::MANAGED_BY.1);
    let c = ctx.client.clone();
    watch(Api::<kube::api::DynamicObject>::all_with(c.clone(), &apply::charts_resource()), &managed, ctx.wake.clone());
    watch(Api::<Job>::all(c.clone()), "helmcharts.helm.cattle.io/chart", ctx.wake.clone());
    watch(Api::<Service>::all(c), "app=vcluster", ctx.wake.clone());
}

fn watch<K>(api: Api<K>, labels: &str, wake: Arc<Notify>)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    let cfg = watcher::Config::default().labels(labels);
    tokio::spawn(async move {
        let mut stream = watcher(api, cfg).default_backoff().boxed();
        while let Some(ev) = stream.next().await {
            if ev.is_ok() {
                wake.notify_one();
            }
        }
    });
}

/// One pass: the queue, then the status of the clusters that are not settled
/// (all of them when `full`: the periodic pass repairs drift).
pub async fn pass(ctx: &Context, full: bool) -> Result<()> {
    work(ctx).await?;
    observe_all(ctx, full).await
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
        let outcome = handle(ctx, op.cluster_id).await;
        match outcome {
            Ok(()) => {
                operations::finish(&ctx.pool, op.id, &ctx.worker, None).await?;
            }
            Err(e) if e.is_permanent() => {
                tracing::warn!(cluster = op.cluster_id, error = %e, "operation failed");
                let reason = e.reason();
                operations::finish(&ctx.pool, op.id, &ctx.worker, Some(&reason)).await?;
                fail_status(ctx, op.cluster_id, &reason).await?;
            }
            Err(e) => {
                let delay = backoff(ctx.retry_base, op.attempts);
                tracing::info!(cluster = op.cluster_id, error = %e, ?delay, "operation retried later");
                operations::retry_later(&ctx.pool, op.id, &ctx.worker, delay.as_secs().max(1) as i64, &e.reason())
                    .await?;
            }
        }
    }
    Ok(())
}

/// Exponential backoff with jitter: base·2^(attempts−1), ±25 %, at most 5 min.
pub fn backoff(base: Duration, attempts: i64) -> Duration {
    let exp = base.saturating_mul(1u32 << attempts.clamp(1, 12).saturating_sub(1) as u32);
    let capped = exp.min(Duration::from_secs(300));
    let jitter = 0.75 + rand::random::<f64>() * 0.5;
    capped.mul_f64(jitter)
}

/// Applies (or uninstalls) the cluster's current spec.
async fn handle(ctx: &Context, cluster_id: i64) -> Result<()> {
    let Some(cluster) = clusters::get(&ctx.pool, cluster_id).await? else {
        return Ok(()); // already gone
    };
    if cluster.deletion_requested {
        apply::uninstall(&ctx.client, &cluster).await?;
        clusters::delete_row(&ctx.pool, cluster.id).await?;
        tracing::info!(cluster = %cluster.spec.name.as_str(), "uninstalled and removed");
        return Ok(());
    }
    let settings = db::settings::load(&ctx.pool).await?;
    apply_tracked(ctx, &cluster, &settings).await
}

/// Applies, remembering the install Job that predates a values change.
async fn apply_tracked(ctx: &Context, cluster: &Cluster, settings: &crate::domain::SystemSettings) -> Result<()> {
    let stale = current_job_uid(ctx, cluster).await;
    let applied = apply::apply(&ctx.client, cluster, settings, ctx.address_request, &ctx.chart).await?;
    if applied.changed
        && let (Some(uid), Ok(mut map)) = (stale, ctx.stale_jobs.lock())
    {
        map.entry(cluster.id).or_default().insert(uid);
    }
    Ok(())
}

async fn current_job_uid(ctx: &Context, cluster: &Cluster) -> Option<String> {
    let name = cluster.spec.name.as_str();
    let jobs: Api<Job> = Api::namespaced(ctx.client.clone(), &render::namespace(name));
    jobs.get_opt(&format!("helm-install-{name}")).await.ok().flatten().and_then(|j| j.uid())
}

async fn fail_status(ctx: &Context, cluster_id: i64, reason: &str) -> Result<()> {
    if let Some(c) = clusters::get(&ctx.pool, cluster_id).await? {
        let status = ClusterStatus {
            phase: Phase::Failed,
            message: format!("{}: {reason}", observe::message::HELM_FAILED),
            observed_generation: c.generation,
            ..ClusterStatus::default()
        };
        clusters::write_status(&ctx.pool, c.id, &status).await?;
    }
    Ok(())
}

/// Observes the clusters (all, or the unsettled ones) whose HelmChart carries
/// their current generation.
async fn observe_all(ctx: &Context, full: bool) -> Result<()> {
    let mut all = clusters::list(&ctx.pool, None).await?;
    if !full {
        all.retain(|c| !settled(c));
    }
    if all.is_empty() {
        return Ok(());
    }
    let settings = db::settings::load(&ctx.pool).await?;
    let nodes = gather::ready_nodes(&ctx.client).await?;
    for cluster in all.iter().filter(|c| !c.deletion_requested) {
        if let Err(e) = observe_one(ctx, cluster, &settings, &nodes).await {
            tracing::debug!(cluster = %cluster.spec.name.as_str(), error = %e, "observe failed");
        }
    }
    Ok(())
}

async fn observe_one(
    ctx: &Context,
    cluster: &Cluster,
    settings: &crate::domain::SystemSettings,
    nodes: &[observe::NodeAddresses],
) -> Result<()> {
    let stale = ctx.stale_jobs.lock().map(|m| m.get(&cluster.id).cloned().unwrap_or_default()).unwrap_or_default();
    let mut g = gather::gather(&ctx.client, cluster.spec.name.as_str(), &stale).await?;
    if g.chart_generation != Some(cluster.generation) {
        return Err(Error::NotYet("the HelmChart is not rendered from the current spec yet"));
    }
    // Settings changed, or someone edited the chart: render again (level-triggered).
    let request = ctx.address_request;
    let values = render::values_yaml(&render::values(&cluster.spec, settings, request));
    let wanted = render::helm_chart(cluster.id, &cluster.spec, &values, &ctx.chart);
    let differs = wanted["spec"]
        .as_object()
        .into_iter()
        .flatten()
        .any(|(k, v)| g.chart_spec.as_ref().and_then(|s| s.get(k)) != Some(v));
    if differs {
        tracing::info!(cluster = %cluster.spec.name.as_str(), "HelmChart differs from its rendering; applying again");
        apply_tracked(ctx, cluster, settings).await?;
        return Ok(());
    }
    g.observation.ready_nodes = nodes.to_vec();
    // Probe the endpoint this observation leads to, with the kubeconfig a user gets.
    let draft = observe::status(&cluster.spec, cluster.generation, settings, &g.observation);
    if let (Some(endpoint), Some(creds), true) = (&draft.api_endpoint, &g.credentials, draft.kubeconfig_available) {
        let report = probe::probe(endpoint, creds, &ctx.resolver).await;
        g.observation.probe = Some(report.status);
    }
    let status = observe::status(&cluster.spec, cluster.generation, settings, &g.observation);
    if status != cluster.status {
        clusters::write_status(&ctx.pool, cluster.id, &status).await?;
    }
    Ok(())
}

/// The kubeconfig of a cluster, read from the host now (never stored).
pub async fn download(client: &Client, cluster: &Cluster) -> Result<Option<String>> {
    let Some(endpoint) = cluster.status.api_endpoint.as_deref().filter(|_| cluster.kubeconfig_downloadable()) else {
        return Ok(None);
    };
    let g = gather::gather(client, cluster.spec.name.as_str(), &BTreeSet::new()).await?;
    let Some(config) = g.vcluster_config else { return Ok(None) };
    Ok(kubeconfig::render(&config, cluster.spec.name.as_str(), endpoint).ok())
}

/// Lists the namespaces of the console's clusters (for tests and tools).
pub async fn managed_namespaces(client: &Client) -> Result<Vec<String>> {
    let lp = ListParams::default().labels(&format!("{}={}", render::MANAGED_BY.0, render::MANAGED_BY.1));
    let list = Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone())
        .list(&lp)
        .await
        .map_err(error::kube("list namespaces"))?;
    Ok(list.items.iter().map(|n| n.name_any()).collect())
}

/// The host cluster's client: `KUBECONFIG` (or `~/.kube/config`), else the
/// in-cluster service account.
pub async fn connect() -> std::result::Result<Client, String> {
    let config = kube::Config::infer().await.map_err(|e| e.to_string())?;
    Client::try_from(config).map_err(|e| e.to_string())
}

/// Probes a cluster's public endpoint now, with the kubeconfig a user would get.
pub async fn probe_now(ctx: &Context, cluster: &Cluster) -> Result<Option<probe::Report>> {
    let Some(endpoint) = cluster.status.api_endpoint.as_deref().filter(|_| cluster.spec.public_access.is_enabled())
    else {
        return Ok(None);
    };
    let g = gather::gather(&ctx.client, cluster.spec.name.as_str(), &BTreeSet::new()).await?;
    let Some(creds) = g.credentials else { return Ok(None) };
    Ok(Some(probe::probe(endpoint, &creds, &ctx.resolver).await))
}
