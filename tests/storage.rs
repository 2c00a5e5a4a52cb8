//! Storage against real SQLite files and a real PostgreSQL server: the seed's
//! upgrade story, one writer per column group, and the durable operation queue.

mod support;

use std::path::Path;

use kubebyon::domain::change::Operation;
use kubebyon::domain::user::Role;
use kubebyon::domain::{
    ClusterName, ClusterSpec, ClusterStatus, ConnectionStatus, Host, Phase, PublicAccess, PublicAccessMode, Resources,
    SystemSettings,
};
use kubebyon::server::db;
use sqlx::migrate::Migrator;
use support::{each_backend, sqlite_url, user};

fn spec(name: &str, access: PublicAccess) -> ClusterSpec {
    ClusterSpec {
        name: ClusterName::parse(name).unwrap(),
        resources: Resources::default(),
        public_access: access,
        own_nodes: false,
        placement: Default::default(),
        telemetry: kubebyon::domain::Telemetry::Off,
    }
}

fn lb(host: &str) -> PublicAccess {
    PublicAccess::LoadBalancer { host: Host::parse(host).unwrap() }
}

/// Seed 5.12/5.13 "old data": a database made at the schema before the mode
/// column, holding clusters, upgrades cleanly and every old cluster is NodePort.
#[tokio::test]
async fn legacy_clusters_read_as_nodeport_after_upgrade() {
    let (sqlite, _dir) = sqlite_url();
    let pg = support::maybe_postgres_url().await.map(|u| (u, "postgres"));
    for (url, dialect) in std::iter::once((sqlite, "sqlite")).chain(pg) {
        // Only the first migration: the old schema.
        let old = tempfile::tempdir().unwrap();
        let first =
            std::fs::read_dir(Path::new("migrations").join(dialect)).unwrap().map(|e| e.unwrap().path()).min().unwrap();
        std::fs::copy(&first, old.path().join(first.file_name().unwrap())).unwrap();
        let pool = db::connect_only(&url).await.unwrap();
        Migrator::new(old.path()).await.unwrap().run(&pool).await.unwrap();

        let has_mode: bool = sqlx::query("SELECT public_access_mode FROM clusters").fetch_all(&pool).await.is_ok();
        assert!(!has_mode, "{dialect}: the old schema has no mode column");
        let owner = user(&pool, "legacy", Role::User).await;
        for (name, enabled, host) in [("old-a", true, Some("10.1.2.3")), ("old-b", false, None), ("old-c", true, None)]
        {
            sqlx::query(
                "INSERT INTO clusters (owner_id, name, cpu_millis, memory_gib, storage_gib, public_access_enabled, \
                 control_plane_host, public_access_port, api_endpoint, created_at, updated_at) \
                 VALUES ($1, $2, 1000, 2, 10, $3, $4, 30443, 'https://10.1.2.3:30443', 1, 1)",
            )
            .bind(owner.id)
            .bind(name)
            .bind(enabled)
            .bind(host)
            .execute(&pool)
            .await
            .unwrap();
        }
        pool.close().await;

        // The console starts: full migration.
        let pool = db::connect(&url).await.unwrap();
        let modes: Vec<String> =
            sqlx::query_scalar("SELECT public_access_mode FROM clusters ORDER BY name").fetch_all(&pool).await.unwrap();
        assert_eq!(modes, ["nodeport"; 3], "{dialect}");
        let clusters = db::clusters::list(&pool, None).await.unwrap();
        assert_eq!(clusters.len(), 3);
        assert_eq!(
            clusters[0].spec.public_access,
            PublicAccess::NodePort { host: Some(Host::parse("10.1.2.3").unwrap()) },
            "{dialect}"
        );
        assert_eq!(clusters[1].spec.public_access, PublicAccess::Disabled, "{dialect}");
        assert_eq!(clusters[2].spec.public_access, PublicAccess::NodePort { host: None }, "{dialect}");
        assert_eq!(clusters[0].status.public_access_port, Some(30443), "observed fields survive: {dialect}");
        // Clusters made before keep vCluster's telemetry as the chart has it
        // (their values do not change, so no control plane restarts).
        for c in &clusters {
            assert_eq!(c.spec.telemetry, kubebyon::domain::Telemetry::ChartDefault, "{dialect}: {}", c.spec.name);
        }
        // A new cluster after the upgrade can be LoadBalancer.
        let id = db::clusters::insert(
            &pool,
            owner.id,
            &spec("new-lb", lb("api.example.com")),
            PublicAccessMode::NodePort,
            None,
        )
        .await
        .unwrap();
        let stored = db::clusters::get(&pool, id).await.unwrap().unwrap().spec;
        assert_eq!(stored.public_access, lb("api.example.com"));
        assert_eq!(stored.telemetry, kubebyon::domain::Telemetry::Off, "{dialect}: as created");
    }
}

