//! Test support: a host cluster for integration tests. Starts etcd and
//! kube-apiserver on free 127.0.0.1 ports with fresh certificates, optionally
//! upstream's controllers with the simulated node, and stops every process by PID
//! when dropped. [`TestHost::shared`] gives one instance per test binary;
//! each test then takes a fresh namespace with [`TestHost::namespace`].
//!
//! The processes are started from a dedicated thread whose end (or the test
//! binary's exit, panics included) makes the kernel kill them (PR_SET_PDEATHSIG),
//! so even the never-dropped shared instance leaves nothing running.

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use serde_json::json;

use tokio::sync::oneshot;

use crate::controlplane::{self, ControlPlane, ControlPlaneConfig};
use crate::kubeconfig::Credentials;

/// What runs beside the control plane (`None`: the bare etcd + kube-apiserver).
#[derive(Clone, Debug)]
pub enum Simulator {
    /// Upstream's parts ([`controlplane::UpstreamParts`]) and the simulated node
    /// ([`crate::node`]) in this process; the function gets the host's addresses
    /// ([`Net::node_config`] is the usual choice).
    Node(fn(Net) -> crate::node::Config),
}

/// The loopback addresses `127.A.B.0/24` one test host owns: its node IPs and
/// LoadBalancer pools, so any number of test hosts (and the hand-started host,
/// which uses `127.0.0.0/24`) run at once without sharing a port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Net(pub [u8; 2]);

impl Net {
    /// `127.A.B.n`.
    pub fn addr(self, n: u8) -> Ipv4Addr {
        Ipv4Addr::new(127, self.0[0], self.0[1], n)
    }

    /// The first node (in vCluster's certificate).
    pub fn node(self) -> Ipv4Addr {
        self.addr(1)
    }

    /// A second node: node ports answer there too, but it is not in the SANs.
    pub fn other_node(self) -> Ipv4Addr {
        self.addr(2)
    }

    /// Pool `default`: `.200-.229`, auto-assigned.
    pub fn default_pool(self) -> String {
        format!("default={}-{}", self.addr(200), self.addr(229))
    }

    /// Pool `tiny`: one address (`.230`), only on request.
    pub fn tiny_pool(self) -> String {
        format!("tiny={},noauto", self.addr(230))
    }

    /// The chart mirror's proxy (helm-controller's `HTTPS_PROXY`).
    pub fn mirror(self) -> std::net::SocketAddr {
        std::net::SocketAddr::from((self.addr(250), 3128))
    }

    /// Two nodes of 32 CPU / 128 GiB / 2 TiB ephemeral storage (the suites run
    /// dozens of 1-CPU clusters at once), pods listening on `.3`–`.199`, the test delays;
    /// `state_dir` is set by the host.
    pub fn node_config(self) -> crate::node::Config {
        crate::node::Config {
            nodes: [self.node(), self.other_node()]
                .map(|internal| crate::node::nodes::NodeAddr { internal, external: None })
                .into(),
            capacity: crate::node::nodes::Capacity {
                cpu: "32".into(),
                memory: "128Gi".into(),
                // Every control plane asks for 1Gi and the LimitRange gives
                // each helm Job 3Gi: 50Gi would fit ~16 clusters per node.
                ephemeral_storage: "2Ti".into(),
                ..Default::default()
            },
            pod_ips: (3..=199).map(|n| self.addr(n)).collect(),
            mirror: self.mirror(),
            bin_dir: PathBuf::new(),
            latency: crate::latency::Latency::TEST,
            state_dir: PathBuf::new(),
            vcluster_api: crate::node::apiserver::VClusterApi::Relay,
            etcd: String::new(),
            gateway_api: Some("v1.6.3-standard".into()),
            helm: crate::controlplane::HelmGeneration::Current,
        }
    }

