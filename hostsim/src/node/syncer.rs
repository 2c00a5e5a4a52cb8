//! `--vcluster-api syncer`: the vCluster control plane is upstream's own OSS
//! syncer (`github.com/loft-sh/vcluster` v0.30.0 `cmd/vcluster`, the
//! `ghcr.io/loft-sh/vcluster-oss` image's code, with kine v0.14.4 as its store; both built by `scripts/build-control-plane.sh` from
//! `hostcluster/vcluster` and `hostcluster/kine`), started from the pod the
//! chart's StatefulSet made, as a kubelet would start its container:
//!
//! - the image's entrypoint (`/vcluster start`, vCluster's `Dockerfile`) with the
//!   container's `command`/`args`, and its `env` (values and `fieldRef`s);
//! - its volumes: `emptyDir`, `secret` (the chart's `vc-config-<release>` at
//!   `/var/lib/vcluster`), `configMap`, `persistentVolumeClaim` (a folder per
//!   claim, kept across pods as local-path keeps it), and the projected
//!   `kube-api-access-*` volume the ServiceAccount admission plugin adds (a
//!   token from the TokenRequest API bound to the pod, the root CA, the
//!   namespace), so the syncer holds exactly the chart's RBAC on the host;
//! - the chart's `kubernetes` init container (`cp -r /kubernetes/. /binaries/`)
//!   is our kube-apiserver / kube-controller-manager / kube-scheduler build
//!   of the image's tag (`kubernetes-<tag>/`: v1.34.0, the chart's default)
//!   linked into `/binaries`; kine (v0.14.4, the image's) is at
//!   `/usr/local/bin/kine` as in the image.
//!
//! Each container start gets its own network, mount and PID namespaces (the
//! syncer binds `127.0.0.1:6443` and `0.0.0.0:8443` itself): a root made of
//! read-only binds of the machine's `/usr` and the pod's volumes, `chroot`ed;
//! a network namespace holding only `lo` with the pod's IP and
//! `10.43.0.1` (k3s' `kubernetes` Service), and no route out — telemetry or any
//! other call out fails at once. The host's API server is reached through
//! `10.43.0.1:443` (a listener this process made inside the namespace, relaying
//! to the real one), and the pod's port 8443 from the host's side through the
//! pod's loopback address (a relay that connects inside the namespace), where
//! kube-proxy's rules already send the Service's traffic. When the container
//! exits the namespace's PID 1 dies and the kernel ends the rest (kine,
//! kube-apiserver, kube-controller-manager); the kubelet restarts it with
//! CrashLoopBackOff and `lastState`, as for any container. Its output is the
//! container's log (`kubectl logs`), and `syncer.log` in the pod's folder.

use std::collections::BTreeMap;
use std::io::{Read, Write as _};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use k8s_openapi::api::authentication::v1::{BoundObjectReference, TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{ConfigMap, Container as PodContainer, Pod, Secret, ServiceAccount, Volume};
use kube::api::{Api, PostParams};
use kube::{Client, ResourceExt};
use serde_json::json;
use tokio::sync::OwnedSemaphorePermit;

use crate::kubelet::Logs;
use crate::latency::Latency;

/// k3s' `kubernetes` Service address (`--service-cidr` 10.43.0.0/16), which
/// the kubelet gives every container as `KUBERNETES_SERVICE_HOST`.
pub const KUBERNETES_SERVICE: Ipv4Addr = Ipv4Addr::new(10, 43, 0, 1);
/// k3s' cluster DNS address, in every pod's `resolv.conf` (unreachable here).
const CLUSTER_DNS: &str = "10.43.0.10";
/// The port the chart's probes and Service reach.
const PROXY_PORT: u16 = 8443;
/// A projected token's life when the pod names none (the admission plugin's 3607 s).
const DEFAULT_TOKEN_SECONDS: i64 = 3607;
/// vCluster's image entrypoint (`ENTRYPOINT ["/vcluster", "start"]`).
const ENTRYPOINT: [&str; 2] = ["/vcluster", "start"];
/// What the chart's `kubernetes` init container copies (`/kubernetes/.`).
const KUBERNETES_BINARIES: [&str; 3] = ["kube-apiserver", "kube-controller-manager", "kube-scheduler"];

/// What the kubelet needs to run syncer pods.
#[derive(Clone)]
pub struct Runtime {
    pub client: Client,
    /// The `vcluster` binary (`cmd/vcluster`).
    pub vcluster: PathBuf,
    /// The `kine` binary.
    pub kine: PathBuf,
    /// Where kube-apiserver and friends are (the test host's own build).
    pub binaries: PathBuf,
    /// The host's API server, and its CA.
    pub host_api: SocketAddr,
    pub host_ca_pem: String,
    /// Pods' folders (`<uid>/`), and `claims/` beside it.
    pub root: PathBuf,
    pub logs: Logs,
    pub latency: Latency,
}

/// The container as the kubelet resolved it from the pod.
#[derive(Debug)]
struct Spec {
    name: String,
    argv: Vec<String>,
    env: Vec<(String, String)>,
    /// (host folder, path in the container, read only).
    mounts: Vec<(PathBuf, String, bool)>,
    pod_ip: Ipv4Addr,
    dir: PathBuf,
    /// The projected ServiceAccount tokens, renewed as the kubelet renews them.
    tokens: Vec<Token>,
    /// `resources.limits`, enforced by a cgroup per start.
    limits: super::cgroup::Limits,
    /// The pod's `restartPolicy` (`Always` unless set).
    restart: Restart,
}

/// When the kubelet starts an exited container again (`pod.spec.restartPolicy`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Restart {
    Always,
    OnFailure,
    Never,
}