/// Migration 6 on a database of the earlier schema: a cluster the console's
/// records show it applied (an observed generation, or a finished create or
/// update) is marked to be taken over once; one never applied is not; no
/// cluster has a namespace UID yet. The installation id is made once and
/// read the same after, per database.
#[tokio::test]
async fn ownership_migration_marks_only_what_the_console_applied() {
    let (sqlite, _dir) = sqlite_url();
    let pg = support::maybe_postgres_url().await.map(|u| (u, "postgres"));
    let mut ids = Vec::new();
    for (url, dialect) in std::iter::once((sqlite, "sqlite")).chain(pg) {
        let old = tempfile::tempdir().unwrap();
        for e in std::fs::read_dir(Path::new("migrations").join(dialect)).unwrap() {
            let path = e.unwrap().path();
            if !path.file_name().unwrap().to_str().unwrap().contains("host_ownership") {
                std::fs::copy(&path, old.path().join(path.file_name().unwrap())).unwrap();
            }
        }
        let pool = db::connect_only(&url).await.unwrap();
        Migrator::new(old.path()).await.unwrap().run(&pool).await.unwrap();
        let owner = user(&pool, "earlier", Role::User).await;
        let mut made = Vec::new();
        for name in ["observed", "finished", "queued"] {
            let s = spec(name, PublicAccess::Disabled);
            made.push(db::clusters::insert(&pool, owner.id, &s, PublicAccessMode::NodePort, None).await.unwrap());
        }
        let [observed, finished, queued] = made[..] else { unreachable!() };
        sqlx::query("UPDATE clusters SET observed_generation = 1 WHERE id = $1")
            .bind(observed)
            .execute(&pool)
            .await
            .unwrap();
        sqlx::query("UPDATE cluster_operations SET state = 'done' WHERE cluster_id = $1")
            .bind(finished)
            .execute(&pool)
            .await
            .unwrap();
        pool.close().await;

        let pool = db::connect(&url).await.unwrap();
        for (id, adopt) in [(observed, true), (finished, true), (queued, false)] {
            let record = db::clusters::host_record(&pool, id).await.unwrap();
            assert_eq!(record, db::clusters::HostRecord { namespace_uid: None, adopt_legacy: adopt }, "{dialect} {id}");
        }
        db::clusters::record_namespace(&pool, observed, "uid-1").await.unwrap();
        db::clusters::end_adoption(&pool, observed).await.unwrap();
        let record = db::clusters::host_record(&pool, observed).await.unwrap();
        assert_eq!(record, db::clusters::HostRecord { namespace_uid: Some("uid-1".into()), adopt_legacy: false });

        let id = db::shared::installation_id(&pool).await.unwrap();
        assert_eq!(id.len(), 32, "{dialect}: {id}");
        assert_eq!(db::shared::installation_id(&pool).await.unwrap(), id, "{dialect}: made once");
        ids.push(id);
    }
    if let [a, b] = &ids[..] {
        assert_ne!(a, b, "each database its own id");
    }
}

#[tokio::test]
async fn create_stores_spec_and_operation_together() {
    for t in each_backend().await {
        let alice = user(&t.pool, "alice", Role::User).await;
        let s = spec("dev", lb("api.example.com"));
        let id = db::clusters::insert(&t.pool, alice.id, &s, PublicAccessMode::NodePort, None).await.unwrap();
        let c = db::clusters::get(&t.pool, id).await.unwrap().unwrap();
        assert_eq!(c.spec, s, "{}", t.backend);
        assert_eq!((c.generation, c.status.observed_generation), (1, 0));
        assert!(c.waiting_for_host());
        assert_eq!(c.status.phase, Phase::Pending);
        assert_eq!(c.owner, "alice");
        let events = db::operations::for_cluster(&t.pool, id).await.unwrap();
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].operation().unwrap(), Operation::Create { spec: s.clone() });
        assert_eq!(events[0].requested_by_name.as_deref(), Some("alice"));

        // Duplicate names are refused by the database, and nothing else is written.
        let err = db::clusters::insert(&t.pool, alice.id, &s, PublicAccessMode::NodePort, None).await.unwrap_err();
        assert!(err.is_unique_violation(), "{}: {err}", t.backend);
        let ops: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM cluster_operations").fetch_one(&t.pool).await.unwrap();
        assert_eq!(ops, 1, "{}: no half-written operation", t.backend);
    }
}

/// Spec and status have one writer each: a user's edit never touches what the
/// host reported, and a status write never touches what the user asked.
#[tokio::test]
async fn spec_and_status_writers_do_not_overwrite_each_other() {
    for t in each_backend().await {
        let bob = user(&t.pool, "bob", Role::User).await;
        let id = db::clusters::insert(
            &t.pool,
            bob.id,
            &spec("np", PublicAccess::NodePort { host: None }),
            PublicAccessMode::NodePort,
            None,
        )
        .await
        .unwrap();
        let status = ClusterStatus {
            phase: Phase::Ready,
            reason: "ok".into(),
            public_access_port: Some(31443),
            api_endpoint: Some("https://198.51.100.1:31443".into()),
            kubeconfig_available: true,
            connection_status: ConnectionStatus::Ok,
            observed_generation: 1,
        };
        assert!(db::clusters::write_status(&t.pool, id, &status).await.unwrap());

        let new = spec("np", lb("vip.example.com"));
        let op = Operation::Update { changes: vec![] };
        let generation = db::clusters::update_spec(&t.pool, id, 1, &new, PublicAccessMode::NodePort, &op, bob.id, None)
            .await
            .unwrap();
        assert_eq!(generation, Some(2));
        let c = db::clusters::get(&t.pool, id).await.unwrap().unwrap();
        assert_eq!(c.spec, new);
        assert_eq!(c.status, status, "{}: user edit left status alone", t.backend);
        assert!(c.waiting_for_host());
        // Stored as observed, but never shown as current: the old NodePort port
        // and endpoint are withheld from pages and the API until the host catches up.
        let shown = c.clone().shown().status;
        assert_eq!((shown.public_access_port, shown.api_endpoint, shown.kubeconfig_available), (None, None, false));

        // A stale writer (expected generation 1) loses; nothing changes.
        let stale = db::clusters::update_spec(
            &t.pool,
            id,
            1,
            &spec("np", PublicAccess::Disabled),
            PublicAccessMode::NodePort,
            &op,
            bob.id,
            None,
        )
        .await
        .unwrap();
        assert_eq!(stale, None);
        assert_eq!(db::clusters::get(&t.pool, id).await.unwrap().unwrap().spec, new);

        // The reconciler's whole-status write clears the old port (never merged).
        let lb_status = ClusterStatus {
            phase: Phase::Ready,
            public_access_port: None,
            api_endpoint: Some("https://vip.example.com:443".into()),
            observed_generation: 2,
            ..status.clone()
        };
        db::clusters::write_status(&t.pool, id, &lb_status).await.unwrap();
        // A late writer still at generation 1 cannot roll the status back.
        assert!(!db::clusters::write_status(&t.pool, id, &status).await.unwrap(), "{}", t.backend);
        let c = db::clusters::get(&t.pool, id).await.unwrap().unwrap();
        assert_eq!(c.status.public_access_port, None);
        assert_eq!(c.spec, new, "{}: status write left spec alone", t.backend);
        assert!(!c.waiting_for_host());
    }
}

