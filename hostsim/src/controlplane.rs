//! Starts the real control plane: etcd, kube-apiserver and kube-controller-manager
//! built from Go modules by `scripts/build-control-plane.sh`, on 127.0.0.1, with
//! certificates generated here.
//!
//! The flags follow controller-runtime's envtest, with k3s' service range so
//! ClusterIPs look like the ones a k3s host hands out. kube-controller-manager runs
//! only the controllers whose work needs no kubelet ([`CONTROLLERS`]).

use std::fs;
use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use crate::kubeconfig;
use crate::pki::{self, Ca, CertPair};

/// k3s' default service CIDR.
pub const SERVICE_CIDR: &str = "10.43.0.0/16";

/// What `scripts/build-control-plane.sh` builds (and the host needs).
const BINARIES: [&str; 10] = [
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kubectl",
    "helm-controller",
    "helm-controller-v0.17.1",
    "helm",
    "helm-v3",
    "metallb-controller",
];

/// The controllers an upstream host adds to [`CONTROLLERS`]: those whose pods the
/// node now runs (Jobs for helm-controller, the chart's StatefulSet), volume
/// binding for its claim, the protection finalizers k3s has on both, and node
/// lifecycle (removes the `not-ready` taint the API server puts on a new Node once
/// it reports Ready, and taints it when its kubelet's Lease stops being renewed).
pub const UPSTREAM_CONTROLLERS: &str = "job-controller,statefulset-controller,replicaset-controller,\
deployment-controller,persistentvolume-binder-controller,persistentvolume-protection-controller,\
persistentvolumeclaim-protection-controller,disruption-controller,node-lifecycle-controller";

/// The klipper-helm image k3s v1.36.3 passes helm-controller (`--default-job-image`).
pub const KLIPPER_HELM_IMAGE: &str = "rancher/klipper-helm:v0.13.3-build20260727";

/// The klipper-helm image paired here with helm-controller v0.17.1 (k3s
/// v1.34.9, v1.36.0-v1.36.2): the newest build before v0.17.1's successors,
/// helm v3.20.2 inside (its Dockerfile). The k3s tree could not be read
/// here to confirm the exact tag (docs/testing.md).
pub const KLIPPER_HELM_IMAGE_V0_9: &str = "rancher/klipper-helm:v0.9.18-build20260428";

/// Which helm-controller the host runs, and the job image it passes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum HelmGeneration {
    /// helm-controller v0.17.9 with klipper-helm v0.13.3 (`failurePolicy`
    /// `retry`; `CONFIG_HASH`, server-side apply; helm 4).
    #[default]
    #[value(name = "v0.17.9")]
    Current,
    /// helm-controller v0.17.1 with klipper-helm v0.9.18 (`failurePolicy`
    /// `abort` or `reinstall` only; no `CONFIG_HASH`; helm 3): what k3s
    /// v1.34.9, v1.35.6 and v1.36.0-v1.36.2 embed.
    #[value(name = "v0.17.1")]
    V0_17_1,
}

impl HelmGeneration {
    /// Its binary in the control plane's folder.
    pub fn binary(self) -> &'static str {
        match self {
            Self::Current => "helm-controller",
            Self::V0_17_1 => "helm-controller-v0.17.1",
        }
    }

    /// The k3s release the nodes report (`kubeletVersion`): one that embeds it.
    pub fn k3s(self) -> &'static str {
        match self {
            Self::Current => "v1.36.3+k3s1",
            Self::V0_17_1 => "v1.36.1+k3s1",
        }
    }

    /// The klipper-helm image it passes its Jobs.
    pub fn job_image(self) -> &'static str {
        match self {
            Self::Current => KLIPPER_HELM_IMAGE,
            Self::V0_17_1 => KLIPPER_HELM_IMAGE_V0_9,
        }
    }
}

