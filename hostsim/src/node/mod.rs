//! The node of a host whose control plane runs upstream's own code
//! (kube-scheduler, kube-controller-manager's workload and volume controllers,
//! helm-controller, MetalLB's controller: see [`crate::controlplane::UpstreamParts`]).
//! Only what needs a machine is simulated here:
//!
//! - Nodes with real capacity, which the real scheduler fills;
//! - a kubelet running the pods bound to them, by image: klipper-helm
//!   ([`klipper`], the real helm binary), the vCluster control plane
//!   ([`vcluster`], listening on the pod's IP), anything else as a
//!   container that starts and stays ready; pod IPs, statuses, restarts with
//!   CrashLoopBackOff, container logs (`kubectl logs`), graceful termination
//!   (klipper-helm ignores SIGTERM: it is killed when the grace period ends);
//! - kube-proxy and MetalLB's speaker ([`network`]);
//! - k3s' local-path provisioner ([`storage`]);
//! - the chart repository, through an HTTPS proxy ([`repo`]).

pub mod apiserver;
pub mod cgroup;
pub mod cni;
pub mod faults;
pub mod gateway;
pub mod joinfront;
pub mod klipper;
pub mod kubeadm;
pub mod network;
pub mod nodes;
pub mod repo;
pub mod storage;
pub mod syncer;
pub mod vcluster;

use std::collections::{BTreeSet, HashMap, HashSet};
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod, Secret, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use serde::Deserialize;
use serde_json::json;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use crate::apiproxy::Upstream;
use crate::kubeconfig::Credentials;
use crate::kubelet::{Kubelet, Logs};
use crate::kubeproxy::Proxy;
use crate::latency::Latency;
use nodes::{Capacity, NodeAddr};
use vcluster::VCluster;

/// The node's settings.
#[derive(Clone, Debug)]
pub struct Config {
    pub nodes: Vec<NodeAddr>,
    pub capacity: Capacity,
    /// Loopback addresses the pods' containers listen on, one each. A pod's
    /// reported IP is [`pod_ip`] of it (the API server refuses loopback addresses
    /// in EndpointSlices, as a real pod network's are not); kube-proxy maps back.
    pub pod_ips: Vec<Ipv4Addr>,
    /// Where the chart mirror's proxy listens (helm-controller's `HTTPS_PROXY`).
    pub mirror: SocketAddr,
    /// `helm` and `charts/`, from `scripts/build-control-plane.sh`.
    pub bin_dir: PathBuf,
    pub latency: Latency,
    /// Pod volumes, helm's homes, the mirror's CA.
    pub state_dir: PathBuf,
    /// How vCluster control planes answer (`relay`, or `real` API servers).
    pub vcluster_api: apiserver::VClusterApi,
    /// The host's etcd, for `real` vCluster API servers; set by the host.
    pub etcd: String,
    /// The Gateway API CRD bundle installed (a folder of `gateway-api/` from
    /// `scripts/build-control-plane.sh`, e.g. `v1.6.3-standard`); none: not installed.
    pub gateway_api: Option<String>,
    /// Which helm-controller the host runs (its Jobs' image picks the
    /// klipper-helm `entry` the kubelet runs, [`klipper::Entry`]).
    pub helm: crate::controlplane::HelmGeneration,
}

enum Container {
    Klipper(JoinHandle<()>),
    /// A pod failing as a test asked ([`faults`]).
    Faulty(JoinHandle<()>),
    /// vCluster's own syncer ([`syncer`]).
    Syncer(JoinHandle<()>),
    VCluster {
        vc: Box<VCluster>,
        ready: bool,
    },
    Plain,
}

struct Running {
    /// The loopback address the container listens on; given back when the pod
    /// has terminated (a real pod's sandbox is torn down then).
    ip: Option<Ipv4Addr>,
    node_ip: Ipv4Addr,
    container: Container,
}

struct Node {
    client: Client,
    cfg: Config,
    upstream: Arc<Upstream>,
    klipper: klipper::Runtime,
    syncer: syncer::Runtime,
    free_ips: BTreeSet<Ipv4Addr>,
    pods: HashMap<String, Running>,
    proxy: Proxy,
    /// The mirrored Gateway's data path ([`gateway`]).
    sni: gateway::SniProxy,
    /// The `TLSRoute` version served (none: Gateway API not installed).
    route_version: Option<&'static str>,
    next: Option<Instant>,
    wake: Arc<Notify>,
    _kubelets: Vec<Kubelet>,
    _mirror: repo::Mirror,
}

fn metallb(kind: &str, plural: &str) -> ApiResource {
    ApiResource {
        group: "metallb.io".into(),
        version: "v1beta1".into(),
        api_version: "metallb.io/v1beta1".into(),
        kind: kind.into(),
        plural: plural.into(),
    }
}

