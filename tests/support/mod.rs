//! Test support: a fresh database per test on each real backend — a SQLite
//! file in a temporary folder, and a new database on the PostgreSQL server
//! named by `KUBEBYON_TEST_POSTGRES_URL` (started by `scripts/test.sh`).

#![allow(dead_code)]

pub mod bare;
pub mod calls;
pub mod host;
pub mod http;
pub mod routes;

use std::sync::atomic::{AtomicU32, Ordering};

use kubebyon::domain::user::{CurrentUser, Role, Username};
use kubebyon::server::db;
use sqlx::AnyPool;
use tempfile::TempDir;

pub struct TestDb {
    pub pool: AnyPool,
    pub url: String,
    pub backend: &'static str,
    _dir: Option<TempDir>,
}

pub fn sqlite_url() -> (String, TempDir) {
    let dir = tempfile::tempdir().expect("temp dir");
    (db::sqlite_url(dir.path()).expect("sqlite url"), dir)
}

/// A new, empty PostgreSQL database on the test server.
pub async fn postgres_url() -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    let base = std::env::var("KUBEBYON_TEST_POSTGRES_URL")
        .expect("KUBEBYON_TEST_POSTGRES_URL is not set: run the tests through `make test` (scripts/test.sh)");
    let name = format!("t_{}_{}", std::process::id(), N.fetch_add(1, Ordering::SeqCst));
    let admin = db::connect_only(&base).await.expect("connect to the test PostgreSQL server");
    sqlx::query(&format!("CREATE DATABASE {name}")).execute(&admin).await.expect("create database");
    admin.close().await;
    let (prefix, _) = base.rsplit_once('/').expect("url has a database");
    format!("{prefix}/{name}")
}

/// Both backends, migrated to the latest schema. Without a PostgreSQL server
/// (`KUBEBYON_TEST_POSTGRES_URL`, set by `make test`) the PostgreSQL half is
/// skipped with a notice on stderr — unless `KUBEBYON_REQUIRE_POSTGRES=1`
/// (also set by `make test`), so CI can never skip it silently.
pub async fn each_backend() -> Vec<TestDb> {
    let (sqlite, dir) = sqlite_url();
    let mut dbs = vec![TestDb {
        pool: db::connect(&sqlite).await.expect("sqlite"),
        url: sqlite,
        backend: "sqlite",
        _dir: Some(dir),
    }];
    if let Some(pg) = maybe_postgres_url().await {
        dbs.push(TestDb { pool: db::connect(&pg).await.expect("postgres"), url: pg, backend: "postgres", _dir: None });
    }
    dbs
}

/// A fresh PostgreSQL database, or `None` (with a notice) when no server is
/// configured and none is required (see [`each_backend`]).
pub async fn maybe_postgres_url() -> Option<String> {
    let required = std::env::var("KUBEBYON_REQUIRE_POSTGRES").is_ok_and(|v| v == "1");
    if std::env::var("KUBEBYON_TEST_POSTGRES_URL").is_err() && !required {
        eprintln!("NOTICE: KUBEBYON_TEST_POSTGRES_URL not set: PostgreSQL half skipped (make test runs it)");
        return None;
    }
    Some(postgres_url().await)
}

pub async fn user(pool: &AnyPool, name: &str, role: Role) -> CurrentUser {
    let id = db::users::insert(pool, &Username::parse(name).unwrap(), "not-a-real-hash", role).await.unwrap();
    CurrentUser { id, username: name.to_owned(), role }
}

/// A cluster's spec with the default resources and placement, no own nodes.
pub fn spec(name: &str, public_access: kubebyon::domain::PublicAccess) -> kubebyon::domain::ClusterSpec {
    kubebyon::domain::ClusterSpec {
        name: kubebyon::domain::ClusterName::parse(name).unwrap(),
        resources: Default::default(),
        public_access,
        own_nodes: false,
        placement: Default::default(),
        telemetry: kubebyon::domain::Telemetry::Off,
    }
}

/// The resident set in a `/proc/<pid>/status` text (`VmRSS`), in KiB.
pub fn vm_rss_kib(status: &str) -> Option<u64> {
    vm_kib(status, "VmRSS:")
}

fn vm_kib(status: &str, field: &str) -> Option<u64> {
    status.lines().find(|l| l.starts_with(field))?.split_whitespace().nth(1)?.parse().ok()
}

/// Sets this process's peak resident set (`VmHWM`) to its resident set now
/// (`/proc/self/clear_refs` `5`, Linux 4.0 and later) and returns that, in KiB.
pub fn reset_peak_rss_kib() -> u64 {
    std::fs::write("/proc/self/clear_refs", "5").expect("the peak resident set can be reset");
    rss_kib(None)
}

/// This process's peak resident set since [`reset_peak_rss_kib`] (`VmHWM`), in KiB.
pub fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status").ok().as_deref().and_then(|s| vm_kib(s, "VmHWM:")).unwrap_or(0)
}

/// A process's resident set in KiB (`pid` `None`: this process); 0 when unreadable.
pub fn rss_kib(pid: Option<u32>) -> u64 {
    let path = pid.map_or("/proc/self/status".to_owned(), |p| format!("/proc/{p}/status"));
    std::fs::read_to_string(path).ok().as_deref().and_then(vm_rss_kib).unwrap_or(0)
}

/// How well the best single threshold on a measure sorts samples `a` from
/// samples `b` (0.5: a coin; 1.0: perfectly): what an observer timing
/// answers could do at best with one cut.
pub fn best_threshold_accuracy(a: &[f64], b: &[f64]) -> f64 {
    let total = (a.len() + b.len()) as f64;
    let mut cuts: Vec<f64> = a.iter().chain(b).copied().collect();
    cuts.push(f64::NEG_INFINITY);
    cuts.iter()
        .map(|&cut| {
            // `a` at or below the cut, `b` above it (or the other way round).
            let right = a.iter().filter(|&&x| x <= cut).count() + b.iter().filter(|&&x| x > cut).count();
            let right = right as f64 / total;
            right.max(1.0 - right)
        })
        .fold(0.5, f64::max)
}