/// The queue is durable and claimed once: two workers never get the same row,
/// a crashed worker's claim expires, and rows survive reopening the database.
/// One tenant cannot starve the queue: user A's 5,000 queued edits (50
/// clusters, 100 edits each, written to the queue directly) do not delay user
/// B's create beyond two claims, since claims rotate across owners; and one
/// claim of a cluster finishes its other pending edits up to the generation
/// it applied (superseded: the handler applies the current spec anyway).
#[tokio::test]
async fn claims_rotate_across_owners_and_supersede_a_clusters_queued_edits() {
    for t in each_backend().await {
        let (pool, backend) = (&t.pool, t.backend);
        let a = user(pool, "tenant-a", Role::User).await;
        let b = user(pool, "tenant-b", Role::User).await;
        for i in 0..50 {
            let s = spec(&format!("a{i}"), PublicAccess::Disabled);
            db::clusters::insert(pool, a.id, &s, PublicAccessMode::NodePort, None).await.unwrap();
        }
        sqlx::query(
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 100) \
             INSERT INTO cluster_operations (cluster_id, kind, generation, detail, requested_by, created_at) \
             SELECT c.id, 'update', 1 + n.i, '{\"kind\":\"update\",\"changes\":[]}', c.owner_id, 1 \
             FROM clusters c, n WHERE c.owner_id = $1",
        )
        .bind(a.id)
        .execute(pool)
        .await
        .unwrap();
        sqlx::query("UPDATE clusters SET generation = 101 WHERE owner_id = $1").bind(a.id).execute(pool).await.unwrap();
        let queued: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM cluster_operations WHERE state = 'pending'")
            .fetch_one(pool)
            .await
            .unwrap();
        assert_eq!(queued, 5_050, "{backend}");
        let b_cluster =
            db::clusters::insert(pool, b.id, &spec("b0", PublicAccess::Disabled), PublicAccessMode::NodePort, None)
                .await
                .unwrap();

        let mut claimed = Vec::new();
        for _ in 0..3 {
            let op = db::operations::claim_next(pool, "w", 60).await.unwrap().expect("runnable work");
            let generation: i64 = sqlx::query_scalar("SELECT generation FROM clusters WHERE id = $1")
                .bind(op.cluster_id)
                .fetch_one(pool)
                .await
                .unwrap();
            assert!(db::operations::finish(pool, op.id, "w", None).await.unwrap());
            let folded = db::operations::supersede(pool, op.cluster_id, generation).await.unwrap();
            claimed.push((op.cluster_id, folded));
        }
        let b_at = claimed.iter().position(|(c, _)| *c == b_cluster);
        assert!(b_at.is_some_and(|i| i < 2), "{backend}: B's create within two claims: {claimed:?}");
        for (cluster, folded) in &claimed {
            let want = if *cluster == b_cluster { 0 } else { 100 };
            assert_eq!(*folded, want, "{backend}: cluster {cluster}'s queued edits superseded by one claim");
        }
        let left: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM cluster_operations WHERE state = 'pending'")
            .fetch_one(pool)
            .await
            .unwrap();
        assert_eq!(left, 5_050 - 2 * 101, "{backend}");
    }
}

#[tokio::test]
async fn operations_are_claimed_once_and_survive_restart() {
    for t in each_backend().await {
        let carol = user(&t.pool, "carol", Role::User).await;
        let a = db::clusters::insert(
            &t.pool,
            carol.id,
            &spec("a", PublicAccess::Disabled),
            PublicAccessMode::NodePort,
            None,
        )
        .await
        .unwrap();
        db::clusters::insert(&t.pool, carol.id, &spec("b", PublicAccess::Disabled), PublicAccessMode::NodePort, None)
            .await
            .unwrap();
        db::clusters::request_deletion(&t.pool, a, carol.id).await.unwrap();
        assert!(!db::clusters::request_deletion(&t.pool, a, carol.id).await.unwrap(), "second delete is a no-op");

        // Restart: a new pool on the same database sees every request.
        t.pool.close().await;
        let pool = db::connect(&t.url).await.unwrap();

        let (w1, w2) =
            tokio::join!(db::operations::claim_next(&pool, "w1", 60), db::operations::claim_next(&pool, "w2", 60));
        let (o1, o2) = (w1.unwrap().unwrap(), w2.unwrap().unwrap());
        assert_ne!(o1.id, o2.id, "{}: no row claimed twice", t.backend);
        assert_ne!(o1.cluster_id, o2.cluster_id, "{}: one cluster's operations never run at once", t.backend);
        // a's delete waits for a's create, whoever holds it.
        assert!(db::operations::claim_next(&pool, "w3", 60).await.unwrap().is_none(), "{}", t.backend);
        let (a_create, a_worker, other, other_worker) =
            if o1.cluster_id == a { (o1, "w1", o2, "w2") } else { (o2, "w2", o1, "w1") };
        assert!(!db::operations::finish(&pool, a_create.id, other_worker, None).await.unwrap(), "only the holder");
        assert!(db::operations::finish(&pool, a_create.id, a_worker, None).await.unwrap());
        let third = db::operations::claim_next(&pool, "w1", 60).await.unwrap().unwrap();
        assert_eq!((third.cluster_id, third.kind.as_str()), (a, "delete"), "{}: in order per cluster", t.backend);
        assert!(db::operations::claim_next(&pool, "w2", 60).await.unwrap().is_none());
        assert!(db::operations::finish(&pool, other.id, other_worker, None).await.unwrap());

        // An expired lease (worker crashed) is taken again by another worker.
        sqlx::query("UPDATE cluster_operations SET claimed_until = 0 WHERE id = $1")
            .bind(third.id)
            .execute(&pool)
            .await
            .unwrap();
        let retaken = db::operations::claim_next(&pool, "w2", 60).await.unwrap().unwrap();
        assert_eq!((retaken.id, retaken.attempts), (third.id, 2));
    }
}