/// Runs until the process ends; `on_ready` is called after the first pass.
pub async fn run(client: Client, creds: Credentials, mut cfg: Config, on_ready: impl FnOnce()) -> Result<()> {
    std::fs::create_dir_all(cfg.state_dir.join("pods"))?;
    if let apiserver::VClusterApi::Real(real) | apiserver::VClusterApi::Syncer(real) = &mut cfg.vcluster_api {
        real.etcd = cfg.etcd.clone();
        real.bin = cfg.bin_dir.join("kube-apiserver");
        real.dir = cfg.state_dir.join("vclusters");
    }
    storage::ensure_class(&client).await?;
    let route_version = match &cfg.gateway_api {
        Some(bundle) => Some(install_gateway_api(&client, &cfg.bin_dir.join("gateway-api").join(bundle)).await?),
        None => None,
    };
    // A kubelet endpoint on each node's address, as each k3s node runs its
    // own: kube-apiserver reads a pod's log from its node's kubelet.
    let logs = Logs::default();
    let mut kubelets = Vec::with_capacity(cfg.nodes.len());
    for n in &cfg.nodes {
        kubelets.push(Kubelet::start(n.internal.into(), logs.clone()).await?);
    }
    let ports: Vec<u16> = kubelets.iter().map(|k| k.addr.port()).collect();
    nodes::register(&client, &cfg.nodes, &ports, &cfg.capacity, cfg.helm.k3s()).await?;
    tokio::spawn(heartbeat(client.clone(), cfg.nodes.clone()));
    let ca_file = cfg.state_dir.join("ca.crt");
    std::fs::write(&ca_file, &creds.ca_pem)?;
    let mirror = repo::Mirror::start(cfg.mirror, &cfg.bin_dir.join("charts"), &cfg.state_dir).await?;
    let wake = Arc::new(Notify::new());
    let host_api = creds
        .server
        .trim_start_matches("https://")
        .parse()
        .map_err(|e| anyhow::anyhow!("the host's server {}: {e}", creds.server))?;
    let mut node = Node {
        syncer: syncer::Runtime {
            client: client.clone(),
            vcluster: cfg.bin_dir.join("vcluster"),
            kine: cfg.bin_dir.join("kine"),
            binaries: cfg.bin_dir.clone(),
            host_api,
            host_ca_pem: creds.ca_pem.clone(),
            root: cfg.state_dir.join("pods"),
            logs: logs.clone(),
            latency: cfg.latency,
        },
        klipper: klipper::Runtime {
            client: client.clone(),
            helm: cfg.bin_dir.join("helm"),
            helm_v3: cfg.bin_dir.join("helm-v3"),
            server: creds.server.clone(),
            ca_file,
            trust_dir: mirror.trust_dir.clone(),
            logs,
            root: cfg.state_dir.join("pods"),
        },
        upstream: Upstream::new(&creds)?,
        free_ips: cfg.pod_ips.iter().copied().collect(),
        client,
        cfg,
        pods: HashMap::new(),
        proxy: Proxy::default(),
        sni: gateway::SniProxy::default(),
        route_version,
        next: None,
        wake: wake.clone(),
        _kubelets: kubelets,
        _mirror: mirror,
    };
    let c = node.client.clone();
    spawn_watch(Api::<Pod>::all(c.clone()), wake.clone());
    spawn_watch(Api::<Service>::all(c.clone()), wake.clone());
    spawn_watch(Api::<EndpointSlice>::all(c.clone()), wake.clone());
    spawn_watch(Api::<PersistentVolumeClaim>::all(c.clone()), wake.clone());
    spawn_watch(Api::<PersistentVolume>::all(c.clone()), wake.clone());
    spawn_watch(
        Api::<DynamicObject>::all_with(c.clone(), &metallb("L2Advertisement", "l2advertisements")),
        wake.clone(),
    );
    if let Some(version) = route_version {
        for (kind, plural, v) in [("Gateway", "gateways", "v1"), ("TLSRoute", "tlsroutes", version)] {
            spawn_watch(Api::<DynamicObject>::all_with(c.clone(), &gateway_api(kind, plural, v)), wake.clone());
        }
    }
    spawn_watch(Api::<DynamicObject>::all_with(c, &metallb("IPAddressPool", "ipaddresspools")), wake.clone());
    node.resync().await?;
    on_ready();
    loop {
        let tick = node.next.map(|t| t.saturating_duration_since(Instant::now())).unwrap_or(Duration::from_secs(5));
        tokio::select! {
            _ = wake.notified() => {}
            _ = tokio::time::sleep(tick.min(Duration::from_secs(5))) => {}
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        if let Err(e) = node.resync().await {
            tracing::warn!(error = %e, "node: resync failed; retrying");
        }
    }
}

/// Awaits one step of a pass, logging it when it takes more than 10 s (a pass
/// that stalls would stop every pod on the node).
async fn step<T>(name: &str, f: impl std::future::Future<Output = T>) -> T {
    tokio::pin!(f);
    let started = Instant::now();
    loop {
        match tokio::time::timeout(Duration::from_secs(10), &mut f).await {
            Ok(v) => return v,
            Err(_) => tracing::warn!(step = name, waited = ?started.elapsed(), "node: step still running"),
        }
    }
}

/// The kubelet's heartbeat: its Lease in `kube-node-lease` renewed every 10 s
/// (`nodeLeaseDurationSeconds` 40), which node-lifecycle-controller reads.
async fn heartbeat(client: Client, nodes: Vec<NodeAddr>) {
    let api: Api<k8s_openapi::api::coordination::v1::Lease> = Api::namespaced(client, "kube-node-lease");
    loop {
        for n in &nodes {
            let name = nodes::node_name(n.internal);
            let body = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": name, "namespace": "kube-node-lease"},
                "spec": {"holderIdentity": name, "leaseDurationSeconds": 40,
                    "renewTime": k8s_openapi::jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()}});
            if let Err(e) = api.patch(&name, &PatchParams::apply("kubelet").force(), &Patch::Apply(&body)).await {
                tracing::debug!(error = %e, "node lease");
            }
        }
        tokio::time::sleep(Duration::from_secs(10)).await;
    }
}

