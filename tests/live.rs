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

    // Deleting the cluster is announced too (the page then finds it gone).
    let r = console.send("DELETE", &format!("/api/console/clusters/{a}"), Some(&alice), None, "").await;
    assert!(r.status.is_success(), "{}", r.body);
    assert!(cluster.version(SOON).await.expect("the deletion request is announced") > v1);
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
