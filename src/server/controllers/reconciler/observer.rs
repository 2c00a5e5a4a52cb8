//! The observer: one replica at a time (the observer lease) reads the host
//! for the clusters that may have changed, takes their latest probe, repairs
//! drift and writes each status ([`super::observe`] decides it, pure).

use std::collections::BTreeSet;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use k8s_openapi::api::core::v1::Node;
use kube::ResourceExt;
use kube::api::{Api, DynamicObject, ListParams};

use super::work::{apply_tracked, ensure_policy_egress, fail_status};
use super::{Context, apply, cache, events, gather, observe, roster};
use crate::domain::cluster::Cluster;
use crate::domain::gateway::GatewayRef;
use crate::domain::host_objects;
use crate::domain::render;
use crate::domain::{Phase, Reason};
use crate::server::db::{self, clusters};
use crate::server::host::error::{self, Error, Result};
use crate::server::host::facts::{gateway_address_of, gateway_ip, read_gateway, try_detect_address_request};
use crate::server::host::objects::{GENERATION_ANNOTATION, NETWORK_POLICY_ANNOTATION, routes_resource};

pub const OBSERVER_LEASE: &str = "reconciler-observer";

/// What the observer keeps between passes.
pub(super) struct Observer {
    /// Whether the last pass held the observer lease.
    observing: AtomicBool,
    /// The clusters the observer works on, kept current from what changed.
    roster: tokio::sync::Mutex<roster::Roster>,
    /// Read the whole table on the next pass (the observer lease was taken).
    reload: AtomicBool,
    /// The Ready nodes as the last pass saw them (a change: every cluster is looked at).
    last_nodes: Mutex<Vec<observe::NodeAddresses>>,
}

impl Default for Observer {
    fn default() -> Self {
        Self {
            observing: AtomicBool::new(false),
            roster: tokio::sync::Mutex::default(),
            reload: AtomicBool::new(true),
            last_nodes: Mutex::default(),
        }
    }
}

