//! The observer works from change (issue 26): a reconciler pass over a
//! database of settled clusters reads no cluster row when nothing changed
//! (counted by `db::clusters::ROWS_READ`, which counts every row decoded in
//! this process: this binary runs one test), and reads the one row that
//! changed when one did. Against a bare API server (nothing installed: no
//! host reads are needed for settled clusters between full passes).

mod support;

use std::sync::atomic::Ordering;

use hostsim::testhost::TestHost;
use kubebyon::domain::render::AddressRequest;
use kubebyon::domain::user::Role;
use kubebyon::domain::{ClusterStatus, Phase, PublicAccess, PublicAccessMode};
use kubebyon::server::controllers::reconciler::Context;
use kubebyon::server::db;
use kubebyon::server::testing::reconcile_pass;

const CLUSTERS: usize = 300;

fn read() -> u64 {
    db::clusters::ROWS_READ.load(Ordering::Relaxed)
}

/// A database of `n` settled clusters (public access off, Ready for their
/// generation, operations done: as if the host had installed every one),
/// and a reconciler on the bare test host.
async fn settled(n: usize) -> (Context, sqlx::AnyPool, tempfile::TempDir) {
    let host = TestHost::shared(None);
    let client = host.client().await.expect("client");
    let (url, dir) = support::sqlite_url();
    let pool = db::connect(&url).await.unwrap();
    let owner = support::user(&pool, "alice", Role::User).await;
    for i in 0..n {
        let spec = support::spec(&format!("c{i}"), PublicAccess::Disabled);
        db::clusters::insert(&pool, owner.id, &spec, PublicAccessMode::NodePort, None).await.unwrap();
    }
    sqlx::query("UPDATE cluster_operations SET state = 'done'").execute(&pool).await.unwrap();
    sqlx::query("UPDATE clusters SET phase = $1, observed_generation = generation")
        .bind(Phase::Ready.as_str())
        .execute(&pool)
        .await
        .unwrap();
    let host = std::sync::Arc::new(kubebyon::server::host::Host::new(client, pool.clone(), AddressRequest::None));
    (Context::new(host, pool.clone()), pool, dir)
}

/// Marks cluster `c<i>` failed (a change the observer must see).
async fn change(pool: &sqlx::AnyPool, i: usize) {
    let id: i64 = sqlx::query_scalar("SELECT id FROM clusters WHERE name = $1")
        .bind(format!("c{i}"))
        .fetch_one(pool)
        .await
        .unwrap();
    let failed = ClusterStatus { phase: Phase::Failed, observed_generation: 1, ..ClusterStatus::default() };
    assert!(db::clusters::write_status(pool, id, &failed).await.unwrap());
}

#[tokio::test]
async fn a_pass_with_nothing_changed_reads_no_cluster_row() {
    let (ctx, pool, _dir) = settled(CLUSTERS).await;

    // The first pass reads the table once (the roster starts whole).
    let before = read();
    reconcile_pass(&ctx, false).await.expect("first pass");
    assert_eq!(read() - before, CLUSTERS as u64, "the whole table, once");

    // Nothing changed: passes, and a full pass over the host, read no row.
    let before = read();
    for _ in 0..10 {
        reconcile_pass(&ctx, false).await.expect("pass");
    }
    reconcile_pass(&ctx, true).await.expect("full pass");
    reconcile_pass(&ctx, false).await.expect("pass");
    assert_eq!(read() - before, 0, "no cluster row read while nothing changed");

    // One cluster changed: that row, once.
    change(&pool, 7).await;
    let before = read();
    reconcile_pass(&ctx, false).await.expect("pass");
    reconcile_pass(&ctx, false).await.expect("pass");
    assert_eq!(read() - before, 1, "the changed row only");
}

/// `make bench-scale`: the observer's database reads per pass with
/// `KUBEBYON_BENCH_DB_CLUSTERS` clusters (default 10,000) in the database.
#[tokio::test]
#[ignore = "benchmark: make bench-scale"]
async fn bench_observer_reads() {
    let n: usize = std::env::var("KUBEBYON_BENCH_DB_CLUSTERS").ok().and_then(|v| v.parse().ok()).unwrap_or(10_000);
    let t = std::time::Instant::now();
    let (ctx, pool, _dir) = settled(n).await;
    println!("== observer: {n} clusters in the database (SQLite; seeded in {:.1} s)", t.elapsed().as_secs_f64());
    let (before, t) = (read(), std::time::Instant::now());
    reconcile_pass(&ctx, false).await.expect("first pass");
    println!(
        "first pass: {} rows (the whole table, once), {:.1} ms (every cluster looked at on the host, by GETs: this bench runs no watch caches)",
        read() - before,
        t.elapsed().as_secs_f64() * 1e3
    );
    let passes = 50;
    let (before, t) = (read(), std::time::Instant::now());
    for _ in 0..passes {
        reconcile_pass(&ctx, false).await.expect("pass");
    }
    println!(
        "nothing changed: {} rows read in {passes} passes, {:.2} ms per pass (queue, lease, counter; one LIST of nodes)",
        read() - before,
        t.elapsed().as_secs_f64() * 1e3 / f64::from(passes)
    );
    for changed in [1, 10, 100] {
        for i in 0..changed {
            change(&pool, i * 7 % n).await;
        }
        let (before, t) = (read(), std::time::Instant::now());
        reconcile_pass(&ctx, false).await.expect("pass");
        println!(
            "{changed} changed: {} rows read in the next pass, {:.1} ms",
            read() - before,
            t.elapsed().as_secs_f64() * 1e3
        );
        // Back to settled for the next round.
        sqlx::query("UPDATE clusters SET phase = $1").bind(Phase::Ready.as_str()).execute(&pool).await.unwrap();
        reconcile_pass(&ctx, false).await.expect("pass");
    }
}