    /// Claims a free `127.A.B.0/24` (A ≥ 1) with a lock file in the temp folder;
    /// locks of processes that are gone are taken over.
    fn claim() -> Result<Self> {
        let pid = std::process::id();
        for attempt in 0..2000u32 {
            let seed = pid.wrapping_mul(7919).wrapping_add(attempt.wrapping_mul(104_729));
            let net = Net([1 + (seed % 254) as u8, ((seed / 254) % 256) as u8]);
            let lock = std::env::temp_dir().join(format!("kubebyon-testhost-net-{}-{}", net.0[0], net.0[1]));
            match std::fs::OpenOptions::new().write(true).create_new(true).open(&lock) {
                Ok(mut f) => {
                    use std::io::Write;
                    let _ = write!(f, "{pid}");
                    return Ok(net);
                }
                Err(_) => {
                    let owner = std::fs::read_to_string(&lock).unwrap_or_default();
                    let alive =
                        owner.trim().parse::<u32>().is_ok_and(|p| Path::new("/proc").join(p.to_string()).exists());
                    if !alive && std::fs::remove_file(&lock).is_ok() {
                        continue;
                    }
                }
            }
        }
        bail!("no free 127.x.y.0/24 for a test host")
    }

    fn release(self) {
        let _ = std::fs::remove_file(
            std::env::temp_dir().join(format!("kubebyon-testhost-net-{}-{}", self.0[0], self.0[1])),
        );
    }
}

/// A `127.A.B.0/24` held until dropped: addresses a test needs beside its
/// host's own (e.g. a second LoadBalancer pool), claimed like a host's.
#[derive(Debug)]
pub struct NetLease(pub Net);

impl NetLease {
    pub fn claim() -> Result<Self> {
        Net::claim().map(Self)
    }
}

impl Drop for NetLease {
    fn drop(&mut self) {
        self.0.release();
    }
}

/// What a test can ask of a running host's processes.
#[derive(Debug)]
enum Command {
    StopApiServer(std::sync::mpsc::Sender<()>),
    StartApiServer(std::sync::mpsc::Sender<Result<()>>),
}

/// Facts about a running test host.
#[derive(Clone, Debug)]
pub struct TestHost {
    pub kubeconfig: PathBuf,
    pub data_dir: PathBuf,
    /// From spawning etcd to the control plane (and node) being ready.
    pub startup: Duration,
    pub pids: Vec<(&'static str, u32)>,
    /// Its addresses.
    pub net: Net,
    commands: tokio::sync::mpsc::UnboundedSender<Command>,
}

/// An owned test host; dropping it stops its processes and removes its folder.
pub struct TestHostGuard {
    pub host: TestHost,
    stop: Option<oneshot::Sender<()>>,
    keeper: Option<JoinHandle<()>>,
}

impl Drop for TestHostGuard {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(k) = self.keeper.take() {
            let _ = k.join();
        }
        if std::thread::panicking() && std::env::var_os("KUBEBYON_KEEP_FAILED_HOST").is_some() {
            // A failed test's host, asked to be kept: its logs tell why.
            eprintln!("test host folder kept for inspection: {}", self.host.data_dir.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.host.data_dir);
        }
        self.host.net.release();
    }
}

static SHARED: OnceLock<Result<(TestHost, oneshot::Sender<()>), String>> = OnceLock::new();

/// How many times [`TestHost::start`] tries when a port it picked was taken.
const START_TRIES: usize = 3;