impl Restart {
    fn of(pod: &Pod) -> Self {
        match pod.spec.as_ref().and_then(|s| s.restart_policy.as_deref()) {
            Some("Never") => Self::Never,
            Some("OnFailure") => Self::OnFailure,
            _ => Self::Always,
        }
    }

    /// Whether a container that exited with `code` runs again.
    fn again(self, code: i32) -> bool {
        match self {
            Self::Always => true,
            Self::OnFailure => code != 0,
            Self::Never => false,
        }
    }
}

/// How a run ended, as the kubelet reports it (the runtime's reason:
/// containerd's CRI says `OOMKilled` when the container's cgroup saw an OOM
/// kill, else `Completed` for exit 0 and `Error` otherwise; the exit code is
/// the process's own, 137 when SIGKILL ended it).
fn termination_reason(code: i32, oom_killed: bool) -> &'static str {
    match (code, oom_killed) {
        (_, true) => "OOMKilled",
        (0, false) => "Completed",
        (_, false) => "Error",
    }
}

/// A projected `serviceAccountToken` file.
#[derive(Debug)]
struct Token {
    file: PathBuf,
    audience: Option<String>,
    expiry: i64,
}

/// Runs the pod's syncer container until the pod goes (the task is aborted),
/// restarting it with back-off when it exits. `local` is the pod's loopback
/// address (its reported IP is [`super::pod_ip`] of it).
pub async fn run(rt: Runtime, api: Api<Pod>, pod: Pod, local: Ipv4Addr, _slot: OwnedSemaphorePermit) {
    let (ns, name) = (pod.namespace().unwrap_or_default(), pod.name_any());
    // The chart's `kubernetes` init container of a distro tag this host has
    // not built: its image cannot be pulled (`Init:ImagePullBackOff`).
    let first_init = pod.spec.as_ref().and_then(|s| s.init_containers.as_ref()).and_then(|c| c.first());
    let image = first_init.map(|c| c.image.clone().unwrap_or_default());
    if let Some(image) = image.filter(|i| distro_binaries(&rt.binaries, i).is_none()) {
        tracing::warn!(pod = %name, %image, "syncer: the init container's image is not on the test host");
        let node = pod.spec.as_ref().and_then(|s| s.node_name.clone()).unwrap_or_default();
        let events = Api::namespaced(rt.client.clone(), &ns);
        let pull = super::faults::Fault::Init(Box::new(super::faults::Fault::ImagePull));
        super::faults::run(api, events, rt.logs.clone(), pod, node, pull, rt.latency).await;
        return;
    }
    let spec = match Spec::resolve(&rt, &pod, local).await {
        Ok(spec) => spec,
        Err(e) => {
            // What a kubelet reports when it cannot make the container's config.
            let message = format!("{e:#}");
            tracing::warn!(pod = %name, error = %message, "syncer: cannot start the container");
            let waiting = json!({"waiting": {"reason": "CreateContainerConfigError", "message": message}});
            let _ = super::patch_status(&api, &name, super::container_status(&pod, false, waiting, 0), false).await;
            return;
        }
    };
    rt.logs.fresh(&ns, &name, &spec.name);
    let _ended = rt.logs.ends_on_drop(&ns, &name, &spec.name);
    let mut restarts = 0;
    loop {
        if restarts > 0 {
            // The next run: the one before is `--previous`.
            rt.logs.restart(&ns, &name, &spec.name);
        }
        let started = super::now();
        let (reason, code) = match run_once(&rt, &api, &pod, &spec, local, restarts).await {
            Ok((code, oom_killed)) => (termination_reason(code, oom_killed), code),
            Err(e) => {
                tracing::warn!(pod = %name, error = %format!("{e:#}"), "syncer: sandbox failed");
                rt.logs.append(&ns, &name, &spec.name, &format!("hostsim: {e:#}\n"));
                ("Error", 128)
            }
        };
        rt.logs.crashed(&ns, &name, &spec.name);
        tracing::info!(pod = %name, code, reason, "syncer: container exited");
        let terminated = json!({"terminated": {"exitCode": code, "reason": reason,
            "startedAt": started, "finishedAt": super::now()}});
        if !spec.restart.again(code) {
            // Not started again: it stays terminated; the pod's phase is final.
            let mut status = super::container_status(&pod, false, terminated, restarts);
            status["started"] = false.into();
            let phase = if code == 0 { "Succeeded" } else { "Failed" };
            let _ = super::patch_status(&api, &name, status, false).await;
            let _ = api
                .patch_status(&name, &Default::default(), &kube::api::Patch::Merge(json!({"status": {"phase": phase}})))
                .await;
            return;
        }
        restarts += 1;
        let waiting = json!({"waiting": {"reason": "CrashLoopBackOff",
            "message": format!("back-off restarting failed container {} in pod {name}_{ns}", spec.name)}});
        let mut status = super::container_status(&pod, false, waiting, restarts);
        status["lastState"] = terminated;
        if super::patch_status(&api, &name, status, false).await.is_err() {
            return;
        }
        tokio::time::sleep(rt.latency.retry_after(restarts as u32)).await;
    }
}

