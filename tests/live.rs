//! Pages updated by push (issue 26): the event streams a live page follows
//! (`server::push`), through the real router into a real database: a
//! cluster's stream announces its change, a user's list stream announces
//! their clusters' changes and not another user's, who may not follow
//! another's cluster, and a client past the bound is told so.

mod support;

use std::time::Duration;

use axum::body::Body;
use http::{Request, StatusCode, header};
use http_body_util::BodyExt;
use kubebyon::server::config::Config;
use serde_json::json;
use support::http::{Console, HOST};
use tower::ServiceExt;

/// An open event stream.
struct Stream {
    body: Body,
    buf: String,
}

impl Stream {
    /// The next event (`event:` and `data:` lines; heartbeat comments
    /// skipped), or `None` if none comes within `within` or the stream ends.
    async fn next(&mut self, within: Duration) -> Option<(String, String)> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            while let Some(end) = self.buf.find("\n\n") {
                let block: String = self.buf.drain(..end + 2).collect();
                let field = |name: &str| {
                    block.lines().find_map(|l| l.strip_prefix(name)).map(|v| v.trim().to_owned()).unwrap_or_default()
                };
                let (event, data) = (field("event:"), field("data:"));
                if !event.is_empty() || !data.is_empty() {
                    return Some((event, data));
                }
            }
            let frame = tokio::time::timeout_at(deadline, self.body.frame()).await.ok()??.ok()?;
            if let Ok(bytes) = frame.into_data() {
                self.buf.push_str(&String::from_utf8_lossy(&bytes));
            }
        }
    }

    async fn version(&mut self, within: Duration) -> Option<i64> {
        let (event, data) = self.next(within).await?;
        assert_eq!(event, "version", "{data}");
        data.parse().ok()
    }
}

async fn open(console: &Console, path: &str, cookie: &str) -> (StatusCode, http::HeaderMap, Stream) {
    let mut req = Request::builder()
        .uri(path)
        .header(header::HOST, HOST)
        .header(header::COOKIE, cookie)
        .header(header::ACCEPT, "text/event-stream")
        .body(Body::empty())
        .unwrap();
    req.extensions_mut().insert(axum::extract::ConnectInfo(std::net::SocketAddr::from(([127, 0, 0, 1], 40000))));
    let res = console.router.clone().oneshot(req).await.unwrap();
    let (parts, body) = res.into_parts();
    (parts.status, parts.headers, Stream { body, buf: String::new() })
}

async fn create(console: &Console, cookie: &str, name: &str) -> i64 {
    let r = console
        .json("POST", "/api/console/clusters", Some(cookie), json!({"name": name, "resources": {"cpu": "1", "memory_gib": 1, "storage_gib": 5}, "public_access": {"enabled": false}}))
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    r.json()["id"].as_i64().unwrap()
}

async fn resize(console: &Console, cookie: &str, id: i64, cpu: &str) {
    let body = json!({"resources": {"cpu": cpu, "memory_gib": 1, "storage_gib": 5}});
    let r = console.json("PATCH", &format!("/api/console/clusters/{id}"), Some(cookie), body).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
}

const SOON: Duration = Duration::from_secs(3);
const QUIET: Duration = Duration::from_millis(1200);