impl TestHost {
    /// The test binary's shared host, started on first use.
    ///
    /// # Panics
    /// When it cannot start: every test needing it would fail anyway.
    pub fn shared(simulator: Option<Simulator>) -> &'static TestHost {
        let started = SHARED.get_or_init(|| {
            TestHost::start(simulator)
                .and_then(|mut g| {
                    let stop = g.stop.take().context("guard without stop channel")?;
                    let host = g.host.clone();
                    // Never stopped: the processes live until the test binary exits.
                    std::mem::forget(g);
                    Ok((host, stop))
                })
                .map_err(|e| format!("{e:#}"))
        });
        match started {
            Ok((host, _)) => host,
            Err(e) => panic!("test host failed to start: {e}"),
        }
    }

    /// Starts a new host owned by the returned guard.
    ///
    /// Its ports are picked free a moment before each process binds them
    /// ([`controlplane::free_port`]), so another host starting at once in
    /// this process (or any other process) may take one in between: such a
    /// start is tried again, with new ports, up to [`START_TRIES`] times.
    pub fn start(simulator: Option<Simulator>) -> Result<TestHostGuard> {
        let mut tries = 1;
        loop {
            match Self::start_once(simulator.clone()) {
                Err(e) if tries < START_TRIES && format!("{e:#}").contains("address already in use") => {
                    eprintln!("test host: a port was taken before it was bound; starting again ({e:#})");
                    tries += 1;
                }
                started => return started,
            }
        }
    }

    fn start_once(simulator: Option<Simulator>) -> Result<TestHostGuard> {
        let bin_dir = controlplane::locate_binaries()?;
        sweep_stale_dirs();
        let data_dir = std::env::temp_dir().join(format!(
            "kubebyon-testhost-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        let net = Net::claim()?;
        let (ready_tx, ready_rx) = mpsc::channel();
        let (stop_tx, stop_rx) = oneshot::channel::<()>();
        let dir = data_dir.clone();
        let keeper = std::thread::Builder::new()
            .name("testhost-keeper".into())
            .spawn(move || keep(dir, bin_dir, net, simulator, ready_tx, stop_rx))?;
        let host = match ready_rx.recv() {
            Ok(r) => r,
            Err(_) => Err(anyhow::anyhow!("test host keeper ended before reporting")),
        };
        let host = match host {
            Ok(h) => h,
            Err(e) => {
                let _ = keeper.join();
                let _ = std::fs::remove_dir_all(&data_dir);
                net.release();
                return Err(e);
            }
        };
        Ok(TestHostGuard { host, stop: Some(stop_tx), keeper: Some(keeper) })
    }

    /// Stops kube-apiserver, keeping etcd, kube-controller-manager and the
    /// simulator running (an outage as clients see it). Blocks until it is down.
    pub fn stop_api_server(&self) -> Result<()> {
        let (tx, rx) = std::sync::mpsc::channel();
        self.commands.send(Command::StopApiServer(tx)).map_err(|_| anyhow::anyhow!("test host is gone"))?;
        rx.recv().context("test host is gone")
    }

    /// Starts kube-apiserver again on the same port and data; blocks until ready.
    pub fn start_api_server(&self) -> Result<()> {
        let (tx, rx) = std::sync::mpsc::channel();
        self.commands.send(Command::StartApiServer(tx)).map_err(|_| anyhow::anyhow!("test host is gone"))?;
        rx.recv().context("test host is gone")?
    }

    /// A client for this host (one per test: a client belongs to one runtime).
    pub async fn client(&self) -> Result<Client> {
        client_for(&self.kubeconfig).await
    }

    /// A fresh namespace named `t-<prefix>-<random>`.
    pub async fn namespace(&self, client: &Client, prefix: &str) -> Result<String> {
        let api: Api<Namespace> = Api::all(client.clone());
        let body: Namespace = serde_json::from_value(json!({"metadata": {"generateName": format!("t-{prefix}-")}}))?;
        let ns = api.create(&PostParams::default(), &body).await?;
        ns.metadata.name.context("created namespace has no name")
    }

    /// A fresh namespace with the vCluster chart applied in it as `release`
    /// (`values`: its `valuesContent`); the client and the namespace.
    pub async fn install(&self, release: &str, values: &str) -> Result<(Client, String)> {
        let client = self.client().await?;
        let ns = self.namespace(&client, release).await?;
        crate::testsupport::apply_chart(&client, &ns, release, values, json!({})).await?;
        Ok((client, ns))
    }
}

/// Waits (≤ 30 s) for the in-process node's first full sync.
async fn first_sync(rx: oneshot::Receiver<()>) -> Result<()> {
    match tokio::time::timeout(Duration::from_secs(30), rx).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(_)) => bail!("the node ended before its first sync"),
        Err(_) => bail!("the node is not ready after 30 s"),
    }
}

static COUNTER: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// A kube-rs client from a kubeconfig file.
pub async fn client_for(kubeconfig: &Path) -> Result<Client> {
    let kc = Kubeconfig::read_from(kubeconfig)?;
    let cfg = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).await?;
    Ok(Client::try_from(cfg)?)
}

