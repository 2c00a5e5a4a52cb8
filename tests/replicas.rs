//! Two console processes (the real binary, `kubebyon serve`) on one
//! PostgreSQL database and one test host share the work: 50 clusters created
//! through both at once all become Ready, each HelmChart is applied once
//! (generation 1) and every create operation finishes exactly once; the
//! replica holding the observer lease is killed with SIGKILL mid-way and the
//! other takes the lease over within its time and finishes the job. Sessions
//! and sign-in throttling hold across the replicas.

mod support;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use hostsim::testhost::{Net, Simulator, TestHost};
use hostsim::testsupport as ts;
use serde_json::{Value, json};

const PW: &str = "replica-admin-password";
const CLUSTERS: usize = 50;
const LEADER_LEASE_SECS: u64 = 3;

fn host() -> &'static TestHost {
    TestHost::shared(Some(Simulator::Node(|net: Net| net.node_config())))
}

struct Replica {
    child: Child,
    url: String,
}

/// A replica's process ends with the test, also when an assertion fails.
impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn start(db: &str, kubeconfig: &Path, logs: &Path, tag: &str) -> Replica {
    let port = free_port();
    let log = std::fs::File::create(logs.join(format!("{tag}.log"))).unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_kubebyon"))
        .arg("serve")
        .env("DATABASE_URL", db)
        .env("KUBECONFIG", kubeconfig)
        .env("LEPTOS_SITE_ADDR", format!("127.0.0.1:{port}"))
        .env("LEPTOS_OUTPUT_NAME", "kubebyon")
        .env("LEPTOS_SITE_ROOT", logs.join("site"))
        .env("LEPTOS_SITE_PKG_DIR", "pkg")
        .env_remove("LEPTOS_HASH_FILES")
        .env("KUBEBYON_ADMIN_PASSWORD", PW)
        .env("KUBEBYON_LEADER_LEASE_SECS", LEADER_LEASE_SECS.to_string())
        .env("KUBEBYON_CLAIM_LEASE_SECS", "5")
        .env("KUBEBYON_LOG_FORMAT", "json")
        .env("KUBEBYON_PROBE_LOOPBACK", "1")
        // 50 creates at once by one admin: not what this measures.
        .env("KUBEBYON_SPEC_WRITE_LIMIT", "off")
        .env("RUST_LOG", "info,sqlx=warn")
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("start kubebyon serve");
    Replica { child, url: format!("http://127.0.0.1:{port}") }
}

/// `curl` (as the browser tests' scripts use it): status and body.
fn curl(method: &str, url: &str, cookie: Option<&str>, body: Option<&Value>) -> (u16, String, Option<String>) {
    let mut cmd = Command::new("curl");
    cmd.args(["-sS", "-o", "-", "-D", "/dev/stderr", "-w", "\n%{http_code}", "-X", method, url]);
    cmd.args(["-H", "content-type: application/json"]);
    if let Some(c) = cookie {
        cmd.args(["-H", &format!("cookie: {c}")]);
    }
    if let Some(b) = body {
        cmd.args(["--data-binary", &b.to_string()]);
    }
    let out = cmd.output().expect("curl");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", "0"));
    let headers = String::from_utf8_lossy(&out.stderr);
    let cookie = headers.lines().find_map(|l| {
        let v = l.strip_prefix("set-cookie: ").or_else(|| l.strip_prefix("Set-Cookie: "))?;
        v.split(';').next().filter(|c| c.starts_with("kubebyon_session=") && c.len() > 20).map(str::to_owned)
    });
    (code.trim().parse().unwrap_or(0), body.to_owned(), cookie)
}