#[tokio::test]
async fn streams_announce_changes_to_whoever_may_see_them() {
    let (url, _dir) = support::sqlite_url();
    let pool = kubebyon::server::db::connect(&url).await.unwrap();
    let console = Console::new(pool);
    console.user("alice", "correct horse battery", false).await;
    console.user("bob", "correct horse battery", false).await;
    let alice = console.login("alice", "correct horse battery").await;
    let bob = console.login("bob", "correct horse battery").await;
    let a = create(&console, &alice, "alpha").await;
    let b = create(&console, &bob, "bravo").await;

    // The cluster's stream: its version at once, then each change.
    let (status, headers, mut cluster) = open(&console, &format!("/events/clusters/{a}"), &alice).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers[header::CONTENT_TYPE], "text/event-stream");
    assert_eq!(headers["x-accel-buffering"], "no", "proxies are asked not to buffer");
    let shown = console.get(&format!("/api/console/clusters/{a}"), Some(&alice)).await.json();
    let v0 = cluster.version(SOON).await.expect("the current version at once");
    assert_eq!(v0, shown["revision"].as_i64().unwrap(), "the version the page was rendered at");
    let (_, _, mut list) = open(&console, "/events/clusters", &alice).await;
    let l0 = list.version(SOON).await.expect("the list's version at once");
    assert!(l0 >= v0);

    resize(&console, &alice, a, "2").await;
    let v1 = cluster.version(SOON).await.expect("the change is announced");
    assert!(v1 > v0, "{v1} > {v0}");
    assert!(list.version(SOON).await.expect("alice's list changed") > l0);

    // Another user's change: neither alice's cluster nor her list hears of it.
    resize(&console, &bob, b, "2").await;
    assert_eq!(cluster.next(QUIET).await, None, "bob's cluster is not alice's");
    assert_eq!(list.next(QUIET).await, None, "bob's cluster is not on alice's list");

    // Nobody follows another's cluster (no existence leak: 404 as the page).
    let (status, _, _) = open(&console, &format!("/events/clusters/{b}"), &alice).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _, _) = open(&console, "/events/clusters/999999", &alice).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    // Signed out: 401.
    let (status, _, _) = open(&console, "/events/clusters", "kubebyon_session=nope").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);

    // Shared with Bob, then taken back: his open list hears of both (it
    // drops the cluster by push, not at the next load; issue 42).
    let (_, _, mut bobs) = open(&console, "/events/clusters", &bob).await;
    let b0 = bobs.version(SOON).await.expect("bob's list's version at once");
    let members = format!("/api/console/clusters/{a}/members");
    let r = console.json("PUT", &members, Some(&alice), serde_json::json!({"name": "bob", "role": "view"})).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let b1 = bobs.version(SOON).await.expect("shared with bob: his list changed");
    assert!(b1 > b0, "{b1} > {b0}");
    let bob_id = r.json()[0]["id"].as_i64().unwrap();
    let r = console.send("DELETE", &format!("{members}/user/{bob_id}"), Some(&alice), None, "").await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(bobs.version(SOON).await.expect("taken back: his list changed") > b1);
    let v1 = cluster.version(SOON).await.expect("the cluster heard of both").max(v1);
    let _ = cluster.next(QUIET).await;

    // Deleting the cluster is announced too (the page then finds it gone).
    let r = console.send("DELETE", &format!("/api/console/clusters/{a}"), Some(&alice), None, "").await;
    assert!(r.status.is_success(), "{}", r.body);
    assert!(cluster.version(SOON).await.expect("the deletion request is announced") > v1);
}

/// Who may follow is asked again each heartbeat (issue 40): an admin
/// demoted while following every cluster's list, or a user who no longer
/// owns a cluster they follow, has the stream ended within a heartbeat — not
/// at its 10-minute end; a user who still may keeps theirs.
#[tokio::test]
async fn a_stream_ends_when_its_user_may_no_longer_follow_it() {
    let (url, _dir) = support::sqlite_url();
    let pool = kubebyon::server::db::connect(&url).await.unwrap();
    let config = Config { data_dir: "unused".into(), live_heartbeat_secs: 1, ..Config::default() };
    let console = Console::with(pool.clone(), None, config);
    console.user("root", "correct horse battery", true).await;
    console.user("alice", "correct horse battery", false).await;
    console.user("bob", "correct horse battery", false).await;
    let (root, alice) =
        (console.login("root", "correct horse battery").await, console.login("alice", "correct horse battery").await);
    let a = create(&console, &alice, "alpha").await;
    let (_, _, mut every) = open(&console, "/events/clusters", &root).await;
    let (_, _, mut mine) = open(&console, &format!("/events/clusters/{a}"), &alice).await;
    let (_, _, mut list) = open(&console, "/events/clusters", &alice).await;
    for s in [&mut every, &mut mine, &mut list] {
        s.version(SOON).await.expect("the current version");
    }
    sqlx::query("UPDATE users SET role = 'user' WHERE username = 'root'").execute(&pool).await.unwrap();
    let bob: i64 = sqlx::query_scalar("SELECT id FROM users WHERE username = 'bob'").fetch_one(&pool).await.unwrap();
    sqlx::query("UPDATE clusters SET owner_id = $1 WHERE id = $2").bind(bob).bind(a).execute(&pool).await.unwrap();
    for (what, s) in [("the demoted admin's list of every cluster", &mut every), ("a cluster now bob's", &mut mine)] {
        // (The ownership change itself may still be announced before it ends.)
        let started = std::time::Instant::now();
        while s.next(Duration::from_secs(6)).await.is_some() {}
        assert!(started.elapsed() < Duration::from_secs(4), "{what} ended after {:?}", started.elapsed());
    }
    // Alice's own list is still hers: it stays open across heartbeats.
    assert_eq!(list.next(Duration::from_millis(2500)).await, None, "nothing changed on her list");
    let b = create(&console, &alice, "bravo").await;
    assert!(list.version(SOON).await.is_some(), "her list stream still announces changes (cluster {b})");
}

