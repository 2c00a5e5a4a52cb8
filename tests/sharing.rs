//! Sharing (issue 42) through the real router on both real backends: a
//! cluster shared with a user or a team shows in their list and answers as
//! their role allows; taking it back hides it again; every change is
//! audited; bad input is refused with its field and changes nothing; an
//! editor is held to the owner's quota. (Who may call which route is the
//! matrix in `tests/authz.rs`.)

mod support;

use kubebyon::server::db;
use serde_json::{Value, json};
use support::each_backend;
use support::http::{Console, audit_rows};

const PW: &str = "correct horse battery";
const CREATE: &str =
    r#"{"name":"shared-one","resources":{"cpu":"1","memory_gib":2,"storage_gib":5},"public_access":{"enabled":false}}"#;

fn names(list: &Value) -> Vec<String> {
    list.as_array().unwrap().iter().map(|c| c["spec"]["name"].as_str().unwrap().to_owned()).collect()
}

async fn user_id(pool: &sqlx::AnyPool, name: &str) -> i64 {
    db::users::by_username(pool, name).await.unwrap().unwrap().id
}

#[tokio::test]
async fn a_shared_cluster_shows_for_its_members_as_their_role_allows_until_taken_back() {
    for t in each_backend().await {
        let c = Console::new(t.pool.clone());
        for (name, admin) in [("admin", true), ("alice", false), ("bob", false), ("erin", false)] {
            c.user(name, PW, admin).await;
        }
        let (alice, bob, erin, admin) = (
            c.login("alice", PW).await,
            c.login("bob", PW).await,
            c.login("erin", PW).await,
            c.login("admin", PW).await,
        );
        let r = c.json("POST", "/api/console/clusters", Some(&alice), serde_json::from_str(CREATE).unwrap()).await;
        assert_eq!(r.status, 201, "{}: {}", t.backend, r.body);
        let id = r.json()["id"].as_i64().unwrap();
        let cluster = format!("/api/console/clusters/{id}");
        let members = format!("{cluster}/members");
        let patch = |cpu: &str| json!({"resources": {"cpu": cpu, "memory_gib": 2, "storage_gib": 5}});

        // Not shared: Bob neither lists nor sees it.
        assert!(names(&c.get("/api/console/clusters", Some(&bob)).await.json()).is_empty(), "{}", t.backend);
        assert_eq!(c.get(&cluster, Some(&bob)).await.status, 404, "{}", t.backend);
        let bob_id = user_id(&t.pool, "bob").await;
        let before = db::clusters::list_revision(&t.pool, Some(bob_id)).await.unwrap();

        // Shared with Bob to view: listed, readable, not changeable.
        let r = c.json("PUT", &members, Some(&alice), json!({"name": "bob", "role": "view"})).await;
        assert_eq!(r.status, 200, "{}: {}", t.backend, r.body);
        assert_eq!(r.json(), json!([{"kind": "user", "id": bob_id, "name": "bob", "role": "view"}]), "{}", t.backend);
        assert!(
            db::clusters::list_revision(&t.pool, Some(bob_id)).await.unwrap() > before,
            "{}: Bob's list moved",
            t.backend
        );
        assert_eq!(names(&c.get("/api/console/clusters", Some(&bob)).await.json()), ["shared-one"], "{}", t.backend);
        assert_eq!(c.get(&cluster, Some(&bob)).await.status, 200, "{}", t.backend);
        let r = c.json("PATCH", &cluster, Some(&bob), patch("2")).await;
        assert_eq!((r.status.as_u16(), r.code()), (403, "forbidden".into()), "{}: {}", t.backend, r.body);
        // The page says the role and offers no edit or share form.
        let page = c.get(&format!("/clusters/{id}"), Some(&bob)).await;
        assert_eq!(page.status, 200, "{}", t.backend);
        assert!(page.body.contains(r#"data-testid="members""#) && !page.body.contains(r#"data-form="put-member""#));
        assert!(
            !page.body.contains(&format!(r#"href="/clusters/{id}/edit""#)),
            "{}: no edit link for a viewer",
            t.backend
        );

        // Raised to edit: the change goes through, as Bob's.
        let r = c.json("PUT", &members, Some(&alice), json!({"name": "bob", "role": "edit"})).await;
        assert_eq!(r.json()[0]["role"], "edit", "{}", t.backend);
        let r = c.json("PATCH", &cluster, Some(&bob), patch("2")).await;
        assert_eq!(r.status, 200, "{}: {}", t.backend, r.body);
        assert_eq!(r.json()["spec"]["resources"]["cpu_millis"], 2000, "{}: {}", t.backend, r.body);

        // A team: Erin sees the cluster exactly while she is in it.
        let r = c.json("POST", "/api/admin/teams", Some(&admin), json!({"name": "ops"})).await;
        assert_eq!(r.status, 201, "{}: {}", t.backend, r.body);
        let team = r.json()["id"].as_i64().unwrap();
        let r = c.json("PUT", &members, Some(&alice), json!({"kind": "team", "name": "ops", "role": "view"})).await;
        assert_eq!(r.status, 200, "{}: {}", t.backend, r.body);
        assert_eq!(c.get(&cluster, Some(&erin)).await.status, 404, "{}: not in the team yet", t.backend);
        let r = c.send("PUT", &format!("/api/admin/teams/{team}/members/erin"), Some(&admin), None, "").await;
        assert_eq!(r.json()["members"], json!(["erin"]), "{}: {}", t.backend, r.body);
        assert_eq!(c.get(&cluster, Some(&erin)).await.status, 200, "{}: in the team", t.backend);
        assert_eq!(names(&c.get("/api/console/clusters", Some(&erin)).await.json()), ["shared-one"], "{}", t.backend);
        // Out of the team: gone, and her list's version moves (an open
        // list page drops the cluster by push).
        let erin_id = user_id(&t.pool, "erin").await;
        let erins = db::clusters::list_revision(&t.pool, Some(erin_id)).await.unwrap();
        c.send("DELETE", &format!("/api/admin/teams/{team}/members/erin"), Some(&admin), None, "").await;
        assert_eq!(c.get(&cluster, Some(&erin)).await.status, 404, "{}: out of the team", t.backend);
        assert!(db::clusters::list_revision(&t.pool, Some(erin_id)).await.unwrap() > erins, "{}", t.backend);
        let (touched, _) = db::clusters::touched_since(&t.pool, erins).await.unwrap();
        assert!(touched.iter().any(|(c, u, _)| (*c, *u) == (id, erin_id)), "{}: {touched:?}", t.backend);

        // Taken back from Bob: gone from his list and his reach.
        let bobs = db::clusters::list_revision(&t.pool, Some(bob_id)).await.unwrap();
        let r = c.send("DELETE", &format!("{members}/user/{bob_id}"), Some(&alice), None, "").await;
        assert_eq!(r.status, 200, "{}: {}", t.backend, r.body);
        assert!(db::clusters::list_revision(&t.pool, Some(bob_id)).await.unwrap() > bobs, "{}", t.backend);
        assert_eq!(c.get(&cluster, Some(&bob)).await.status, 404, "{}", t.backend);
        assert!(names(&c.get("/api/console/clusters", Some(&bob)).await.json()).is_empty(), "{}", t.backend);
        let r = c.send("DELETE", &format!("{members}/user/{bob_id}"), Some(&alice), None, "").await;
        assert_eq!(r.status, 404, "{}: not a member any more", t.backend);

        // Deleting the team ends its memberships.
        assert_eq!(c.send("DELETE", &format!("/api/admin/teams/{team}"), Some(&admin), None, "").await.status, 204);
        assert_eq!(c.get(&members, Some(&alice)).await.json(), json!([]), "{}", t.backend);

        // Every change is in the audit log, with who did it.
        let log = audit_rows(&c.get("/api/admin/audit", Some(&admin)).await.json());
        let target = "cluster:shared-one".to_owned();
        for want in [
            ("alice", "member_added", target.clone(), "user:bob as view".to_owned()),
            ("alice", "member_role_changed", target.clone(), "user:bob: view → edit".to_owned()),
            ("alice", "member_added", target.clone(), "team:ops as view".to_owned()),
            ("admin", "team_created", "team:ops".to_owned(), String::new()),
            ("admin", "team_member_added", "team:ops".to_owned(), "user:erin".to_owned()),
            ("admin", "team_member_removed", "team:ops".to_owned(), "user:erin".to_owned()),
            ("alice", "member_removed", target.clone(), "user:bob (was edit)".to_owned()),
            ("admin", "team_deleted", "team:ops".to_owned(), String::new()),
        ] {
            let want = (want.0.to_owned(), want.1.to_owned(), want.2, want.3);
            assert!(log.contains(&want), "{}: {want:?} not in {log:?}", t.backend);
        }
    }
}

#[tokio::test]
async fn bad_member_input_is_refused_with_its_field_and_changes_nothing() {
    for t in each_backend().await {
        let c = Console::new(t.pool.clone());
        for (name, admin) in [("admin", true), ("alice", false), ("bob", false)] {
            c.user(name, PW, admin).await;
        }
        let (alice, admin) = (c.login("alice", PW).await, c.login("admin", PW).await);
        let r = c.json("POST", "/api/console/clusters", Some(&alice), serde_json::from_str(CREATE).unwrap()).await;
        let members = format!("/api/console/clusters/{}/members", r.json()["id"]);
        let refused = [
            (json!({"name": "nobody", "role": "view"}), "member_unknown", "member"),
            (json!({"kind": "team", "name": "no-team", "role": "view"}), "member_unknown", "member"),
            (json!({"kind": "group", "name": "bob", "role": "view"}), "member_unknown", "member"),
            (json!({"name": "alice", "role": "view"}), "member_is_owner", "member"),
            (json!({"name": "bob", "role": "owner"}), "member_role_invalid", "member_role"),
            (json!({"name": "bob", "role": "system:masters"}), "member_role_invalid", "member_role"),
        ];
        for (body, code, field) in refused {
            let r = c.json("PUT", &members, Some(&alice), body.clone()).await;
            assert_eq!(r.status, 422, "{}: {body}: {}", t.backend, r.body);
            assert_eq!(r.json(), json!({"code": code, "field": field}), "{}: {body}", t.backend);
        }
        let r = c.json("PUT", &members, Some(&alice), json!({"name": "bob", "role": "view", "extra": 1})).await;
        assert_eq!(r.status, 400, "{}: unknown fields are refused", t.backend);
        assert_eq!(c.get(&members, Some(&alice)).await.json(), json!([]), "{}: nothing was added", t.backend);

        for (name, status, code) in [
            ("Bad Name", 422, "team_name_invalid"),
            ("system:masters", 422, "team_name_invalid"),
            ("ab", 422, "team_name_invalid"),
        ] {
            let r = c.json("POST", "/api/admin/teams", Some(&admin), json!({"name": name})).await;
            assert_eq!((r.status.as_u16(), r.code()), (status, code.to_owned()), "{}: {name}", t.backend);
        }
        assert_eq!(c.json("POST", "/api/admin/teams", Some(&admin), json!({"name": "ops"})).await.status, 201);
        let r = c.json("POST", "/api/admin/teams", Some(&admin), json!({"name": "ops"})).await;
        assert_eq!(r.json(), json!({"code": "team_name_taken", "field": "team_name"}), "{}", t.backend);
        let teams = c.get("/api/admin/teams", Some(&admin)).await.json();
        assert_eq!(teams.as_array().unwrap().len(), 1, "{}: {teams}", t.backend);
    }
}

#[tokio::test]
async fn an_editor_is_held_to_the_owners_quota_not_their_own() {
    use kubebyon::domain::quota::Quota;
    for t in each_backend().await {
        let c = Console::new(t.pool.clone());
        for name in ["alice", "erin"] {
            c.user(name, PW, false).await;
        }
        let (alice, erin) = (c.login("alice", PW).await, c.login("erin", PW).await);
        let r = c.json("POST", "/api/console/clusters", Some(&alice), serde_json::from_str(CREATE).unwrap()).await;
        let cluster = format!("/api/console/clusters/{}", r.json()["id"]);
        c.json("PUT", &format!("{cluster}/members"), Some(&alice), json!({"name": "erin", "role": "edit"})).await;
        // Alice may hold 2 CPUs; Erin's own quota is the platform's 16.
        let alice_id = user_id(&t.pool, "alice").await;
        db::users::set_quota(&t.pool, alice_id, &Quota { cpu_millis: Some(2000), ..Quota::UNLIMITED }).await.unwrap();
        let patch = |cpu: &str| json!({"resources": {"cpu": cpu, "memory_gib": 2, "storage_gib": 5}});
        let r = c.json("PATCH", &cluster, Some(&erin), patch("3")).await;
        assert_eq!((r.status.as_u16(), r.code()), (422, "quota_exceeded".into()), "{}: {}", t.backend, r.body);
        assert_eq!(c.get(&cluster, Some(&alice)).await.json()["spec"]["resources"]["cpu_millis"], 1000);
        let r = c.json("PATCH", &cluster, Some(&erin), patch("2")).await;
        assert_eq!(r.status, 200, "{}: within Alice's quota: {}", t.backend, r.body);
    }
}

#[tokio::test]
async fn an_admin_moves_a_cluster_to_an_owner_whose_quota_holds_it() {
    for t in each_backend().await {
        let c = Console::new(t.pool.clone());
        for (name, admin) in [("admin", true), ("alice", false), ("bob", false), ("carol", false)] {
            c.user(name, PW, admin).await;
        }
        let (alice, bob, admin) = (c.login("alice", PW).await, c.login("bob", PW).await, c.login("admin", PW).await);
        let r = c.json("POST", "/api/console/clusters", Some(&alice), serde_json::from_str(CREATE).unwrap()).await;
        let id = r.json()["id"].as_i64().unwrap();
        let (cluster, owner) = (format!("/api/console/clusters/{id}"), format!("/api/console/clusters/{id}/owner"));
        // Bob is a member already; Carol gets nothing.
        let r =
            c.json("PUT", &format!("{cluster}/members"), Some(&alice), json!({"name": "bob", "role": "view"})).await;
        assert_eq!(r.status, 200, "{}: {}", t.backend, r.body);
        let (alice_id, bob_id) = (user_id(&t.pool, "alice").await, user_id(&t.pool, "bob").await);

        // Only console admins move clusters (the owner may not give hers away).
        let r = c.json("PUT", &owner, Some(&alice), json!({"username": "bob"})).await;
        assert_eq!((r.status.as_u16(), r.code()), (403, "forbidden".into()), "{}", t.backend);
        // Refused, each at the owner field, nothing changed: no such account,
        // a disabled one, a quota that does not hold it (Bob may hold no cluster).
        let r = c.json("PUT", &owner, Some(&admin), json!({"username": "nobody"})).await;
        assert_eq!(
            (r.status.as_u16(), r.code(), r.json()["field"].clone()),
            (422, "member_unknown".into(), json!("owner"))
        );
        let carol = user_id(&t.pool, "carol").await;
        let form = Some("application/x-www-form-urlencoded");
        c.send("POST", "/fn/users/disabled", Some(&admin), form, format!("user_id={carol}&disabled=true")).await;
        let r = c.json("PUT", &owner, Some(&admin), json!({"username": "carol"})).await;
        assert_eq!((r.status.as_u16(), r.code()), (409, "owner_disabled".into()), "{}: {}", t.backend, r.body);
        let quota = format!("user_id={bob_id}&quota_clusters=0&quota_cpu=&quota_memory_gib=&quota_storage_gib=");
        let r = c.send("POST", "/fn/users/quota", Some(&admin), form, quota).await;
        assert!(r.status.is_success() || r.status.is_redirection(), "{}: {}", t.backend, r.body);
        let r = c.json("PUT", &owner, Some(&admin), json!({"username": "bob"})).await;
        assert_eq!(
            (r.status.as_u16(), r.code(), r.json()["field"].clone()),
            (422, "owner_quota_exceeded".into(), json!("owner"))
        );
        let r = c.json("PUT", &owner, Some(&admin), json!({"username": "bob", "keep": true})).await;
        assert_eq!(r.status, 400, "{}: unknown fields refused: {}", t.backend, r.body);
        assert_eq!(c.get(&cluster, Some(&alice)).await.json()["owner"], "alice", "{}", t.backend);

        // An edit read while Alice owned it, written after the move, is a
        // lost race (not charged to her quota, not landing on Bob's cluster).
        let before = db::clusters::get(&t.pool, id).await.unwrap().unwrap();
        let quota = format!("user_id={bob_id}&quota_clusters=1&quota_cpu=&quota_memory_gib=&quota_storage_gib=");
        c.send("POST", "/fn/users/quota", Some(&admin), form, quota).await;
        let alices = db::clusters::list_revision(&t.pool, Some(alice_id)).await.unwrap();
        let r = c.json("PUT", &owner, Some(&admin), json!({"username": "bob"})).await;
        assert_eq!((r.status.as_u16(), r.json()["owner"].clone()), (200, json!("bob")), "{}: {}", t.backend, r.body);
        let unlimited = kubebyon::domain::quota::Quota::UNLIMITED;
        let hold = db::clusters::QuotaHold { owner: alice_id, limit: &unlimited, from: before.spec.resources };
        let op = kubebyon::domain::change::Operation::Update { changes: vec![] };
        let late = db::clusters::update_spec(
            &t.pool,
            id,
            before.generation,
            &before.spec,
            kubebyon::domain::PublicAccessMode::NodePort,
            &op,
            alice_id,
            Some(hold),
        )
        .await
        .unwrap();
        assert_eq!(late, None, "{}: the move came first", t.backend);

        // Moved: Bob owns it (no longer a member of it);
        // Alice neither lists nor reaches it, and her list's version moved.
        assert_eq!(c.get(&format!("{cluster}/members"), Some(&bob)).await.json(), json!([]), "{}", t.backend);
        let r = c
            .json("PATCH", &cluster, Some(&bob), json!({"resources": {"cpu": "2", "memory_gib": 2, "storage_gib": 5}}))
            .await;
        assert_eq!(r.status, 200, "{}: the new owner edits it: {}", t.backend, r.body);
        assert_eq!(c.get(&cluster, Some(&alice)).await.status, 404, "{}", t.backend);
        assert!(names(&c.get("/api/console/clusters", Some(&alice)).await.json()).is_empty(), "{}", t.backend);
        assert!(db::clusters::list_revision(&t.pool, Some(alice_id)).await.unwrap() > alices, "{}", t.backend);
        // Bob's quota holds one cluster, his: he may create no other.
        let other = CREATE.replace("shared-one", "bobs-second");
        let r = c.json("POST", "/api/console/clusters", Some(&bob), serde_json::from_str(&other).unwrap()).await;
        assert_eq!(r.code(), "quota_clusters_exceeded", "{}: {}", t.backend, r.body);

        let log = audit_rows(&c.get("/api/admin/audit", Some(&admin)).await.json());
        let want = (
            "admin".to_owned(),
            "owner_changed".to_owned(),
            "cluster:shared-one".to_owned(),
            "owner: alice → bob".to_owned(),
        );
        assert!(log.contains(&want), "{}: {log:?}", t.backend);
        assert_eq!(log.iter().filter(|e| e.1 == "owner_changed").count(), 1, "{}: refusals are not audited", t.backend);
    }
}