/// A deletion the host refused for good (the reconciler wrote `failed` for
/// its generation) stops being "under way" and may be asked for again: a new
/// generation and a new operation; while that one runs, a third is refused.
#[tokio::test]
async fn a_refused_deletion_can_be_asked_for_again() {
    for t in each_backend().await {
        let dan = user(&t.pool, "dan", Role::User).await;
        let id = db::clusters::insert(
            &t.pool,
            dan.id,
            &spec("gone", PublicAccess::Disabled),
            PublicAccessMode::NodePort,
            None,
        )
        .await
        .unwrap();
        let create = db::operations::claim_next(&t.pool, "w", 60).await.unwrap().unwrap();
        assert!(db::operations::finish(&t.pool, create.id, "w", None).await.unwrap());
        assert!(db::clusters::request_deletion(&t.pool, id, dan.id).await.unwrap());
        assert!(!db::clusters::request_deletion(&t.pool, id, dan.id).await.unwrap(), "{}: under way", t.backend);
        let first_requested: i64 = sqlx::query_scalar("SELECT deletion_requested_at FROM clusters WHERE id = $1")
            .bind(id)
            .fetch_one(&t.pool)
            .await
            .unwrap();

        // The reconciler's permanent failure: the operation failed, the status Failed for that generation.
        let delete = db::operations::claim_next(&t.pool, "w", 60).await.unwrap().unwrap();
        assert!(db::operations::finish(&t.pool, delete.id, "w", Some("delete HelmChart: refused")).await.unwrap());
        let failed = ClusterStatus {
            phase: Phase::Failed,
            reason: "helm_failed: delete HelmChart: refused".into(),
            observed_generation: delete.generation,
            ..ClusterStatus::default()
        };
        assert!(db::clusters::write_status(&t.pool, id, &failed).await.unwrap());
        let c = db::clusters::get(&t.pool, id).await.unwrap().unwrap();
        assert!(c.deletion_failed() && !c.in_progress(), "{}: nothing under way", t.backend);
        // The list's phase filter agrees with the phase shown.
        let by_phase = |phase: Phase| {
            let query = kubebyon::domain::listing::ListQuery { phase: Some(phase), ..Default::default() };
            let pool = t.pool.clone();
            async move { db::clusters::list_page(&pool, None, &query, 50).await.unwrap().1 }
        };
        assert_eq!((by_phase(Phase::Failed).await, by_phase(Phase::Deleting).await), (1, 0), "{}", t.backend);

        assert!(db::clusters::request_deletion(&t.pool, id, dan.id).await.unwrap(), "{}: asked again", t.backend);
        let c = db::clusters::get(&t.pool, id).await.unwrap().unwrap();
        assert_eq!(c.generation, delete.generation + 1, "{}", t.backend);
        assert!(c.deletion_requested && !c.deletion_failed() && c.in_progress(), "{}", t.backend);
        assert_eq!((by_phase(Phase::Failed).await, by_phase(Phase::Deleting).await), (0, 1), "{}", t.backend);
        let requested: i64 = sqlx::query_scalar("SELECT deletion_requested_at FROM clusters WHERE id = $1")
            .bind(id)
            .fetch_one(&t.pool)
            .await
            .unwrap();
        assert_eq!(requested, first_requested, "{}: the first request's time is kept", t.backend);
        let again = db::operations::claim_next(&t.pool, "w", 60).await.unwrap().unwrap();
        assert_eq!((again.kind.as_str(), again.generation), ("delete", c.generation), "{}", t.backend);
        assert!(!db::clusters::request_deletion(&t.pool, id, dan.id).await.unwrap(), "{}: under way again", t.backend);
    }
}

