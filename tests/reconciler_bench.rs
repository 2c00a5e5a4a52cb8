//! `make bench` only (ignored by `cargo test`): N clusters switched NodePort →
//! LoadBalancer through the reconciler on the upstream test host (real
//! helm-controller, helm, chart, scheduler and MetalLB; the node in this
//! process, vCluster control planes in `relay` mode), against a bare kube-rs
//! client doing the minimal calls for the same switches in the same run
//! (server-side apply of the HelmChart, one Service watch, one Secret read, then
//! the same TLS probe). Prints wall-time ratio, API calls per cluster per switch
//! (counted by a client-side layer), this process's RSS (the console and the
//! node) and the host's processes' RSS. N = `KUBEBYON_BENCH_CLUSTERS` (default
//! 50, at most 240; 2N vCluster pods share the node's 197 pod addresses, and
//! above 90 clusters the node gets more from extra /24s; the console's
//! LoadBalancer addresses come from a second /24, the bare client's from a third).

mod support;

use support::calls::{Calls, counting_client};

use std::sync::Arc;
use std::time::{Duration, Instant};

use hostsim::testhost::{Simulator, TestHost};
use hostsim::testsupport as ts;
use kube::api::{Api, PostParams};
use kubebyon::domain::user::Role;
use kubebyon::server::controllers::reconciler::{self, Context};
use kubebyon::server::service::clusters;
use serde_json::json;

static CONSOLE: Calls = Calls::new();
static BARE: Calls = Calls::new();

/// Pod addresses beyond the host's own /24 (`.3`–`.199`: 2N vCluster pods
/// share them with helm's): 248 more per extra /24.
static POD_NETS: std::sync::OnceLock<Vec<hostsim::testhost::NetLease>> = std::sync::OnceLock::new();

/// The usual node, listening for pods on [`POD_NETS`] too, with room for them.
fn node_config(net: hostsim::testhost::Net) -> hostsim::node::Config {
    let mut config = net.node_config();
    let extra = POD_NETS.get().map_or(&[][..], Vec::as_slice);
    config.pod_ips.extend(extra.iter().flat_map(|lease| (3..=250).map(|n| lease.0.addr(n))));
    // Per node, and two nodes: beside the console's N control planes (1 GiB,
    // 0.1 CPU each) run the bare client's N (the chart's default requests) and
    // the helm Jobs of both.
    config.capacity.pods = (110 + 124 * extra.len()).to_string();
    config.capacity.cpu = (32 + 32 * extra.len()).to_string();
    config.capacity.memory = format!("{}Gi", 128 + 128 * extra.len());
    config
}