/// One run of the container: its exit code, and whether the kernel's OOM
/// killer ended it (its cgroup's count).
async fn run_once(
    rt: &Runtime,
    api: &Api<Pod>,
    pod: &Pod,
    spec: &Spec,
    local: Ipv4Addr,
    restarts: i32,
) -> Result<(i32, bool)> {
    let (ns, name) = (pod.namespace().unwrap_or_default(), pod.name_any());
    let group = super::cgroup::Group::create(&format!("{}-{restarts}", pod.uid().unwrap_or_default()), spec.limits);
    let mut sandbox = Sandbox::start(spec, group.as_ref().map(|g| g.join_script()).unwrap_or_default())?;
    let running = json!({"running": {"startedAt": super::now()}});
    super::patch_status(api, &name, super::container_status(pod, false, running.clone(), restarts), false).await?;
    let host_api = rt.host_api;
    let api_relay = tokio::spawn(relay_out(sandbox.api_listener.take().context("no API listener")?, host_api));
    let inbound = tokio::net::TcpListener::bind((local, PROXY_PORT))
        .await
        .with_context(|| format!("listening on {local}:{PROXY_PORT}"))?;
    let connect = sandbox.connector();
    let inbound_relay = tokio::spawn(relay_in(inbound, connect, SocketAddr::from((spec.pod_ip, PROXY_PORT))));
    let _relays = AbortOnDrop(vec![api_relay, inbound_relay]);
    let (logs, key) = (rt.logs.clone(), (ns.clone(), name.clone(), spec.name.clone()));
    let file = spec.dir.join("syncer.log");
    let (out, err) = (sandbox.child.stdout.take(), sandbox.child.stderr.take());
    let (copied_tx, copied) = mpsc::channel::<()>();
    let mut copiers = 0;
    for stream in [out.map(|o| Box::new(o) as Box<dyn Read + Send>), err.map(|e| Box::new(e) as Box<dyn Read + Send>)]
        .into_iter()
        .flatten()
    {
        let (logs, key, file, done) = (logs.clone(), key.clone(), file.clone(), copied_tx.clone());
        copiers += 1;
        std::thread::spawn(move || {
            copy_log(stream, &logs, &key, &file);
            let _ = done.send(());
        });
    }
    drop(copied_tx);
    let ca = spec.mounts.iter().find(|(_, path, _)| path == "/data").map(|(dir, ..)| dir.join("pki/ca.crt"));
    let mut ready = false;
    loop {
        if let Some(status) = sandbox.child.try_wait()? {
            // Its last words reach the log before the exit is reported (the
            // pipes close once every process of its PID namespace is gone).
            let _ = tokio::task::spawn_blocking(move || {
                for _ in 0..copiers {
                    if copied.recv_timeout(Duration::from_secs(2)).is_err() {
                        break;
                    }
                }
            })
            .await;
            let oom_killed = group.as_ref().is_some_and(|g| g.oom_killed());
            return Ok((status.code().unwrap_or(137), oom_killed));
        }
        renew_tokens(rt, pod, spec).await;
        if !ready
            && let Some(ca) = &ca
            && probe_ready(local, ca).await
        {
            tracing::info!(pod = %name, "syncer: ready");
            super::patch_status(api, &name, super::container_status(pod, true, running.clone(), restarts), true)
                .await?;
            ready = true;
        }
        tokio::time::sleep(Duration::from_millis(if ready { 1000 } else { 300 })).await;
    }
}

/// The kubelet renews a projected token once 80 % of its life has passed
/// (`pkg/kubelet/token/token_manager.go` `requiresRefresh`), writing the file
/// anew (here: aside, then renamed over, as its atomic writer swaps it).
async fn renew_tokens(rt: &Runtime, pod: &Pod, spec: &Spec) {
    let ns = pod.namespace().unwrap_or_default();
    for t in &spec.tokens {
        let age = std::fs::metadata(&t.file).and_then(|m| m.modified()).ok().and_then(|m| m.elapsed().ok());
        if !renewal_due(age, t.expiry) {
            continue;
        }
        match rt.token(pod, &ns, t.audience.clone(), t.expiry).await {
            Ok(token) => {
                let tmp = t.file.with_extension("new");
                if std::fs::write(&tmp, token).and_then(|_| std::fs::rename(&tmp, &t.file)).is_err() {
                    tracing::warn!(pod = %pod.name_any(), "syncer: cannot write the renewed token");
                }
            }
            Err(e) => tracing::warn!(pod = %pod.name_any(), error = %format!("{e:#}"), "syncer: token renewal failed"),
        }
    }
}