#[tokio::test]
async fn settings_round_trip_and_default_to_nodeport() {
    for t in each_backend().await {
        assert_eq!(db::settings::load(&t.pool).await.unwrap(), SystemSettings::default());
        let s = SystemSettings {
            default_mode: PublicAccessMode::LoadBalancer,
            nodeport_public_host: Some(Host::parse("2001:db8::7").unwrap()),
            load_balancer_annotations: [("metallb.io/address-pool".to_owned(), "public".to_owned())].into(),
            load_balancer_class: Some("metallb.io/metallb".into()),
            load_balancer_address_request: kubebyon::domain::settings::AddressStyle::KubeVip,
            chart_repo: "oci://registry.example/charts".into(),
            chart_version: "0.30.5".into(),
            quota: kubebyon::domain::quota::Quota { clusters: Some(9), storage_gib: None, ..Default::default() },
            pod_security: kubebyon::domain::settings::PodSecurity::Privileged,
            network_policy: false,
            private_nodes: true,
            platform_api_key: Some(kubebyon::domain::nodes::SecretRef::parse("licences/vcluster-key").unwrap()),
            gateway: Some(kubebyon::domain::gateway::GatewayRef {
                namespace: "kube-system".into(),
                name: "shared".into(),
                listener: Some("tls".into()),
            }),
            gateway_domain_suffix: Some(Host::parse("k.example.com").unwrap()),
            placement: kubebyon::domain::placement::Placement {
                spread: kubebyon::domain::placement::Spread::Required,
                topology_key: "topology.kubernetes.io/zone".into(),
                storage_class: Some("fast-ssd".into()),
            },
            kubeconfig_max_lifetime: kubebyon::domain::membership::CredentialLifetime::parse("90m").unwrap(),
            extra_egress: kubebyon::domain::egress::ExtraEgress::parse("10443 vcluster-platform\n5556 team=dex\n8080")
                .unwrap(),
        };
        db::settings::save(&t.pool, &s).await.unwrap();
        db::settings::save(&t.pool, &s).await.unwrap();
        assert_eq!(db::settings::load(&t.pool).await.unwrap(), s, "{}", t.backend);
    }
}

#[tokio::test]
async fn sessions_expire_idle_out_and_end_on_password_reset() {
    for t in each_backend().await {
        let dave = user(&t.pool, "dave", Role::Admin).await;
        db::sessions::insert(&t.pool, "live", dave.id, 3600).await.unwrap();
        db::sessions::insert(&t.pool, "dead", dave.id, -1).await.unwrap();
        assert_eq!(db::sessions::user_for(&t.pool, "live", 3600, 60).await.unwrap().unwrap().username, "dave");
        assert!(db::sessions::user_for(&t.pool, "dead", 3600, 60).await.unwrap().is_none());
        assert_eq!(db::sessions::delete_expired(&t.pool).await.unwrap(), 1);
        db::users::set_password(&t.pool, dave.id, "new-hash").await.unwrap();
        assert!(db::sessions::user_for(&t.pool, "live", 3600, 60).await.unwrap().is_none(), "{}", t.backend);
        assert_eq!(db::users::count_admins(&t.pool).await.unwrap(), 1);

        // Idle: a session unused for the idle time ends; a use writes its last use.
        db::sessions::insert(&t.pool, "idle", dave.id, 3600).await.unwrap();
        let age = |secs: i64| {
            sqlx::query("UPDATE sessions SET last_seen_at = $1 WHERE token_hash = 'idle'")
                .bind(db::now() - secs)
                .execute(&t.pool)
        };
        age(120).await.unwrap();
        assert!(db::sessions::user_for(&t.pool, "idle", 600, 60).await.unwrap().is_some());
        let seen: i64 = sqlx::query_scalar("SELECT last_seen_at FROM sessions WHERE token_hash = 'idle'")
            .fetch_one(&t.pool)
            .await
            .unwrap();
        assert!(seen >= db::now() - 5, "{}: the use was written", t.backend);
        age(601).await.unwrap();
        assert!(db::sessions::user_for(&t.pool, "idle", 600, 60).await.unwrap().is_none(), "{}: idle", t.backend);
    }
}

/// A list page (one aggregated row) carries every field exactly as `get`
/// reads it, in name order, with the total of its filter, on both databases.
#[tokio::test]
async fn list_pages_carry_every_field_in_name_order() {
    use kubebyon::domain::listing::{ListQuery, ModeFilter};
    for t in each_backend().await {
        let ann = user(&t.pool, "ann", Role::User).await;
        let ben = user(&t.pool, "ben", Role::Admin).await;
        let mut ids = Vec::new();
        for (owner, name, access) in [
            (ann.id, "zeta", lb("api.example.com")),
            (ben.id, "alpha", PublicAccess::NodePort { host: Some(Host::parse("10.0.0.7").unwrap()) }),
            (ann.id, "mid-1", PublicAccess::Disabled),
            (ann.id, "mid-2", PublicAccess::NodePort { host: None }),
        ] {
            ids.push(
                db::clusters::insert(&t.pool, owner, &spec(name, access), PublicAccessMode::NodePort, None)
                    .await
                    .unwrap(),
            );
        }
        let status = ClusterStatus {
            phase: Phase::Failed,
            reason: "helm said \"no\" — ünïcode, a \\ backslash,\nand a new line".into(),
            public_access_port: Some(31443),
            api_endpoint: Some("https://10.0.0.7:31443".into()),
            kubeconfig_available: true,
            connection_status: ConnectionStatus::Ok,
            observed_generation: 1,
        };
        assert!(db::clusters::write_status(&t.pool, ids[1], &status).await.unwrap());

        let all = ListQuery { page: 1, ..Default::default() };
        let (page, total) = db::clusters::list_page(&t.pool, None, &all, 50).await.unwrap();
        assert_eq!(total, 4, "{}", t.backend);
        let names: Vec<&str> = page.iter().map(|c| c.spec.name.as_str()).collect();
        assert_eq!(names, ["alpha", "mid-1", "mid-2", "zeta"], "{}", t.backend);
        for c in &page {
            assert_eq!(Some(c), db::clusters::get(&t.pool, c.id).await.unwrap().as_ref(), "{}", t.backend);
        }
        assert_eq!(page[0].status, status, "{}", t.backend);

        // Pages, a filter, one owner, a page past the end: totals of the filter.
        let (second, total) =
            db::clusters::list_page(&t.pool, None, &ListQuery { page: 2, ..all.clone() }, 3).await.unwrap();
        assert_eq!((second.len(), total), (1, 4), "{}", t.backend);
        assert_eq!(second[0].spec.name.as_str(), "zeta");
        let q = ListQuery { q: "mid".into(), mode: Some(ModeFilter::Mode(PublicAccessMode::NodePort)), ..all.clone() };
        let (found, total) = db::clusters::list_page(&t.pool, None, &q, 50).await.unwrap();
        assert_eq!((found.len(), total), (1, 1), "{}", t.backend);
        assert_eq!(found[0].spec.name.as_str(), "mid-2");
        let (mine, total) = db::clusters::list_page(&t.pool, Some(ann.id), &all, 50).await.unwrap();
        assert_eq!((mine.len(), total), (3, 3), "{}", t.backend);
        let (past, total) =
            db::clusters::list_page(&t.pool, None, &ListQuery { page: 9, ..all.clone() }, 2).await.unwrap();
        assert_eq!((past.len(), total), (0, 4), "{}", t.backend);
        let by_owner = ListQuery { owner: Some("ben".into()), ..all.clone() };
        let (bens, total) = db::clusters::list_page(&t.pool, None, &by_owner, 50).await.unwrap();
        assert_eq!((bens.len(), total), (1, 1), "{}", t.backend);
    }
}