fn now() -> String {
    k8s_openapi::jiff::Timestamp::now().to_string()
}

fn image_of(pod: &Pod) -> String {
    pod.spec.as_ref().and_then(|s| s.containers.first()).and_then(|c| c.image.clone()).unwrap_or_default()
}

impl Node {
    fn wake_at(&mut self, t: Instant) {
        self.next = Some(self.next.map_or(t, |n| n.min(t)));
    }

    fn node_ip(&self, node_name: &str) -> Option<Ipv4Addr> {
        self.cfg.nodes.iter().map(|n| n.internal).find(|ip| nodes::node_name(*ip) == node_name)
    }

    async fn resync(&mut self) -> Result<()> {
        self.next = None;
        let pods = step("list pods", Api::<Pod>::all(self.client.clone()).list(&ListParams::default())).await?.items;
        let services =
            step("list services", Api::<Service>::all(self.client.clone()).list(&ListParams::default())).await?.items;
        let mut seen = HashSet::new();
        for pod in &pods {
            let Some(node_ip) = pod.spec.as_ref().and_then(|s| s.node_name.as_deref()).and_then(|n| self.node_ip(n))
            else {
                continue;
            };
            let uid = pod.uid().unwrap_or_default();
            seen.insert(uid.clone());
            if let Err(e) = step(&format!("pod {}", pod.name_any()), self.sync_pod(pod, uid, node_ip, &services)).await
            {
                tracing::warn!(error = %e, pod = %pod.name_any(), "kubelet: retrying");
            }
        }
        let gone: Vec<String> = self.pods.keys().filter(|u| !seen.contains(*u)).cloned().collect();
        for uid in gone {
            self.stop(&uid);
        }
        if let Err(e) = step("storage", storage::sync(&self.client)).await {
            tracing::warn!(error = %e, "local-path: retrying");
        }
        step("network", self.sync_network(&services)).await?;
        Ok(())
    }

    fn stop(&mut self, uid: &str) {
        if let Some(run) = self.pods.remove(uid) {
            if let Container::Klipper(task) | Container::Faulty(task) | Container::Syncer(task) = run.container {
                task.abort();
            }
            self.free_ips.extend(run.ip);
        }
    }

