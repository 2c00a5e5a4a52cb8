//! `make bench` only (ignored by `cargo test`): N clusters switched NodePort →
//! LoadBalancer through the reconciler on the upstream test host (real
//! helm-controller, helm, chart, scheduler and MetalLB; the node in this
//! process, vCluster control planes in `relay` mode), against a bare kube-rs
//! client doing the minimal calls for the same switches in the same run
//! (server-side apply of the HelmChart, one Service watch, one Secret read, then
//! the same TLS probe). Prints wall-time ratio, API calls per cluster per switch
//! (counted by a client-side layer), this process's RSS (the console and the
//! node) and the host's processes' RSS. N = `KUBEBYON_BENCH_CLUSTERS` (default
//! 50, at most 90: 2N vCluster pods share the node's 197 pod addresses; the
//! console's LoadBalancer addresses come from a second /24, the bare client's
//! from a third).

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use hostsim::testhost::{Simulator, TestHost};
use hostsim::testsupport as ts;
use k8s_openapi::api::core::v1::{Namespace, Secret, Service};
use kube::api::{Api, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::runtime::watcher;
use kubebyon::domain::user::Role;
use kubebyon::server::controllers::reconciler::probe::{Credentials, Resolver, probe};
use kubebyon::server::controllers::reconciler::{self, Context};
use kubebyon::server::service::clusters;
use serde_json::json;

static CONSOLE_CALLS: AtomicUsize = AtomicUsize::new(0);
static BARE_CALLS: AtomicUsize = AtomicUsize::new(0);
/// The console's calls by verb and resource, e.g. `PATCH helmcharts`, `GET secrets`.
static CONSOLE_KINDS: std::sync::Mutex<std::collections::BTreeMap<String, usize>> =
    std::sync::Mutex::new(std::collections::BTreeMap::new());

/// `VERB resource` of a request (`WATCH` for watches).
fn call_kind<B>(req: &http::Request<B>) -> String {
    let uri = req.uri();
    let parts: Vec<&str> = uri.path().trim_start_matches('/').split('/').collect();
    // /api/v1/<res>[/..] or /apis/<group>/<version>/<res>[/..], with namespaces/<ns>/ after the version.
    let rest = if parts.first() == Some(&"api") { &parts[2.min(parts.len())..] } else { &parts[3.min(parts.len())..] };
    let rest = if rest.len() > 2 && rest[0] == "namespaces" { &rest[2..] } else { rest };
    let resource = rest.first().copied().unwrap_or("?");
    let sub = if rest.len() > 2 { format!("/{}", rest[2]) } else { String::new() };
    let verb = if uri.query().is_some_and(|q| q.contains("watch=true")) { "WATCH" } else { req.method().as_str() };
    format!("{verb} {resource}{sub}")
}

async fn counting_client(host: &TestHost, counter: &'static AtomicUsize) -> kube::Client {
    let kc = Kubeconfig::read_from(&host.kubeconfig).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).await.unwrap();
    let layer = tower::util::MapRequestLayer::new(move |req: http::Request<kube::client::Body>| {
        counter.fetch_add(1, Ordering::Relaxed);
        if std::ptr::eq(counter, &CONSOLE_CALLS) {
            *CONSOLE_KINDS.lock().unwrap().entry(call_kind(&req)).or_default() += 1;
        }
        req
    });
    kube::client::ClientBuilder::try_from(config).unwrap().with_layer(&layer).build()
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
        total += status
            .lines()
            .find(|l| l.starts_with("VmRSS:"))
            .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
            .unwrap_or(0);
    }
    total
}

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("VmRSS:")).map(str::to_owned))
        .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark: run by scripts/bench.sh"]