/// Whether a token written `age` ago (`None`: unknown) with a life of
/// `expiry` seconds is due for renewal: past 80 % of its life.
fn renewal_due(age: Option<Duration>, expiry: i64) -> bool {
    let due = Duration::from_secs(u64::try_from(expiry).unwrap_or(0) * 8 / 10);
    age.is_none_or(|age| age >= due)
}

struct AbortOnDrop(Vec<tokio::task::JoinHandle<()>>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        for t in &self.0 {
            t.abort();
        }
    }
}

fn copy_log(mut from: Box<dyn Read + Send>, logs: &Logs, key: &(String, String, String), file: &Path) {
    let mut out = std::fs::OpenOptions::new().create(true).append(true).open(file).ok();
    let mut buf = [0u8; 8192];
    while let Ok(n) = from.read(&mut buf) {
        if n == 0 {
            break;
        }
        let text = String::from_utf8_lossy(&buf[..n]);
        logs.append(&key.0, &key.1, &key.2, &text);
        if let Some(f) = out.as_mut() {
            let _ = f.write_all(&buf[..n]);
        }
    }
}

/// The chart's readiness probe (`GET https://:8443/readyz`, no credentials),
/// checked against the vCluster's own CA in its data volume.
async fn probe_ready(local: Ipv4Addr, ca: &Path) -> bool {
    let Ok(ca_pem) = std::fs::read_to_string(ca) else { return false };
    let Ok(config) = crate::tls::client_config(&ca_pem, None) else { return false };
    let attempt = async {
        let tcp = tokio::net::TcpStream::connect((local, PROXY_PORT)).await.ok()?;
        let name = rustls_pki_types::ServerName::try_from("localhost").ok()?;
        let mut tls = tokio_rustls::TlsConnector::from(config).connect(name, tcp).await.ok()?;
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        tls.write_all(b"GET /readyz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").await.ok()?;
        let mut body = Vec::new();
        tls.read_to_end(&mut body).await.ok();
        Some(body.starts_with(b"HTTP/1.1 200"))
    };
    matches!(tokio::time::timeout(Duration::from_secs(2), attempt).await, Ok(Some(true)))
}

/// The host API server's relay inside the namespace (`10.43.0.1:443`).
async fn relay_out(listener: TcpListener, host_api: SocketAddr) {
    let Ok(listener) = listener.set_nonblocking(true).and_then(|_| tokio::net::TcpListener::from_std(listener)) else {
        return;
    };
    while let Ok((mut conn, _)) = listener.accept().await {
        tokio::spawn(async move {
            if let Ok(mut up) = tokio::net::TcpStream::connect(host_api).await {
                let _ = tokio::io::copy_bidirectional(&mut conn, &mut up).await;
            }
        });
    }
}

/// The pod's port from the host's side: each connection to the pod's
/// loopback address is relayed to `target` inside the namespace.
async fn relay_in(listener: tokio::net::TcpListener, connect: Connector, target: SocketAddr) {
    while let Ok((mut conn, _)) = listener.accept().await {
        let connect = connect.clone();
        tokio::spawn(async move {
            let Ok(inside) = connect.connect(target).await else { return };
            let Ok(mut inside) = inside.set_nonblocking(true).and_then(|_| tokio::net::TcpStream::from_std(inside))
            else {
                return;
            };
            let _ = tokio::io::copy_bidirectional(&mut conn, &mut inside).await;
        });
    }
}

type ConnectReply = tokio::sync::oneshot::Sender<std::io::Result<TcpStream>>;

/// Connects inside the sandbox's network namespace.
#[derive(Clone)]
struct Connector(mpsc::Sender<(SocketAddr, ConnectReply)>);

impl Connector {
    async fn connect(&self, to: SocketAddr) -> std::io::Result<TcpStream> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.0.send((to, tx)).map_err(|_| std::io::Error::other("the sandbox is gone"))?;
        rx.await.map_err(|_| std::io::Error::other("the sandbox is gone"))?
    }
}

/// A container's namespaces and process. The network namespace belongs to a
/// thread of this process made for it (sockets made there live in it); the
/// container's process is its child, killed (with its PID namespace) when this
/// is dropped.
struct Sandbox {
    child: Child,
    api_listener: Option<TcpListener>,
    connect: Option<mpsc::Sender<(SocketAddr, ConnectReply)>>,
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        // Ends the namespace's thread.
        self.connect = None;
    }
}

impl Sandbox {
    fn connector(&self) -> Connector {
        Connector(self.connect.clone().expect("set until dropped"))
    }