    async fn sync_pod(&mut self, pod: &Pod, uid: String, node_ip: Ipv4Addr, services: &[Service]) -> Result<()> {
        let ns = pod.namespace().unwrap_or_default();
        let name = pod.name_any();
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &ns);
        let phase = pod.status.as_ref().and_then(|s| s.phase.clone()).unwrap_or_default();
        if let Some(deleted) = &pod.metadata.deletion_timestamp {
            // The grace period ends at the deletion timestamp; klipper-helm's
            // entry ignores SIGTERM and runs until then.
            if let Some(Running { container: Container::Klipper(task), .. }) = self.pods.get(&uid)
                && !task.is_finished()
            {
                let left = deleted.0.duration_since(k8s_openapi::jiff::Timestamp::now());
                if let Ok(left) = Duration::try_from(left)
                    && !left.is_zero()
                {
                    self.wake_at(Instant::now() + left);
                    return Ok(());
                }
            }
            self.stop(&uid);
            let dp = DeleteParams::default().grace_period(0);
            if let Err(e) = api.delete(&name, &dp).await {
                tracing::debug!(error = %e, "confirming pod deletion");
            }
            return Ok(());
        }
        if !self.pods.contains_key(&uid) {
            if matches!(phase.as_str(), "Succeeded" | "Failed") {
                return Ok(());
            }
            let Some(ip) = self.free_ips.pop_first() else {
                anyhow::bail!("no pod address left");
            };
            let container = self.start(pod, &api, ip, node_ip).await;
            let container = match container {
                Ok(c) => c,
                Err(e) => {
                    self.free_ips.insert(ip);
                    return Err(e);
                }
            };
            self.pods.insert(uid.clone(), Running { ip: Some(ip), node_ip, container });
        }
        if matches!(phase.as_str(), "Succeeded" | "Failed")
            && let Some(ip) = self.pods.get_mut(&uid).and_then(|r| r.ip.take())
        {
            self.free_ips.insert(ip);
            return Ok(());
        }
        let refresh = self.cfg.latency.cert_refresh.sample();
        let upstream = self.upstream.clone();
        let client = self.client.clone();
        let mut wake = None;
        if let Some(Running { container: Container::VCluster { vc, ready }, node_ip, .. }) = self.pods.get_mut(&uid) {
            let svc =
                services.iter().find(|s| s.namespace().as_deref() == Some(ns.as_str()) && s.name_any() == vc.release);
            wake = vc.tick(&client, &upstream, svc, &node_ip.to_string(), refresh).await?;
            if vc.up() && !*ready {
                patch_status(
                    &api,
                    &name,
                    container_status(pod, true, json!({"running": {"startedAt": now()}}), 0),
                    true,
                )
                .await?;
                *ready = true;
            }
        }
        if let Some(t) = wake {
            self.wake_at(t);
        }
        Ok(())
    }

    /// Starts a pod's container; reports it running.
    async fn start(&self, pod: &Pod, api: &Api<Pod>, ip: Ipv4Addr, node_ip: Ipv4Addr) -> Result<Container> {
        let name = pod.name_any();
        let image = image_of(pod);
        let base = json!({"status": {
            "phase": "Running", "hostIP": node_ip.to_string(), "hostIPs": [{"ip": node_ip.to_string()}],
            "podIP": pod_ip(ip).to_string(), "podIPs": [{"ip": pod_ip(ip).to_string()}], "startTime": now(),
            "initContainerStatuses": init_statuses(pod),
        }});
        api.patch_status(&name, &PatchParams::default(), &Patch::Merge(base)).await?;
        if image.contains("klipper-helm") {
            let running = json!({"running": {"startedAt": now()}});
            patch_status(api, &name, container_status(pod, true, running, 0), true).await?;
            let (rt, api, pod, wake) = (self.klipper.clone(), api.clone(), pod.clone(), self.wake.clone());
            let latency = self.cfg.latency;
            return Ok(Container::Klipper(tokio::spawn(async move {
                // Killed at the end of its grace period: its log ends there too.
                let _ended = rt.logs.ends_on_drop(&pod.namespace().unwrap_or_default(), &pod.name_any(), "helm");
                run_klipper(rt, api, pod, latency).await;
                wake.notify_one();
            })));
        }
        if let Some(fault) = self.fault(pod).await {
            tracing::info!(pod = %name, ?fault, "kubelet: failing the pod as the test asked");
            let ns = pod.namespace().unwrap_or_default();
            let (pods, events) = (api.clone(), Api::namespaced(self.client.clone(), &ns));
            let node = nodes::node_name(node_ip);
            let logs = self.klipper.logs.clone();
            let task = tokio::spawn(faults::run(pods, events, logs, pod.clone(), node, fault, self.cfg.latency));
            return Ok(Container::Faulty(task));
        }
        if image.contains("vcluster") {
            let ns = pod.namespace().unwrap_or_default();
            let release = pod.labels().get("release").cloned().unwrap_or_default();
            let (extra_sans, join_endpoint) = self.pod_config(&ns, &release).await;
            // Upstream's syncer runs the open-source image's pods (the
            // console's shared-node clusters); the Pro image (the chart's
            // default, which private nodes need) is closed: the stand-in.
            if let apiserver::VClusterApi::Syncer(real) = &self.cfg.vcluster_api
                && join_endpoint.is_none()
                && image.contains("/vcluster-oss:")
                && real.serves(&release)
            {
                if let Some(slot) = real.slot() {
                    let (rt, api, pod, wake) = (self.syncer.clone(), api.clone(), pod.clone(), self.wake.clone());
                    return Ok(Container::Syncer(tokio::spawn(async move {
                        syncer::run(rt, api, pod, ip, slot).await;
                        wake.notify_one();
                    })));
                }
                tracing::warn!(%release, cap = real.cap, "vcluster syncer: cap reached; relaying");
            }
            let waiting = json!({"running": {"startedAt": now()}});
            patch_status(api, &name, container_status(pod, false, waiting, 0), false).await?;
            let vc = VCluster::new(
                &ns,
                &release,
                extra_sans,
                join_endpoint,
                self.cfg.latency.vcluster_start.sample(),
                SocketAddr::from((ip, vcluster::API_PORT as u16)),
                self.cfg.vcluster_api.clone(),
            );
            return Ok(Container::VCluster { vc: Box::new(vc), ready: false });
        }
        patch_status(api, &name, container_status(pod, true, json!({"running": {"startedAt": now()}}), 0), true)
            .await?;
        Ok(Container::Plain)
    }

    /// The fault a test asked for in the pod's namespace ([`faults::ANNOTATION`]).
    async fn fault(&self, pod: &Pod) -> Option<faults::Fault> {
        let ns = pod.namespace()?;
        let api: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(self.client.clone());
        let namespace = api.get_opt(&ns).await.ok().flatten()?;
        faults::Fault::parse(namespace.annotations().get(faults::ANNOTATION)?)
    }

    /// From the config the pod mounts (`vc-config-<release>`):
    /// `controlPlane.proxy.extraSANs`, and `controlPlane.endpoint` when
    /// `privateNodes.enabled`.
    async fn pod_config(&self, ns: &str, release: &str) -> (Vec<String>, Option<String>) {
        let api: Api<Secret> = Api::namespaced(self.client.clone(), ns);
        let Ok(Some(s)) = api.get_opt(&format!("vc-config-{release}")).await else { return (vec![], None) };
        let Some(cfg) = s.data.as_ref().and_then(|d| d.get("config.yaml")) else { return (vec![], None) };
        let cfg: serde_yaml::Value = serde_yaml::from_slice(&cfg.0).unwrap_or_default();
        let sans = cfg["controlPlane"]["proxy"]["extraSANs"]
            .as_sequence()
            .map(|s| s.iter().filter_map(|v| v.as_str().map(String::from)).collect())
            .unwrap_or_default();
        let private = cfg["privateNodes"]["enabled"].as_bool() == Some(true);
        let endpoint = cfg["controlPlane"]["endpoint"].as_str().filter(|_| private).map(String::from);
        (sans, endpoint)
    }

    async fn sync_network(&mut self, services: &[Service]) -> Result<()> {
        let slices = Api::<EndpointSlice>::all(self.client.clone()).list(&ListParams::default()).await?.items;
        let objects = |ar: ApiResource| {
            let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &ar);
            async move {
                api.list(&ListParams::default())
                    .await
                    .map(|l| l.items.iter().filter_map(|o| serde_json::to_value(o).ok()).collect::<Vec<_>>())
                    .unwrap_or_default()
            }
        };
        let pools = objects(metallb("IPAddressPool", "ipaddresspools")).await;
        let l2 = objects(metallb("L2Advertisement", "l2advertisements")).await;
        let mlb = network::Advertised::from_objects(&pools, &l2);
        let node_ips: Vec<Ipv4Addr> = self.cfg.nodes.iter().map(|n| n.internal).collect();
        let pods = &self.pods;
        let rules = network::rules(services, &slices, &node_ips, &mlb, &|ip| local_of(pods, ip));
        for (rule, err) in self.proxy.sync(rules).await {
            tracing::warn!(listen = %rule.listen, service = %rule.service, error = %err, "kube-proxy: cannot listen");
        }
        if let Some(version) = self.route_version
            && let Err(e) = self.sync_gateways(version, services, &slices, &mlb).await
        {
            tracing::warn!(error = %e, "gateway: retrying");
        }
        Ok(())
    }

    /// The mirrored Gateway implementation ([`gateway`]): statuses, the
    /// Gateways' LoadBalancer Services, and the SNI listeners.
    async fn sync_gateways(
        &mut self,
        route_version: &str,
        services: &[Service],
        slices: &[EndpointSlice],
        mlb: &network::Advertised,
    ) -> Result<()> {
        let list = |kind: &str, plural: &str, v: &str| {
            let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &gateway_api(kind, plural, v));
            async move {
                Ok::<_, anyhow::Error>(
                    api.list(&ListParams::default())
                        .await?
                        .items
                        .iter()
                        .filter_map(|o| serde_json::to_value(o).ok())
                        .collect::<Vec<_>>(),
                )
            }
        };
        let classes = list("GatewayClass", "gatewayclasses", "v1").await?;
        let gateways = list("Gateway", "gateways", "v1").await?;
        let routes = list("TLSRoute", "tlsroutes", route_version).await?;
        let namespaces = Api::<k8s_openapi::api::core::v1::Namespace>::all(self.client.clone())
            .list(&ListParams::default())
            .await?
            .items
            .into_iter()
            .map(|n| (n.name_any(), n.labels().clone()))
            .collect();
        let keys: BTreeSet<String> =
            services.iter().map(|s| format!("{}/{}", s.namespace().unwrap_or_default(), s.name_any())).collect();
        let addresses = services
            .iter()
            .filter_map(|s| {
                let gw = s.labels().get("gateway.networking.k8s.io/gateway-name")?;
                let ip = crate::lb::ingress_ips(s).into_iter().find(|ip| mlb.announces(*ip))?;
                Some((format!("{}/{gw}", s.namespace().unwrap_or_default()), ip))
            })
            .collect();
        let now = now_seconds();
        let plan = gateway::plan(&gateway::World {
            classes: &classes,
            gateways: &gateways,
            routes: &routes,
            namespaces: &namespaces,
            services: &keys,
            addresses: &addresses,
            now: &now,
        });
        let pp = PatchParams::apply(gateway::CONTROLLER.replace('/', "-").as_str()).force();
        for svc in &plan.services {
            let api: Api<Service> =
                Api::namespaced(self.client.clone(), svc["metadata"]["namespace"].as_str().unwrap_or_default());
            api.patch(svc["metadata"]["name"].as_str().unwrap_or_default(), &pp, &Patch::Apply(svc)).await?;
        }
        let write = |ar: ApiResource,
                     ns: Option<String>,
                     name: String,
                     status: serde_json::Value,
                     current: Option<serde_json::Value>| {
            let api: Api<DynamicObject> = match &ns {
                Some(ns) => Api::namespaced_with(self.client.clone(), ns, &ar),
                None => Api::all_with(self.client.clone(), &ar),
            };
            async move {
                // Unchanged but for the times: not written (no churn).
                if current.as_ref().map(strip_times) == Some(strip_times(&status)) {
                    return Ok::<_, anyhow::Error>(());
                }
                api.patch_status(&name, &PatchParams::default(), &Patch::Merge(json!({"status": status}))).await?;
                Ok(())
            }
        };
        let current = |objs: &[serde_json::Value], ns: Option<&str>, name: &str| {
            objs.iter()
                .find(|o| o["metadata"]["name"] == name && ns.is_none_or(|n| o["metadata"]["namespace"] == n))
                .map(|o| o["status"].clone())
        };
        for (name, status) in plan.class_status {
            let cur = current(&classes, None, &name);
            write(gateway_api("GatewayClass", "gatewayclasses", "v1"), None, name, status, cur).await?;
        }
        for (ns, name, status) in plan.gateway_status {
            let cur = current(&gateways, Some(&ns), &name);
            write(gateway_api("Gateway", "gateways", "v1"), Some(ns), name, status, cur).await?;
        }
        for (ns, name, status) in plan.route_status {
            let cur = current(&routes, Some(&ns), &name);
            write(gateway_api("TLSRoute", "tlsroutes", route_version), Some(ns), name, status, cur).await?;
        }
        // The data path: SNI host → the backend Service's ready endpoint.
        let pods = &self.pods;
        let mut table: std::collections::BTreeMap<SocketAddr, std::collections::BTreeMap<String, SocketAddr>> =
            std::collections::BTreeMap::new();
        for (listen, host, backend, port) in plan.sni {
            let Some((bns, bname)) = backend.split_once('/') else { continue };
            let Some(svc) = services.iter().find(|s| s.namespace().as_deref() == Some(bns) && s.name_any() == bname)
            else {
                continue;
            };
            let port_name = svc
                .spec
                .as_ref()
                .and_then(|s| s.ports.as_ref())
                .and_then(|ps| ps.iter().find(|p| i64::from(p.port) == port).map(|p| p.name.clone()));
            let Some(port_name) = port_name else { continue };
            let mine: Vec<&EndpointSlice> = slices
                .iter()
                .filter(|s| {
                    s.namespace().as_deref() == Some(bns)
                        && s.labels().get("kubernetes.io/service-name").map(String::as_str) == Some(bname)
                })
                .collect();
            if let Some(to) = network::ready_backend(&mine, port_name.as_deref(), &|ip| local_of(pods, ip)) {
                table.entry(listen).or_default().insert(host, to);
            }
        }
        for (addr, err) in self.sni.sync(table).await {
            tracing::warn!(listen = %addr, error = %err, "gateway: cannot listen");
        }
        Ok(())
    }
}

