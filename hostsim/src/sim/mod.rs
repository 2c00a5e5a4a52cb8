//! The host simulator: watches the real API server and plays what k3s runs around
//! it — helm-controller ([`helm`]), the Job controller for its Jobs ([`jobs`]), the
//! kubelet running their pods ([`klipper`], [`crate::kubelet`]), the vCluster
//! control planes ([`vcluster`]), MetalLB ([`loadbalancer`]) and kube-proxy. Every
//! change (and a slow tick, and every timer it set) triggers a full, idempotent
//! resync from what the API server holds, so a restart loses nothing but logs.

mod events;
pub mod helm;
mod jobs;
mod klipper;
mod loadbalancer;
pub mod nodes;
pub mod release;
pub mod vcluster;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Result;
use futures::StreamExt;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Pod, Service};
use kube::api::{Api, DynamicObject, ListParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use tokio::sync::Notify;

use crate::apiproxy::Upstream;
use crate::kubeconfig::Credentials;
use crate::kubelet::{Kubelet, Logs};
use crate::kubeproxy::{Proxy, Rule};
use crate::latency::Latency;
use crate::{chart, lb};
use events::Recorder;
use nodes::NodeAddr;
use vcluster::VCluster;

/// Which parts to play and how.
#[derive(Clone, Debug)]
pub struct Config {
    pub lb: lb::Config,
    /// The host's nodes; kube-proxy serves node ports on their InternalIPs. The
    /// first runs the pods (helm Jobs, vCluster), and is the only node IP vCluster
    /// puts in its certificate.
    pub nodes: Vec<NodeAddr>,
    pub latency: Latency,
    pub charts: chart::Source,
}

struct Sim {
    client: Client,
    cfg: Config,
    /// The pools as MetalLB reads them now (its `IPAddressPool` objects).
    lb: lb::Config,
    upstream: Arc<Upstream>,
    clusters: HashMap<(String, String), VCluster>,
    proxy: Proxy,
    events: Recorder,
    runtime: klipper::Runtime,
    /// Pods whose container is running on a task, by UID.
    running: Arc<Mutex<HashSet<String>>>,
    wake: Arc<Notify>,
    /// The earliest timer some part set.
    next: Option<Instant>,
    _kubelet: Kubelet,
}

/// Runs until the process ends; `on_ready` is called after the first full resync.
pub async fn run(client: Client, creds: Credentials, cfg: Config, on_ready: impl FnOnce()) -> Result<()> {
    // helm-controller and MetalLB register their CRDs when they start.
    crate::crd::register_all(&client).await?;
    let node_ip = cfg.nodes.first().map(|n| n.internal).unwrap_or(std::net::Ipv4Addr::LOCALHOST);
    let logs = Logs::default();
    let kubelet = Kubelet::start(node_ip.into(), logs.clone()).await?;
    nodes::register(&client, &cfg.nodes, kubelet.addr.port(), &nodes::Capacity::default()).await?;
    loadbalancer::seed_pools(&client, &cfg.lb.pools).await?;
    let wake = Arc::new(Notify::new());
    let mut sim = Sim {
        upstream: Upstream::new(&creds)?,
        events: Recorder::new(client.clone(), "hostsim"),
        runtime: klipper::Runtime { client: client.clone(), logs, latency: cfg.latency, charts: cfg.charts.clone() },
        lb: cfg.lb.clone(),
        client,
        cfg,
        clusters: HashMap::new(),
        proxy: Proxy::default(),
        running: Arc::default(),
        wake: wake.clone(),
        next: None,
        _kubelet: kubelet,
    };
    spawn_watch(Api::<Service>::all(sim.client.clone()), wake.clone());
    spawn_watch(Api::<DynamicObject>::all_with(sim.client.clone(), &helm::resource()), wake.clone());
    spawn_watch(Api::<Job>::all(sim.client.clone()), wake.clone());
    spawn_watch(Api::<Pod>::all(sim.client.clone()), wake.clone());
    sim.resync().await?;
    on_ready();
    loop {
        let tick = sim
            .next
            .map(|t| t.saturating_duration_since(Instant::now()))
            .unwrap_or(Duration::from_secs(5))
            .min(Duration::from_secs(5));
        tokio::select! {
            _ = wake.notified() => {}
            _ = tokio::time::sleep(tick) => {}
        }
        // Coalesce bursts of watch events into one pass.
        tokio::time::sleep(Duration::from_millis(20)).await;
        if let Err(e) = sim.resync().await {
            tracing::warn!(error = %e, "resync failed; retrying");
        }
    }
}

/// Wakes the loop on every change of these objects.
pub(crate) fn spawn_watch<K>(api: Api<K>, wake: Arc<Notify>)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    tokio::spawn(async move {
        let mut stream = watcher(api, watcher::Config::default()).default_backoff().boxed();
        while let Some(ev) = stream.next().await {
            match ev {
                Ok(_) => wake.notify_one(),
                Err(e) => tracing::debug!(error = %e, "watch error"),
            }
        }
    });
}