    /// `prelude`: shell lines run first (the move into the container's cgroup).
    fn start(spec: &Spec, prelude: String) -> Result<Self> {
        let script = spec.dir.join("start.sh");
        std::fs::write(&script, prelude + &start_script(spec))?;
        let mut cmd = Command::new("unshare");
        // --fork --pid: the container's process is PID 1 of its own PID
        // namespace (its children die with it); --kill-child: it dies with
        // `unshare`; --mount: its binds are its own (private propagation).
        cmd.args(["--fork", "--pid", "--mount", "--kill-child", "--", "sh"])
            .arg(&script)
            .args(&spec.argv)
            .env_clear()
            .envs(spec.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        // SAFETY: prctl is async-signal-safe; it only sets this child's death signal.
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let pod_ip = spec.pod_ip;
        let (ready_tx, ready_rx) = mpsc::channel();
        let (connect_tx, connect_rx) = mpsc::channel::<(SocketAddr, ConnectReply)>();
        std::thread::Builder::new().name("netns".into()).spawn(move || {
            let made = (|| -> Result<(Child, TcpListener)> {
                // SAFETY: unshare(2) affects only this thread's namespaces.
                if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
                    bail!("unshare(CLONE_NEWNET): {}", std::io::Error::last_os_error());
                }
                for args in [
                    vec!["link", "set", "lo", "up"],
                    vec!["addr", "add", &format!("{KUBERNETES_SERVICE}/32"), "dev", "lo"],
                    vec!["addr", "add", &format!("{pod_ip}/32"), "dev", "lo"],
                ] {
                    let out = Command::new("ip").args(&args).output().context("running ip")?;
                    if !out.status.success() {
                        bail!("ip {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim());
                    }
                }
                let listener = TcpListener::bind((KUBERNETES_SERVICE, 443)).context("the kubernetes Service relay")?;
                let child = cmd.spawn().context("starting unshare")?;
                Ok((child, listener))
            })();
            let ok = made.is_ok();
            let _ = ready_tx.send(made);
            if !ok {
                return;
            }
            // Lives as long as the container (its death signal follows this thread).
            while let Ok((to, reply)) = connect_rx.recv() {
                let _ = reply.send(TcpStream::connect_timeout(&to, Duration::from_secs(2)));
            }
        })?;
        let (child, listener) = ready_rx.recv().context("the sandbox thread ended")??;
        Ok(Self { child, api_listener: Some(listener), connect: Some(connect_tx) })
    }
}

/// Single quotes for sh.
fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The mount namespace's set-up, then `chroot` and the container's argv ("$@").
fn start_script(spec: &Spec) -> String {
    let root = spec.dir.join("root");
    let r = |p: &str| quote(&format!("{}{p}", root.display()));
    let mut s = String::from("set -eu\n");
    s += &format!("mkdir -p {}\n", quote(&root.display().to_string()));
    // The machine's programs and libraries, read only ("usr-merged" Debian:
    // /bin, /lib, /lib64 and /sbin are links into /usr).
    for dir in ["/usr/bin", "/usr/sbin", "/usr/lib", "/usr/lib64", "/usr/share"] {
        if Path::new(dir).is_dir() {
            s += &format!("mkdir -p {0} && mount -o bind,ro {1} {0}\n", r(dir), quote(dir));
        }
    }
    for link in ["/bin", "/sbin", "/lib", "/lib64"] {
        match std::fs::read_link(link) {
            Ok(target) => s += &format!("ln -sfn {} {}\n", quote(&target.display().to_string()), r(link)),
            Err(_) if Path::new(link).is_dir() => {
                s += &format!("mkdir -p {0} && mount -o bind,ro {1} {0}\n", r(link), quote(link))
            }
            Err(_) => {}
        }
    }
    s += &format!("mkdir -p {0} {1} {2} {3}\n", r("/etc"), r("/dev"), r("/proc"), r("/usr/local/bin"));
    s += &format!("mount --rbind /dev {}\n", r("/dev"));
    s += &format!("mount -t proc proc {}\n", r("/proc"));
    let file = |from: &Path, to: &str| {
        format!("touch {0} && mount -o bind,ro {1} {0}\n", r(to), quote(&from.display().to_string()))
    };
    for etc in ["/etc/passwd", "/etc/group", "/etc/nsswitch.conf"] {
        if Path::new(etc).is_file() {
            s += &file(Path::new(etc), etc);
        }
    }
    if Path::new("/etc/ssl").is_dir() {
        s += &format!("mkdir -p {0} && mount -o bind,ro /etc/ssl {0}\n", r("/etc/ssl"));
    }
    s += &file(&spec.dir.join("hosts"), "/etc/hosts");
    s += &file(&spec.dir.join("resolv.conf"), "/etc/resolv.conf");
    s += &file(&spec.dir.join("bin/vcluster"), "/vcluster");
    s += &file(&spec.dir.join("bin/kine"), "/usr/local/bin/kine");
    for (from, to, ro) in &spec.mounts {
        let opts = if *ro { "bind,ro" } else { "bind" };
        s += &format!("mkdir -p {0} && mount -o {opts} {1} {0}\n", r(to), quote(&from.display().to_string()));
    }
    s += &format!("cd {}\nexec chroot {} \"$@\"\n", r("/"), quote(&root.display().to_string()));
    s
}

impl Spec {
    /// The container, env and volumes of `pod` made ready in its folder.
    async fn resolve(rt: &Runtime, pod: &Pod, local: Ipv4Addr) -> Result<Self> {
        let ns = pod.namespace().unwrap_or_default();
        let spec = pod.spec.as_ref().context("a pod without spec")?;
        let container = spec.containers.first().context("a pod without containers")?;
        let dir = rt.root.join(pod.uid().unwrap_or_default());
        let pod_ip = super::pod_ip(local);
        std::fs::create_dir_all(dir.join("bin"))?;
        // The image's files.
        link_or_copy(&rt.vcluster, &dir.join("bin/vcluster"))?;
        link_or_copy(&rt.kine, &dir.join("bin/kine"))?;
        std::fs::write(
            dir.join("hosts"),
            format!("127.0.0.1\tlocalhost\n::1\tlocalhost\n{pod_ip}\t{}\n", pod.name_any()),
        )?;
        std::fs::write(
            dir.join("resolv.conf"),
            format!(
                "search {ns}.svc.cluster.local svc.cluster.local cluster.local\nnameserver {CLUSTER_DNS}\noptions ndots:5\n"
            ),
        )?;
        let fields = fields(pod, pod_ip);
        let (mut volumes, mut tokens) = (BTreeMap::new(), Vec::new());
        for v in spec.volumes.iter().flatten() {
            volumes.insert(v.name.clone(), rt.volume(pod, &ns, &dir, v, &fields, &mut tokens).await?);
        }
        for init in spec.init_containers.iter().flatten() {
            init_container(rt, init, &volumes)?;
        }
        let mut mounts = Vec::new();
        for m in container.volume_mounts.iter().flatten() {
            if m.sub_path.is_some() || m.sub_path_expr.is_some() {
                bail!("volume mount {}: subPath is not supported by the test host", m.name);
            }
            let from = volumes.get(&m.name).with_context(|| format!("volume mount {}: no such volume", m.name))?;
            mounts.push((from.clone(), m.mount_path.clone(), m.read_only == Some(true)));
        }
        let mut env = vec![
            ("PATH".to_owned(), "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".to_owned()),
            ("HOSTNAME".to_owned(), pod.name_any()),
            ("HOME".to_owned(), "/root".to_owned()),
            ("KUBERNETES_SERVICE_HOST".to_owned(), KUBERNETES_SERVICE.to_string()),
            ("KUBERNETES_SERVICE_PORT".to_owned(), "443".to_owned()),
            ("KUBERNETES_SERVICE_PORT_HTTPS".to_owned(), "443".to_owned()),
        ];
        for e in container.env.iter().flatten() {
            let value = match (&e.value, &e.value_from) {
                (Some(v), _) => v.clone(),
                (None, Some(from)) => {
                    let path = from
                        .field_ref
                        .as_ref()
                        .map(|f| f.field_path.as_str())
                        .with_context(|| format!("env {}: only fieldRef sources are supported", e.name))?;
                    fields.get(path).cloned().with_context(|| format!("env {}: unknown field {path}", e.name))?
                }
                (None, None) => String::new(),
            };
            env.push((e.name.clone(), value));
        }
        let argv = argv(container);
        let (limits, restart) = (super::cgroup::Limits::of(container), Restart::of(pod));
        Ok(Self { name: container.name.clone(), argv, env, mounts, pod_ip, dir, tokens, limits, restart })
    }
}

/// The container's argv over the image's entrypoint, as a runtime builds it.
fn argv(c: &PodContainer) -> Vec<String> {
    let mut argv: Vec<String> = match &c.command {
        Some(command) if !command.is_empty() => command.clone(),
        _ => ENTRYPOINT.map(String::from).into(),
    };
    argv.extend(c.args.iter().flatten().cloned());
    argv
}

/// The downward API's fields a container may name.
fn fields(pod: &Pod, pod_ip: Ipv4Addr) -> BTreeMap<&'static str, String> {
    let spec = pod.spec.as_ref();
    let host_ip = pod.status.as_ref().and_then(|s| s.host_ip.clone()).unwrap_or_default();
    BTreeMap::from([
        ("metadata.name", pod.name_any()),
        ("metadata.namespace", pod.namespace().unwrap_or_default()),
        ("metadata.uid", pod.uid().unwrap_or_default()),
        ("spec.nodeName", spec.and_then(|s| s.node_name.clone()).unwrap_or_default()),
        ("spec.serviceAccountName", spec.and_then(|s| s.service_account_name.clone()).unwrap_or_default()),
        ("status.podIP", pod_ip.to_string()),
        ("status.hostIP", host_ip),
    ])
}