/// Quotas hold under concurrency: 12 creates of one user at once, with a
/// limit of 3 clusters, store exactly 3, on SQLite and on PostgreSQL (where
/// READ COMMITTED alone would let several read the same count and all
/// insert); an edit growing past the CPU limit is refused and changes
/// nothing; another user is not held to the first one's count.
#[tokio::test]
async fn quotas_hold_when_creates_race() {
    use kubebyon::domain::quota::{Dimension, Quota};
    for t in each_backend().await {
        let erin = user(&t.pool, "erin", Role::User).await;
        let frank = user(&t.pool, "frank", Role::User).await;
        let limit = Quota { clusters: Some(3), cpu_millis: Some(7_000), ..Quota::UNLIMITED };
        let tasks: Vec<_> = (0..12)
            .map(|i| {
                let pool = t.pool.clone();
                tokio::spawn(async move {
                    let s = spec(&format!("race-{i}"), PublicAccess::Disabled);
                    db::clusters::insert(&pool, erin.id, &s, PublicAccessMode::NodePort, Some(&limit)).await
                })
            })
            .collect();
        let mut stored = 0;
        for task in tasks {
            match task.await.unwrap() {
                Ok(_) => stored += 1,
                Err(db::DbError::OverQuota(Dimension::Clusters)) => {}
                Err(e) => panic!("{}: {e}", t.backend),
            }
        }
        assert_eq!(stored, 3, "{}: exactly the limit", t.backend);
        let used = db::clusters::usage(&t.pool, erin.id, None).await.unwrap();
        assert_eq!((used.clusters, used.cpu_millis), (3, 6_000), "{}", t.backend);
        let ops: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM cluster_operations").fetch_one(&t.pool).await.unwrap();
        assert_eq!(ops, 3, "{}: no operation without its cluster", t.backend);

        // Growing one cluster from 2 to 3 CPU takes erin to 7 CPU: allowed; to 3.5: refused.
        let c = db::clusters::list(&t.pool, Some(erin.id)).await.unwrap().remove(0);
        let grow = |cpu: u32| {
            let mut s = c.spec.clone();
            s.resources.cpu_millis = cpu;
            s
        };
        let op = Operation::Update { changes: vec![] };
        let hold = db::clusters::QuotaHold { owner: erin.id, limit: &limit, from: c.spec.resources };
        let err = db::clusters::update_spec(
            &t.pool,
            c.id,
            c.generation,
            &grow(3_500),
            PublicAccessMode::NodePort,
            &op,
            erin.id,
            Some(hold),
        )
        .await
        .unwrap_err();
        assert!(matches!(err, db::DbError::OverQuota(Dimension::Cpu)), "{}: {err}", t.backend);
        let unchanged = db::clusters::get(&t.pool, c.id).await.unwrap().unwrap();
        assert_eq!((unchanged.generation, unchanged.spec.resources), (c.generation, c.spec.resources));
        db::clusters::update_spec(
            &t.pool,
            c.id,
            c.generation,
            &grow(3_000),
            PublicAccessMode::NodePort,
            &op,
            erin.id,
            Some(hold),
        )
        .await
        .unwrap()
        .expect("within the limit");
        // A cluster being deleted still holds its share until the host lets
        // it go (the reconciler removes its row once its namespace is gone);
        // another user has their own count.
        assert!(db::clusters::request_deletion(&t.pool, c.id, erin.id).await.unwrap());
        let after = spec("after-delete", PublicAccess::Disabled);
        let held = db::clusters::insert(&t.pool, erin.id, &after, PublicAccessMode::NodePort, Some(&limit)).await;
        assert!(matches!(held, Err(db::DbError::OverQuota(Dimension::Clusters))), "{}: still counts", t.backend);
        sqlx::query("DELETE FROM clusters WHERE id = $1").bind(c.id).execute(&t.pool).await.unwrap();
        db::clusters::insert(&t.pool, erin.id, &after, PublicAccessMode::NodePort, Some(&limit))
            .await
            .expect("a removed cluster no longer counts");
        db::clusters::insert(
            &t.pool,
            frank.id,
            &spec("frank-1", PublicAccess::Disabled),
            PublicAccessMode::NodePort,
            Some(&limit),
        )
        .await
        .expect("frank's own count");
    }
}

