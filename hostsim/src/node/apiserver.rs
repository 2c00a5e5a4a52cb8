//! `--vcluster-api real`: a running vCluster's own API server — the same
//! kube-apiserver binary as the host's, on the host's etcd under its own
//! `--etcd-prefix` (`/vcluster/<namespace>/<release>`, kept across restarts as
//! vCluster's data volume keeps its state), serving the vCluster's certificate
//! on the pod's address, port 8443, and trusting the vCluster's CA for client
//! certificates (~260 MB RSS and ~2.7 s of CPU to `/readyz` each, measured
//! on this machine). So `kubectl` with a downloaded kubeconfig sees the virtual
//! cluster's own namespaces (`default`, `kube-system`, `kube-public`,
//! `kube-node-lease`: the API server makes them itself), not the host's.
//!
//! What it is not: there is no syncer (a workload created inside does not appear
//! on the host), and without private nodes no controller-manager or scheduler
//! inside. At most
//! [`RealApi::cap`] run at once; a vCluster started beyond the cap relays to the
//! host's API server like `relay` does (logged).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Child;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::pki::{self, Ca, CertPair};

/// How vCluster control planes answer.
#[derive(Clone, Debug, Default)]
pub enum VClusterApi {
    /// Relay to the host's API server (thousands of clusters; benchmarks).
    #[default]
    Relay,
    Real(RealApi),
    /// Upstream's own syncer runs the pod ([`super::syncer`]); releases it does
    /// not serve, and those beyond its cap, relay.
    Syncer(RealApi),
}

/// What a real vCluster API server needs, and the cap on how many run.
#[derive(Clone, Debug)]
pub struct RealApi {
    pub cap: usize,
    /// Only these releases get one (a test suite that reads inside a few
    /// clusters and creates many; a trailing `*` matches a prefix); `None`: any.
    pub only: Option<Vec<String>>,
    slots: Arc<Semaphore>,
    /// The host's etcd (`http://127.0.0.1:<port>`), set by the host.
    pub etcd: String,
    /// kube-apiserver.
    pub bin: PathBuf,
    /// Certificates and logs, one folder per vCluster.
    pub dir: PathBuf,
}

impl RealApi {
    pub fn new(cap: usize) -> Self {
        Self {
            cap,
            only: None,
            slots: Arc::new(Semaphore::new(cap)),
            etcd: String::new(),
            bin: PathBuf::new(),
            dir: PathBuf::new(),
        }
    }

    /// Real API servers only for these releases.
    pub fn for_releases(cap: usize, releases: &[&str]) -> Self {
        Self { only: Some(releases.iter().map(|r| r.to_string()).collect()), ..Self::new(cap) }
    }

    /// Whether `release` gets one at all.
    pub fn serves(&self, release: &str) -> bool {
        self.only.as_ref().is_none_or(|only| {
            only.iter().any(|r| r == release || r.strip_suffix('*').is_some_and(|prefix| release.starts_with(prefix)))
        })
    }

    /// A slot, unless `cap` already run.
    pub fn slot(&self) -> Option<OwnedSemaphorePermit> {
        self.slots.clone().try_acquire_owned().ok()
    }
}

fn advertise(bind: SocketAddr) -> std::net::IpAddr {
    match bind.ip() {
        std::net::IpAddr::V4(v4) => super::pod_ip(v4).into(),
        other => other,
    }
}

/// One vCluster's API server process (and, with private nodes, its
/// kube-controller-manager and kube-scheduler); killed when dropped.
pub struct VirtualApiServer {
    child: Child,
    /// kube-controller-manager and kube-scheduler (private nodes).
    controllers: Vec<Child>,
    dir: PathBuf,
    _slot: OwnedSemaphorePermit,
}