/// The chart's `kubernetes` init container, `cp -r /kubernetes/. /binaries/`
/// from image `ghcr.io/loft-sh/kubernetes:<tag>`
/// (`controlPlane.distro.k8s.image`): the test host's build of that release
/// (`kubernetes-<tag>/`, scripts/build-control-plane.sh) linked into the
/// volume. Any other init container is refused (the test host runs no images).
fn init_container(rt: &Runtime, c: &PodContainer, volumes: &BTreeMap<String, PathBuf>) -> Result<()> {
    let copies =
        c.command.as_deref() == Some(&["cp".to_owned()][..]) && c.args.iter().flatten().any(|a| a == "/kubernetes/.");
    if !copies {
        bail!("init container {}: the test host runs only the chart's kubernetes one", c.name);
    }
    let image = c.image.as_deref().unwrap_or_default();
    let from = distro_binaries(&rt.binaries, image)
        .with_context(|| format!("init container {}: image {image} is not on the test host", c.name))?;
    let mount = c.volume_mounts.iter().flatten().find(|m| m.mount_path == "/binaries");
    let to = mount.and_then(|m| volumes.get(&m.name)).context("init container: no /binaries volume")?;
    for bin in KUBERNETES_BINARIES {
        link_or_copy(&from.join(bin), &to.join(bin))?;
    }
    Ok(())
}