/// The init containers ran and completed (the chart's `kubernetes` one copies binaries).
fn init_statuses(pod: &Pod) -> serde_json::Value {
    let list: Vec<serde_json::Value> = pod
        .spec
        .as_ref()
        .and_then(|s| s.init_containers.as_ref())
        .into_iter()
        .flatten()
        .map(|c| {
            json!({"name": c.name, "image": c.image, "imageID": "", "ready": true, "restartCount": 0,
                "state": {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": now(), "finishedAt": now()}}})
        })
        .collect();
    json!(list)
}

fn container_status(pod: &Pod, ready: bool, state: serde_json::Value, restarts: i32) -> serde_json::Value {
    let c = pod.spec.as_ref().and_then(|s| s.containers.first());
    json!({"name": c.map(|c| c.name.clone()).unwrap_or_default(), "image": c.and_then(|c| c.image.clone()),
        "imageID": "", "ready": ready, "started": true, "restartCount": restarts, "state": state})
}

async fn patch_status(
    api: &Api<Pod>,
    name: &str,
    container: serde_json::Value,
    ready: bool,
) -> Result<(), kube::Error> {
    let r = if ready { "True" } else { "False" };
    let t = now();
    let patch = json!({"status": {
        "conditions": [
            {"type": "PodReadyToStartContainers", "status": "True", "lastTransitionTime": t},
            {"type": "Initialized", "status": "True", "lastTransitionTime": t},
            {"type": "ContainersReady", "status": r, "lastTransitionTime": t},
            {"type": "Ready", "status": r, "lastTransitionTime": t},
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": t},
        ],
        "containerStatuses": [container],
    }});
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(patch)).await.map(|_| ())
}

/// The klipper-helm container to its end; with `restartPolicy: OnFailure` a failed
/// run restarts in the same pod after CrashLoopBackOff (10 s doubling, ≤ 5 min,
/// scaled like the Job back-off of the latency profile).
async fn run_klipper(rt: klipper::Runtime, api: Api<Pod>, pod: Pod, latency: Latency) {
    let name = pod.name_any();
    let ns = pod.namespace().unwrap_or_default();
    let on_failure = pod.spec.as_ref().and_then(|s| s.restart_policy.as_deref()) == Some("OnFailure");
    let mut restarts = 0;
    loop {
        let started = now();
        let code = klipper::run(&rt, &pod).await;
        rt.logs.end(&ns, &name, "helm");
        let terminated = json!({"terminated": {"exitCode": code,
            "reason": if code == 0 { "Completed" } else { "Error" }, "startedAt": started, "finishedAt": now()}});
        if code == 0 || !on_failure {
            let mut status = container_status(&pod, false, terminated, restarts);
            status["started"] = json!(false);
            let _ = patch_status(&api, &name, status, false).await;
            let phase = if code == 0 { "Succeeded" } else { "Failed" };
            let _ = api
                .patch_status(&name, &PatchParams::default(), &Patch::Merge(json!({"status": {"phase": phase}})))
                .await;
            return;
        }
        rt.logs.crashed(&ns, &name, "helm");
        restarts += 1;
        let waiting = json!({"waiting": {"reason": "CrashLoopBackOff",
            "message": format!("back-off restarting failed container helm in pod {name}_{ns}")}});
        let mut status = container_status(&pod, false, waiting, restarts);
        status["lastState"] = terminated;
        if patch_status(&api, &name, status, false).await.is_err() {
            return;
        }
        tokio::time::sleep(latency.retry_after(restarts as u32)).await;
        rt.logs.restart(&ns, &name, "helm");
        let running = json!({"running": {"startedAt": now()}});
        if patch_status(&api, &name, container_status(&pod, true, running, restarts), true).await.is_err() {
            return;
        }
    }
}

/// The admin's MetalLB configuration for these pools: each `IPAddressPool`, and
/// one `L2Advertisement` announcing them all (as MetalLB's quick start does).
/// Wakes the loop on every change of `K` (errors are retried with back-off).
fn spawn_watch<K>(api: Api<K>, wake: Arc<Notify>)
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

pub async fn seed_pools(client: &Client, pools: &[crate::lb::Pool]) -> Result<()> {
    let pa = PatchParams::apply("hostsim-admin").force();
    let pool_api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), crate::lb::METALLB_NAMESPACE, &metallb("IPAddressPool", "ipaddresspools"));
    for p in pools {
        pool_api.patch(&p.name, &pa, &Patch::Apply(&p.to_object())).await?;
    }
    let l2: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        crate::lb::METALLB_NAMESPACE,
        &metallb("L2Advertisement", "l2advertisements"),
    );
    let body = json!({"apiVersion": "metallb.io/v1beta1", "kind": "L2Advertisement",
        "metadata": {"name": "all", "namespace": crate::lb::METALLB_NAMESPACE}, "spec": {}});
    l2.patch("all", &pa, &Patch::Apply(&body)).await?;
    Ok(())
}

