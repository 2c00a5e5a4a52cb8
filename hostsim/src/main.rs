//! `hostsim`: the host simulator (`run`), or the whole test host in one process
//! tree (`up`: etcd + kube-apiserver + simulator, state in a data folder).

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand};
use hostsim::controlplane::{self, ControlPlane, ControlPlaneConfig};
use hostsim::kubeconfig::Credentials;
use hostsim::latency::{Latency, Span};
use hostsim::sim::nodes::{Capacity, NodeAddr};
use hostsim::{chart, lb, node, sim, testhost};

#[derive(Parser)]
#[command(about = "KubeBYON's simulated k3s host")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Simulate helm-controller + vCluster, a LoadBalancer provider and kube-proxy
    /// against an existing API server.
    Run {
        #[arg(long)]
        kubeconfig: PathBuf,
        /// Touched once the first full sync is done.
        #[arg(long)]
        ready_file: Option<PathBuf>,
        #[command(flatten)]
        sim: SimArgs,
    },
    /// Start the host in the foreground: etcd, kube-apiserver, kube-controller-manager,
    /// kube-scheduler, helm-controller, MetalLB's controller and the simulated node.
    Up {
        #[arg(long)]
        data_dir: PathBuf,
        /// kube-apiserver's port (k3s uses 6443).
        #[arg(long, default_value_t = 6443)]
        api_port: u16,
        /// The earlier simulator, which mirrors helm-controller, helm, the chart,
        /// the Job controller and MetalLB instead of running them (default: run
        /// upstream's own and simulate only the node, see `node`).
        #[arg(long)]
        mirror: bool,
        /// Loopback addresses the pods listen on, `FIRST-LAST`.
        #[arg(long, default_value = "127.0.1.1-127.0.1.254")]
        pod_ips: String,
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
        /// `relay` forwards to this host's API server (hundreds of clusters).
        #[arg(long, value_enum, default_value = "real")]
        vcluster_api: ApiMode,
        /// With `real`: at most this many API servers at once (each ~200 MB);
        /// vClusters beyond it relay.
        #[arg(long, default_value_t = 20)]
        vcluster_api_cap: usize,
        #[command(flatten)]
        sim: SimArgs,
    },
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum ApiMode {
    Real,
    Relay,
}

#[derive(Args)]
struct SimArgs {
    /// Address pool `NAME=FIRST[-LAST][,noauto][,hostname=SUFFIX]`; repeatable.
    /// Written as MetalLB `IPAddressPool` objects in `metallb-system`.
    #[arg(long = "pool", default_value = "default=127.0.0.100-127.0.0.199")]
    pools: Vec<lb::Pool>,
    /// Serve only this loadBalancerClass (default: Services without a class).
    #[arg(long)]
    lb_class: Option<String>,
    /// A node `INTERNAL_IP[/EXTERNAL_IP]`; repeatable. The first runs the pods.
    #[arg(long = "node-ip", default_value = "127.0.0.1")]
    nodes: Vec<NodeAddr>,
    /// Short but non-zero delays, for test hosts ([`Latency::TEST`]) instead of
    /// the upstream-like ones ([`Latency::UPSTREAM`]); the flags below override.
    #[arg(long)]
    test_latency: bool,
    /// How long a helm Job pod takes (`MIN-MAX` or one duration; upstream-like: 2s-5s).
    #[arg(long)]
    helm_job: Option<Span>,
    /// How long a vCluster pod takes to serve after install or a values change (5s-10s).
    #[arg(long)]
    vcluster_start: Option<Span>,
    /// How long after a SAN change the new certificate is served (2s-4500ms).
    #[arg(long)]
    cert_refresh: Option<Span>,
    /// The Job controller's first retry delay, doubling per failure (10s).
    #[arg(long)]
    job_retry: Option<Span>,
    /// vCluster chart versions the simulated chart repository serves; repeatable.
    #[arg(long = "chart-version")]
    chart_versions: Vec<String>,
    /// Chart repositories that answer `helm repo add`; repeatable.
    #[arg(long = "chart-repo")]
    chart_repos: Vec<String>,
}