/// Where the binaries of a `…/kubernetes:<tag>` image are, if built here.
pub fn distro_binaries(bin_dir: &Path, image: &str) -> Option<PathBuf> {
    let (repo, tag) = image.rsplit_once(':')?;
    if !repo.ends_with("/kubernetes") || tag.contains('/') || tag.is_empty() {
        return None;
    }
    let dir = bin_dir.join(format!("kubernetes-{tag}"));
    KUBERNETES_BINARIES.iter().all(|b| dir.join(b).is_file()).then_some(dir)
}

/// A hard link where the file system allows, else a copy.
fn link_or_copy(from: &Path, to: &Path) -> Result<()> {
    if to.exists() {
        return Ok(());
    }
    if std::fs::hard_link(from, to).is_err() {
        std::fs::copy(from, to).with_context(|| format!("copying {}", from.display()))?;
    }
    Ok(())
}

fn write_files(dir: &Path, files: impl IntoIterator<Item = (String, Vec<u8>)>) -> Result<()> {
    std::fs::create_dir_all(dir)?;
    for (path, bytes) in files {
        if path.split('/').any(|p| p == ".." || p.is_empty()) {
            bail!("volume file {path}: not a relative path");
        }
        let file = dir.join(&path);
        if let Some(parent) = file.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(file, bytes)?;
    }
    Ok(())
}

impl Runtime {
    /// A pod volume's folder, filled as the kubelet fills it.
    async fn volume(
        &self,
        pod: &Pod,
        ns: &str,
        dir: &Path,
        v: &Volume,
        fields: &BTreeMap<&'static str, String>,
        tokens: &mut Vec<Token>,
    ) -> Result<PathBuf> {
        let at = dir.join("volumes").join(&v.name);
        if v.empty_dir.is_some() {
            std::fs::create_dir_all(&at)?;
        } else if let Some(claim) = &v.persistent_volume_claim {
            let kept = self.root.with_file_name("claims").join(ns).join(&claim.claim_name);
            std::fs::create_dir_all(&kept)?;
            return Ok(kept);
        } else if let Some(secret) = &v.secret {
            let name = secret.secret_name.clone().context("a secret volume without a name")?;
            let s = Api::<Secret>::namespaced(self.client.clone(), ns).get(&name).await?;
            let data = s.data.unwrap_or_default().into_iter().map(|(k, v)| (k, v.0));
            write_files(&at, data)?;
        } else if let Some(cm) = &v.config_map {
            let c = Api::<ConfigMap>::namespaced(self.client.clone(), ns).get(&cm.name).await?;
            write_files(&at, c.data.unwrap_or_default().into_iter().map(|(k, v)| (k, v.into_bytes())))?;
        } else if let Some(projected) = &v.projected {
            let mut files = Vec::new();
            for source in projected.sources.iter().flatten() {
                if let Some(t) = &source.service_account_token {
                    let expiry = t.expiration_seconds.unwrap_or(DEFAULT_TOKEN_SECONDS);
                    files.push((t.path.clone(), self.token(pod, ns, t.audience.clone(), expiry).await?));
                    tokens.push(Token { file: at.join(&t.path), audience: t.audience.clone(), expiry });
                } else if let Some(cm) = &source.config_map {
                    let data = match Api::<ConfigMap>::namespaced(self.client.clone(), ns).get_opt(&cm.name).await? {
                        Some(c) => c.data.unwrap_or_default(),
                        // kube-root-ca.crt before the root-ca-cert-publisher wrote it.
                        None if cm.name == "kube-root-ca.crt" => {
                            BTreeMap::from([("ca.crt".to_owned(), self.host_ca_pem.clone())])
                        }
                        None => bail!("configMap {} not found", cm.name),
                    };
                    for item in cm.items.iter().flatten() {
                        let value = data
                            .get(&item.key)
                            .with_context(|| format!("configMap {}: no key {}", cm.name, item.key))?;
                        files.push((item.path.clone(), value.clone().into_bytes()));
                    }
                } else if let Some(down) = &source.downward_api {
                    for item in down.items.iter().flatten() {
                        let path = item.field_ref.as_ref().map(|f| f.field_path.as_str()).unwrap_or_default();
                        let value = fields.get(path).with_context(|| format!("downward API: unknown field {path}"))?;
                        files.push((item.path.clone(), value.clone().into_bytes()));
                    }
                } else {
                    bail!("volume {}: a projected source the test host does not fill", v.name);
                }
            }
            write_files(&at, files)?;
        } else {
            bail!("volume {}: a kind the test host does not mount", v.name);
        }
        Ok(at)
    }