/// A LoadBalancer host is held by the database: of 8 creates of clusters on
/// one host at once, one is stored, the others fail on the claim (not on the
/// name); turning the holder's access off frees the host; a NodePort cluster
/// may name it.
#[tokio::test]
async fn a_load_balancer_host_is_claimed_by_one_cluster() {
    for t in each_backend().await {
        let gus = user(&t.pool, "gus", Role::User).await;
        let tasks: Vec<_> = (0..8)
            .map(|i| {
                let pool = t.pool.clone();
                tokio::spawn(async move {
                    let s = spec(&format!("claim-{i}"), lb("api.claimed.example"));
                    db::clusters::insert(&pool, gus.id, &s, PublicAccessMode::NodePort, None).await
                })
            })
            .collect();
        let mut stored = Vec::new();
        for task in tasks {
            match task.await.unwrap() {
                Ok(id) => stored.push(id),
                Err(e) => assert!(e.is_lb_host_taken(), "{}: {e}", t.backend),
            }
        }
        assert_eq!(stored.len(), 1, "{}: one holder", t.backend);
        let holder = db::clusters::get(&t.pool, stored[0]).await.unwrap().unwrap();
        let np = db::clusters::insert(
            &t.pool,
            gus.id,
            &spec("np-same-host", PublicAccess::NodePort { host: Some(Host::parse("api.claimed.example").unwrap()) }),
            PublicAccessMode::NodePort,
            None,
        )
        .await;
        assert!(np.is_ok(), "{}: NodePort clusters do not claim", t.backend);
        // A gateway host is claimed in the same place: one host, one cluster,
        // across LoadBalancer and gateway clusters.
        let gw = |name: &str, host: &str| spec(name, PublicAccess::Gateway { host: Host::parse(host).unwrap() });
        let taken = db::clusters::insert(
            &t.pool,
            gus.id,
            &gw("gw-same-host", "api.claimed.example"),
            PublicAccessMode::Gateway,
            None,
        )
        .await;
        assert!(
            taken.is_err_and(|e| e.is_lb_host_taken()),
            "{}: the LoadBalancer's host is taken for a gateway",
            t.backend
        );
        db::clusters::insert(&t.pool, gus.id, &gw("gw-own", "gw.claimed.example"), PublicAccessMode::Gateway, None)
            .await
            .unwrap();
        // The list's mode filter finds gateway clusters too.
        let by_gateway = kubebyon::domain::listing::ListQuery {
            mode: Some(kubebyon::domain::listing::ModeFilter::Mode(PublicAccessMode::Gateway)),
            page: 1,
            ..Default::default()
        };
        let (found, total) = db::clusters::list_page(&t.pool, None, &by_gateway, 50).await.unwrap();
        assert_eq!((found.len(), total), (1, 1), "{}", t.backend);
        assert_eq!(found[0].spec.name.as_str(), "gw-own", "{}", t.backend);
        let lb_on_gw = db::clusters::insert(
            &t.pool,
            gus.id,
            &spec("lb-on-gw", lb("gw.claimed.example")),
            PublicAccessMode::NodePort,
            None,
        )
        .await;
        assert!(
            lb_on_gw.is_err_and(|e| e.is_lb_host_taken()),
            "{}: the gateway's host is taken for a LoadBalancer",
            t.backend
        );
        let op = Operation::Update { changes: vec![] };
        let off = spec(holder.spec.name.as_str(), PublicAccess::Disabled);
        db::clusters::update_spec(
            &t.pool,
            holder.id,
            holder.generation,
            &off,
            PublicAccessMode::LoadBalancer,
            &op,
            gus.id,
            None,
        )
        .await
        .unwrap()
        .unwrap();
        db::clusters::insert(
            &t.pool,
            gus.id,
            &spec("claim-next", lb("api.claimed.example")),
            PublicAccessMode::NodePort,
            None,
        )
        .await
        .expect("the host is free again");
    }
}

/// Work proportional to change (issue 26, migration 12): every write to a
/// cluster — spec, status, deletion, its operations — gives its row the next
/// revision; a deleted row leaves a tombstone; "what changed since N" reads
/// only those rows, and nothing (one counter read) when nothing changed.
#[tokio::test]
async fn every_write_raises_a_revision_and_only_changed_rows_are_read() {
    for t in each_backend().await {
        let b = t.backend;
        let alice = user(&t.pool, "alice", Role::User).await;
        let bob = user(&t.pool, "bob", Role::User).await;
        let mut ids = Vec::new();
        for (i, owner) in [alice.id, alice.id, bob.id].into_iter().enumerate() {
            let s = spec(&format!("rev-{i}"), PublicAccess::Disabled);
            ids.push(db::clusters::insert(&t.pool, owner, &s, PublicAccessMode::NodePort, None).await.unwrap());
        }
        let start = db::clusters::revision_now(&t.pool).await.unwrap();
        let rev = |id| {
            let pool = t.pool.clone();
            async move { db::clusters::revision_of(&pool, id).await.unwrap().unwrap() }
        };
        // Each insert (and its create operation) counted; the newest row holds the counter.
        assert_eq!(rev(ids[2]).await, start, "{b}");
        assert!(rev(ids[0]).await < rev(ids[1]).await, "{b}");

        // Nothing changed: nothing read.
        let none = db::clusters::changed_since(&t.pool, start).await.unwrap();
        assert!(none.clusters.is_empty() && none.deleted.is_empty() && none.revision == start, "{b}: {none:?}");
        assert_eq!(db::clusters::touched_since(&t.pool, start).await.unwrap(), (vec![], start), "{b}");

        // A status write: that row, and only it.
        let status = ClusterStatus { phase: Phase::Ready, observed_generation: 1, ..ClusterStatus::default() };
        assert!(db::clusters::write_status(&t.pool, ids[1], &status).await.unwrap());
        let one = db::clusters::changed_since(&t.pool, start).await.unwrap();
        assert_eq!(one.clusters.iter().map(|c| c.id).collect::<Vec<_>>(), vec![ids[1]], "{b}");
        assert_eq!(one.revision, start + 1, "{b}");
        assert_eq!(one.clusters[0].revision, start + 1, "{b}");

        // An operation claimed or finished is a change of its cluster.
        let op = db::operations::claim_next(&t.pool, "w", 60).await.unwrap().expect("a queued create");
        let touched = db::clusters::touched_since(&t.pool, one.revision).await.unwrap();
        assert_eq!(touched.0.iter().map(|(id, ..)| *id).collect::<Vec<_>>(), vec![op.cluster_id], "{b}");

        // A list's version: the newest revision among its owner's clusters.
        let alices = db::clusters::list_revision(&t.pool, Some(alice.id)).await.unwrap();
        let bobs = db::clusters::list_revision(&t.pool, Some(bob.id)).await.unwrap();
        let all = db::clusters::list_revision(&t.pool, None).await.unwrap();
        assert_eq!(all, alices.max(bobs), "{b}");

        // A deletion requested, then the row removed: a tombstone tells.
        assert!(db::clusters::request_deletion(&t.pool, ids[2], bob.id).await.unwrap());
        let at = db::clusters::revision_now(&t.pool).await.unwrap();
        sqlx::query("DELETE FROM clusters WHERE id = $1").bind(ids[2]).execute(&t.pool).await.unwrap();
        let gone = db::clusters::changed_since(&t.pool, at).await.unwrap();
        assert!(gone.clusters.is_empty() && gone.deleted == vec![ids[2]], "{b}: {gone:?}");
        assert!(db::clusters::list_revision(&t.pool, Some(bob.id)).await.unwrap() > bobs, "{b}: bob's list changed");
        let (touched, _) = db::clusters::touched_since(&t.pool, at).await.unwrap();
        assert_eq!(touched, vec![(ids[2], bob.id, gone.revision)], "{b}");
    }
}