/// The pod IP reported for a container listening on `local` (`127.a.b.c`): in
/// k3s' cluster CIDR, `10.42.b.c`.
pub fn pod_ip(local: Ipv4Addr) -> Ipv4Addr {
    let [_, _, b, c] = local.octets();
    Ipv4Addr::new(10, 42, b, c)
}

/// A Gateway API kind.
fn gateway_api(kind: &str, plural: &str, version: &str) -> ApiResource {
    ApiResource {
        group: gateway::GROUP.into(),
        version: version.into(),
        api_version: format!("{}/{version}", gateway::GROUP),
        kind: kind.into(),
        plural: plural.into(),
    }
}

/// A status without its `lastTransitionTime`s, to compare.
fn strip_times(v: &serde_json::Value) -> serde_json::Value {
    match v {
        serde_json::Value::Object(m) => {
            m.iter().filter(|(k, _)| *k != "lastTransitionTime").map(|(k, v)| (k.clone(), strip_times(v))).collect()
        }
        serde_json::Value::Array(a) => a.iter().map(strip_times).collect(),
        other => other.clone(),
    }
}

/// RFC 3339 to the second (what `metav1.Time` keeps).
fn now_seconds() -> String {
    k8s_openapi::jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// Installs the Gateway API CRDs of `dir` (server-side apply), waits until
/// they are served, seeds the GatewayClass [`gateway::CLASS`]; returns the
/// newest `TLSRoute` version served.
async fn install_gateway_api(client: &Client, dir: &std::path::Path) -> Result<&'static str> {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let pp = PatchParams::apply("hostsim").force();
    let mut route_versions = Vec::new();
    let mut files: Vec<_> = std::fs::read_dir(dir)?.filter_map(|e| e.ok().map(|e| e.path())).collect();
    files.sort();
    // Parsed first: the YAML reader is not held across an await.
    let mut all = Vec::new();
    for file in files.iter().filter(|f| f.extension().is_some_and(|e| e == "yaml")) {
        let text = std::fs::read_to_string(file)?;
        for doc in serde_yaml::Deserializer::from_str(&text) {
            let value = serde_json::Value::deserialize(doc)?;
            if value["kind"] == "CustomResourceDefinition" {
                all.push(serde_json::from_value::<CustomResourceDefinition>(value)?);
            }
        }
    }
    for crd in &all {
        if crd.spec.names.plural == "tlsroutes" {
            route_versions = crd.spec.versions.iter().filter(|v| v.served).map(|v| v.name.clone()).collect();
        }
        crds.patch(&crd.name_any(), &pp, &Patch::Apply(crd)).await?;
    }
    for name in [
        "gateways.gateway.networking.k8s.io",
        "gatewayclasses.gateway.networking.k8s.io",
        "tlsroutes.gateway.networking.k8s.io",
    ] {
        tokio::time::timeout(
            Duration::from_secs(60),
            kube::runtime::wait::await_condition(crds.clone(), name, kube::runtime::conditions::is_crd_established()),
        )
        .await??;
    }
    let version = ["v1", "v1alpha3", "v1alpha2"]
        .into_iter()
        .find(|v| route_versions.iter().any(|r| r == v))
        .ok_or_else(|| anyhow::anyhow!("{}: no TLSRoute version served", dir.display()))?;
    let classes: Api<DynamicObject> =
        Api::all_with(client.clone(), &gateway_api("GatewayClass", "gatewayclasses", "v1"));
    let class = json!({"apiVersion": format!("{}/v1", gateway::GROUP), "kind": "GatewayClass",
        "metadata": {"name": gateway::CLASS}, "spec": {"controllerName": gateway::CONTROLLER}});
    classes.patch(gateway::CLASS, &pp, &Patch::Apply(&class)).await?;
    Ok(version)
}

/// Where a reported pod IP really listens, among the running pods.
fn local_of(pods: &HashMap<String, Running>, reported: Ipv4Addr) -> Option<Ipv4Addr> {
    pods.values().filter_map(|r| r.ip).find(|ip| pod_ip(*ip) == reported)
}

/// Pod addresses `FIRST-LAST`.
pub fn parse_ip_range(s: &str) -> Result<Vec<Ipv4Addr>, String> {
    let (a, b) = s.split_once('-').ok_or_else(|| format!("{s:?}: expected FIRST-LAST"))?;
    let a: Ipv4Addr = a.trim().parse().map_err(|e| format!("{a:?}: {e}"))?;
    let b: Ipv4Addr = b.trim().parse().map_err(|e| format!("{b:?}: {e}"))?;
    if a > b {
        return Err(format!("{s:?}: empty range"));
    }
    Ok((u32::from(a)..=u32::from(b)).map(Ipv4Addr::from).collect())
}