/// The parts of a k3s server beyond the API server that run here as upstream's own
/// binaries ([`ControlPlaneConfig::upstream`]).
#[derive(Clone, Debug)]
pub struct UpstreamParts {
    /// Which helm-controller runs.
    pub helm: HelmGeneration,
    /// The HTTPS proxy helm-controller passes to its Jobs (as k3s passes its own
    /// `HTTPS_PROXY`): the node's chart mirror listens there.
    pub https_proxy: std::net::SocketAddr,
    /// MetalLB controller's metrics port (its default, 7472, would collide).
    pub metallb_metrics_port: u16,
}

/// The kube-controller-manager controllers a test host runs: those that make
/// namespace deletion and garbage collection real, plus the ones k3s runs whose
/// work needs no kubelet. Left out, because their pods could never run here or
/// hostsim plays them: `job` (hostsim is the Job controller for helm-controller's
/// Jobs only), `deployment`, `replicaset`, `statefulset`, `daemonset`, `cronjob`
/// (pods nobody runs); `node-lifecycle` (would taint the simulated Nodes, which
/// send no kubelet heartbeats); `service-lb`, `node-route`, `cloud-node-lifecycle`
/// (cloud provider); persistent-volume and attach/detach controllers (no storage);
/// `certificatesigningrequest-*`, `bootstrap-signer`, `token-cleaner` (no joining
/// kubelets); `serviceaccount-token` (needs the signing key in every process that
/// runs it; the API server's TokenRequest serves tokens).
pub const CONTROLLERS: &str = "namespace-controller,garbage-collector-controller,\
serviceaccount-controller,root-ca-certificate-publisher-controller,\
ttl-after-finished-controller,resourcequota-controller,pod-garbage-collector-controller,\
clusterrole-aggregation-controller,\
endpointslice-controller,endpointslice-mirroring-controller";