/// The summed RSS of the processes whose command line names the host's folder.
fn host_processes_rss_kib(dir: &std::path::Path) -> u64 {
    let dir = dir.display().to_string();
    let mut total = 0;
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let cmd = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        if !String::from_utf8_lossy(&cmd).contains(&dir) {
            continue;
        }
        let status = std::fs::read_to_string(entry.path().join("status")).unwrap_or_default();
        total += support::vm_rss_kib(&status).unwrap_or(0);
    }
    total
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark: run by scripts/bench.sh"]
async fn switch_node_port_to_load_balancer() {
    let n: usize = std::env::var("KUBEBYON_BENCH_CLUSTERS").ok().and_then(|v| v.parse().ok()).unwrap_or(50).min(240);
    // Beyond 90 clusters the node listens for pods on more /24s.
    let extra = n.saturating_sub(90).div_ceil(120);
    POD_NETS.get_or_init(|| (0..extra).map(|_| hostsim::testhost::NetLease::claim().expect("pod addresses")).collect());
    // Every wait grows with N (50 clusters took ~90 s to create on this machine).
    let wait = Duration::from_secs(300 + 6 * n as u64);
    let guard =
        tokio::task::spawn_blocking(move || TestHost::start(Some(Simulator::Node(node_config))).expect("test host"))
            .await
            .unwrap();
    let host = &guard.host;
    let net = host.net;
    // The console's addresses: 127.A.B.10-249 of a second /24; the bare
    // client's: 127.C.D.10-249 of a third.
    let mine = hostsim::testhost::NetLease::claim().expect("a second /24");
    let other = hostsim::testhost::NetLease::claim().expect("a third /24");
    let admin = host.client().await.unwrap();
    let pools: Api<kube::api::DynamicObject> = Api::namespaced_with(
        admin.clone(),
        "metallb-system",
        &kube::api::ApiResource {
            group: "metallb.io".into(),
            version: "v1beta1".into(),
            api_version: "metallb.io/v1beta1".into(),
            kind: "IPAddressPool".into(),
            plural: "ipaddresspools".into(),
        },
    );
    // The extra pools, as an admin would add them: IPAddressPool objects.
    for pool_args in [
        format!("bench={}-{}", mine.0.addr(10), mine.0.addr(249)),
        format!("bare={}-{}", other.0.addr(10), other.0.addr(249)),
    ] {
        let pool: hostsim::lb::Pool = pool_args.parse().unwrap();
        let body: kube::api::DynamicObject = serde_json::from_value(pool.to_object()).unwrap();
        pools.create(&PostParams::default(), &body).await.unwrap();
    }
    let lb_ip = |i: usize| mine.0.addr(10 + i as u8).to_string();
    let other_ip = |i: usize| other.0.addr(10 + i as u8);

    // --- the console ---
    let (url, _dir) = support::sqlite_url();
    let pool_db = kubebyon::server::db::connect(&url).await.unwrap();
    let user = support::user(&pool_db, "bench", Role::Admin).await;
    let mut settings = kubebyon::server::db::settings::load(&pool_db).await.unwrap();
    settings.nodeport_public_host = Some(kubebyon::domain::Host::parse(&net.node().to_string()).unwrap());
    kubebyon::server::db::settings::save(&pool_db, &settings).await.unwrap();
    let client = counting_client(&host.kubeconfig, &CONSOLE).await;
    let mut console_host =
        kubebyon::server::host::Host::new(client, pool_db.clone(), kubebyon::domain::render::AddressRequest::MetalLb);
    // The test host serves on 127.0.0.0/8.
    console_host.resolver.targets.allow_loopback = true;
    let ctx = Context::new(Arc::new(console_host), pool_db.clone());
    // The console's own timings (a full pass every minute, retries from
    // 2 s): each full pass asks the host which LoadBalancer provider and
    // TLSRoute version it serves, so a shorter resync would count calls a
    // deployed console does not make (a 10 s resync: 72 of 482 calls).
    let ctx = Arc::new(ctx);
    tokio::spawn(reconciler::run(ctx.clone()));
    let started = Instant::now();
    let mut ids = Vec::new();
    for i in 0..n {
        let draft: clusters::ClusterDraft = serde_json::from_value(json!({"name": format!("b{i}"),
            "resources": {"cpu": "0.1", "memory_gib": 1, "storage_gib": 1},
            "public_access": {"enabled": true, "mode": "nodeport"}}))
        .unwrap();
        ids.push(clusters::create(&pool_db, &Default::default(), &Default::default(), &user, &draft).await.unwrap().id);
    }
    ctx.host.wake();
    let all_ready = |want_lb: bool| {
        let pool_db = pool_db.clone();
        async move {
            let list = kubebyon::server::db::clusters::list(&pool_db, None).await.ok()?;
            list.iter()
                .all(|c| {
                    c.status.phase == kubebyon::domain::Phase::Ready
                        && c.status.observed_generation == c.generation
                        && c.status.api_endpoint.as_deref().is_some_and(|e| e.ends_with(":443") == want_lb)
                })
                .then_some(())
        }
    };
    ts::eventually("all NodePort clusters Ready", wait, || all_ready(false)).await.unwrap();
    println!("created {n} NodePort clusters, all Ready, in {:.1} s", started.elapsed().as_secs_f64());

    CONSOLE.reset();
    let t0 = Instant::now();
    for (i, id) in ids.iter().enumerate() {
        let patch: clusters::ClusterPatch = serde_json::from_value(
            json!({"public_access": {"enabled": true, "mode": "loadbalancer", "control_plane_host": lb_ip(i)}}),
        )
        .unwrap();
        clusters::update(&pool_db, &Default::default(), &Default::default(), &user, *id, &patch).await.unwrap();
    }
    ctx.host.wake();
    ts::eventually("all switched and Ready", wait, || all_ready(true)).await.unwrap();
    let console_time = t0.elapsed();
    let console_calls = CONSOLE.total();
    let console_kinds = CONSOLE.by_kind();
    let rss = support::rss_kib(None);

    // --- a bare kube-rs client, the same switches ---
    let bare = counting_client(&host.kubeconfig, &BARE).await;
    support::bare::install(&admin, n, wait).await;
    BARE.reset();
    let bare_time = support::bare::switch(&bare, n, other_ip, wait).await;
    let bare_calls = BARE.total();

    println!("== {n} clusters switched NodePort -> LoadBalancer (test host, the console's own timings)");
    println!(
        "console reconciler: {:.1} s, {} API calls ({:.1} per cluster)",
        console_time.as_secs_f64(),
        console_calls,
        console_calls as f64 / n as f64
    );
    println!("console calls by kind: {console_kinds}");
    println!(
        "bare kube-rs:       {:.1} s, {} API calls ({:.1} per cluster)",
        bare_time.as_secs_f64(),
        bare_calls,
        bare_calls as f64 / n as f64
    );
    println!(
        "wall-time ratio console/bare: {:.2}x (goal <= 1.0x, <= 1.5 calls per cluster)",
        console_time.as_secs_f64() / bare_time.as_secs_f64()
    );
    println!("console (and node) process RSS with {n} clusters watched: {} MiB", rss / 1024);
    let host_rss: u64 = host_processes_rss_kib(&host.data_dir);
    println!(
        "host processes (etcd, kube-apiserver, controllers, helm-controller, MetalLB) RSS with {} clusters: {} MiB ({:.1} MiB per cluster)",
        2 * n,
        host_rss / 1024,
        host_rss as f64 / 1024.0 / (2 * n) as f64
    );
}