/// A node removal is one row per node while it runs (asking again returns
/// it), records its progress only while it runs, and ends once.
#[tokio::test]
async fn a_node_removal_runs_once_per_node_and_ends_once() {
    use kubebyon::domain::nodes::{RemovalReason, RemovalState};
    use kubebyon::server::db::node_removals;
    for t in each_backend().await {
        let dana = user(&t.pool, "dana", Role::User).await;
        let lb = lb("nodes.example.com");
        let id =
            db::clusters::insert(&t.pool, dana.id, &spec("own", lb), PublicAccessMode::NodePort, None).await.unwrap();
        let (first, started) = node_removals::start(&t.pool, id, "byo-1", true, dana.id).await.unwrap();
        assert!(started, "{}", t.backend);
        let (again, started) = node_removals::start(&t.pool, id, "byo-1", false, dana.id).await.unwrap();
        assert_eq!((again.id, started, again.drain), (first.id, false, 1), "{}: the running one", t.backend);
        let (other, _) = node_removals::start(&t.pool, id, "byo-2", false, dana.id).await.unwrap();
        assert_ne!(other.id, first.id);
        let view = first.view();
        assert_eq!(
            (view.state, view.pods_left, view.reason, view.requested_by.as_deref()),
            (RemovalState::Draining, None, None, Some("dana"))
        );

        node_removals::progress(
            &t.pool,
            first.id,
            Some(2),
            Some(RemovalReason::DisruptionBudget),
            Some("default/web-1"),
        )
        .await
        .unwrap();
        let running = node_removals::running(&t.pool).await.unwrap();
        let row = running.iter().find(|r| r.id == first.id).unwrap().view();
        assert_eq!(
            (row.pods_left, row.reason, row.pod.as_deref()),
            (Some(2), Some(RemovalReason::DisruptionBudget), Some("default/web-1")),
            "{}",
            t.backend
        );
        // A pass that could not look keeps the last count.
        // The first removal as stored now.
        let stored = || async {
            let rows = node_removals::recent(&t.pool, id, 10).await.unwrap();
            rows.into_iter().find(|r| r.id == first.id).unwrap().view()
        };
        node_removals::progress(&t.pool, first.id, None, Some(RemovalReason::ControlPlaneUnavailable), None)
            .await
            .unwrap();
        let row = stored().await;
        assert_eq!((row.pods_left, row.reason, row.pod), (Some(2), Some(RemovalReason::ControlPlaneUnavailable), None));

        let (a, b) = tokio::join!(
            node_removals::finish(&t.pool, first.id, None),
            node_removals::finish(&t.pool, first.id, Some(RemovalReason::DrainTimeout))
        );
        assert!(a.unwrap() ^ b.unwrap(), "{}: ended once", t.backend);
        let ended = stored().await;
        assert_ne!(ended.state, RemovalState::Draining);
        assert!(ended.finished_at.is_some());
        // Progress after the end changes nothing; the node may be removed again.
        node_removals::progress(&t.pool, first.id, Some(9), None, None).await.unwrap();
        let after = stored().await;
        assert_eq!(after, ended, "{}", t.backend);
        let (next, started) = node_removals::start(&t.pool, id, "byo-1", true, dana.id).await.unwrap();
        assert!(started && next.id != first.id, "{}", t.backend);
        let recent: Vec<i64> = node_removals::recent(&t.pool, id, 10).await.unwrap().iter().map(|r| r.id).collect();
        assert_eq!(recent, vec![next.id, other.id, first.id], "{}: newest first", t.backend);
        // Deleting the cluster takes its removals along.
        sqlx::query("DELETE FROM clusters WHERE id = $1").bind(id).execute(&t.pool).await.unwrap();
        assert!(node_removals::recent(&t.pool, id, 10).await.unwrap().is_empty(), "{}", t.backend);
    }
}