impl SimArgs {
    fn config(self) -> sim::Config {
        let mut charts = chart::Source::default();
        if !self.chart_versions.is_empty() {
            charts.versions = self.chart_versions;
        }
        if !self.chart_repos.is_empty() {
            charts.repos = self.chart_repos;
        }
        sim::Config {
            lb: lb::Config { pools: self.pools, class: self.lb_class },
            nodes: self.nodes,
            latency: {
                let base = if self.test_latency { Latency::TEST } else { Latency::UPSTREAM };
                Latency {
                    helm_job: self.helm_job.unwrap_or(base.helm_job),
                    vcluster_start: self.vcluster_start.unwrap_or(base.vcluster_start),
                    cert_refresh: self.cert_refresh.unwrap_or(base.cert_refresh),
                    job_retry: self.job_retry.map_or(base.job_retry, |s| s.min),
                }
            },
            charts,
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
        Command::Run { kubeconfig, ready_file, sim } => {
            let client = testhost::client_for(&kubeconfig).await?;
            let creds = Credentials::from_file(&kubeconfig)?;
            sim::run(client, creds, sim.config(), move || {
                if let Some(f) = ready_file {
                    let _ = std::fs::write(f, "ready\n");
                }
            })
            .await
        }
        Command::Up { data_dir, api_port, mirror: true, sim, .. } => up(data_dir, api_port, sim).await,
        Command::Up {
            data_dir,
            api_port,
            mirror: false,
            pod_ips,
            node_cpu,
            node_memory,
            node_ephemeral_storage,
            vcluster_api,
            vcluster_api_cap,
            sim,
        } => {
            let api = match vcluster_api {
                ApiMode::Real => node::apiserver::VClusterApi::Real(node::apiserver::RealApi::new(vcluster_api_cap)),
                ApiMode::Relay => node::apiserver::VClusterApi::Relay,
            };
            let capacity = Capacity {
                cpu: node_cpu,
                memory: node_memory,
                ephemeral_storage: node_ephemeral_storage,
                ..Capacity::default()
            };
            let pod_ips = node::parse_ip_range(&pod_ips).map_err(anyhow::Error::msg)?;
            up_upstream(data_dir, api_port, sim, capacity, pod_ips, api).await
        }
    }
}

async fn up(data_dir: PathBuf, api_port: u16, sim_args: SimArgs) -> Result<()> {
    std::fs::create_dir_all(&data_dir)?;
    let ready = data_dir.join("ready");
    let _ = std::fs::remove_file(&ready);
    // Spawned on this (main) thread, which lives as long as the process.
    let bin_dir = controlplane::locate_binaries()?;
    let mut cp = ControlPlane::start(&ControlPlaneConfig {
        data_dir: data_dir.clone(),
        bin_dir,
        api_port: Some(api_port),
        node_port_range: controlplane::DEFAULT_NODE_PORT_RANGE.into(),
        upstream: None,
    })?;
    let kubeconfig = cp.admin.kubeconfig.clone();
    let client = testhost::client_for(&kubeconfig).await?;
    let creds = Credentials::from_file(&kubeconfig)?;
    let pids: Vec<String> = cp.pids().iter().map(|(n, p)| format!("{n}={p}")).collect();
    tracing::info!(kubeconfig = %kubeconfig.display(), pids = %pids.join(" "), "host up");
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let ready_marker = ready.clone();
    let result = tokio::select! {
        r = sim::run(client, creds, sim_args.config(), move || {
            let _ = std::fs::write(&ready_marker, format!("{}\n", kubeconfig.display()));
        }) => r,
        _ = term.recv() => Ok(()),
        _ = tokio::signal::ctrl_c() => Ok(()),
    };
    let _ = std::fs::remove_file(&ready);
    cp.stop();
    result.context("simulator stopped")
}

/// `up`: the control plane with upstream's parts, and the node.
async fn up_upstream(
    data_dir: PathBuf,
    api_port: u16,
    sim_args: SimArgs,
    capacity: Capacity,
    pod_ips: Vec<std::net::Ipv4Addr>,
    vcluster_api: node::apiserver::VClusterApi,
) -> Result<()> {
    std::fs::create_dir_all(&data_dir)?;
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
            https_proxy: mirror,
            metallb_metrics_port: controlplane::free_port()?,
        }),
    })?;
    let kubeconfig = cp.admin.kubeconfig.clone();
    let client = testhost::client_for(&kubeconfig).await?;
    let creds = Credentials::from_file(&kubeconfig)?;
    let sim_cfg = sim_args.config();
    node::seed_pools(&client, &sim_cfg.lb.pools).await?;
    let cfg = node::Config {
        nodes: sim_cfg.nodes,
        capacity,
        pod_ips,
        mirror,
        bin_dir,
        latency: sim_cfg.latency,
        state_dir: data_dir.join("node"),
        vcluster_api,
        etcd: cp.etcd_url.clone(),
    };
    let pids: Vec<String> = cp.pids().iter().map(|(n, p)| format!("{n}={p}")).collect();
    tracing::info!(kubeconfig = %kubeconfig.display(), pids = %pids.join(" "), "host up (upstream)");
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
