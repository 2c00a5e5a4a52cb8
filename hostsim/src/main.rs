//! `hostsim up`: the whole test host in one process tree — etcd, kube-apiserver,
//! kube-controller-manager, kube-scheduler, helm-controller and MetalLB's
//! controller (upstream's own binaries) and the simulated node — state in a data
//! folder.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use hostsim::controlplane::{self, ControlPlane, ControlPlaneConfig};
use hostsim::kubeconfig::Credentials;
use hostsim::latency::{Latency, Span};
use hostsim::node::nodes::{Capacity, NodeAddr};
use hostsim::{lb, node, testhost};

#[derive(Parser)]
#[command(about = "KubeBYON's test host: upstream's control plane and a simulated node")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Start the host in the foreground.
    Up(Up),
    /// Be a machine running the join command: fetch the script from `url`
    /// (the console's join script endpoint, `http://` only), follow it
    /// (`hostsim::machine`) and stay joined, with heartbeats, until stopped.
    Join(Join),
}

#[derive(clap::Args)]
struct Join {
    #[arg(long)]
    url: String,
    /// The node's name.
    #[arg(long)]
    name: String,
    /// Its internal IP, as reported in the Node's status.
    #[arg(long)]
    ip: String,
    /// Where the script's endpoint is reached (no DNS here): `address:port`.
    #[arg(long)]
    connect: std::net::SocketAddr,
}

#[derive(clap::Args)]
struct Up {
    #[arg(long)]
    data_dir: PathBuf,
    /// kube-apiserver's port (k3s uses 6443).
    #[arg(long, default_value_t = 6443)]
    api_port: u16,
    /// Address pool `NAME=FIRST[-LAST][,noauto]`; repeatable.
    /// Written as MetalLB `IPAddressPool` objects in `metallb-system`.
    #[arg(long = "pool", default_value = "default=127.0.0.100-127.0.0.199")]
    pools: Vec<lb::Pool>,
    /// A node `INTERNAL_IP[/EXTERNAL_IP]`; repeatable. Each serves its kubelet
    /// endpoint (pod logs) on its internal address.
    #[arg(long = "node-ip", default_value = "127.0.0.1")]
    nodes: Vec<NodeAddr>,
    /// Loopback addresses the pods listen on, `FIRST-LAST`.
    #[arg(long, default_value = "127.0.1.1-127.0.1.254")]
    pod_ips: String,
    /// Claim a free `127.A.B.0/24` with the lock the Rust test hosts use
    /// (`hostsim::testhost::Net`, held while this runs): one node `.1`, pods
    /// `.3`-`.199`, pool `default` `.200`-`.229`, instead of `--node-ip`,
    /// `--pod-ips` and `--pool`. `127.A.B` is written to `DATA_DIR/net`.
    #[arg(long)]
    test_net: bool,
    /// Each node's CPU, memory and ephemeral storage.
    #[arg(long, default_value = "8")]
    node_cpu: String,
    #[arg(long, default_value = "32Gi")]
    node_memory: String,
    #[arg(long, default_value = "100Gi")]
    node_ephemeral_storage: String,
    /// How a running vCluster answers: `real` gives each its own
    /// kube-apiserver (on this host's etcd, its own prefix and certificates:
    /// `kubectl` sees the virtual cluster's own namespaces; no syncer);
    /// `relay` forwards to this host's API server (hundreds of clusters);
    /// `syncer` (the default) runs upstream's vCluster v0.30.0 for the
    /// open-source image the console renders for shared-node clusters, and
    /// `real`'s stand-in for own-nodes ones (needs root for its namespaces:
    /// without, `real`).
    #[arg(long, value_enum, default_value = "syncer")]
    vcluster_api: ApiMode,
    /// At most this many own control planes at once (a syncer ~545 MB, a
    /// `real` API server ~260 MB); vClusters beyond it relay.
    #[arg(long, default_value_t = 8)]
    vcluster_api_cap: usize,
    /// With `real`: only these releases get their own API server (a trailing
    /// `*` matches a prefix); the others relay. Empty: any.
    #[arg(long, value_delimiter = ',')]
    vcluster_api_releases: Vec<String>,
    /// Short but non-zero delays, for test hosts ([`Latency::TEST`]) instead of
    /// the upstream-like ones ([`Latency::UPSTREAM`]); the flags below override.
    #[arg(long)]
    test_latency: bool,
    /// How long a vCluster pod takes to serve after install or a values change (30s-90s).
    #[arg(long)]
    vcluster_start: Option<Span>,
    /// How long after a SAN change the new certificate is served (2s-4500ms).
    #[arg(long)]
    cert_refresh: Option<Span>,
    /// The Gateway API CRD bundle to install (a folder of `gateway-api/`:
    /// `v1.6.3-standard` serves TLSRoute v1, `v1.4.1-experimental` v1alpha2
    /// and v1alpha3), or `none`.
    #[arg(long, default_value = "v1.6.3-standard")]
    gateway_api: String,
    /// Which helm-controller (and klipper-helm job image) the host runs:
    /// `v0.17.9` (retry, helm 4) or `v0.17.1` (abort or reinstall, helm 3),
    /// what older k3s releases embed.
    #[arg(long, value_enum, default_value = "v0.17.9")]
    helm_controller: controlplane::HelmGeneration,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum ApiMode {
    Real,
    /// Upstream's vCluster syncer (`hostcluster/vcluster`) in its own
    /// namespaces, for shared-node clusters; own-nodes clusters get `real`'s stand-in.
    Syncer,
    Relay,
}

impl Up {
    fn latency(&self) -> Latency {
        let base = if self.test_latency { Latency::TEST } else { Latency::UPSTREAM };
        Latency {
            vcluster_start: self.vcluster_start.unwrap_or(base.vcluster_start),
            cert_refresh: self.cert_refresh.unwrap_or(base.cert_refresh),
            ..base
        }
    }
}

#[tokio::main]
async fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info,kube=warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    if let Err(e) = real_main(Cli::parse()).await {
        eprintln!("hostsim: {e:#}");
        std::process::exit(1);
    }
}

