//! The host simulator: watches the real API server and plays helm-controller with
//! the vCluster chart, the vCluster control planes, a MetalLB-like LoadBalancer
//! provider and kube-proxy. Every change (and a slow tick) triggers a full,
//! idempotent resync from what the API server holds, so a restart loses nothing.

mod events;
mod helm;
mod loadbalancer;
mod vcluster;

use std::collections::{BTreeMap, HashMap};
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Service;
use kube::api::{Api, DynamicObject, ListParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use tokio::sync::Notify;

use crate::apiproxy::Upstream;
use crate::kubeconfig::Credentials;
use crate::kubeproxy::{Proxy, Rule};
use crate::lb;
use events::Recorder;
use vcluster::VCluster;

/// Which parts to play and how.
#[derive(Clone, Debug)]
pub struct Config {
    pub lb: lb::Config,
    /// Node addresses kube-proxy serves node ports on; the first is the node the
    /// vCluster pods run on (the only one vCluster puts in its certificate).
    pub node_ips: Vec<Ipv4Addr>,
}

struct Sim {
    client: Client,
    cfg: Config,
    upstream: Arc<Upstream>,
    clusters: HashMap<(String, String), VCluster>,
    /// Per HelmChart (namespace, name): the spec last installed successfully.
    applied: HashMap<(String, String), String>,
    proxy: Proxy,
    events: Recorder,
}

/// Runs until the process ends; `on_ready` is called after the first full resync.
pub async fn run(
    client: Client,
    creds: Credentials,
    cfg: Config,
    on_ready: impl FnOnce(),
) -> Result<()> {
    let mut sim = Sim {
        upstream: Upstream::new(&creds)?,
        events: Recorder::new(client.clone(), "hostsim"),
        client,
        cfg,
        clusters: HashMap::new(),
        applied: HashMap::new(),
        proxy: Proxy::default(),
    };
    // helm-controller registers its own CRD when it starts.
    crate::crd::register_helmchart(&sim.client).await?;
    let wake = Arc::new(Notify::new());
    spawn_watch(Api::<Service>::all(sim.client.clone()), wake.clone());
    spawn_watch(
        Api::<DynamicObject>::all_with(sim.client.clone(), &helm::resource()),
        wake.clone(),
    );
    sim.resync().await?;
    on_ready();
    loop {
        tokio::select! {
            _ = wake.notified() => {}
            _ = tokio::time::sleep(Duration::from_secs(5)) => {}
        }
        // Coalesce bursts of watch events into one pass.
        tokio::time::sleep(Duration::from_millis(20)).await;
        if let Err(e) = sim.resync().await {
            tracing::warn!(error = %e, "resync failed; retrying");
        }
    }
}

fn spawn_watch<K>(api: Api<K>, wake: Arc<Notify>)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    tokio::spawn(async move {
        let mut stream = watcher(api, watcher::Config::default())
            .default_backoff()
            .boxed();
        while let Some(ev) = stream.next().await {
            match ev {
                Ok(_) => wake.notify_one(),
                Err(e) => tracing::debug!(error = %e, "watch error"),
            }
        }
    });
}

impl Sim {
    async fn resync(&mut self) -> Result<()> {
        self.sync_helm_charts().await?;
        let services = Api::<Service>::all(self.client.clone())
            .list(&ListParams::default())
            .await?;
        loadbalancer::sync(
            &self.client,
            &self.cfg.lb,
            &services.items,
            &mut self.events,
        )
        .await;
        self.sync_endpoints(&services.items).await;
        Ok(())
    }

    async fn sync_helm_charts(&mut self) -> Result<()> {
        let api = Api::<DynamicObject>::all_with(self.client.clone(), &helm::resource());
        let charts = api.list(&ListParams::default()).await?;
        let mut live = Vec::new();
        for hc in &charts.items {
            let key = (hc.namespace().unwrap_or_default(), hc.name_any());
            match helm::reconcile(&self.client, hc, self.applied.get(&key).map(String::as_str))
                .await
            {
                helm::Outcome::Ignored => {}
                helm::Outcome::Uninstall { namespace, name } => {
                    self.uninstall(hc, namespace, name).await;
                }
                helm::Outcome::Failed(msg) => {
                    self.applied.remove(&key);
                    log_err(helm::set_finalizer(&self.client, hc, true).await);
                    self.report(hc, Some(&msg)).await;
                    // A failed upgrade leaves the running release alone.
                    if let Ok(spec) = helm::spec_of(hc) {
                        live.push((helm::target_namespace(hc, &spec), hc.name_any()));
                    }
                }
                helm::Outcome::Installed(release) => {
                    log_err(helm::set_finalizer(&self.client, hc, true).await);
                    live.push((release.namespace.clone(), release.name.clone()));
                    self.applied.insert(key, release.config_hash.clone());
                    let started = self.ensure_vcluster(&release).await;
                    self.report(hc, started.err().as_deref()).await;
                }
            }
        }
        // Releases whose HelmChart vanished without our finalizer running.
        self.clusters.retain(|k, _| live.contains(k));
        let charts: Vec<_> = charts
            .items
            .iter()
            .map(|hc| (hc.namespace().unwrap_or_default(), hc.name_any()))
            .collect();
        self.applied.retain(|k, _| charts.contains(k));
        Ok(())
    }