/// Where kube-apiserver and etcd are: `$KUBEBYON_CONTROL_PLANE_DIR`, or whatever
/// `scripts/build-control-plane.sh` prints (it builds them on first use).
pub fn locate_binaries() -> Result<PathBuf> {
    if let Some(dir) = std::env::var_os("KUBEBYON_CONTROL_PLANE_DIR") {
        let dir = PathBuf::from(dir);
        if BINARIES.iter().all(|b| dir.join(b).is_file()) {
            return Ok(dir);
        }
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/build-control-plane.sh");
    let out = Command::new("bash")
        .arg(&script)
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("running {}", script.display()))?;
    if !out.status.success() {
        bail!("{} failed ({})", script.display(), out.status);
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let dir = stdout.lines().last().context("build script printed no folder")?;
    Ok(PathBuf::from(dir.trim()))
}

/// A port that was free a moment ago on 127.0.0.1.
pub fn free_port() -> Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// Options for [`ControlPlane::start`].
#[derive(Clone, Debug)]
pub struct ControlPlaneConfig {
    /// Holds `pki/`, `etcd/`, `logs/` and `admin.kubeconfig`; reused when it exists.
    pub data_dir: PathBuf,
    pub bin_dir: PathBuf,
    /// kube-apiserver's port; a free one when `None`.
    pub api_port: Option<u16>,
    /// `--service-node-port-range`, e.g. `30000-32767` (k3s' default).
    pub node_port_range: String,
    /// Also run kube-scheduler, helm-controller and MetalLB's controller, and
    /// kube-controller-manager's workload and volume controllers; `None` keeps
    /// the simulator's mirrors of them.
    pub upstream: Option<UpstreamParts>,
}

/// The node port range k3s uses.
pub const DEFAULT_NODE_PORT_RANGE: &str = "30000-32767";

/// Admin access to the running API server.
#[derive(Clone, Debug)]
pub struct Admin {
    pub server: String,
    pub ca_pem: String,
    pub client: CertPair,
    pub kubeconfig: PathBuf,
}

/// Running etcd + kube-apiserver; both are stopped by PID on drop.
pub struct ControlPlane {
    pub admin: Admin,
    /// etcd's client URL (`--vcluster-api real` puts each vCluster's API server there).
    pub etcd_url: String,
    pub data_dir: PathBuf,
    bin_dir: PathBuf,
    apiserver_args: Vec<String>,
    /// In start order; stopped in reverse.
    children: Vec<(&'static str, Child)>,
    /// How to start again the parts a k3s server restarts when they exit
    /// (helm-controller and MetalLB exit when they lose their leader lease, e.g.
    /// through an API server outage; k3s' supervisor, systemd, starts them again).
    respawn: Vec<Respawn>,
}

struct Respawn {
    name: &'static str,
    bin: PathBuf,
    log: PathBuf,
    args: Vec<String>,
    env: Vec<(String, String)>,
}

impl ControlPlane {
    /// Starts etcd, kube-apiserver (waits until `/readyz` answers ok) and
    /// kube-controller-manager.
    ///
    /// Children get SIGKILL if the thread that started them ends: start this from
    /// a thread that lives as long as the control plane should.
    pub fn start(cfg: &ControlPlaneConfig) -> Result<Self> {
        let pki = Pki::load_or_create(&cfg.data_dir.join("pki"))?;
        let logs = cfg.data_dir.join("logs");
        fs::create_dir_all(&logs)?;
        let etcd_port = free_port()?;
        let peer_port = free_port()?;
        let api_port = match cfg.api_port {
            Some(p) => p,
            None => free_port()?,
        };
        let etcd_url = format!("http://127.0.0.1:{etcd_port}");
        let mut cp = Self {
            etcd_url: etcd_url.clone(),
            admin: Admin {
                server: format!("https://127.0.0.1:{api_port}"),
                ca_pem: pki.ca.pair.cert_pem.clone(),
                client: pki.admin.clone(),
                kubeconfig: cfg.data_dir.join("admin.kubeconfig"),
            },
            data_dir: cfg.data_dir.clone(),
            bin_dir: cfg.bin_dir.clone(),
            apiserver_args: Vec::new(),
            children: Vec::new(),
            respawn: Vec::new(),
        };
        let etcd = spawn(
            &cfg.bin_dir.join("etcd"),
            &logs.join("etcd.log"),
            &[
                "--name=hostsim",
                &format!("--data-dir={}", cfg.data_dir.join("etcd").display()),
                &format!("--listen-client-urls={etcd_url}"),
                &format!("--advertise-client-urls={etcd_url}"),
                &format!("--listen-peer-urls=http://127.0.0.1:{peer_port}"),
                &format!("--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}"),
                &format!("--initial-cluster=hostsim=http://127.0.0.1:{peer_port}"),
                "--unsafe-no-fsync=true",
                "--log-level=warn",
            ],
        )?;
        cp.children.push(("etcd", etcd));
        let p = |f: &str| pki.dir.join(f).display().to_string();
        cp.apiserver_args = vec![
            format!("--etcd-servers={etcd_url}"),
            format!("--cert-dir={}", pki.dir.display()),
            format!("--tls-cert-file={}", p("apiserver.crt")),
            format!("--tls-private-key-file={}", p("apiserver.key")),
            format!("--client-ca-file={}", p("ca.crt")),
            format!("--secure-port={api_port}"),
            "--bind-address=127.0.0.1".into(),
            "--advertise-address=127.0.0.1".into(),
            format!("--service-cluster-ip-range={SERVICE_CIDR}"),
            format!("--service-node-port-range={}", cfg.node_port_range),
            "--authorization-mode=Node,RBAC".into(),
            "--allow-privileged=true".into(),
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local".into(),
            format!("--service-account-key-file={}", p("sa.pub")),
            format!("--service-account-signing-key-file={}", p("sa.key")),
            // `kubectl logs` reaches the simulated kubelet at the Node's InternalIP
            // (k3s passes the same preference); without
            // --kubelet-certificate-authority the API server does not verify the
            // kubelet's serving certificate (upstream default).
            "--kubelet-preferred-address-types=InternalIP,ExternalIP,Hostname".into(),
            format!("--kubelet-client-certificate={}", p("admin.crt")),
            format!("--kubelet-client-key={}", p("admin.key")),
            "--profiling=false".into(),
            "--v=1".into(),
        ];
        if cfg.upstream.is_none() {
            // No kubelet mounts the token volume the admission plugin adds.
            cp.apiserver_args.push("--disable-admission-plugins=ServiceAccount".into());
        }
        cp.start_apiserver()?;
        write_private(
            &cp.admin.kubeconfig,
            &kubeconfig::render("hostsim", &cp.admin.server, &cp.admin.ca_pem, &cp.admin.client),
        )?;
        cp.wait_ready(Duration::from_secs(90))?;
        let controllers = match cfg.upstream {
            Some(_) => format!("{CONTROLLERS},{UPSTREAM_CONTROLLERS}"),
            None => CONTROLLERS.to_owned(),
        };
        let kubeconfig_flag = format!("--kubeconfig={}", cp.admin.kubeconfig.display());
        let kcm = spawn(
            &cfg.bin_dir.join("kube-controller-manager"),
            &logs.join("kube-controller-manager.log"),
            &[
                &kubeconfig_flag,
                &format!("--controllers={controllers}"),
                &format!("--root-ca-file={}", p("ca.crt")),
                &format!("--service-cluster-ip-range={SERVICE_CIDR}"),
                "--leader-elect=false",
                // No serving port: nothing scrapes it, and a fixed one would collide.
                "--secure-port=0",
                "--profiling=false",
                "--v=1",
            ],
        )?;
        cp.children.push(("kube-controller-manager", kcm));
        if let Some(up) = &cfg.upstream {
            cp.start_upstream(up, &kubeconfig_flag)?;
        }
        Ok(cp)
    }

    /// kube-scheduler, MetalLB (its CRDs first, from the module) and helm-controller
    /// (which installs its own CRDs), as a k3s server with MetalLB runs them.
    fn start_upstream(&mut self, up: &UpstreamParts, kubeconfig_flag: &str) -> Result<()> {
        self.start_supervised(
            "kube-scheduler",
            &[kubeconfig_flag, "--leader-elect=false", "--secure-port=0", "--profiling=false", "--v=1"],
            &[],
        )?;
        let (kubectl_bin, admin) = (self.bin_dir.join("kubectl"), self.admin.kubeconfig.clone());
        let kubectl = |args: &[&str]| -> Result<()> {
            let out = Command::new(&kubectl_bin)
                .arg(format!("--kubeconfig={}", admin.display()))
                .args(args)
                .output()
                .context("running kubectl")?;
            if !out.status.success() {
                bail!("kubectl {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr));
            }
            Ok(())
        };
        let crds = self.bin_dir.join("metallb-crds").display().to_string();
        kubectl(&["apply", "--server-side", "--force-conflicts", "-f", &crds])?;
        kubectl(&["wait", "--for=condition=Established", "--timeout=60s", "-f", &crds])?;
        if let Err(e) = kubectl(&["create", "namespace", "metallb-system"])
            && !e.to_string().contains("AlreadyExists")
        {
            return Err(e);
        }
        self.start_supervised(
            "metallb-controller",
            &[
                &format!("-kubeconfig={}", self.admin.kubeconfig.display()),
                "-namespace=metallb-system",
                "-webhook-mode=disabled",
                "-log-level=warn",
                &format!("-port={}", up.metallb_metrics_port),
            ],
            &[],
        )?;
        let proxy = format!("http://{}", up.https_proxy);
        self.start_supervised(
            up.helm.binary(),
            &[
                kubeconfig_flag,
                &format!("--default-job-image={}", up.helm.job_image()),
                "--job-cluster-role=cluster-admin",
            ],
            &[
                ("HTTPS_PROXY", proxy.as_str()),
                ("HTTP_PROXY", proxy.as_str()),
                ("NO_PROXY", "127.0.0.0/8,localhost,10.42.0.0/16,10.43.0.0/16,.svc,.cluster.local"),
            ],
        )?;
        // helm-controller creates its CRDs once it runs; k3s reports ready only
        // after its CRDs are established, so a HelmChart applied then is served.
        let deadline = Instant::now() + Duration::from_secs(60);
        let crd = "crd/helmcharts.helm.cattle.io";
        while let Err(e) = kubectl(&["wait", "--for=condition=Established", "--timeout=10s", crd]) {
            if Instant::now() > deadline {
                return Err(e.context("helm-controller did not register its CRDs within 60 s"));
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        Ok(())
    }

    fn start_supervised(&mut self, name: &'static str, args: &[&str], env: &[(&str, &str)]) -> Result<()> {
        let r = Respawn {
            name,
            bin: self.bin_dir.join(name),
            log: self.data_dir.join("logs").join(format!("{name}.log")),
            args: args.iter().map(|a| a.to_string()).collect(),
            env: env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        };
        let args: Vec<&str> = r.args.iter().map(String::as_str).collect();
        let env: Vec<(&str, &str)> = r.env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let child = spawn_env(&r.bin, &r.log, &args, &env)?;
        self.children.push((name, child));
        self.respawn.push(r);
        Ok(())
    }

    /// Starts again every supervised part that exited (its log is appended
    /// to); returns their names. Call it now and then, from the thread that
    /// started the control plane.
    pub fn revive(&mut self) -> Vec<&'static str> {
        let mut revived = Vec::new();
        for r in &self.respawn {
            let Some(i) = self.children.iter().position(|(n, _)| *n == r.name) else { continue };
            if !matches!(self.children[i].1.try_wait(), Ok(Some(_))) {
                continue;
            }
            let args: Vec<&str> = r.args.iter().map(String::as_str).collect();
            let env: Vec<(&str, &str)> = r.env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            match fs::OpenOptions::new()
                .append(true)
                .open(&r.log)
                .map_err(anyhow::Error::from)
                .and_then(|f| spawn_file(&r.bin, f, &args, &env))
            {
                Ok(child) => {
                    self.children[i].1 = child;
                    revived.push(r.name);
                }
                Err(e) => tracing::warn!(part = r.name, error = %e, "restarting"),
            }
        }
        revived
    }

    fn start_apiserver(&mut self) -> Result<()> {
        let args: Vec<&str> = self.apiserver_args.iter().map(String::as_str).collect();
        let child = spawn(&self.bin_dir.join("kube-apiserver"), &self.data_dir.join("logs/kube-apiserver.log"), &args)?;
        // Stopped before etcd (children stop in reverse order).
        let at = self.children.iter().position(|(n, _)| *n == "etcd").map_or(0, |i| i + 1);
        self.children.insert(at, ("kube-apiserver", child));
        Ok(())
    }

    /// Stops kube-apiserver (etcd and everything else keep running), for outage tests.
    pub fn stop_api_server(&mut self) {
        if let Some(i) = self.children.iter().position(|(n, _)| *n == "kube-apiserver") {
            let (_, mut child) = self.children.remove(i);
            terminate(&mut child, Duration::from_secs(5));
        }
    }

    /// Starts kube-apiserver again on the same port and data, and waits until ready.
    pub fn start_api_server_again(&mut self) -> Result<()> {
        if self.children.iter().any(|(n, _)| *n == "kube-apiserver") {
            return Ok(());
        }
        self.start_apiserver()?;
        self.wait_ready(Duration::from_secs(90))
    }

    fn wait_ready(&mut self, timeout: Duration) -> Result<()> {
        let admin = self.admin.clone();
        let probe = crate::tls::blocking_get(&admin, "/readyz")?;
        let deadline = Instant::now() + timeout;
        loop {
            self.revive();
            for (name, child) in &mut self.children {
                if let Some(status) = child.try_wait()? {
                    let log = self.data_dir.join("logs").join(format!("{name}.log"));
                    bail!("{name} exited ({status}); last log lines:\n{}", tail(&log, 15));
                }
            }
            match probe() {
                Ok(body) if body.trim() == "ok" => return Ok(()),
                _ if Instant::now() > deadline => {
                    let log = self.data_dir.join("logs/kube-apiserver.log");
                    bail!("kube-apiserver not ready after {timeout:?}:\n{}", tail(&log, 15));
                }
                _ => std::thread::sleep(Duration::from_millis(200)),
            }
        }
    }

    /// PIDs of the running processes, for reports and memory measurements.
    pub fn pids(&self) -> Vec<(&'static str, u32)> {
        self.children.iter().map(|(n, c)| (*n, c.id())).collect()
    }

    /// SIGTERM, then SIGKILL after a grace period; in reverse start order, etcd last.
    pub fn stop(&mut self) {
        while let Some((_, mut child)) = self.children.pop() {
            terminate(&mut child, Duration::from_secs(5));
        }
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Sends SIGTERM to one child by PID and waits; SIGKILL if it does not exit in time.
pub fn terminate(child: &mut Child, grace: Duration) {
    if let Ok(pid) = i32::try_from(child.id()) {
        // SAFETY: kill(2) on our own child's PID; the child is not yet reaped.
        unsafe { libc::kill(pid, libc::SIGTERM) };
    }
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// Spawns a child with output to `log`, killed by the kernel if its parent thread dies.
pub fn spawn(bin: &Path, log: &Path, args: &[&str]) -> Result<Child> {
    spawn_env(bin, log, args, &[])
}

/// [`spawn`] with extra environment variables.
pub fn spawn_env(bin: &Path, log: &Path, args: &[&str], env: &[(&str, &str)]) -> Result<Child> {
    let out = fs::File::create(log).with_context(|| format!("creating {}", log.display()))?;
    spawn_file(bin, out, args, env)
}

fn spawn_file(bin: &Path, out: fs::File, args: &[&str], env: &[(&str, &str)]) -> Result<Child> {
    let mut cmd = Command::new(bin);
    cmd.args(args).envs(env.iter().copied()).stdin(Stdio::null()).stdout(out.try_clone()?).stderr(out);
    // SAFETY: prctl is async-signal-safe; it only sets this child's death signal.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    cmd.spawn().with_context(|| format!("starting {}", bin.display()))
}

/// Writes a file only its owner can read (keys, kubeconfigs).
pub(crate) fn write_private(path: &Path, content: &str) -> Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("writing {}", path.display()))?;
    f.write_all(content.as_bytes())?;
    Ok(())
}

/// The last lines of a log, without the flag dump Kubernetes components start with.
fn tail(path: &Path, lines: usize) -> String {
    let text = fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().filter(|l| !l.contains("] FLAG: --")).collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// The control plane's certificates, kept in `<data>/pki` so restarts reuse them.
struct Pki {
    dir: PathBuf,
    ca: Ca,
    admin: CertPair,
}

impl Pki {
    fn load_or_create(dir: &Path) -> Result<Self> {
        fs::create_dir_all(dir)?;
        let read = |f: &str| fs::read_to_string(dir.join(f));
        if let (Ok(cert_pem), Ok(key_pem), Ok(a_cert), Ok(a_key)) =
            (read("ca.crt"), read("ca.key"), read("admin.crt"), read("admin.key"))
        {
            let ca = Ca::from_pem(CertPair { cert_pem, key_pem })?;
            let admin = CertPair { cert_pem: a_cert, key_pem: a_key };
            return Ok(Self { dir: dir.to_owned(), ca, admin });
        }
        let ca = Ca::generate("hostsim-ca")?;
        let sans: Vec<String> = [
            "127.0.0.1",
            "localhost",
            "kubernetes",
            "kubernetes.default",
            "kubernetes.default.svc",
            "kubernetes.default.svc.cluster.local",
            "10.43.0.1",
        ]
        .map(String::from)
        .into();
        let serving = ca.issue_server("kube-apiserver", &sans)?;
        let admin = ca.issue_client("hostsim-admin", &["system:masters"])?;
        let sa_key = pki::generate_key_pem()?;
        let files = [
            ("ca.crt", &ca.pair.cert_pem),
            ("ca.key", &ca.pair.key_pem),
            ("apiserver.crt", &serving.cert_pem),
            ("apiserver.key", &serving.key_pem),
            ("sa.key", &sa_key),
            ("sa.pub", &pki::public_key_pem(&sa_key)?),
            // Written last: their presence marks a complete set.
            ("admin.key", &admin.key_pem),
            ("admin.crt", &admin.cert_pem),
        ];
        for (name, content) in files {
            write_private(&dir.join(name), content)?;
        }
        Ok(Self { dir: dir.to_owned(), ca, admin })
    }
}
