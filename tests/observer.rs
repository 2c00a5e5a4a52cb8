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
use kubebyon::domain::{ClusterName, ClusterSpec, ClusterStatus, Phase, PublicAccess, PublicAccessMode, Resources};
use kubebyon::server::controllers::reconciler::Context;
use kubebyon::server::db;
use kubebyon::server::testing::reconcile_pass;

const CLUSTERS: usize = 300;

fn read() -> u64 {
    db::clusters::ROWS_READ.load(Ordering::Relaxed)
}

#[tokio::test]
async fn a_pass_with_nothing_changed_reads_no_cluster_row() {
    let host = TestHost::shared(None);
    let client = host.client().await.expect("client");
    let (url, _dir) = support::sqlite_url();
    let pool = db::connect(&url).await.unwrap();
    let owner = support::user(&pool, "alice", Role::User).await;
    for i in 0..CLUSTERS {
        let spec = ClusterSpec {
            name: ClusterName::parse(&format!("c{i}")).unwrap(),
            resources: Resources::default(),
            public_access: PublicAccess::Disabled,
            own_nodes: false,
            placement: Default::default(),
        };
        db::clusters::insert(&pool, owner.id, &spec, PublicAccessMode::NodePort, None).await.unwrap();
    }
    // As if the host had installed every one: their operations done, each
    // Ready for its generation (settled).
    sqlx::query("UPDATE cluster_operations SET state = 'done'").execute(&pool).await.unwrap();
    sqlx::query("UPDATE clusters SET phase = $1, observed_generation = generation")
        .bind(Phase::Ready.as_str())
        .execute(&pool)
        .await
        .unwrap();
    let ctx = Context::new(client, pool.clone(), AddressRequest::None);

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
    let id: i64 = sqlx::query_scalar("SELECT id FROM clusters WHERE name = 'c7'").fetch_one(&pool).await.unwrap();
    let failed = ClusterStatus { phase: Phase::Failed, observed_generation: 1, ..ClusterStatus::default() };
    assert!(db::clusters::write_status(&pool, id, &failed).await.unwrap());
    let before = read();
    reconcile_pass(&ctx, false).await.expect("pass");
    reconcile_pass(&ctx, false).await.expect("pass");
    assert_eq!(read() - before, 1, "the changed row only");
}