/// The keeper thread: owns the processes (and the in-process node) until
/// told to stop, or forever.
fn keep(
    data_dir: PathBuf,
    bin_dir: PathBuf,
    net: Net,
    simulator: Option<Simulator>,
    ready: mpsc::Sender<Result<TestHost>>,
    stop: oneshot::Receiver<()>,
) {
    let begin = Instant::now();
    let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            let _ = ready.send(Err(e.into()));
            return;
        }
    };
    // The in-process node logs to `<data>/logs/node.log` (this thread only).
    let _log = std::fs::create_dir_all(data_dir.join("logs"))
        .and_then(|_| std::fs::File::create(data_dir.join("logs/node.log")))
        .ok()
        .filter(|_| matches!(simulator, Some(Simulator::Node(_))))
        .map(|f| {
            let sub = tracing_subscriber::fmt()
                .with_writer(std::sync::Mutex::new(f))
                .with_ansi(false)
                .with_env_filter(tracing_subscriber::EnvFilter::new("info,kube=warn"))
                .finish();
            tracing::subscriber::set_default(sub)
        });
    let mut cp: Option<ControlPlane> = None;
    let started = (|| -> Result<Option<tokio::task::JoinHandle<Result<()>>>> {
        let node_cfg = simulator.as_ref().map(|Simulator::Node(config)| config(net));
        let upstream = match &node_cfg {
            Some(cfg) => Some(controlplane::UpstreamParts {
                helm: cfg.helm,
                https_proxy: net.mirror(),
                metallb_metrics_port: controlplane::free_port()?,
            }),
            None => None,
        };
        let plane = cp.insert(ControlPlane::start(&ControlPlaneConfig {
            data_dir: data_dir.clone(),
            bin_dir: bin_dir.clone(),
            api_port: None,
            node_port_range: controlplane::DEFAULT_NODE_PORT_RANGE.into(),
            upstream: upstream.clone(),
        })?);
        let kubeconfig = plane.admin.kubeconfig.clone();
        let client = rt.block_on(client_for(&kubeconfig))?;
        match node_cfg {
            None => Ok(None),
            Some(mut cfg) => {
                cfg.bin_dir = bin_dir.clone();
                cfg.state_dir = data_dir.join("node");
                cfg.etcd = plane.etcd_url.clone();
                let creds = Credentials::from_file(&kubeconfig)?;
                let pools: Vec<crate::lb::Pool> =
                    [net.default_pool(), net.tiny_pool()].iter().filter_map(|p| p.parse().ok()).collect();
                rt.block_on(crate::node::seed_pools(&client, &pools))?;
                let (tx, rx) = oneshot::channel();
                let task = rt.spawn(crate::node::run(client, creds, cfg, move || {
                    let _ = tx.send(());
                }));
                rt.block_on(first_sync(rx))?;
                Ok(Some(task))
            }
        }
    })();
    let in_process = match started {
        Ok(task) => task,
        Err(e) => {
            let _ = ready.send(Err(e));
            return; // cp drops here: stopped by PID
        }
    };
    let pids = cp.as_ref().map(ControlPlane::pids).unwrap_or_default();
    let (commands, mut inbox) = tokio::sync::mpsc::unbounded_channel();
    let host = TestHost {
        kubeconfig: data_dir.join("admin.kubeconfig"),
        data_dir,
        startup: begin.elapsed(),
        pids,
        net,
        commands,
    };
    if ready.send(Ok(host)).is_ok() {
        // Drives the in-process node and serves commands until the guard is
        // dropped; the shared host's sender is never dropped.
        rt.block_on(async {
            tokio::pin!(stop);
            loop {
                tokio::select! {
                    _ = &mut stop => break,
                    // k3s' supervisor: parts that exited start again.
                    _ = tokio::time::sleep(Duration::from_secs(1)) => {
                        if let Some(p) = cp.as_mut() {
                            for name in p.revive() {
                                tracing::info!(part = name, "restarted after it exited");
                            }
                        }
                    }
                    Some(cmd) = inbox.recv() => match cmd {
                        Command::StopApiServer(done) => {
                            if let Some(p) = cp.as_mut() {
                                p.stop_api_server();
                            }
                            let _ = done.send(());
                        }
                        Command::StartApiServer(done) => {
                            let r = match cp.as_mut() {
                                Some(p) => p.start_api_server_again(),
                                None => Err(anyhow::anyhow!("no control plane")),
                            };
                            let _ = done.send(r);
                        }
                    },
                }
            }
        });
    }
    if let Some(task) = in_process {
        task.abort();
    }
    drop(rt); // closes the node's listeners
    if let Some(mut plane) = cp {
        plane.stop();
    }
}

/// Removes folders left by test binaries that are no longer running.
fn sweep_stale_dirs() {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(rest) = name.strip_prefix("kubebyon-testhost-") else {
            continue;
        };
        let pid = rest.split('-').next().unwrap_or_default();
        if !pid.is_empty() && !Path::new("/proc").join(pid).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}