async fn switch_node_port_to_load_balancer() {
    let n: usize = std::env::var("KUBEBYON_BENCH_CLUSTERS").ok().and_then(|v| v.parse().ok()).unwrap_or(50).min(90);
    let guard = tokio::task::spawn_blocking(move || {
        TestHost::start(Some(Simulator::Node(|net: hostsim::testhost::Net| net.node_config()))).expect("test host")
    })
    .await
    .unwrap();
    let host = &guard.host;
    let net = host.net;
    // The console's addresses: 127.A.B.10-99 of a second /24; the bare
    // client's: 127.C.D.10-99 of a third.
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
        format!("bench={}-{}", mine.0.addr(10), mine.0.addr(99)),
        format!("bare={}-{}", other.0.addr(10), other.0.addr(99)),
    ] {
        let pool: hostsim::lb::Pool = pool_args.parse().unwrap();
        let body: kube::api::DynamicObject = serde_json::from_value(pool.to_object()).unwrap();
        pools.create(&PostParams::default(), &body).await.unwrap();
    }
    let lb_ip = |i: usize| mine.0.addr(10 + i as u8).to_string();
    let bare_ip = |i: usize| other.0.addr(10 + i as u8).to_string();

    // --- the console ---
    let (url, _dir) = support::sqlite_url();
    let pool_db = kubebyon::server::db::connect(&url).await.unwrap();
    let user = support::user(&pool_db, "bench", Role::Admin).await;
    let mut settings = kubebyon::server::db::settings::load(&pool_db).await.unwrap();
    settings.nodeport_public_host = Some(kubebyon::domain::Host::parse(&net.node().to_string()).unwrap());
    kubebyon::server::db::settings::save(&pool_db, &settings).await.unwrap();
    let client = counting_client(host, &CONSOLE_CALLS).await;
    let mut ctx = Context::new(client, pool_db.clone(), kubebyon::domain::render::AddressRequest::MetalLb);
    // The test host serves on 127.0.0.0/8.
    ctx.resolver.targets.allow_loopback = true;
    ctx.resync = Duration::from_secs(10);
    ctx.retry_base = Duration::from_millis(500);
    let ctx = Arc::new(ctx);
    tokio::spawn(reconciler::run(ctx.clone()));
    let started = Instant::now();
    let mut ids = Vec::new();
    for i in 0..n {
        let draft: clusters::ClusterDraft = serde_json::from_value(json!({"name": format!("b{i}"),
            "resources": {"cpu": "0.1", "memory_gib": 1, "storage_gib": 1},
            "public_access": {"enabled": true, "mode": "nodeport"}}))
        .unwrap();
        ids.push(clusters::create(&pool_db, &Default::default(), &user, &draft).await.unwrap().id);
    }
    ctx.wake();
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
    ts::eventually("all NodePort clusters Ready", Duration::from_secs(900), || all_ready(false)).await.unwrap();
    println!("created {n} NodePort clusters, all Ready, in {:.1} s", started.elapsed().as_secs_f64());

    CONSOLE_CALLS.store(0, Ordering::Relaxed);
    CONSOLE_KINDS.lock().unwrap().clear();
    let t0 = Instant::now();
    for (i, id) in ids.iter().enumerate() {
        let patch: clusters::ClusterPatch = serde_json::from_value(
            json!({"public_access": {"enabled": true, "mode": "loadbalancer", "control_plane_host": lb_ip(i)}}),
        )
        .unwrap();
        clusters::update(&pool_db, &Default::default(), &user, *id, &patch).await.unwrap();
    }
    ctx.wake();
    ts::eventually("all switched and Ready", Duration::from_secs(900), || all_ready(true)).await.unwrap();
    let console_time = t0.elapsed();
    let console_calls = CONSOLE_CALLS.load(Ordering::Relaxed);
    let console_kinds = std::mem::take(&mut *CONSOLE_KINDS.lock().unwrap());
    let rss = rss_kib();

    // --- a bare kube-rs client, the same switches ---
    let bare = counting_client(host, &BARE_CALLS).await;
    for i in 0..n {
        let ns = format!("bare-{i}");
        let body: Namespace = serde_json::from_value(json!({"metadata": {"name": ns}})).unwrap();
        Api::<Namespace>::all(admin.clone()).create(&PostParams::default(), &body).await.unwrap();
        ts::apply_chart(&admin, &ns, "bare", "controlPlane:\n  service:\n    spec:\n      type: NodePort\n", json!({}))
            .await
            .unwrap();
    }
    for i in 0..n {
        ts::wait_install_job(&admin, &format!("bare-{i}"), "bare", Duration::from_secs(900)).await.unwrap();
    }
    BARE_CALLS.store(0, Ordering::Relaxed);
    let t1 = Instant::now();
    for i in 0..n {
        let ip = bare_ip(i);
        let values = format!(
            "controlPlane:\n  service:\n    annotations:\n      metallb.io/loadBalancerIPs: \"{ip}\"\n    spec:\n      type: LoadBalancer\n  proxy:\n    extraSANs: [\"{ip}\"]\n"
        );
        ts::apply_chart(&bare, &format!("bare-{i}"), "bare", &values, json!({})).await.unwrap();
    }
    // One watch on the Services until every one has its address.
    let services: Api<Service> = Api::all(bare.clone());
    let mut stream = watcher(services, watcher::Config::default().labels("release=bare")).boxed();
    let mut done = std::collections::BTreeSet::new();
    while done.len() < n {
        if let Some(Ok(watcher::Event::Apply(s) | watcher::Event::InitApply(s))) = stream.next().await
            && ts::ingress_ip(&s).is_some()
        {
            done.insert(kube::ResourceExt::namespace(&s).unwrap_or_default());
        }
    }
    drop(stream);
    // One Secret read each, then the same probe until it answers.
    let mut loopback = Resolver::default();
    loopback.targets.allow_loopback = true;
    for i in 0..n {
        let ns = format!("bare-{i}");
        let s: Secret = Api::namespaced(bare.clone(), &ns).get("vc-bare").await.unwrap();
        let t = |k: &str| String::from_utf8(s.data.as_ref().unwrap()[k].0.clone()).unwrap();
        let creds = Credentials {
            ca_pem: t("certificate-authority"),
            cert_pem: t("client-certificate"),
            key_pem: t("client-key"),
        };
        let endpoint = format!("https://{}:443", bare_ip(i));
        ts::eventually("bare endpoint answers", Duration::from_secs(300), || async {
            (probe(&endpoint, &creds, &loopback).await.status == kubebyon::domain::ConnectionStatus::Ok).then_some(())
        })
        .await
        .unwrap();
    }
    let bare_time = t1.elapsed();
    let bare_calls = BARE_CALLS.load(Ordering::Relaxed);

    println!("== {n} clusters switched NodePort -> LoadBalancer (test host, test delays)");
    println!(
        "console reconciler: {:.1} s, {} API calls ({:.1} per cluster)",
        console_time.as_secs_f64(),
        console_calls,
        console_calls as f64 / n as f64
    );
    let kinds: Vec<String> = console_kinds.iter().map(|(k, v)| format!("{k} {v}")).collect();
    println!("console calls by kind: {}", kinds.join(", "));
    println!(
        "bare kube-rs:       {:.1} s, {} API calls ({:.1} per cluster)",
        bare_time.as_secs_f64(),
        bare_calls,
        bare_calls as f64 / n as f64
    );
    println!(
        "wall-time ratio console/bare: {:.2}x (goal <= 1.3x)",
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