    async fn uninstall(&mut self, hc: &DynamicObject, namespace: String, name: String) {
        if !hc.finalizers().iter().any(|f| f == helm::FINALIZER) {
            return;
        }
        self.clusters.remove(&(namespace.clone(), name.clone()));
        match vcluster::delete_release(&self.client, &namespace, &name).await {
            Ok(()) => log_err(helm::set_finalizer(&self.client, hc, false).await),
            Err(e) => tracing::warn!(error = %e, %name, "uninstall failed; retrying"),
        }
    }

    /// Starts the release's vCluster if it is not running; the error is the
    /// HelmChart's failure message.
    async fn ensure_vcluster(&mut self, release: &helm::Release) -> Result<(), String> {
        let key = (release.namespace.clone(), release.name.clone());
        if !self.clusters.contains_key(&key) {
            let vc = VCluster::start(&self.client, &key.0, &key.1, self.upstream.clone())
                .await
                .map_err(|e| format!("vcluster failed to start: {e:#}"))?;
            self.clusters.insert(key.clone(), vc);
        }
        if let Some(vc) = self.clusters.get_mut(&key) {
            vc.extra_sans = release.values.extra_sans.clone();
        }
        Ok(())
    }

    async fn report(&self, hc: &DynamicObject, failure: Option<&str>) {
        let status = helm::status(&hc.name_any(), failure);
        log_err(helm::set_status(&self.client, hc, status).await);
    }

    /// vCluster certificate SANs and kube-proxy forwarding, from the Services.
    async fn sync_endpoints(&mut self, services: &[Service]) {
        let node_ip = self
            .cfg
            .node_ips
            .first()
            .map(|ip| ip.to_string())
            .unwrap_or_default();
        let by_name: BTreeMap<(String, String), &Service> = services
            .iter()
            .map(|s| ((s.namespace().unwrap_or_default(), s.name_any()), s))
            .collect();
        for (key, vc) in self.clusters.iter_mut() {
            if let Err(e) = vc.refresh_sans(by_name.get(key).copied(), &node_ip) {
                tracing::warn!(error = %e, release = %vc.release, "certificate refresh failed");
            }
        }
        let mut rules = Vec::new();
        for svc in services {
            rules.extend(self.rules_for(svc));
        }
        for (rule, err) in self.proxy.sync(rules).await {
            if let Some(svc) = services.iter().find(|s| {
                format!("{}/{}", s.namespace().unwrap_or_default(), s.name_any()) == rule.service
            }) {
                let msg = format!("can't listen on {}: {err}", rule.listen);
                self.events.warn(svc, "FailedToListen", &msg).await;
            }
        }
    }

    fn rules_for(&self, svc: &Service) -> Vec<Rule> {
        let ns = svc.namespace().unwrap_or_default();
        let Some(spec) = &svc.spec else { return vec![] };
        let Some(selector) = spec.selector.as_ref().filter(|s| !s.is_empty()) else {
            return vec![];
        };
        // The endpoint: a vCluster pod in the namespace whose labels match the selector.
        let backend = self.clusters.values().find(|vc| {
            let labels = vcluster::pod_labels(&vc.release);
            vc.namespace == ns && selector.iter().all(|(k, v)| labels.get(k) == Some(v))
        });
        let Some(backend) = backend else {
            return vec![];
        };
        // A hostname this provider gave out stands for its address (a cloud LB).
        let ingress_ips = self.cfg.lb.addresses(svc);
        let kind = spec.type_.as_deref().unwrap_or("ClusterIP");
        let service = format!("{ns}/{}", svc.name_any());
        let mut rules = Vec::new();
        for port in spec.ports.iter().flatten() {
            if !targets_api(port) {
                continue;
            }
            let mut listen: Vec<SocketAddr> = Vec::new();
            if matches!(kind, "NodePort" | "LoadBalancer")
                && let Some(np) = port.node_port.and_then(|p| u16::try_from(p).ok())
            {
                listen.extend(
                    self.cfg
                        .node_ips
                        .iter()
                        .map(|ip| SocketAddr::from((*ip, np))),
                );
            }
            if kind == "LoadBalancer"
                && let Ok(p) = u16::try_from(port.port)
            {
                listen.extend(ingress_ips.iter().map(|ip| SocketAddr::from((*ip, p))));
            }
            rules.extend(listen.into_iter().map(|listen| Rule {
                listen,
                backend: backend.listener.addr,
                service: service.clone(),
            }));
        }
        rules
    }
}

/// Whether a Service port reaches the vCluster container's API port.
fn targets_api(port: &k8s_openapi::api::core::v1::ServicePort) -> bool {
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
    match &port.target_port {
        Some(IntOrString::Int(p)) => *p == vcluster::API_PORT,
        Some(IntOrString::String(name)) => name == "https",
        None => port.port == vcluster::API_PORT,
    }
}

fn log_err(r: Result<()>) {
    if let Err(e) = r {
        tracing::warn!(error = %e, "update failed; will retry");
    }
}