impl Sim {
    fn node_name(&self) -> String {
        nodes::node_name(self.cfg.nodes.first().map(|n| n.internal).unwrap_or(std::net::Ipv4Addr::LOCALHOST))
    }

    fn wake_at(&mut self, t: Option<Instant>) {
        if let Some(t) = t {
            self.next = Some(self.next.map_or(t, |n| n.min(t)));
        }
    }

    async fn resync(&mut self) -> Result<()> {
        self.next = None;
        self.sync_helm_charts().await?;
        self.sync_jobs().await?;
        self.sync_vclusters().await?;
        let services = Api::<Service>::all(self.client.clone()).list(&ListParams::default()).await?;
        self.lb = loadbalancer::read_pools(&self.client, &self.cfg.lb).await;
        loadbalancer::sync(&self.client, &self.lb, &services.items, &mut self.events).await;
        self.sync_endpoints(&services.items).await;
        Ok(())
    }

    async fn sync_helm_charts(&mut self) -> Result<()> {
        let api = Api::<DynamicObject>::all_with(self.client.clone(), &helm::resource());
        for hc in api.list(&ListParams::default()).await?.items {
            if let Err(e) = helm::reconcile(&self.client, &hc, &mut self.events).await {
                tracing::warn!(error = %e, chart = %hc.name_any(), "helm-controller: retrying");
            }
        }
        Ok(())
    }