async fn real_main(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Up(args) => up(args).await,
        Command::Join(args) => {
            let script = http_get(&args.url).await?;
            let machine = hostsim::machine::join(&script, &args.name, &args.ip, args.connect).await?;
            println!("joined as {}", machine.name);
            tokio::signal::ctrl_c().await?;
            Ok(())
        }
    }
}

/// `GET` of an `http://host:port/path` URL (HTTP/1.1, the whole body); an
/// answer other than 200 is an error.
async fn http_get(url: &str) -> Result<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let rest = url.strip_prefix("http://").context("only http:// URLs")?;
    let (authority, path) = rest.split_once('/').map_or((rest, "/".to_owned()), |(a, p)| (a, format!("/{p}")));
    let mut sock =
        tokio::net::TcpStream::connect(authority).await.with_context(|| format!("connecting to {authority}"))?;
    let req = format!("GET {path} HTTP/1.1\r\nHost: {authority}\r\nUser-Agent: curl/8\r\nConnection: close\r\n\r\n");
    sock.write_all(req.as_bytes()).await?;
    let mut answer = Vec::new();
    sock.read_to_end(&mut answer).await?;
    let answer = String::from_utf8(answer)?;
    let (head, body) = answer.split_once("\r\n\r\n").context("no HTTP answer")?;
    anyhow::ensure!(
        head.starts_with("HTTP/1.1 200 "),
        "the script endpoint answered {}",
        head.lines().next().unwrap_or_default()
    );
    anyhow::ensure!(!head.to_ascii_lowercase().contains("transfer-encoding: chunked"), "a chunked answer");
    Ok(body.to_owned())
}