fn wait_ready(r: &Replica, logs: &Path) {
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(60) {
        if curl("GET", &format!("{}/readyz", r.url), None, None).0 == 200 {
            return;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    panic!("{} never became ready: {}", r.url, std::fs::read_to_string(logs.join("a.log")).unwrap_or_default());
}

fn pid_of(worker: &str) -> Option<u32> {
    worker.strip_prefix("kubebyon-")?.split('-').next()?.parse().ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_share_the_work_and_survive_kill_9_of_the_lease_holder() {
    let host = host();
    let db = support::postgres_url().await;
    let pool = kubebyon::server::db::connect(&db).await.unwrap();
    let kubeconfig = support::host::console_kubeconfig(host).await;
    let logs = tempfile::tempdir().unwrap();
    // Both start at once: one creates the first admin, the other finds it.
    let mut replicas = vec![start(&db, &kubeconfig, logs.path(), "a"), start(&db, &kubeconfig, logs.path(), "b")];
    for r in &replicas {
        wait_ready(r, logs.path());
    }
    let (a, b) = (replicas[0].url.clone(), replicas[1].url.clone());

    // A session made on one replica works on the other.
    let (status, body, cookie) =
        curl("POST", &format!("{a}/api/auth/login"), None, Some(&json!({"username": "admin", "password": PW})));
    assert_eq!(status, 200, "{body}");
    let cookie = cookie.expect("session cookie");
    let settings = support::host::nodeport_settings(&host.net.node().to_string());
    let (status, body, _) = curl("PUT", &format!("{b}/api/admin/system-settings"), Some(&cookie), Some(&settings));
    assert_eq!(status, 200, "settings through the other replica: {body}");

    // 50 clusters, half through each replica, all at once.
    let started = Instant::now();
    let creates: Vec<_> = (0..CLUSTERS)
        .map(|i| {
            let (url, cookie) = (if i % 2 == 0 { a.clone() } else { b.clone() }, cookie.clone());
            std::thread::spawn(move || {
                let body = json!({"name": format!("rep-{i}"), "resources": {"cpu": "1", "memory_gib": 2, "storage_gib": 5},
                    "public_access": {"enabled": true, "mode": "nodeport"}});
                curl("POST", &format!("{url}/api/console/clusters"), Some(&cookie), Some(&body))
            })
        })
        .collect();
    for c in creates {
        let (status, body, _) = c.join().unwrap();
        assert_eq!(status, 201, "{body}");
    }

    let ready_count = |url: &str| {
        let (_, body, _) = curl("GET", &format!("{url}/api/console/clusters?page=1&q=rep-"), Some(&cookie), None);
        let v: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
        let items = v["items"].as_array().or(v.as_array()).cloned().unwrap_or_default();
        items
            .iter()
            .filter(|c| c["status"]["phase"] == "ready" && c["status"]["observed_generation"] == c["generation"])
            .count()
    };
    // Mid-way: kill -9 the replica holding the observer lease. (240 s: on a
    // fresh machine, with Go and the site building beside the suite, ten
    // took over 120 s on 2026-12-06; ~30 s on a quiet machine.)
    ts::eventually("some clusters Ready", Duration::from_secs(240), || async { (ready_count(&a) >= 10).then_some(()) })
        .await
        .expect("ten clusters Ready");
    let holder =
        kubebyon::server::db::shared::lease_holder(&pool, kubebyon::server::controllers::reconciler::OBSERVER_LEASE)
            .await
            .unwrap()
            .expect("someone observes");
    let victim =
        replicas.iter().position(|r| Some(r.child.id()) == pid_of(&holder)).expect("the holder is one of ours");
    replicas[victim].child.kill().expect("kill -9");
    replicas[victim].child.wait().unwrap();
    let killed_at = Instant::now();
    let survivor = replicas[1 - victim].url.clone();
    let new_holder = ts::eventually("the other replica takes the lease", Duration::from_secs(30), || async {
        let h = kubebyon::server::db::shared::lease_holder(
            &pool,
            kubebyon::server::controllers::reconciler::OBSERVER_LEASE,
        )
        .await
        .ok()??;
        (h != holder).then_some(h)
    })
    .await
    .expect("lease taken over");
    let takeover = killed_at.elapsed();
    assert_eq!(pid_of(&new_holder), Some(replicas[1 - victim].child.id()));
    assert!(takeover <= Duration::from_secs(LEADER_LEASE_SECS + 3), "takeover took {takeover:?}");

    // Everything converges on the survivor.
    ts::eventually("all 50 Ready", Duration::from_secs(240), || async {
        (ready_count(&survivor) == CLUSTERS).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}: {} Ready", ready_count(&survivor)));
    let all_ready = started.elapsed();

    // Each create ran to its end once; each HelmChart was applied once (a
    // second apply with other values would have made generation 2).
    let ops: Vec<(String, i64)> =
        sqlx::query_as("SELECT state, attempts FROM cluster_operations").fetch_all(&pool).await.unwrap();
    assert_eq!(ops.len(), CLUSTERS);
    assert!(ops.iter().all(|(s, _)| s == "done"), "{ops:?}");
    let retried = ops.iter().filter(|(_, n)| *n > 1).count();
    let admin = host.client().await.unwrap();
    let charts = kube::Api::<kube::api::DynamicObject>::all_with(
        admin,
        &kube::discovery::ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk("helm.cattle.io", "v1", "HelmChart")),
    )
    .list(&Default::default())
    .await
    .unwrap();
    let ours: Vec<_> = charts
        .items
        .iter()
        .filter(|c| c.metadata.namespace.as_deref().is_some_and(|n| n.starts_with("kubebyon-rep-")))
        .collect();
    assert_eq!(ours.len(), CLUSTERS);
    for c in &ours {
        assert_eq!(c.metadata.generation, Some(1), "{:?} applied with different values twice", c.metadata.namespace);
    }

    // Sign-in throttling holds across replicas: five failures spread over
    // both, and the sixth attempt is refused on the survivor.
    let (_, body, _) = curl(
        "POST",
        &format!("{survivor}/api/auth/login"),
        None,
        Some(&json!({"username": "admin", "password": "wrong"})),
    );
    assert!(body.contains("login_failed"), "{body}");
    let failures: i64 = sqlx::query_scalar("SELECT failures FROM login_attempts WHERE key LIKE 'p%admin%'")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(failures, 1, "counted in the database");
    for _ in 0..4 {
        curl(
            "POST",
            &format!("{survivor}/api/auth/login"),
            None,
            Some(&json!({"username": "admin", "password": "wrong"})),
        );
    }
    let (status, body, _) =
        curl("POST", &format!("{survivor}/api/auth/login"), None, Some(&json!({"username": "admin", "password": PW})));
    assert_eq!(status, 429, "{body}");

    println!(
        "replicas: {CLUSTERS} clusters Ready in {:.1} s through two replicas; the lease holder killed with SIGKILL, \
         lease taken over in {:.1} s (lease {LEADER_LEASE_SECS} s); {retried} operations re-run after the kill",
        all_ready.as_secs_f64(),
        takeover.as_secs_f64()
    );
}