/// Takes or renews the observer lease; true while this replica holds it.
pub(super) async fn lease(ctx: &Context) -> Result<bool> {
    let ttl = ctx.timing.leader_lease.as_millis() as i64;
    let held = db::shared::acquire_lease(&ctx.pool, OBSERVER_LEASE, &ctx.worker, ttl).await?;
    let was = ctx.observer.observing.swap(held, Ordering::Relaxed);
    if held && !was {
        tracing::info!(worker = %ctx.worker, "took the observer lease: observing, probing and repairing drift here");
        // What another replica applied or wrote is not known here: trust
        // only the host, and read the whole table.
        ctx.observer.reload.store(true, Ordering::Relaxed);
        ctx.host.resync_all();
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

/// Observes the clusters (all of them when `full`; else those not settled,
/// those whose rows changed and those whose host objects changed) whose
/// HelmChart carries their current generation. The clusters come from the
/// [`roster`]: a pass with nothing changed reads no cluster row.
pub(super) async fn observe_all(ctx: &Context, full: bool) -> Result<()> {
    let reload = ctx.observer.reload.swap(false, Ordering::Relaxed);
    let mut roster = ctx.observer.roster.lock().await;
    let changed = match roster.refresh(&ctx.pool, reload).await {
        Ok(changed) => changed,
        Err(e) => {
            ctx.observer.reload.store(reload, Ordering::Relaxed);
            return Err(e.into());
        }
    };
    let touched = ctx.caches().map(cache::Caches::take_touched).unwrap_or_default();
    if full {
        // A host that does not answer keeps what was detected before.
        if let Some(detected) = try_detect_address_request(&ctx.host.client).await {
            ctx.host.seen.set_detected(detected);
        }
        // What the host's helm-controller accepts (k3s upgraded or replaced).
        ctx.host.refresh_helm().await;
        // The periodic pass trusts only the host: drift is repaired.
        if let Ok(mut m) = ctx.memory.applied.lock() {
            m.clear();
        }
    }
    if roster.len() == 0 {
        return Ok(());
    }
    let nodes = match ctx.caches() {
        Some(c) => gather::ready_nodes(&c.nodes()),
        None => {
            let list = Api::<Node>::all(ctx.host.client.clone())
                .list(&ListParams::default())
                .await
                .map_err(error::kube("list nodes"))?;
            gather::ready_nodes(&list.items)
        }
    };
    let nodes_changed = ctx
        .observer
        .last_nodes
        .lock()
        .map(|mut last| std::mem::replace(&mut *last, nodes.clone()) != nodes)
        .unwrap_or(true);
    let everything = full || touched.all || nodes_changed;
    let mut wanted: BTreeSet<i64> = changed;
    for ns in &touched.namespaces {
        if let Some(id) = host_objects::cluster_of_namespace(ns).and_then(|n| roster.id_of(n)) {
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
        if renewed.elapsed() >= ctx.timing.leader_lease / 3 {
            if !lease(ctx).await? {
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
    let stale =
        ctx.memory.stale_jobs.lock().map(|m| m.get(&cluster.id).cloned().unwrap_or_default()).unwrap_or_default();
    let name = cluster.spec.name.as_str();
    // The watch cache, unless it lags behind what we applied (a watch in
    // back-off after an outage): then read the host directly.
    let cached = ctx.caches().map(|c| c.raw(name)).filter(|raw| {
        let generation = raw.chart.as_ref().and_then(|h| h.annotations().get(GENERATION_ANNOTATION).cloned());
        generation == Some(cluster.generation.to_string())
    });
    let (mut raw, from_cache) = match cached {
        Some(raw) => (raw, true),
        None => (gather::fetch(&ctx.host.client, name).await?, false),
    };
    if !ctx.host.installation.chart_is_ours(cluster.id, raw.chart.as_ref()).await? {
        let chart = raw.chart.as_ref().map(|c| &c.metadata);
        let legacy_owner = ctx.host.installation.label_owner(cluster.id, true).await?;
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
        raw.secret =
            ctx.host.secrets.get(&ctx.host.client, cluster.id, name, cluster.spec.public_access.is_enabled()).await?;
    }
    if raw.service.as_ref().is_some_and(gather::served_by_servicelb) {
        ctx.host.seen.saw_servicelb();
    }
    // helm's Job was told to use a proxy: its port is allowed out.
    if let Some(job) = &raw.job
        && ctx.allow_helm_egress(gather::proxy_ports(job))
    {
        ctx.host.wake();
    }
    // The admin switched the namespace's NetworkPolicy on or off since the
    // HelmChart was applied.
    let policy_switched =
        raw.chart.as_ref().and_then(|h| h.annotations().get(NETWORK_POLICY_ANNOTATION)).map(String::as_str)
            != Some(apply::network_policy_switch(settings, cluster.spec.own_nodes).as_str());
    if !policy_switched && settings.network_policy {
        ensure_policy_egress(ctx, cluster, settings).await?;
    }
    let mut g =
        gather::assemble(&ctx.host.client, &ctx.memory.workloads, &ctx.memory.helm_runs, name, raw, &stale).await;
    if g.chart_generation != Some(cluster.generation) {
        return Err(Error::NotYet("the HelmChart is not rendered from the current spec yet"));
    }
    // Settings changed, or someone edited the chart: render again (level-triggered).
    // (Not while the host's helm-controller accepts no policy the console may write.)
    let wanted = ctx
        .host
        .seen
        .failure_policy()
        .map(|policy| render::desired(cluster, settings, ctx.host.address_request(settings), policy));
    let wanted = wanted.unwrap_or_default();
    let differs = wanted["spec"]
        .as_object()
        .into_iter()
        .flatten()
        .any(|(k, v)| g.chart_spec.as_ref().and_then(|s| s.get(k)) != Some(&gather::digest(v)));
    let just_applied = ctx.memory.applied.lock().ok().and_then(|m| m.get(&cluster.id).copied())
        == Some(gather::digest(&wanted["spec"]));
    if (differs && !just_applied) || policy_switched {
        tracing::info!(cluster = %cluster.spec.name.as_str(), "HelmChart differs from its rendering; applying again");
        apply_tracked(ctx, cluster, settings).await?;
        return Ok(());
    }
    if let Some(stop) = g.abort_stop.take() {
        clear_stale_failure(ctx, cluster, stop).await;
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
        let outcome = ctx.probes.outcome(cluster.id, (endpoint, via), creds, &ctx.host.resolver);
        if matches!(
            outcome,
            Some(crate::domain::ConnectionStatus::CertificateUntrusted | crate::domain::ConnectionStatus::Unauthorized)
        ) {
            // vCluster may have new credentials (a reinstall): read them again.
            ctx.host.secrets.doubt(cluster.id);
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
    let version = ctx.host.seen.route_version();
    let mut facts = observe::GatewayFacts {
        configured: settings.gateway.is_some(),
        api: version.is_some(),
        gateway_key: settings.gateway.as_ref().map(|g| g.key()).unwrap_or_default(),
        grace: ctx.timing.route_grace,
        ..observe::GatewayFacts::default()
    };
    let (Some(gw), Some(version)) = (settings.gateway.as_ref(), version) else { return Ok((facts, false)) };
    let name = cluster.spec.name.as_str();
    let ns = host_objects::namespace(name);
    let route = match ctx.caches().and_then(|c| c.route(version, &ns, name)) {
        Some(watched) => watched,
        None => {
            let routes: Api<DynamicObject> =
                Api::namespaced_with(ctx.host.client.clone(), &ns, &routes_resource(version));
            error::ignore_not_found(routes.get(name).await).map_err(error::kube("read TLSRoute"))?
        }
    };
    let wanted = apply::wanted_route(cluster, settings, Some(version), ctx.host.installation.id().await?);
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
        facts.attached_for = attached_for(ctx, cluster.id, &facts.route);
    }
    let view = match read_for_pass {
        Some(view) => view.clone(),
        None => gateway_view(ctx, gw).await?,
    };
    facts.gateway_found = view.found;
    facts.address = view.ip;
    if let Some(a) = view.address {
        ctx.host.seen.saw_gateway(gw.key(), a);
    }
    Ok((facts, false))
}

/// How long this process has seen the route attached (accepted, refs
/// resolved) for its current generation; `None` while it is not.
fn attached_for(ctx: &Context, id: i64, route: &crate::domain::gateway::RouteFacts) -> Option<std::time::Duration> {
    let attached = crate::domain::gateway::route_state(route) == crate::domain::gateway::RouteState::Attached;
    let mut seen = ctx.memory.route_attached.lock().ok()?;
    if !attached {
        seen.remove(&id);
        return None;
    }
    let now = std::time::Instant::now();
    let entry = seen.entry(id).or_insert((route.generation, now));
    if entry.0 != route.generation {
        *entry = (route.generation, now);
    }
    Some(now.duration_since(entry.1))
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
async fn gateway_view(ctx: &Context, gw: &GatewayRef) -> Result<GatewayView> {
    let found = read_gateway(&ctx.host.client, gw).await?;
    let address = found.as_ref().and_then(gateway_address_of);
    let ip = match &address {
        Some(a) => gateway_ip(&ctx.host.resolver, a).await,
        None => None,
    };
    Ok(GatewayView { found: found.is_some(), address, ip })
}

/// An `abort` host's install Job stopped at a failed release: the record is
/// cleared once per rendering of the chart when a corrected spec supersedes
/// it ([`apply::clear_stale_failure`]); logged and recorded as an Event.
async fn clear_stale_failure(ctx: &Context, cluster: &Cluster, stop: gather::AbortStop) {
    let gather::AbortStop { revision, chart_spec, chart_uid } = stop;
    let chart_spec = &chart_spec;
    if ctx.host.seen.failure_policy() != Some(crate::domain::helm::FailurePolicy::Abort) {
        return;
    }
    let key = gather::digest(chart_spec);
    let done = ctx.memory.cleared.lock().ok().and_then(|m| m.get(&cluster.id).copied()) == Some(key);
    if done {
        return;
    }
    let name = cluster.spec.name.as_str();
    let ns = crate::domain::host_objects::namespace(name);
    match apply::clear_stale_failure(&ctx.host.client, &ns, name, revision, chart_spec).await {
        Ok(cleared) => {
            if let Ok(mut m) = ctx.memory.cleared.lock() {
                m.insert(cluster.id, key);
            }
            if let Some(how) = cleared {
                tracing::info!(cluster = %name, revision, ?how, "a failed release a corrected spec supersedes was cleared");
                let note = format!(
                    "helm's release {name} was left failed at revision {revision} by an earlier spec; the console \
                     cleared it ({how:?}) so helm-controller's Job applies the current one (failurePolicy abort)"
                );
                ctx.events.on_helm_chart(name, chart_uid, events::CLEARED_FAILURE, note).await;
            }
        }
        Err(e) => tracing::warn!(cluster = %name, error = %e, "clearing a failed release record failed; tried again"),
    }
}