impl Drop for VirtualApiServer {
    fn drop(&mut self) {
        for child in std::iter::once(&mut self.child).chain(self.controllers.iter_mut()) {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The controllers a kubeadm join relies on: `bootstrapsigner` signs
/// `kube-public/cluster-info` with each token, `tokencleaner` deletes expired
/// tokens, `csrapproving` approves kubelets' bootstrap CSRs (by the
/// bootstrappers' RBAC), `csrsigning` signs them with the vCluster's CA,
/// `nodelifecycle` marks a node whose heartbeats stop as not Ready and taints
/// a not-Ready one (`node.kubernetes.io/not-ready`); and what puts pods on
/// joined machines: `daemonset` (the CNI), `deployment` and `replicaset`
/// (workloads a drain must evict), `disruption` (the budgets an eviction
/// reads), `podgc` (pods of deleted nodes), with kube-scheduler beside.
pub const JOIN_CONTROLLERS: &str = "bootstrapsigner,tokencleaner,csrapproving,csrsigning,csrcleaner,nodelifecycle,daemonset,deployment,replicaset,disruption,podgc";

/// The controllers vCluster v0.30.0 runs in a shared-node virtual cluster's
/// kube-controller-manager (`pkg/k8s/k8s.go:169`, no virtual scheduler):
/// the default set but node IPAM, node lifecycle, volume binding, attach and
/// expansion, cloud node lifecycle and TTL. Among them `csrsigning` (with
/// the vCluster's CA, `k8s.go:146-147`: the CA its API server and proxy trust
/// for client certificates), `clusterrole-aggregation` (which fills the
/// built-in `admin`/`edit`/`view` roles) and `serviceaccount`.
pub const SHARED_CONTROLLERS: &str = "*,-nodeipam,-nodelifecycle,-persistentvolume-binder,-attachdetach,-persistentvolume-expander,-cloud-node-lifecycle,-ttl";

impl VirtualApiServer {
    /// Starts it on `bind` with the vCluster's CA and serving certificate.
    pub fn start(
        real: &RealApi,
        slot: OwnedSemaphorePermit,
        namespace: &str,
        release: &str,
        bind: SocketAddr,
        ca: &Ca,
        serving: &CertPair,
    ) -> Result<Self> {
        let dir = real.dir.join(format!("{namespace}-{release}"));
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let file = |name: &str| dir.join(name);
        crate::controlplane::write_private(&file("ca.crt"), &ca.pair.cert_pem)?;
        crate::controlplane::write_private(&file("ca.key"), &ca.pair.key_pem)?;
        let sa_key = pki::generate_key_pem()?;
        crate::controlplane::write_private(&file("sa.key"), &sa_key)?;
        crate::controlplane::write_private(&file("sa.pub"), &pki::public_key_pem(&sa_key)?)?;
        let server = Self::write_serving(&dir, serving)?;
        let p = |name: &str| file(name).display().to_string();
        let args = [
            format!("--etcd-servers={}", real.etcd),
            format!("--etcd-prefix=/vcluster/{namespace}/{release}"),
            format!("--cert-dir={}", dir.display()),
            format!("--tls-cert-file={}", server.0),
            format!("--tls-private-key-file={}", server.1),
            format!("--client-ca-file={}", p("ca.crt")),
            format!("--bind-address={}", bind.ip()),
            // The pod's reported address: the API server refuses loopback ones
            // in its own `kubernetes` Endpoints.
            format!("--advertise-address={}", advertise(bind)),
            format!("--secure-port={}", bind.port()),
            // vCluster's own service range (its chart's default for k8s).
            "--service-cluster-ip-range=10.96.0.0/16".into(),
            // As kubeadm (and vCluster's k8s distro) runs it: joined kubelets
            // are held to their own Node by the Node authorizer and NodeRestriction.
            "--authorization-mode=Node,RBAC".into(),
            "--enable-admission-plugins=NodeRestriction".into(),
            // Joining own nodes (vCluster private nodes) authenticates with
            // bootstrap tokens, as vCluster's own API server does.
            "--enable-bootstrap-token-auth=true".into(),
            "--allow-privileged=true".into(),
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local".into(),
            format!("--service-account-key-file={}", p("sa.pub")),
            format!("--service-account-signing-key-file={}", p("sa.key")),
            // Nothing inside mounts tokens (no syncer, no kubelet).
            "--disable-admission-plugins=ServiceAccount".into(),
            "--profiling=false".into(),
            "--v=0".into(),
        ];
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let child = crate::controlplane::spawn(&real.bin, &file("kube-apiserver.log"), &args)?;
        Ok(Self { child, controllers: Vec::new(), dir, _slot: slot })
    }

    /// Starts kube-controller-manager with [`JOIN_CONTROLLERS`] and
    /// kube-scheduler against this
    /// API server at `bind` (once it is ready), as `admin`, signing with the
    /// vCluster's CA.
    pub fn start_controllers(&mut self, real: &RealApi, bind: SocketAddr, admin: &CertPair, ca: &Ca) -> Result<()> {
        self.start_controller_manager(real, bind, admin, ca, JOIN_CONTROLLERS)?;
        let kubeconfig = self.dir.join("admin.kubeconfig");
        let args = [
            format!("--kubeconfig={}", kubeconfig.display()),
            "--leader-elect=false".into(),
            "--secure-port=0".into(),
            "--profiling=false".into(),
            "--v=1".into(),
        ];
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let bin = real.bin.with_file_name("kube-scheduler");
        self.controllers.push(crate::controlplane::spawn(&bin, &self.dir.join("kube-scheduler.log"), &args)?);
        Ok(())
    }

    /// Starts kube-controller-manager with `controllers` against this API
    /// server at `bind` (once it is ready), as `admin`, signing with the
    /// vCluster's CA: [`JOIN_CONTROLLERS`] for private nodes (with the
    /// scheduler, [`Self::start_controllers`]), [`SHARED_CONTROLLERS`] for a
    /// shared-node cluster, as vCluster runs it.
    pub fn start_controller_manager(
        &mut self,
        real: &RealApi,
        bind: SocketAddr,
        admin: &CertPair,
        ca: &Ca,
        controllers: &str,
    ) -> Result<()> {
        let kubeconfig = self.dir.join("admin.kubeconfig");
        let mut doc: serde_yaml::Value = serde_yaml::from_str(&crate::kubeconfig::render(
            "vcluster",
            &format!("https://{bind}"),
            &ca.pair.cert_pem,
            admin,
        ))?;
        // The pod's own address is not among vCluster's names; `localhost` is.
        doc["clusters"][0]["cluster"]["tls-server-name"] = "localhost".into();
        crate::controlplane::write_private(&kubeconfig, &serde_yaml::to_string(&doc)?)?;
        let p = |name: &str| self.dir.join(name).display().to_string();
        let args = [
            format!("--kubeconfig={}", kubeconfig.display()),
            format!("--controllers={controllers}"),
            format!("--cluster-signing-cert-file={}", p("ca.crt")),
            format!("--cluster-signing-key-file={}", p("ca.key")),
            // As vCluster passes them (`k8s.go`): ServiceAccount tokens and
            // each namespace's `kube-root-ca.crt`.
            format!("--service-account-private-key-file={}", p("sa.key")),
            format!("--root-ca-file={}", p("ca.crt")),
            "--leader-elect=false".into(),
            "--secure-port=0".into(),
            "--profiling=false".into(),
            "--v=1".into(),
        ];
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let bin = real.bin.with_file_name("kube-controller-manager");
        self.controllers.push(crate::controlplane::spawn(&bin, &self.dir.join("kube-controller-manager.log"), &args)?);
        Ok(())
    }

    /// The serving pair as files kube-apiserver reloads when they change
    /// (`--tls-cert-file` is watched): written beside, then renamed over.
    fn write_serving(dir: &std::path::Path, serving: &CertPair) -> Result<(String, String)> {
        let (crt, key) = (dir.join("serving.crt"), dir.join("serving.key"));
        for (path, pem) in [(&key, &serving.key_pem), (&crt, &serving.cert_pem)] {
            let tmp = path.with_extension("tmp");
            crate::controlplane::write_private(&tmp, pem)?;
            std::fs::rename(&tmp, path)?;
        }
        Ok((crt.display().to_string(), key.display().to_string()))
    }

    /// A new serving certificate (vCluster's cert syncer regenerated it).
    pub fn set_serving(&self, serving: &CertPair) -> Result<()> {
        Self::write_serving(&self.dir, serving).map(|_| ())
    }

    /// Still running.
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// A client for the API server at `bind` with `user`'s credentials.
    pub async fn client(bind: SocketAddr, ca: &Ca, user: &CertPair) -> Option<kube::Client> {
        let kubeconfig = crate::kubeconfig::render("probe", &format!("https://{bind}"), &ca.pair.cert_pem, user);
        let mut kc = serde_yaml::from_str::<kube::config::Kubeconfig>(&kubeconfig).ok()?;
        // The pod's own address is not among vCluster's names; `localhost` is.
        for c in kc.clusters.iter_mut().filter_map(|c| c.cluster.as_mut()) {
            c.tls_server_name = Some("localhost".into());
        }
        let config =
            kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default()).await.ok()?;
        kube::Client::try_from(config).ok()
    }

    /// `/readyz` answers `ok` to the vCluster's own admin credentials.
    pub async fn ready(bind: SocketAddr, ca: &Ca, admin: &CertPair) -> bool {
        let Some(client) = Self::client(bind, ca, admin).await else { return false };
        let req = http::Request::get("/readyz").body(Vec::new());
        let Ok(req) = req else { return false };
        matches!(
            tokio::time::timeout(Duration::from_secs(2), client.request_text(req)).await,
            Ok(Ok(body)) if body.trim() == "ok"
        )
    }
}