#[tokio::test]
async fn a_client_past_the_bound_is_told_so() {
    let (url, _dir) = support::sqlite_url();
    let pool = kubebyon::server::db::connect(&url).await.unwrap();
    let config = Config { data_dir: "unused".into(), live_per_user: 2, live_total: 3, ..Config::default() };
    let console = Console::with(pool, None, config);
    for u in ["carol", "dave"] {
        console.user(u, "correct horse battery", false).await;
    }
    let carol = console.login("carol", "correct horse battery").await;
    let dave = console.login("dave", "correct horse battery").await;

    let (_, _, mut first) = open(&console, "/events/clusters", &carol).await;
    let (_, _, mut second) = open(&console, "/events/clusters", &carol).await;
    assert!(first.version(SOON).await.is_some() && second.version(SOON).await.is_some());
    // A third of carol's: one `bound` event with the reason, then the end.
    let (status, _, mut third) = open(&console, "/events/clusters", &carol).await;
    assert_eq!(status, StatusCode::OK, "an event the page can read, not an error it cannot");
    let (event, data) = third.next(SOON).await.expect("the bound is said");
    assert_eq!(event, "bound");
    let data: serde_json::Value = serde_json::from_str(&data).unwrap();
    assert_eq!(data, json!({"code": "live_bound", "scope": "user", "limit": 2}));
    assert_eq!(third.next(SOON).await, None, "and the stream ends");

    // The total bound: dave's first is the third stream; his second is past it.
    let (_, _, mut d1) = open(&console, "/events/clusters", &dave).await;
    assert!(d1.version(SOON).await.is_some());
    let (_, _, mut d2) = open(&console, "/events/clusters", &dave).await;
    let (event, data) = d2.next(SOON).await.expect("the bound is said");
    assert_eq!(event, "bound");
    assert!(data.contains(r#""scope":"total""#) && data.contains(r#""limit":3"#), "{data}");

    // A page closed gives its place back.
    drop(first);
    tokio::time::sleep(Duration::from_millis(100)).await;
    let (_, _, mut again) = open(&console, "/events/clusters", &carol).await;
    assert!(again.version(SOON).await.is_some(), "carol's place was given back");
}

/// `make bench-scale`: many open detail pages against a release console in
/// another process (`scripts/bench-scale.sh` starts it and signs the users
/// in). `KUBEBYON_BENCH_BASE` is its address (`127.0.0.1:PORT`),
/// `KUBEBYON_BENCH_PID` its process, `KUBEBYON_BENCH_PAGES` a file of lines
/// `<cookie> <cluster id>` (one per user), `KUBEBYON_BENCH_PER_USER` the
/// pages each user opens (default 100), `KUBEBYON_BENCH_SECS` how long they
/// stay open with nothing changing (default 60). Prints how many streams
/// were accepted, the heartbeats they received and the server's CPU over
/// the window (from `/proc/<pid>/stat`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark: make bench-scale"]
async fn bench_open_pages() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let env = |k: &str| std::env::var(k).unwrap_or_else(|_| panic!("{k} is not set: run make bench-scale"));
    let base = env("KUBEBYON_BENCH_BASE");
    let pid = env("KUBEBYON_BENCH_PID");
    let per_user: usize = std::env::var("KUBEBYON_BENCH_PER_USER").ok().and_then(|v| v.parse().ok()).unwrap_or(100);
    let secs: u64 = std::env::var("KUBEBYON_BENCH_SECS").ok().and_then(|v| v.parse().ok()).unwrap_or(60);
    let pages: Vec<(String, String)> = std::fs::read_to_string(env("KUBEBYON_BENCH_PAGES"))
        .unwrap()
        .lines()
        .filter_map(|l| l.split_once(' ').map(|(c, id)| (c.to_owned(), id.to_owned())))
        .collect();
    let accepted = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let heartbeats = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let refused = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for (cookie, id) in &pages {
        for _ in 0..per_user {
            let (base, cookie, id) = (base.clone(), cookie.clone(), id.clone());
            let (accepted, heartbeats, refused) = (accepted.clone(), heartbeats.clone(), refused.clone());
            tasks.push(tokio::spawn(async move {
                let mut s = tokio::net::TcpStream::connect(&base).await.expect("connect");
                let req = format!(
                    "GET /events/clusters/{id} HTTP/1.1\r\nHost: {base}\r\nCookie: {cookie}\r\nAccept: text/event-stream\r\n\r\n"
                );
                s.write_all(req.as_bytes()).await.unwrap();
                let mut buf = vec![0u8; 4096];
                let mut seen_version = false;
                let deadline = tokio::time::Instant::now() + Duration::from_secs(secs + 40);
                while let Ok(Ok(n)) = tokio::time::timeout_at(deadline, s.read(&mut buf)).await {
                    if n == 0 {
                        break;
                    }
                    let text = String::from_utf8_lossy(&buf[..n]);
                    if !seen_version && text.contains("event: version") {
                        seen_version = true;
                        accepted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                    if text.contains("event: bound") {
                        refused.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                    let beats = text.lines().filter(|l| l.starts_with(':')).count();
                    heartbeats.fetch_add(beats, std::sync::atomic::Ordering::Relaxed);
                }
            }));
        }
    }
    let want = pages.len() * per_user;
    let t = std::time::Instant::now();
    while accepted.load(std::sync::atomic::Ordering::Relaxed) + refused.load(std::sync::atomic::Ordering::Relaxed)
        < want
        && t.elapsed() < Duration::from_secs(60)
    {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    println!(
        "== {want} open detail pages of {} users: {} streams accepted, {} refused, all open after {:.1} s",
        pages.len(),
        accepted.load(std::sync::atomic::Ordering::Relaxed),
        refused.load(std::sync::atomic::Ordering::Relaxed),
        t.elapsed().as_secs_f64()
    );
    let cpu = || {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        let fields: Vec<&str> = stat.rsplit_once(')').unwrap().1.split_whitespace().collect();
        fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
    };
    let rss_pid: u32 = pid.parse().expect("KUBEBYON_BENCH_PID is a pid");
    let rss = || support::rss_kib(Some(rss_pid));
    let (beats0, cpu0, t0) = (heartbeats.load(std::sync::atomic::Ordering::Relaxed), cpu(), std::time::Instant::now());
    tokio::time::sleep(Duration::from_secs(secs)).await;
    let (beats1, cpu1, elapsed) = (heartbeats.load(std::sync::atomic::Ordering::Relaxed), cpu(), t0.elapsed());
    let ticks = 100.0; // USER_HZ on Linux
    let cpu_share = (cpu1 - cpu0) as f64 / ticks / elapsed.as_secs_f64() * 100.0;
    println!(
        "nothing changing for {:.0} s: server CPU {:.2} % of one core, {} heartbeats received ({:.1} per stream), server RSS {} KiB",
        elapsed.as_secs_f64(),
        cpu_share,
        beats1 - beats0,
        (beats1 - beats0) as f64 / want as f64,
        rss()
    );
    for t in tasks {
        t.abort();
    }
}