    /// The Job controller and the kubelet, for helm-controller's Jobs.
    async fn sync_jobs(&mut self) -> Result<()> {
        let lp = ListParams::default().labels(jobs::CHART_LABEL);
        let all_jobs = Api::<Job>::all(self.client.clone()).list(&lp).await?.items;
        let all_pods = Api::<Pod>::all(self.client.clone()).list(&lp).await?.items;
        let node = self.node_name();
        for job in &all_jobs {
            let uid = job.uid().unwrap_or_default();
            let pods: Vec<&Pod> =
                all_pods.iter().filter(|p| p.labels().get(jobs::CONTROLLER_UID) == Some(&uid)).collect();
            match jobs::reconcile(&self.client, job, &pods, &node, &self.cfg.latency).await {
                Ok(pass) => self.wake_at(pass.wake_at),
                Err(e) => tracing::warn!(error = %e, job = %job.name_any(), "job controller: retrying"),
            }
        }
        let refs: Vec<&Pod> = all_pods.iter().collect();
        jobs::release_finished(&self.client, &refs).await;
        // The kubelet: run every pod bound to our node that is not running yet.
        for pod in all_pods {
            let phase = pod.status.as_ref().and_then(|s| s.phase.clone()).unwrap_or_default();
            let ours = pod.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node.as_str());
            if ours && pod.metadata.deletion_timestamp.is_some() {
                // The kubelet confirms a graceful deletion once the container stopped.
                let api: Api<Pod> = Api::namespaced(self.client.clone(), &pod.namespace().unwrap_or_default());
                let dp = kube::api::DeleteParams::default().grace_period(0);
                if let Err(e) = api.delete(&pod.name_any(), &dp).await {
                    tracing::debug!(error = %e, "confirming pod deletion");
                }
                continue;
            }
            if !ours || matches!(phase.as_str(), "Succeeded" | "Failed") {
                continue;
            }
            let uid = pod.uid().unwrap_or_default();
            let fresh = self.running.lock().map(|mut r| r.insert(uid.clone())).unwrap_or(false);
            if fresh {
                let (rt, running, wake) = (self.runtime.clone(), self.running.clone(), self.wake.clone());
                tokio::spawn(async move {
                    klipper::run_pod(rt, pod).await;
                    if let Ok(mut r) = running.lock() {
                        r.remove(&uid);
                    }
                    wake.notify_one();
                });
            }
        }
        Ok(())
    }

    /// One vCluster per deployed release, running that release's values.
    async fn sync_vclusters(&mut self) -> Result<()> {
        let deployed = release::deployed(&self.client).await?;
        let latency = self.cfg.latency;
        self.clusters.retain(|k, _| deployed.contains_key(k));
        for (key, rec) in &deployed {
            let extra_sans = chart::parse_values(&rec.values).map(|v| v.extra_sans).unwrap_or_default();
            match self.clusters.get_mut(key) {
                Some(vc) if vc.revision == rec.uid => {}
                Some(vc) => vc.restart(rec.uid.clone(), extra_sans, latency.vcluster_start.sample()),
                None => {
                    let vc =
                        VCluster::new(&key.0, &key.1, rec.uid.clone(), extra_sans, latency.vcluster_start.sample());
                    self.clusters.insert(key.clone(), vc);
                }
            }
        }
        Ok(())
    }

    /// vCluster certificate SANs and kube-proxy forwarding, from the Services.
    async fn sync_endpoints(&mut self, services: &[Service]) {
        let node_ip = self.cfg.nodes.first().map(|n| n.internal.to_string()).unwrap_or_default();
        let by_name: BTreeMap<(String, String), &Service> =
            services.iter().map(|s| ((s.namespace().unwrap_or_default(), s.name_any()), s)).collect();
        let mut wakes = Vec::new();
        for (key, vc) in self.clusters.iter_mut() {
            let svc = by_name.get(key).copied();
            match vc.tick(&self.client, &self.upstream, svc, &node_ip, self.cfg.latency.cert_refresh.sample()).await {
                Ok(t) => wakes.push(t),
                Err(e) => tracing::warn!(error = %e, release = %vc.release, "vcluster: retrying"),
            }
        }
        for t in wakes {
            self.wake_at(t);
        }
        let mut rules = Vec::new();
        for svc in services {
            rules.extend(self.rules_for(svc));
        }
        for (rule, err) in self.proxy.sync(rules).await {
            if let Some(svc) = services
                .iter()
                .find(|s| format!("{}/{}", s.namespace().unwrap_or_default(), s.name_any()) == rule.service)
            {
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
        // The endpoint: a ready vCluster pod in the namespace whose labels match
        // the selector. Without one kube-proxy rejects connections.
        let backend = self.clusters.values().find(|vc| {
            let labels = vcluster::pod_labels(&vc.release);
            vc.namespace == ns && selector.iter().all(|(k, v)| labels.get(k) == Some(v))
        });
        let Some(backend) = backend.and_then(|b| b.listener.as_ref()) else {
            return vec![];
        };
        // A hostname this provider gave out stands for its address (a cloud LB).
        let ingress_ips = self.lb.addresses(svc);
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
                listen.extend(self.cfg.nodes.iter().map(|n| SocketAddr::from((n.internal, np))));
            }
            if kind == "LoadBalancer"
                && let Ok(p) = u16::try_from(port.port)
            {
                listen.extend(ingress_ips.iter().map(|ip| SocketAddr::from((*ip, p))));
            }
            rules.extend(listen.into_iter().map(|listen| Rule {
                listen,
                backend: backend.addr,
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
