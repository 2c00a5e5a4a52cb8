//! Load: 200 signed-in readers and 50 writers at once for a bounded time,
//! through the real router, on a SQLite file and on PostgreSQL. Every answer
//! must be the expected success (error rate 0; never "database is locked");
//! p50/p99 latencies are printed (figures in docs/performance.md, not asserted).
//! `KUBEBYON_LOAD_SECS` (default 5) sets how long each backend is loaded.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use kubebyon::server::auth::session;
use serde_json::json;
use support::http::Console;

const READERS: usize = 200;
const WRITERS: usize = 50;

#[derive(Default)]
struct Tally {
    reads: Vec<Duration>,
    writes: Vec<Duration>,
    errors: Vec<String>,
}

fn pct(v: &mut [Duration], p: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort();
    v[((v.len() as f64 - 1.0) * p).round() as usize].as_secs_f64() * 1000.0
}

async fn session_for(c: &Console, username: &str) -> String {
    let id: i64 =
        sqlx::query_scalar("SELECT id FROM users WHERE username = $1").bind(username).fetch_one(&c.pool).await.unwrap();
    let token = session::new_token();
    kubebyon::server::db::sessions::insert(&c.pool, &session::token_hash(&token), id, 3600).await.unwrap();
    format!("{}={token}", session::COOKIE)
}

async fn load(backend: &str, c: Arc<Console>) {
    let secs: u64 = std::env::var("KUBEBYON_LOAD_SECS").ok().and_then(|v| v.parse().ok()).unwrap_or(5);
    // Ten owners with 20 clusters each to read; readers and writers spread
    // over them. Quotas are not what this measures: lifted.
    let mut settings = kubebyon::server::db::settings::load(&c.pool).await.unwrap();
    settings.quota = kubebyon::domain::quota::Quota::UNLIMITED;
    kubebyon::server::db::settings::save(&c.pool, &settings).await.unwrap();
    let mut owners = Vec::new();
    for o in 0..10 {
        let name = format!("owner{o}");
        c.user(&name, "correct horse battery", false).await;
        let cookie = session_for(&c, &name).await;
        for i in 0..20 {
            let body = json!({"name": format!("seed-{o}-{i}"), "resources": {"cpu": "1", "memory_gib": 2, "storage_gib": 5},
                "public_access": {"enabled": true, "mode": "nodeport"}});
            assert_eq!(c.json("POST", "/api/console/clusters", Some(&cookie), body).await.status, 201);
        }
        owners.push(cookie);
    }
    let stop = Arc::new(AtomicBool::new(false));
    let tally = Arc::new(std::sync::Mutex::new(Tally::default()));
    let mut tasks = Vec::new();
    for r in 0..READERS {
        let (c, stop, tally, cookie) = (c.clone(), stop.clone(), tally.clone(), owners[r % owners.len()].clone());
        tasks.push(tokio::spawn(async move {
            let mut n = 0usize;
            while !stop.load(Ordering::Relaxed) {
                // The list API, a page of the list as HTML, and one cluster.
                let path = match n % 3 {
                    0 => "/api/console/clusters?page=1".to_owned(),
                    1 => "/clusters".to_owned(),
                    _ => "/api/console/clusters?q=seed".to_owned(),
                };
                n += 1;
                let t = Instant::now();
                let reply = c.get(&path, Some(&cookie)).await;
                let took = t.elapsed();
                let mut tally = tally.lock().unwrap();
                if reply.status == 200 {
                    tally.reads.push(took);
                } else {
                    tally.errors.push(format!(
                        "GET {path}: {} {}",
                        reply.status,
                        &reply.body[..reply.body.len().min(200)]
                    ));
                }
            }
        }));
    }
    for w in 0..WRITERS {
        let (c, stop, tally, cookie) = (c.clone(), stop.clone(), tally.clone(), owners[w % owners.len()].clone());
        let backend = backend.to_owned();
        tasks.push(tokio::spawn(async move {
            let mut n = 0usize;
            while !stop.load(Ordering::Relaxed) {
                // Create, change and delete a cluster of one's own.
                let name = format!("w{w}-{n}");
                n += 1;
                let body = json!({"name": name, "resources": {"cpu": "1", "memory_gib": 2, "storage_gib": 5},
                    "public_access": {"enabled": false}});
                let t = Instant::now();
                let created = c.json("POST", "/api/console/clusters", Some(&cookie), body).await;
                let mut failures = Vec::new();
                if created.status != 201 {
                    failures.push(format!("{backend} create: {} {}", created.status, created.body));
                } else {
                    let id = created.json()["id"].as_i64().unwrap();
                    let patch = json!({"resources": {"cpu": "2", "memory_gib": 4, "storage_gib": 5}});
                    let r = c.json("PATCH", &format!("/api/console/clusters/{id}"), Some(&cookie), patch).await;
                    if r.status != 200 {
                        failures.push(format!("{backend} patch: {} {}", r.status, r.body));
                    }
                    let r = c.send("DELETE", &format!("/api/console/clusters/{id}"), Some(&cookie), None, "").await;
                    if r.status != 202 {
                        failures.push(format!("{backend} delete: {} {}", r.status, r.body));
                    }
                }
                let took = t.elapsed() / 3;
                let mut tally = tally.lock().unwrap();
                if failures.is_empty() {
                    tally.writes.extend([took; 3]);
                } else {
                    tally.errors.extend(failures);
                }
            }
        }));
    }
    let started = Instant::now();
    tokio::time::sleep(Duration::from_secs(secs)).await;
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await.expect("no task panicked");
    }
    let elapsed = started.elapsed().as_secs_f64();
    let mut t = tally.lock().unwrap();
    let (reads, writes) = (t.reads.len(), t.writes.len());
    let (r50, r99) = (pct(&mut t.reads, 0.5), pct(&mut t.reads, 0.99));
    let (w50, w99) = (pct(&mut t.writes, 0.5), pct(&mut t.writes, 0.99));
    println!(
        "load {backend}: {READERS} readers + {WRITERS} writers for {elapsed:.1} s: {reads} reads ({:.0}/s, p50 {r50:.1} ms, p99 {r99:.1} ms), \
         {writes} writes ({:.0}/s, p50 {w50:.1} ms, p99 {w99:.1} ms), {} errors",
        reads as f64 / elapsed,
        writes as f64 / elapsed,
        t.errors.len()
    );
    let locked = t.errors.iter().filter(|e| e.contains("locked")).count();
    assert_eq!(locked, 0, "database is locked: {:?}", &t.errors[..t.errors.len().min(5)]);
    assert!(t.errors.is_empty(), "{} errors, first: {:?}", t.errors.len(), &t.errors[..t.errors.len().min(5)]);
    assert!(reads > 0 && writes > 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn readers_and_writers_at_once_on_sqlite_and_postgres() {
    for db in support::each_backend().await {
        let c = Arc::new(Console::new(db.pool.clone()));
        load(db.backend, c).await;
    }
}