/// The control plane with upstream's parts, and the node, until SIGTERM or Ctrl-C.
async fn up(args: Up) -> Result<()> {
    let latency = args.latency();
    let Up {
        data_dir,
        api_port,
        mut pools,
        mut nodes,
        pod_ips,
        vcluster_api,
        vcluster_api_cap,
        vcluster_api_releases,
        ..
    } = args;
    let mut pod_ips = node::parse_ip_range(&pod_ips).map_err(anyhow::Error::msg)?;
    std::fs::create_dir_all(&data_dir)?;
    // Held until this returns: the lock file names this process.
    let _lease = if args.test_net {
        let lease = testhost::NetLease::claim()?;
        let net = lease.0;
        nodes = vec![NodeAddr { internal: net.node(), external: None }];
        pod_ips = (3..=199).map(|n| net.addr(n)).collect();
        pools = vec![net.default_pool().parse().map_err(anyhow::Error::msg)?];
        std::fs::write(data_dir.join("net"), format!("127.{}.{}\n", net.0[0], net.0[1]))?;
        Some(lease)
    } else {
        None
    };
    let vcluster_api = match vcluster_api {
        ApiMode::Real if vcluster_api_releases.is_empty() => {
            node::apiserver::VClusterApi::Real(node::apiserver::RealApi::new(vcluster_api_cap))
        }
        ApiMode::Real => {
            let only: Vec<&str> = vcluster_api_releases.iter().map(String::as_str).collect();
            node::apiserver::VClusterApi::Real(node::apiserver::RealApi::for_releases(vcluster_api_cap, &only))
        }
        ApiMode::Syncer if !nix_root() => {
            tracing::warn!("--vcluster-api syncer needs root (namespaces): the stand-in API servers instead");
            node::apiserver::VClusterApi::Real(node::apiserver::RealApi::new(vcluster_api_cap))
        }
        ApiMode::Syncer => {
            let only: Vec<&str> = vcluster_api_releases.iter().map(String::as_str).collect();
            let real = if only.is_empty() {
                node::apiserver::RealApi::new(vcluster_api_cap)
            } else {
                node::apiserver::RealApi::for_releases(vcluster_api_cap, &only)
            };
            node::apiserver::VClusterApi::Syncer(real)
        }
        ApiMode::Relay => node::apiserver::VClusterApi::Relay,
    };
    let capacity = Capacity {
        cpu: args.node_cpu,
        memory: args.node_memory,
        ephemeral_storage: args.node_ephemeral_storage,
        ..Capacity::default()
    };
    let ready = data_dir.join("ready");
    let _ = std::fs::remove_file(&ready);
    let bin_dir = controlplane::locate_binaries()?;
    let mirror = std::net::SocketAddr::from(([127, 0, 0, 1], controlplane::free_port()?));
    let mut cp = ControlPlane::start(&ControlPlaneConfig {
        data_dir: data_dir.clone(),
        bin_dir: bin_dir.clone(),
        api_port: Some(api_port),
        node_port_range: controlplane::DEFAULT_NODE_PORT_RANGE.into(),
        upstream: Some(controlplane::UpstreamParts {
            helm: args.helm_controller,
            https_proxy: mirror,
            metallb_metrics_port: controlplane::free_port()?,
        }),
    })?;
    let kubeconfig = cp.admin.kubeconfig.clone();
    let client = testhost::client_for(&kubeconfig).await?;
    let creds = Credentials::from_file(&kubeconfig)?;
    node::seed_pools(&client, &pools).await?;
    let cfg = node::Config {
        nodes,
        capacity,
        pod_ips,
        mirror,
        bin_dir,
        latency,
        state_dir: data_dir.join("node"),
        vcluster_api,
        etcd: cp.etcd_url.clone(),
        gateway_api: Some(args.gateway_api.clone()).filter(|b| b != "none"),
        helm: args.helm_controller,
    };
    let pids: Vec<String> = cp.pids().iter().map(|(n, p)| format!("{n}={p}")).collect();
    tracing::info!(kubeconfig = %kubeconfig.display(), pids = %pids.join(" "), "host up");
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let ready_marker = ready.clone();
    let node = node::run(client, creds, cfg, move || {
        let _ = std::fs::write(&ready_marker, format!("{}\n", kubeconfig.display()));
    });
    tokio::pin!(node);
    let result = loop {
        tokio::select! {
            r = &mut node => break r,
            _ = term.recv() => break Ok(()),
            _ = tokio::signal::ctrl_c() => break Ok(()),
            // k3s' supervisor: parts that exited start again.
            _ = tokio::time::sleep(std::time::Duration::from_secs(1)) => {
                for name in cp.revive() {
                    tracing::info!(part = name, "restarted after it exited");
                }
            }
        }
    };
    let _ = std::fs::remove_file(&ready);
    cp.stop();
    result.context("node stopped")
}

/// Whether this process runs as root (the syncer's sandboxes unshare namespaces).
fn nix_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}