    /// A token for the pod's ServiceAccount, bound to the pod (TokenRequest).
    async fn token(&self, pod: &Pod, ns: &str, audience: Option<String>, expiry: i64) -> Result<Vec<u8>> {
        let sa = pod.spec.as_ref().and_then(|s| s.service_account_name.clone()).unwrap_or_else(|| "default".into());
        let request = TokenRequest {
            spec: Some(TokenRequestSpec {
                audiences: audience.map(|a| vec![a]),
                expiration_seconds: Some(expiry),
                bound_object_ref: Some(BoundObjectReference {
                    api_version: Some("v1".into()),
                    kind: Some("Pod".into()),
                    name: Some(pod.name_any()),
                    uid: pod.uid(),
                }),
            }),
            ..Default::default()
        };
        let api: Api<ServiceAccount> = Api::namespaced(self.client.clone(), ns);
        let made = api.create_token_request(&sa, &PostParams::default(), &request).await.context("TokenRequest")?;
        Ok(made.status.and_then(|s| s.token).unwrap_or_default().into_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// kubelet `pkg/kubelet/kuberuntime/kuberuntime_manager.go`
    /// (`computePodActions`, `ShouldContainerBeRestarted` in `pkg/kubelet/container/helpers.go`):
    /// `Always` restarts any exit, `OnFailure` a non-zero one, `Never` none;
    /// the reason is the runtime's.
    #[test]
    fn exits_restart_by_policy_and_are_named_as_a_runtime_names_them() {
        for (policy, code, oom, again, reason) in [
            (Restart::Always, 0, false, true, "Completed"),
            (Restart::Always, 1, false, true, "Error"),
            (Restart::Always, 137, true, true, "OOMKilled"),
            (Restart::OnFailure, 0, false, false, "Completed"),
            (Restart::OnFailure, 2, false, true, "Error"),
            (Restart::Never, 0, false, false, "Completed"),
            (Restart::Never, 1, false, false, "Error"),
            (Restart::Never, 1, true, false, "OOMKilled"),
        ] {
            assert_eq!(policy.again(code), again, "{policy:?} {code}");
            assert_eq!(termination_reason(code, oom), reason, "{code} {oom}");
        }
        let pod = |p: Option<&str>| Pod {
            spec: Some(k8s_openapi::api::core::v1::PodSpec {
                restart_policy: p.map(String::from),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(Restart::of(&pod(None)), Restart::Always);
        assert_eq!(Restart::of(&pod(Some("Never"))), Restart::Never);
        assert_eq!(Restart::of(&pod(Some("OnFailure"))), Restart::OnFailure);
    }

    #[test]
    fn the_distro_image_picks_its_binaries_when_built_here() {
        let dir = tempfile::tempdir().unwrap();
        let built = dir.path().join("kubernetes-v1.34.0");
        std::fs::create_dir_all(&built).unwrap();
        for b in KUBERNETES_BINARIES {
            std::fs::write(built.join(b), "").unwrap();
        }
        for (image, want) in [
            ("ghcr.io/loft-sh/kubernetes:v1.34.0", Some(built.clone())),
            ("registry.example/mirror/kubernetes:v1.34.0", Some(built.clone())),
            ("ghcr.io/loft-sh/kubernetes:v1.34.9", None),
            ("ghcr.io/loft-sh/kubernetes", None),
            ("ghcr.io/loft-sh/vcluster-oss:v1.34.0", None),
            ("ghcr.io/loft-sh/kubernetes:../../etc", None),
        ] {
            assert_eq!(distro_binaries(dir.path(), image), want, "{image}");
        }
    }

    #[test]
    fn the_argv_is_the_images_entrypoint_unless_the_pod_says_otherwise() {
        let c = |command: Option<Vec<&str>>, args: Option<Vec<&str>>| PodContainer {
            command: command.map(|v| v.into_iter().map(String::from).collect()),
            args: args.map(|v| v.into_iter().map(String::from).collect()),
            ..Default::default()
        };
        let cases = [
            (c(None, None), vec!["/vcluster", "start"]),
            (c(None, Some(vec!["--config", "/x"])), vec!["/vcluster", "start", "--config", "/x"]),
            (c(Some(vec!["/bin/sh"]), Some(vec!["-c", "true"])), vec!["/bin/sh", "-c", "true"]),
            (c(Some(vec![]), None), vec!["/vcluster", "start"]),
        ];
        for (container, want) in cases {
            assert_eq!(argv(&container), want);
        }
    }

    #[test]
    fn tokens_are_renewed_past_eighty_percent_of_their_life() {
        let s = Duration::from_secs;
        let cases = [
            (Some(s(0)), 3607, false),
            (Some(s(2884)), 3607, false),
            (Some(s(2885)), 3607, true),
            (Some(s(10_000)), 3607, true),
            (None, 3607, true),
            (Some(s(1)), 0, true),
        ];
        for (age, expiry, want) in cases {
            assert_eq!(renewal_due(age, expiry), want, "{age:?} of {expiry} s");
        }
    }

    #[test]
    fn quoting_survives_quotes() {
        assert_eq!(quote("a'b"), r"'a'\''b'");
    }

    #[test]
    fn volume_files_stay_inside_their_folder() {
        let dir = tempfile::tempdir().unwrap();
        assert!(write_files(dir.path(), [("../x".to_owned(), vec![])]).is_err());
        assert!(write_files(dir.path(), [("a/b".to_owned(), b"1".to_vec())]).is_ok());
        assert_eq!(std::fs::read(dir.path().join("a/b")).unwrap(), b"1");
    }
}
