//! The JSON API and the request guard, end to end through the real router
//! and a real SQLite database: every rule the UI has, and bad input that
//! gets a 4xx with an error code, never a 5xx.

mod support;

use http::StatusCode;
use serde_json::{Value, json};
use support::http::Console;

const PW: &str = "correct horse battery";

async fn console() -> (Console, tempfile::TempDir) {
    console_with(kubebyon::server::config::Config { data_dir: "unused".into(), ..Default::default() }).await
}

/// [`console`] with its configuration given.
async fn console_with(config: kubebyon::server::config::Config) -> (Console, tempfile::TempDir) {
    let (url, dir) = support::sqlite_url();
    let pool = kubebyon::server::db::connect(&url).await.unwrap();
    let c = Console::with(pool, None, config);
    c.user("admin", PW, true).await;
    c.user("alice", PW, false).await;
    c.user("bob", PW, false).await;
    (c, dir)
}

fn cluster(name: &str, access: Value) -> Value {
    json!({"name": name, "resources": {"cpu": "2", "memory_gib": 4, "storage_gib": 20}, "public_access": access})
}

/// Creates a cluster as `cookie`'s user, which must succeed: its id.
async fn create(c: &Console, cookie: Option<&str>, body: Value) -> i64 {
    let r = c.json("POST", "/api/console/clusters", cookie, body).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    r.json()["id"].as_i64().unwrap()
}

async fn count(c: &Console, table: &str) -> i64 {
    sqlx::query_scalar(&format!("SELECT COUNT(*) FROM {table}")).fetch_one(&c.pool).await.unwrap()
}

#[tokio::test]
async fn loadbalancer_rules_and_mode_switches() {
    let (c, _d) = console().await;
    let alice = c.login("alice", PW).await;
    let a = Some(alice.as_str());

    // LoadBalancer without a host: a translated field error, nothing stored.
    let r = c
        .json("POST", "/api/console/clusters", a, cluster("lb1", json!({"enabled": true, "mode": "loadbalancer"})))
        .await;
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", r.body);
    assert_eq!(r.json(), json!({"code": "host_required_for_load_balancer", "field": "control_plane_host"}));
    assert_eq!((count(&c, "clusters").await, count(&c, "cluster_operations").await), (0, 0));

    // With a host: stored as LoadBalancer, waiting for the host cluster.
    let body =
        cluster("lb1", json!({"enabled": true, "mode": "loadbalancer", "control_plane_host": "API.example.com"}));
    let r = c.json("POST", "/api/console/clusters", a, body).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let created = r.json();
    let id = created["id"].as_i64().unwrap();
    assert_eq!(created["spec"]["public_access"], json!({"mode": "loadbalancer", "host": "api.example.com"}));
    assert_eq!(created["status"]["phase"], "pending");
    assert_eq!(created["status"]["public_access_port"], Value::Null);
    let path = format!("/api/console/clusters/{id}");

    // loadbalancer -> nodeport (host kept, optional) -> off -> loadbalancer again.
    let steps = [
        (json!({"enabled": true, "mode": "nodeport"}), json!({"mode": "nodeport", "host": null})),
        (json!({"enabled": false}), json!({"mode": "disabled"})),
        (
            json!({"enabled": true, "mode": "loadbalancer", "control_plane_host": "10.0.0.50"}),
            json!({"mode": "loadbalancer", "host": "10.0.0.50"}),
        ),
        (
            json!({"enabled": true, "mode": "nodeport", "control_plane_host": "2001:db8::1"}),
            json!({"mode": "nodeport", "host": "2001:db8::1"}),
        ),
    ];
    for (i, (request, want)) in steps.into_iter().enumerate() {
        let r = c.json("PATCH", &path, a, json!({"public_access": request})).await;
        assert_eq!(r.status, StatusCode::OK, "step {i}: {}", r.body);
        assert_eq!(r.json()["spec"]["public_access"], want, "step {i}");
        assert_eq!(r.json()["generation"], json!(i + 2), "step {i}");
    }
    // Switching to LoadBalancer without host is refused and changes nothing
    // (the NodePort cluster's own host is not carried over).
    let r = c.json("PATCH", &path, a, json!({"public_access": {"enabled": true, "mode": "loadbalancer"}})).await;
    assert_eq!(r.code(), "host_required_for_load_balancer");
    let now = c.get(&path, a).await.json();
    assert_eq!(now["generation"], 5);
    assert_eq!(now["spec"]["public_access"]["mode"], "nodeport");

    // Every request is in the history, newest first, with what changed.
    let events = c.get(&format!("{path}/events"), a).await.json();
    let kinds: Vec<&str> =
        events.as_array().unwrap().iter().map(|e| e["operation"]["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["update", "update", "update", "update", "create"]);
    assert_eq!(events[3]["operation"]["changes"][0]["from"]["mode"], "loadbalancer");
    assert_eq!(events[3]["operation"]["changes"][0]["to"]["mode"], "nodeport");

    // The host reports NodePort for generation 5; then the user switches to
    // LoadBalancer: until the host catches up, the old port, endpoint and
    // kubeconfig are withheld (null/false) on the cluster and in the list.
    let observed = kubebyon::domain::ClusterStatus {
        phase: kubebyon::domain::Phase::Ready,
        public_access_port: Some(31000),
        api_endpoint: Some("https://[2001:db8::1]:31000".into()),
        kubeconfig_available: true,
        connection_status: kubebyon::domain::ConnectionStatus::Ok,
        observed_generation: 5,
        ..Default::default()
    };
    assert!(kubebyon::server::db::clusters::write_status(&c.pool, id, &observed).await.unwrap());
    let now = c.get(&path, a).await.json();
    assert_eq!(
        (&now["status"]["public_access_port"], &now["status"]["kubeconfig_available"]),
        (&json!(31000), &json!(true))
    );
    let lb = json!({"enabled": true, "mode": "loadbalancer", "control_plane_host": "10.0.0.50"});
    assert_eq!(c.json("PATCH", &path, a, json!({"public_access": lb})).await.status, StatusCode::OK);
    let list = c.get("/api/console/clusters", a).await.json();
    for shown in [c.get(&path, a).await.json(), list[0].clone()] {
        let st = &shown["status"];
        assert_eq!((&shown["generation"], &st["observed_generation"]), (&json!(6), &json!(5)));
        assert_eq!(
            (&st["public_access_port"], &st["api_endpoint"], &st["kubeconfig_available"], &st["connection_status"]),
            (&Value::Null, &Value::Null, &json!(false), &json!("unknown")),
            "{shown}"
        );
    }
    let r = c.json("POST", &format!("{path}/kubeconfig"), a, json!({})).await;
    assert_eq!((r.status, r.code()), (StatusCode::CONFLICT, "kubeconfig_unavailable".into()));
    // A credential is made by POST only: a link (a cross-site one too) makes none.
    for get in [format!("{path}/kubeconfig"), path.replace("/api/console", "") + "/kubeconfig?lifetime=1h"] {
        assert_eq!(c.get(&get, a).await.status, StatusCode::METHOD_NOT_ALLOWED, "{get}");
    }

    // Another cluster cannot take the same LoadBalancer host (defect 11);
    // unusable addresses are refused as hosts.
    let r = c
        .json(
            "POST",
            "/api/console/clusters",
            a,
            cluster("lb2", json!({"enabled": true, "mode": "loadbalancer", "control_plane_host": "10.0.0.50"})),
        )
        .await;
    assert_eq!(
        (r.status, r.json()),
        (StatusCode::CONFLICT, json!({"code": "host_in_use", "field": "control_plane_host"}))
    );
    for host in ["0.0.0.0", "::", "[::]", "255.255.255.255"] {
        let body = cluster("lb3", json!({"enabled": true, "mode": "loadbalancer", "control_plane_host": host}));
        assert_eq!(c.json("POST", "/api/console/clusters", a, body).await.code(), "host_invalid", "{host}");
    }
    let ok = cluster("lb2", json!({"enabled": true, "mode": "loadbalancer", "control_plane_host": "10.0.0.51"}));
    let other = c.json("POST", "/api/console/clusters", a, ok).await.json()["id"].as_i64().unwrap();
    let taken = json!({"public_access": {"enabled": true, "mode": "loadbalancer", "control_plane_host": "10.0.0.50"}});
    let r = c.json("PATCH", &format!("/api/console/clusters/{other}"), a, taken).await;
    assert_eq!(r.code(), "host_in_use");
    // The same address in its IPv4-mapped IPv6 form is the same claim (issue 40).
    let mapped =
        cluster("lb4", json!({"enabled": true, "mode": "loadbalancer", "control_plane_host": "::ffff:10.0.0.50"}));
    assert_eq!(c.json("POST", "/api/console/clusters", a, mapped).await.code(), "host_in_use");

    // Public access off remembers the host as it remembers the mode: on again
    // as LoadBalancer without retyping it works (defect 6), and the edit form
    // shows it.
    let body =
        cluster("lb9", json!({"enabled": true, "mode": "loadbalancer", "control_plane_host": "lb9.example.com"}));
    let lb9 = c.json("POST", "/api/console/clusters", a, body).await.json()["id"].as_i64().unwrap();
    let lb9_path = format!("/api/console/clusters/{lb9}");
    let off = c.json("PATCH", &lb9_path, a, json!({"public_access": {"enabled": false}})).await;
    assert_eq!(off.json()["spec"]["public_access"], json!({"mode": "disabled"}));
    let form = c.get(&format!("/clusters/{lb9}/edit"), a).await;
    assert!(form.body.contains(r#"value="lb9.example.com""#), "the edit form shows the remembered host");
    let on = c.json("PATCH", &lb9_path, a, json!({"public_access": {"enabled": true, "mode": "loadbalancer"}})).await;
    assert_eq!(on.status, StatusCode::OK, "{}", on.body);
    assert_eq!(on.json()["spec"]["public_access"], json!({"mode": "loadbalancer", "host": "lb9.example.com"}));
    // On again as NodePort without a host: none is filled in (the admin's NodePort host applies).
    c.json("PATCH", &lb9_path, a, json!({"public_access": {"enabled": false}})).await;
    let np = c.json("PATCH", &lb9_path, a, json!({"public_access": {"enabled": true, "mode": "nodeport"}})).await;
    assert_eq!(np.json()["spec"]["public_access"], json!({"mode": "nodeport", "host": null}));

    // Delete is accepted, recorded, and blocks further edits.
    let r = c.send("DELETE", &path, a, None, "").await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    assert_eq!(r.json()["deletion_requested"], true);
    let r = c.json("PATCH", &path, a, json!({"resources": {"cpu": "1", "memory_gib": 2, "storage_gib": 5}})).await;
    assert_eq!((r.status, r.code()), (StatusCode::CONFLICT, "cluster_deleting".into()));
}

#[tokio::test]
async fn admin_default_mode_applies_to_creates_without_a_mode() {
    let (c, _d) = console().await;
    let admin = c.login("admin", PW).await;
    let alice = c.login("alice", PW).await;
    let settings = json!({"default_cluster_public_access_mode": "loadbalancer", "nodeport_public_host": "203.0.113.5",
        "load_balancer_annotations": {"metallb.io/address-pool": "public"}, "load_balancer_class": "metallb.io/metallb"});
    let r = c.json("PUT", "/api/admin/system-settings", Some(&admin), settings).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.json()["default_cluster_public_access_mode"], "loadbalancer");
    assert_eq!(r.json()["clusters_rerendered"], 0, "no clusters yet");
    let got = c.get("/api/admin/system-settings", Some(&admin)).await.json();
    assert_eq!(got["load_balancer_annotations"]["metallb.io/address-pool"], "public");
    // Fields added later keep their defaults when left out; no host, nothing detected.
    assert_eq!(
        (&got["load_balancer_address_request"], &got["chart_repo"], &got["chart_version"]),
        (&json!("auto"), &json!("https://charts.loft.sh"), &json!("0.30.0"))
    );
    assert_eq!(got["detected_address_request"], Value::Null);
    // GET, change, PUT back: the same names both ways (defect 8).
    let mut changed = got.clone();
    changed["load_balancer_address_request"] = json!("kube-vip");
    changed["chart_version"] = json!("0.30.5");
    let r = c.json("PUT", "/api/admin/system-settings", Some(&admin), changed).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let got = c.get("/api/admin/system-settings", Some(&admin)).await.json();
    assert_eq!((&got["load_balancer_address_request"], &got["chart_version"]), (&json!("kube-vip"), &json!("0.30.5")));

    // No mode given: the admin default (LoadBalancer) decides, so a host is needed.
    let r = c.json("POST", "/api/console/clusters", Some(&alice), cluster("d1", json!({"enabled": true}))).await;
    assert_eq!(r.code(), "host_required_for_load_balancer");
    let r = c
        .json(
            "POST",
            "/api/console/clusters",
            Some(&alice),
            cluster("d1", json!({"enabled": true, "control_plane_host": "d1.example.com"})),
        )
        .await;
    assert_eq!(r.json()["spec"]["public_access"]["mode"], "loadbalancer", "{}", r.body);
    // No public access block at all: on, in the default mode.
    let body = json!({"name": "d2", "resources": {"cpu": "1", "memory_gib": 1, "storage_gib": 1}});
    assert_eq!(
        c.json("POST", "/api/console/clusters", Some(&alice), body).await.code(),
        "host_required_for_load_balancer"
    );
    // An explicit mode wins over the default.
    let r = c
        .json(
            "POST",
            "/api/console/clusters",
            Some(&alice),
            cluster("d3", json!({"enabled": true, "mode": "nodeport"})),
        )
        .await;
    assert_eq!(r.json()["spec"]["public_access"]["mode"], "nodeport");
}

/// The list: search, filters and pages, in the API (array + X-Total-Count);
/// users never see others' clusters through a filter.
#[tokio::test]
async fn the_list_is_searched_filtered_and_paged() {
    let (c, _d) = console().await;
    let alice = c.login("alice", PW).await;
    let bob = c.login("bob", PW).await;
    let admin = c.login("admin", PW).await;
    for (who, name, access) in [
        (&alice, "web-1", json!({"enabled": false})),
        (&alice, "web-2", json!({"enabled": true, "mode": "nodeport"})),
        (&alice, "db-1", json!({"enabled": true, "mode": "loadbalancer", "control_plane_host": "db1.example.com"})),
        (&bob, "web-3", json!({"enabled": true, "mode": "nodeport"})),
        (&bob, "web_x", json!({"enabled": false})),
    ] {
        let r = c.json("POST", "/api/console/clusters", Some(who.as_str()), cluster(name, access)).await;
        assert!(r.status == StatusCode::CREATED || r.code() == "name_invalid", "{name}: {}", r.body);
    }
    let names = |r: &support::http::Reply| -> Vec<String> {
        r.json().as_array().unwrap().iter().map(|c| c["spec"]["name"].as_str().unwrap().to_owned()).collect()
    };
    let list = |who: &str, q: &str| {
        let path = format!("/api/console/clusters{q}");
        let who = who.to_owned();
        let c = &c;
        async move { c.get(&path, Some(&who)).await }
    };
    let r = list(&admin, "?q=web").await;
    assert_eq!(
        (names(&r), r.headers["x-total-count"].to_str().unwrap()),
        (vec!["web-1".into(), "web-2".into(), "web-3".into()], "3")
    );
    // LIKE wildcards in the search are literal.
    assert_eq!(list(&admin, "?q=web_").await.headers["x-total-count"], "0");
    assert_eq!(list(&admin, "?q=%25").await.headers["x-total-count"], "0");
    assert_eq!(names(&list(&admin, "?mode=nodeport").await), ["web-2", "web-3"]);
    assert_eq!(names(&list(&admin, "?mode=disabled").await), ["web-1"]);
    assert_eq!(names(&list(&admin, "?mode=loadbalancer&owner=alice").await), ["db-1"]);
    assert_eq!(names(&list(&admin, "?owner=bob").await), ["web-3"]);
    assert_eq!(names(&list(&admin, "?phase=pending&q=web-1").await), ["web-1"]);
    assert_eq!(list(&admin, "?phase=ready").await.headers["x-total-count"], "0");
    // Pages: two per page, in name order.
    let r = list(&admin, "?per_page=2&page=2").await;
    assert_eq!((names(&r), r.headers["x-total-count"].to_str().unwrap()), (vec!["web-2".into(), "web-3".into()], "4"));
    assert_eq!(names(&list(&admin, "?per_page=2&page=9").await), Vec::<String>::new());
    // Users: only their own, whatever the owner filter says; junk values are ignored.
    assert_eq!(names(&list(&alice, "?owner=bob&mode=ingress&page=x").await), ["db-1", "web-1", "web-2"]);
    assert_eq!(names(&list(&bob, "?q=web").await), ["web-3"]);
    // The page itself, without JavaScript: the filters are in the URL.
    let page = c.get("/clusters?q=web&mode=nodeport", Some(&admin)).await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.body.contains(r#"data-cluster="web-2""#) && page.body.contains(r#"data-cluster="web-3""#));
    assert!(!page.body.contains(r#"data-cluster="web-1""#) && !page.body.contains(r#"data-cluster="db-1""#));
    assert!(page.body.contains(r#"<option value="nodeport" selected"#), "the filter is shown as chosen");
}

/// Defect 7: a host stored before validation that is not a host neither
/// breaks the list nor is dropped silently: the cluster reads, marked for
/// attention, and an edit must fix it.
#[tokio::test]
async fn an_unusable_stored_host_needs_attention_instead_of_breaking_the_list() {
    let (c, _d) = console().await;
    let alice = c.login("alice", PW).await;
    let a = Some(alice.as_str());
    let mut ids = Vec::new();
    for (name, access) in [
        ("old-lb", json!({"enabled": true, "mode": "loadbalancer", "control_plane_host": "lb.example.com"})),
        ("old-np", json!({"enabled": true, "mode": "nodeport", "control_plane_host": "np.example.com"})),
        ("fine", json!({"enabled": false})),
    ] {
        ids.push(
            c.json("POST", "/api/console/clusters", a, cluster(name, access)).await.json()["id"].as_i64().unwrap(),
        );
    }
    // As an old release could have stored them.
    for (id, raw) in [(ids[0], "https://lb.example.com:6443"), (ids[1], "np host")] {
        sqlx::query("UPDATE clusters SET control_plane_host = $1 WHERE id = $2")
            .bind(raw)
            .bind(id)
            .execute(&c.pool)
            .await
            .unwrap();
    }
    let list = c.get("/api/console/clusters", a).await;
    assert_eq!(list.status, StatusCode::OK, "{}", list.body);
    let by_name = |n: &str| list.json().as_array().unwrap().iter().find(|x| x["spec"]["name"] == n).cloned().unwrap();
    assert_eq!(by_name("old-lb")["unusable_host"], "https://lb.example.com:6443");
    assert_eq!(by_name("old-np")["unusable_host"], "np host");
    assert_eq!(by_name("fine")["unusable_host"], Value::Null);
    let page = c.get("/clusters", a).await;
    assert_eq!(page.body.matches(r#"data-attention="unusable_host""#).count(), 2, "the list says so");
    let detail = c.get(&format!("/clusters/{}", ids[0]), a).await;
    assert!(
        detail.body.contains(r#"data-testid="unusable-host""#) && detail.body.contains("https://lb.example.com:6443")
    );
    // An edit that does not fix it is refused (it would turn public access off)...
    let path = format!("/api/console/clusters/{}", ids[0]);
    let r = c.json("PATCH", &path, a, json!({"resources": {"cpu": "1", "memory_gib": 2, "storage_gib": 5}})).await;
    assert_eq!(r.json(), json!({"code": "host_invalid", "field": "control_plane_host"}));
    // ...one that sets a valid host clears the mark.
    let fix =
        json!({"public_access": {"enabled": true, "mode": "loadbalancer", "control_plane_host": "lb.example.com"}});
    let r = c.json("PATCH", &path, a, fix).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(
        (r.json()["unusable_host"].clone(), r.json()["spec"]["public_access"]["host"].clone()),
        (Value::Null, json!("lb.example.com"))
    );
}

#[tokio::test]
async fn users_see_only_their_own_clusters_and_no_admin_api() {
    let (c, _d) = console().await;
    let (admin, alice, bob) = (c.login("admin", PW).await, c.login("alice", PW).await, c.login("bob", PW).await);
    let r = c.json("POST", "/api/console/clusters", Some(&alice), cluster("mine", json!({"enabled": false}))).await;
    let id = r.json()["id"].as_i64().unwrap();
    let path = format!("/api/console/clusters/{id}");

    assert_eq!(c.get(&path, Some(&bob)).await.code(), "not_found");
    assert_eq!(
        c.json("PATCH", &path, Some(&bob), json!({"public_access": {"enabled": true}})).await.code(),
        "not_found"
    );
    assert_eq!(c.send("DELETE", &path, Some(&bob), None, "").await.code(), "not_found");
    assert_eq!(c.get("/api/console/clusters", Some(&bob)).await.json(), json!([]));
    assert_eq!(c.get("/api/console/clusters", Some(&admin)).await.json().as_array().unwrap().len(), 1);
    assert_eq!(c.get(&path, Some(&admin)).await.json()["owner"], "alice");

    let r = c.get("/api/admin/system-settings", Some(&alice)).await;
    assert_eq!((r.status, r.code()), (StatusCode::FORBIDDEN, "forbidden".into()));
    let r = c
        .json(
            "PUT",
            "/api/admin/system-settings",
            Some(&alice),
            json!({"default_cluster_public_access_mode": "loadbalancer", "nodeport_public_host": null,
                   "load_balancer_annotations": null, "load_balancer_class": null}),
        )
        .await;
    assert_eq!(r.code(), "forbidden");
    let r = c.get("/api/console/clusters", None).await;
    assert_eq!((r.status, r.code()), (StatusCode::UNAUTHORIZED, "unauthenticated".into()));
}

#[tokio::test]
async fn bad_input_gets_4xx_with_a_code_and_changes_nothing() {
    let (c, _d) = console().await;
    let alice = c.login("alice", PW).await;
    let a = Some(alice.as_str());
    let big = format!("{{\"name\": \"{}\"}}", "x".repeat(70 * 1024));
    let cases: Vec<(&str, Option<&str>, String, u16, &str)> = vec![
        ("not json", Some("application/json"), "{".into(), 400, "bad_request"),
        (
            "unknown field",
            Some("application/json"),
            cluster("u1", json!({"enabled": false, "colour": "red"})).to_string(),
            400,
            "bad_request",
        ),
        (
            "unknown top field",
            Some("application/json"),
            json!({"name": "u2", "resources": {"cpu": "1", "memory_gib": 1, "storage_gib": 1}, "x": 1}).to_string(),
            400,
            "bad_request",
        ),
        (
            "wrong type",
            Some("application/json"),
            json!({"name": 5, "resources": {"cpu": "1", "memory_gib": 1, "storage_gib": 1}}).to_string(),
            400,
            "bad_request",
        ),
        ("missing field", Some("application/json"), json!({"name": "u3"}).to_string(), 400, "bad_request"),
        ("no content type", None, cluster("u4", json!({"enabled": false})).to_string(), 415, "unsupported_media_type"),
        (
            "form content type",
            Some("application/x-www-form-urlencoded"),
            "name=x".into(),
            415,
            "unsupported_media_type",
        ),
        ("too large", Some("application/json"), big, 413, "payload_too_large"),
        (
            "bad name",
            Some("application/json"),
            cluster("Bad_Name", json!({"enabled": false})).to_string(),
            422,
            "name_invalid",
        ),
        (
            "bad host",
            Some("application/json"),
            cluster("h1", json!({"enabled": true, "mode": "nodeport", "control_plane_host": "https://x.example:6443"}))
                .to_string(),
            422,
            "host_invalid",
        ),
        (
            "bad mode",
            Some("application/json"),
            cluster("m1", json!({"enabled": true, "mode": "ingress"})).to_string(),
            422,
            "mode_invalid",
        ),
        (
            "bad cpu",
            Some("application/json"),
            json!({"name": "c1", "resources": {"cpu": "999", "memory_gib": 1, "storage_gib": 1}}).to_string(),
            422,
            "cpu_invalid",
        ),
        (
            "negative memory",
            Some("application/json"),
            json!({"name": "c2", "resources": {"cpu": "1", "memory_gib": -1, "storage_gib": 1}}).to_string(),
            400,
            "bad_request",
        ),
    ];
    for (what, ct, body, status, code) in cases {
        let r = c.send("POST", "/api/console/clusters", a, ct, body).await;
        assert_eq!((r.status.as_u16(), r.code()), (status, code.to_owned()), "{what}: {}", r.body);
    }
    // The same body as a real client sends it, with its Content-Length: the
    // documented JSON 413, not tower-http's plain text (defect 2).
    let big = format!("{{\"name\": \"{}\"}}", "x".repeat(70 * 1024));
    let length = big.len().to_string();
    let r = c
        .send_with("POST", "/api/console/clusters", a, Some("application/json"), big, &[("content-length", &length)])
        .await;
    assert_eq!((r.status.as_u16(), r.code()), (413, "payload_too_large".to_owned()), "{}", r.body);
    assert!(r.headers["content-type"].to_str().unwrap().starts_with("application/json"));
    assert_eq!(c.get("/api/console/clusters/abc", a).await.code(), "not_found");
    let r = c.get("/api/console/nothing-here", a).await;
    assert_eq!((r.status, r.code()), (StatusCode::NOT_FOUND, "not_found".into()));
    let r = c.send("PUT", "/api/console/clusters", a, Some("application/json"), "{}").await;
    assert_eq!(r.status, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(c.get("/api/console/clusters/999", a).await.code(), "not_found");
    assert_eq!((count(&c, "clusters").await, count(&c, "cluster_operations").await), (0, 0));

    // Settings validation: a PUT carries every field (null clears one).
    let admin = c.login("admin", PW).await;
    let settings = |mode: &str, host: Value, ann: Value, class: Value| {
        json!({"default_cluster_public_access_mode": mode, "nodeport_public_host": host,
               "load_balancer_annotations": ann, "load_balancer_class": class})
    };
    let with = |mut body: Value, key: &str, value: Value| {
        body[key] = value;
        body
    };
    let mut missing = settings("nodeport", Value::Null, Value::Null, Value::Null);
    missing.as_object_mut().unwrap().remove("load_balancer_class");
    let mut extra = settings("nodeport", Value::Null, Value::Null, Value::Null);
    extra.as_object_mut().unwrap().insert("surprise".into(), json!(true));
    for (body, code) in [
        (settings("ingress", Value::Null, Value::Null, Value::Null), "mode_invalid"),
        (settings("nodeport", json!("a b"), Value::Null, Value::Null), "host_invalid"),
        (settings("nodeport", Value::Null, json!({"bad key": "x"}), Value::Null), "annotations_invalid"),
        (settings("nodeport", Value::Null, Value::Null, json!("no way")), "load_balancer_class_invalid"),
        (
            with(
                settings("nodeport", Value::Null, Value::Null, Value::Null),
                "load_balancer_address_request",
                json!("cilium"),
            ),
            "address_request_invalid",
        ),
        (
            with(settings("nodeport", Value::Null, Value::Null, Value::Null), "chart_repo", json!("charts.loft.sh")),
            "chart_repo_invalid",
        ),
        (
            with(
                settings("nodeport", Value::Null, Value::Null, Value::Null),
                "chart_repo",
                json!("http://charts.loft.sh"),
            ),
            "chart_repo_invalid",
        ),
        (
            with(
                settings("nodeport", Value::Null, Value::Null, Value::Null),
                "chart_repo",
                json!("https://user:token@charts.loft.sh"),
            ),
            "chart_repo_invalid",
        ),
        (
            with(
                settings("nodeport", Value::Null, Value::Null, Value::Null),
                "chart_repo",
                json!("https://charts.example.com"),
            ),
            "chart_repo_not_allowed",
        ),
        (
            with(settings("nodeport", Value::Null, Value::Null, Value::Null), "chart_version", json!(">=0.30.0")),
            "chart_version_invalid",
        ),
        (with(settings("nodeport", Value::Null, Value::Null, Value::Null), "chart_version", json!(30)), "bad_request"),
        (missing, "bad_request"),
        (extra, "bad_request"),
    ] {
        let r = c.json("PUT", "/api/admin/system-settings", Some(&admin), body).await;
        assert_eq!(r.code(), code, "{}", r.body);
    }
    assert_eq!(count(&c, "system_settings").await, 0);
}

#[tokio::test]
async fn cross_site_writes_and_bad_logins_are_refused() {
    let (c, _d) = console().await;
    let alice = c.login("alice", PW).await;
    let body = cluster("x1", json!({"enabled": false})).to_string();
    let evil = [("origin", "http://evil.example")];
    let r =
        c.send_with("POST", "/api/console/clusters", Some(&alice), Some("application/json"), body.clone(), &evil).await;
    assert_eq!((r.status, r.code()), (StatusCode::FORBIDDEN, "origin_rejected".into()));
    // A cross-site HTML form post to a server function is refused the same way.
    let r = c
        .send_with(
            "POST",
            "/fn/clusters/create",
            Some(&alice),
            Some("application/x-www-form-urlencoded"),
            "name=x2",
            &evil,
        )
        .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
    // A non-browser JSON client (no Origin, no Referer) may write.
    let r = c.send_with("POST", "/api/console/clusters", Some(&alice), Some("application/json"), body, &[]).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    assert_eq!(count(&c, "clusters").await, 1);

    // Wrong passwords: 401, then 429 after five failures, even with the right one.
    for _ in 0..5 {
        let r =
            c.json("POST", "/api/auth/login", None, json!({"username": "bob", "password": "wrong password!"})).await;
        assert_eq!((r.status, r.code()), (StatusCode::UNAUTHORIZED, "login_failed".into()));
        assert!(r.session_cookie().is_none());
    }
    let r = c.json("POST", "/api/auth/login", None, json!({"username": "bob", "password": PW})).await;
    assert_eq!((r.status, r.code()), (StatusCode::TOO_MANY_REQUESTS, "login_rate_limited".into()));
    // Unknown users fail the same way as wrong passwords.
    let r = c.json("POST", "/api/auth/login", None, json!({"username": "nobody", "password": PW})).await;
    assert_eq!(r.code(), "login_failed");

    // Behind a TLS proxy the cookie is Secure.
    let r = c
        .send_with(
            "POST",
            "/api/auth/login",
            None,
            Some("application/json"),
            json!({"username": "alice", "password": PW}).to_string(),
            &[("x-forwarded-proto", "https")],
        )
        .await;
    assert!(r.headers.get("set-cookie").unwrap().to_str().unwrap().ends_with("; Secure"));

    // Session cookie attributes, and sign-out ends the session.
    let r = c.json("POST", "/api/auth/login", None, json!({"username": "alice", "password": PW})).await;
    let set = r.headers.get("set-cookie").unwrap().to_str().unwrap().to_owned();
    assert!(set.contains("HttpOnly") && set.contains("SameSite=Lax"), "{set}");
    let cookie = r.session_cookie().unwrap();
    assert_eq!(
        c.send("POST", "/api/auth/logout", Some(&cookie), Some("application/json"), "").await.status,
        StatusCode::NO_CONTENT
    );
    assert_eq!(c.get("/api/console/clusters", Some(&cookie)).await.code(), "unauthenticated");
}

/// Behind a proxy that ends TLS (`X-Forwarded-Proto: https`) without
/// `KUBEBYON_PUBLIC_URL`, the join page's one-time token cookie is the
/// `__Host-` one, `Secure`, as the session's is: the page reads that one and
/// clears it with `Secure` (it read the plain cookie before: only the public
/// URL counted, `server::http::request`).
#[tokio::test]
async fn the_join_tokens_cookie_is_secure_behind_a_tls_proxy_as_the_sessions_is() {
    let (c, _d) = console().await;
    let behind_tls = [("origin", "https://127.0.0.1:3000"), ("x-forwarded-proto", "https")];
    let body = json!({"username": "alice", "password": PW}).to_string();
    let r = c.send_with("POST", "/api/auth/login", None, Some("application/json"), body, &behind_tls).await;
    let session = r
        .headers
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find_map(|v| v.strip_prefix("__Host-kubebyon_session=").map(|_| v.split(';').next().unwrap().to_owned()))
        .expect("a __Host- session cookie");
    let id = create(&c, Some(&c.login("alice", PW).await), cluster("tls", json!({"enabled": false}))).await;
    let token = "abcdef.0123456789abcdef";
    let form = Some("application/x-www-form-urlencoded");
    let cookies = format!("{session}; __Host-kubebyon_join_token={id}:{token}:100:200");
    let r = c.send_with("POST", "/fn/join/get", Some(&cookies), form, format!("id={id}"), &behind_tls).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.json()["created"]["token"], token, "{}", r.body);
    let cleared = r.headers.get("set-cookie").expect("the cookie cleared").to_str().unwrap();
    assert!(cleared.starts_with("__Host-kubebyon_join_token=;") && cleared.ends_with("; Secure"), "{cleared}");
    assert!(cleared.contains("Max-Age=0") && cleared.contains("Path=/"), "{cleared}");
    // The plain cookie is not the page's over https (a sibling could plant it).
    let cookies = format!("{session}; kubebyon_join_token={id}:{token}:100:200");
    let r = c.send_with("POST", "/fn/join/get", Some(&cookies), form, format!("id={id}"), &behind_tls).await;
    assert_eq!((r.status, &r.json()["created"]), (StatusCode::OK, &Value::Null), "{}", r.body);
}

#[tokio::test]
async fn pages_redirect_anonymous_users_and_forms_post_without_javascript() {
    let (c, _d) = console().await;
    let r = c.get("/clusters/new", None).await;
    assert_eq!(r.status, StatusCode::SEE_OTHER);
    assert_eq!(r.headers["location"], "/login?next=/clusters/new");
    assert_eq!(c.get("/login", None).await.status, StatusCode::OK);
    // Redirect targets stay on this site, whatever the encoding tricks.
    for next in ["/%09/evil.example", "//evil.example", "https://evil.example", "/%0A/x", "/%E9%9B%86"] {
        let r = c.get(&format!("/lang/zh-CN?next={next}"), None).await;
        assert_eq!(r.headers["location"], "/clusters", "{next}");
    }
    assert_eq!(c.get("/lang/zh-CN?next=/clusters/new", None).await.headers["location"], "/clusters/new");
    assert_eq!(c.get("/lang/xx", None).await.status, StatusCode::NOT_FOUND);

    // A plain HTML form post (no JavaScript): 302 back to the form with the error.
    let alice = c.login("alice", PW).await;
    let form = "name=nolb&cpu=2&memory_gib=4&storage_gib=20&public_access_enabled=on&public_access_mode=loadbalancer&control_plane_host=";
    let referer = [
        ("origin", "http://127.0.0.1:3000"),
        ("referer", "http://127.0.0.1:3000/clusters/new"),
        ("accept", "text/html"),
    ];
    let r = c
        .send_with(
            "POST",
            "/fn/clusters/create",
            Some(&alice),
            Some("application/x-www-form-urlencoded"),
            form,
            &referer,
        )
        .await;
    assert_eq!(r.status, StatusCode::FOUND, "{}", r.body);
    let location = r.headers["location"].to_str().unwrap();
    // Back to the form with what was typed (defect: the input was lost) and the error.
    assert!(
        location.starts_with("/clusters/new?name=nolb&cpu=2&memory_gib=4&storage_gib=20&public_access_enabled=on&public_access_mode=loadbalancer&__path=%2Ffn%2Fclusters%2Fcreate&__err="),
        "{location}"
    );
    assert_eq!(count(&c, "clusters").await, 0);
    // The page it returns to shows the translated error next to the host field,
    // the typed name and the LoadBalancer mode still chosen.
    let page = c.get(location, Some(&alice)).await;
    assert!(page.body.contains(r#"data-error-code="host_required_for_load_balancer""#), "error shown");
    assert!(page.body.contains(r#"value="nolb""#), "name kept");
    assert!(page.body.contains(r#"value="loadbalancer" checked"#), "mode kept: {}", page.body.len());

    // The same refusal to a JavaScript caller is a JSON error with its own 4xx status.
    let r = c.send("POST", "/fn/clusters/create", Some(&alice), Some("application/x-www-form-urlencoded"), form).await;
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::UNPROCESSABLE_ENTITY, "host_required_for_load_balancer".into()),
        "{:?}",
        r.headers
    );

    let ok = "name=withlb&cpu=2&memory_gib=4&storage_gib=20&public_access_enabled=on&public_access_mode=loadbalancer&control_plane_host=lb.example.com";
    let r = c
        .send_with("POST", "/fn/clusters/create", Some(&alice), Some("application/x-www-form-urlencoded"), ok, &referer)
        .await;
    assert_eq!(r.status, StatusCode::FOUND);
    let location = r.headers["location"].to_str().unwrap().to_owned();
    assert!(location.starts_with("/clusters/"), "to the new cluster");
    assert_eq!(count(&c, "clusters").await, 1);

    // A problem page says what it is: a 409 is not "Page not found" (defect 9).
    let id: i64 = location.trim_start_matches("/clusters/").parse().unwrap();
    assert_eq!(c.send("DELETE", &format!("/api/console/clusters/{id}"), Some(&alice), None, "").await.status, 202);
    let page = c.get(&format!("/clusters/{id}/edit"), Some(&alice)).await;
    assert_eq!(page.status, StatusCode::CONFLICT);
    assert!(page.body.contains("<title>Request not completed</title>"), "{}", page.body);
    assert!(!page.body.contains("Page not found"));

    // After a refused post without JavaScript, "Saved." is not shown beside
    // the error, even when the page it returns to said so before (defect 12).
    let admin = c.login("admin", PW).await;
    let settings_form = "default_mode=nodeport&nodeport_public_host=bad%20host&load_balancer_annotations=&load_balancer_class=\
        &load_balancer_address_request=auto&chart_repo=https%3A%2F%2Fcharts.loft.sh&chart_version=0.30.0";
    let from_saved = [
        ("origin", "http://127.0.0.1:3000"),
        ("referer", "http://127.0.0.1:3000/admin/settings?saved=1&rerendered=0"),
        ("accept", "text/html"),
    ];
    let r = c
        .send_with(
            "POST",
            "/fn/settings/save",
            Some(&admin),
            Some("application/x-www-form-urlencoded"),
            settings_form,
            &from_saved,
        )
        .await;
    assert_eq!(r.status, StatusCode::FOUND, "{}", r.body);
    let back = r.headers["location"].to_str().unwrap().trim_start_matches("http://127.0.0.1:3000").to_owned();
    assert!(back.contains("saved=1") && back.contains("__err="), "{back}");
    let page = c.get(&back, Some(&admin)).await;
    assert!(page.body.contains(r#"data-error-code="host_invalid""#), "error shown");
    assert!(!page.body.contains("banner-ok"), "no success banner beside the error");
}

/// Defect: behind a reverse proxy every client looked like the proxy, so one
/// client could lock `admin` out for everybody. With the proxy trusted, the
/// forwarded address is the client; without, a forged header changes nothing.
#[tokio::test]
async fn login_throttling_follows_the_forwarded_client_only_behind_a_trusted_proxy() {
    use kubebyon::server::auth::client::Cidr;
    use kubebyon::server::config::Config;
    let (url, _dir) = support::sqlite_url();
    let pool = kubebyon::server::db::connect(&url).await.unwrap();
    // The test router's peer is 127.0.0.1.
    let config = Config { trusted_proxies: Cidr::parse_list("127.0.0.0/8").unwrap(), ..Config::default() };
    let c = Console::with(pool, None, config);
    c.user("admin", PW, true).await;
    let login = |password: &'static str, forwarded: &'static str| {
        let c = &c;
        async move {
            let body = json!({"username": "admin", "password": password}).to_string();
            let headers = [("x-forwarded-for", forwarded)];
            c.send_with("POST", "/api/auth/login", None, Some("application/json"), body, &headers).await
        }
    };
    for _ in 0..5 {
        assert_eq!(login("wrong password!", "198.51.100.7").await.status, StatusCode::UNAUTHORIZED);
    }
    let r = login(PW, "198.51.100.7").await;
    assert_eq!((r.status, r.code()), (StatusCode::TOO_MANY_REQUESTS, "login_rate_limited".into()));
    // The attacker cannot forge its way out: our proxy appends the real address last.
    let r = login(PW, "203.0.113.1, 198.51.100.7").await;
    assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS);
    // Another client behind the same proxy still signs in as admin.
    let r = login(PW, "192.0.2.44").await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);

    // Without trusted proxies the header is ignored: rotating it evades nothing.
    let (c, _dir) = console().await;
    for i in 0..5 {
        let body = json!({"username": "bob", "password": "wrong password!"}).to_string();
        let forged = format!("198.51.100.{i}");
        let headers = [("x-forwarded-for", forged.as_str())];
        let r = c.send_with("POST", "/api/auth/login", None, Some("application/json"), body, &headers).await;
        assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    }
    let body = json!({"username": "bob", "password": PW}).to_string();
    let headers = [("x-forwarded-for", "192.0.2.99")];
    let r = c.send_with("POST", "/api/auth/login", None, Some("application/json"), body, &headers).await;
    assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS);
}

/// Storage is fixed at creation (a real host refuses to change the
/// StatefulSet's volume claims): an edit of it is refused with a translated
/// field error and changes nothing; CPU and memory still change. The edit
/// page shows the field read-only, saying why.
#[tokio::test]
async fn storage_cannot_be_edited_after_creation() {
    let (c, _d) = console().await;
    let alice = c.login("alice", PW).await;
    let a = Some(alice.as_str());
    let r = c.json("POST", "/api/console/clusters", a, cluster("disk", json!({"enabled": false}))).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let id = r.json()["id"].as_i64().unwrap();
    let path = format!("/api/console/clusters/{id}");
    let ops = count(&c, "cluster_operations").await;
    let r = c.json("PATCH", &path, a, json!({"resources": {"cpu": "2", "memory_gib": 4, "storage_gib": 40}})).await;
    assert_eq!(
        (r.status, r.json()),
        (StatusCode::UNPROCESSABLE_ENTITY, json!({"code": "storage_fixed", "field": "storage_gib"}))
    );
    let now = c.get(&path, a).await.json();
    assert_eq!((now["generation"].clone(), now["spec"]["resources"]["storage_gib"].clone()), (json!(1), json!(20)));
    assert_eq!(count(&c, "cluster_operations").await, ops, "nothing queued");
    let r = c.json("PATCH", &path, a, json!({"resources": {"cpu": "4", "memory_gib": 8, "storage_gib": 20}})).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.json()["spec"]["resources"], json!({"cpu_millis": 4000, "memory_gib": 8, "storage_gib": 20}));
    let page = c.get(&format!("/clusters/{id}/edit"), a).await;
    assert!(page.body.contains("Fixed at creation"), "the edit page says why");
    assert!(
        page.body.contains(r#"name="storage_gib""#) && page.body.contains("readonly"),
        "read-only on the edit page"
    );
}

/// The detail page shows a connection test's status from the URL (a fixed
/// set), never text from it: a crafted link cannot write on the page.
#[tokio::test]
async fn no_text_from_the_url_reaches_the_detail_page() {
    let (c, _d) = console().await;
    let alice = c.login("alice", PW).await;
    let a = Some(alice.as_str());
    let r = c.json("POST", "/api/console/clusters", a, cluster("linked", json!({"enabled": false}))).await;
    let id = r.json()["id"].as_i64().unwrap();
    let page = c.get(&format!("/clusters/{id}?probe=ok&probe_detail=Call+0800-PHISH+now"), a).await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.body.contains(r#"data-testid="probe-outcome""#), "the status is shown");
    // Only the language links carry the URL (percent-encoded, as `next=`).
    let shown: String = page
        .body
        .split("href=\"")
        .enumerate()
        .map(|(i, part)| if i == 0 { part } else { part.split_once('"').map_or("", |(_, rest)| rest) })
        .collect();
    assert!(!shown.contains("PHISH"), "the URL's text is not shown");
}

/// The operator decides which chart repositories admins may choose
/// (`KUBEBYON_CHART_REPOS`): one it lists is saved, the default one is then
/// refused unless listed too.
#[tokio::test]
async fn the_operator_allows_the_chart_repositories() {
    use kubebyon::server::config::Config;
    let (url, _dir) = support::sqlite_url();
    let pool = kubebyon::server::db::connect(&url).await.unwrap();
    let config = Config { chart_repos: vec!["oci://registry.example/charts".into()], ..Config::default() };
    let c = Console::with(pool, None, config);
    c.user("admin", PW, true).await;
    let admin = c.login("admin", PW).await;
    let body = |repo: &str| {
        json!({"default_cluster_public_access_mode": "nodeport", "nodeport_public_host": null,
            "load_balancer_annotations": {}, "load_balancer_class": null, "chart_repo": repo})
    };
    let r = c.json("PUT", "/api/admin/system-settings", Some(&admin), body("oci://registry.example/charts")).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.json()["chart_repo"], "oci://registry.example/charts");
    let r = c.json("PUT", "/api/admin/system-settings", Some(&admin), body("https://charts.loft.sh")).await;
    assert_eq!(r.json(), json!({"code": "chart_repo_not_allowed", "field": "chart_repo"}));
    let now = c.get("/api/admin/system-settings", Some(&admin)).await.json();
    assert_eq!(now["chart_repo"], "oci://registry.example/charts", "nothing changed");
}

/// A cluster being deleted counts against its owner's quota until the host
/// has let it go (its namespace gone, then its row): its pods may run through
/// their whole grace period, so create → delete → create cannot hold more
/// than the quota. The quota line says what is held, deleting ones included.
#[tokio::test]
async fn a_cluster_being_deleted_counts_until_its_namespace_is_gone() {
    let (c, _d) = console().await;
    let alice = c.login("alice", PW).await;
    let a = Some(alice.as_str());
    let mut ids = Vec::new();
    for i in 0..5 {
        ids.push(create(&c, a, cluster(&format!("d{i}"), json!({"enabled": false}))).await);
    }
    assert_eq!(c.send("DELETE", &format!("/api/console/clusters/{}", ids[0]), a, None, "").await.status, 202);
    let r = c.json("POST", "/api/console/clusters", a, cluster("d5", json!({"enabled": false}))).await;
    assert_eq!((r.status, r.json()), (StatusCode::UNPROCESSABLE_ENTITY, json!({"code": "quota_clusters_exceeded"})));
    let quota = c.get("/api/console/quota", a).await.json();
    assert_eq!(quota["used"]["clusters"], 5, "the deleting one is still held: {quota}");
    // The reconciler removes the row once the namespace is gone.
    sqlx::query("DELETE FROM clusters WHERE id = $1").bind(ids[0]).execute(&c.pool).await.unwrap();
    let r = c.json("POST", "/api/console/clusters", a, cluster("d5", json!({"enabled": false}))).await;
    assert_eq!(r.status, StatusCode::CREATED, "room again: {}", r.body);
}

/// Quotas through the API and the pages: the platform default (5 clusters,
/// 16 CPU) refuses the sixth cluster and a CPU total past 16 with a
/// translated code naming the limit, changing nothing; the create page shows
/// what the user holds; an admin's per-user override (the users page's form)
/// lifts the count for that user only; admins are not held to quotas.
#[tokio::test]
async fn quotas_refuse_growth_past_the_limit_and_the_create_form_shows_them() {
    let (c, _d) = console().await;
    let (admin, alice, bob) = (c.login("admin", PW).await, c.login("alice", PW).await, c.login("bob", PW).await);
    let a = Some(alice.as_str());
    for i in 0..5 {
        create(&c, a, cluster(&format!("q{i}"), json!({"enabled": false}))).await;
    }
    let quota = c.get("/api/console/quota", a).await.json();
    assert_eq!(quota["used"], json!({"clusters": 5, "cpu_millis": 10000, "memory_gib": 20, "storage_gib": 100}));
    assert_eq!(quota["limit"]["clusters"], 5);
    let (clusters, ops) = (count(&c, "clusters").await, count(&c, "cluster_operations").await);
    let r = c.json("POST", "/api/console/clusters", a, cluster("q5", json!({"enabled": false}))).await;
    assert_eq!((r.status, r.json()), (StatusCode::UNPROCESSABLE_ENTITY, json!({"code": "quota_clusters_exceeded"})));
    // 10 CPU used of 16: growing one cluster from 2 to 9 CPU goes past it.
    let first = c.get("/api/console/clusters", a).await.json()[0]["id"].as_i64().unwrap();
    let path = format!("/api/console/clusters/{first}");
    let r = c.json("PATCH", &path, a, json!({"resources": {"cpu": "9", "memory_gib": 4, "storage_gib": 20}})).await;
    assert_eq!(
        (r.status, r.json()),
        (StatusCode::UNPROCESSABLE_ENTITY, json!({"code": "quota_exceeded", "field": "cpu"}))
    );
    assert_eq!(
        (count(&c, "clusters").await, count(&c, "cluster_operations").await),
        (clusters, ops),
        "nothing written"
    );
    let r = c.json("PATCH", &path, a, json!({"resources": {"cpu": "8", "memory_gib": 4, "storage_gib": 20}})).await;
    assert_eq!(r.status, StatusCode::OK, "exactly 16 CPU: {}", r.body);

    let page = c.get("/clusters/new", a).await;
    assert!(page.body.contains("5 of 5 clusters") && page.body.contains("16 of 16 CPU"), "the create page says");
    let zh_cookie = format!("{alice}; i18n_pref_locale=zh-CN");
    let zh = c.get("/clusters/new", Some(&zh_cookie)).await;
    assert!(zh.body.contains("已用 5 / 5 个集群"), "translated");

    // The admin lifts alice's count (a plain form post, as without JavaScript).
    let alice_id: i64 =
        sqlx::query_scalar("SELECT id FROM users WHERE username = 'alice'").fetch_one(&c.pool).await.unwrap();
    let headers = [("origin", "http://127.0.0.1:3000"), ("referer", "http://127.0.0.1:3000/admin/users")];
    let bad = format!("user_id={alice_id}&quota_clusters=lots&quota_cpu=&quota_memory_gib=&quota_storage_gib=");
    let form = Some("application/x-www-form-urlencoded");
    let r = c.send_with("POST", "/fn/users/quota", Some(&admin), form, bad.clone(), &headers).await;
    let refused = |r: &support::http::Reply, code: &str| {
        r.body.contains(code) || r.headers.get("location").is_some_and(|l| l.to_str().unwrap().contains(code))
    };
    assert!(refused(&r, "quota_invalid"), "{} {}", r.status, r.body);
    let ok = format!("user_id={alice_id}&quota_clusters=6&quota_cpu=24&quota_memory_gib=&quota_storage_gib=");
    let r = c.send_with("POST", "/fn/users/quota", Some(&alice), form, ok.clone(), &headers).await;
    assert!(refused(&r, "forbidden"), "only admins: {} {}", r.status, r.body);
    let r = c.send_with("POST", "/fn/users/quota", Some(&admin), form, ok.clone(), &headers).await;
    assert!(!r.status.is_server_error() && !refused(&r, "quota_"), "{} {}", r.status, r.body);
    let r = c.json("POST", "/api/console/clusters", a, cluster("q5", json!({"enabled": false}))).await;
    assert_eq!(r.status, StatusCode::CREATED, "alice's own limit: {}", r.body);
    let audit = c.get("/api/admin/audit", Some(&admin)).await.json();
    assert_eq!(audit[0]["action"], "quota_changed", "{audit}");
    assert_eq!(audit[0]["detail"], "clusters: null → 6; cpu_millis: null → 24000", "{audit}");
    // Bob still has the platform's 5; admins none.
    assert_eq!(c.get("/api/console/quota", Some(&bob)).await.json()["limit"]["clusters"], 5);
    assert_eq!(c.get("/api/console/quota", Some(&admin)).await.json()["limit"], Value::Null);
    for i in 0..9 {
        let r = c
            .json("POST", "/api/console/clusters", Some(&admin), cluster(&format!("adm{i}"), json!({"enabled": false})))
            .await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    }
}

/// Spec writes are limited per user (with the limit on, as in production):
/// 20 at once, then 429 `rate_limited` with `Retry-After`, nothing written;
/// refused input does not count; another user is not held back.
#[tokio::test]
async fn spec_writes_are_rate_limited_per_user() {
    let (url, _dir) = support::sqlite_url();
    let pool = kubebyon::server::db::connect(&url).await.unwrap();
    let config =
        kubebyon::server::config::Config { data_dir: "unused".into(), spec_write_limit: true, ..Default::default() };
    let c = Console::with(pool, None, config);
    c.user("admin", PW, true).await;
    c.user("bob", PW, false).await;
    let (admin, bob) = (c.login("admin", PW).await, c.login("bob", PW).await);
    for _ in 0..5 {
        let r = c
            .json("POST", "/api/console/clusters", Some(&admin), cluster("Not A Name", json!({"enabled": false})))
            .await;
        assert_eq!(r.code(), "name_invalid");
    }
    for i in 0..20 {
        let r = c
            .json("POST", "/api/console/clusters", Some(&admin), cluster(&format!("w{i}"), json!({"enabled": false})))
            .await;
        assert_eq!(r.status, StatusCode::CREATED, "write {i}: {}", r.body);
    }
    let (clusters, ops) = (count(&c, "clusters").await, count(&c, "cluster_operations").await);
    let r = c.json("POST", "/api/console/clusters", Some(&admin), cluster("w20", json!({"enabled": false}))).await;
    assert_eq!((r.status, r.code()), (StatusCode::TOO_MANY_REQUESTS, "rate_limited".to_owned()));
    assert_eq!(r.headers["retry-after"], "3");
    let r = c.send("DELETE", "/api/console/clusters/1", Some(&admin), None, "").await;
    assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS, "deletes count too");
    assert_eq!((count(&c, "clusters").await, count(&c, "cluster_operations").await), (clusters, ops));
    // Join tokens and node removals draw on the same budget (each would make
    // a Secret in a control plane, or a removal, and an audit row); a
    // malformed token id or node name costs nothing and is not found.
    let audit = count(&c, "audit_log").await;
    let a = Some(admin.as_str());
    for (method, path, body) in [
        ("POST", "/api/console/clusters/1/join-tokens", r#"{"lifetime":"1h"}"#),
        ("DELETE", "/api/console/clusters/1/join-tokens/abcdef", ""),
        ("DELETE", "/api/console/clusters/1/nodes/worker-1", ""),
        // Sharing too: a known and an unknown name get the same answer once
        // the budget is spent (no user listing by trial).
        ("PUT", "/api/console/clusters/1/members", r#"{"name":"bob","role":"view"}"#),
        ("PUT", "/api/console/clusters/1/members", r#"{"name":"nobody-here","role":"view"}"#),
        ("DELETE", "/api/console/clusters/1/members/user/2", ""),
    ] {
        let r = c.send(method, path, a, Some("application/json"), body).await;
        assert_eq!((r.status, r.code()), (StatusCode::TOO_MANY_REQUESTS, "rate_limited".to_owned()), "{method} {path}");
    }
    let r = c.send("DELETE", "/api/console/clusters/1/nodes/Not_A_Node", a, None, "").await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "a name no node can have is refused first");
    assert_eq!(count(&c, "audit_log").await, audit, "nothing audited");
    let r = c.json("POST", "/api/console/clusters", Some(&bob), cluster("bobs", json!({"enabled": false}))).await;
    assert_eq!(r.status, StatusCode::CREATED, "bob has his own: {}", r.body);
}

/// A cluster's history is paged, newest first: 50 per page on `/events` and
/// on the detail page, the next page from the last id shown.
#[tokio::test]
async fn the_history_is_paged() {
    let (c, _d) = console().await;
    let admin = c.login("admin", PW).await;
    let a = Some(admin.as_str());
    let id = c.json("POST", "/api/console/clusters", a, cluster("busy", json!({"enabled": false}))).await.json()["id"]
        .as_i64()
        .unwrap();
    for i in 0..60 {
        let cpu = if i % 2 == 0 { "3" } else { "2" };
        let body = json!({"resources": {"cpu": cpu, "memory_gib": 4, "storage_gib": 20}});
        let r = c.json("PATCH", &format!("/api/console/clusters/{id}"), a, body).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    }
    let first = c.get(&format!("/api/console/clusters/{id}/events"), a).await.json();
    let first = first.as_array().unwrap();
    assert_eq!(first.len(), 50);
    let last = first[49]["id"].as_i64().unwrap();
    assert!(first.windows(2).all(|w| w[0]["id"].as_i64() > w[1]["id"].as_i64()), "newest first");
    let rest = c.get(&format!("/api/console/clusters/{id}/events?before={last}"), a).await.json();
    let rest = rest.as_array().unwrap();
    assert_eq!(rest.len(), 11, "61 requests in all");
    assert_eq!(rest[10]["operation"]["kind"], "create");
    let r = c.get(&format!("/api/console/clusters/{id}/events?before=x"), a).await;
    assert_eq!(r.code(), "bad_request");
    let page = c.get(&format!("/clusters/{id}"), a).await;
    assert!(page.body.contains(&format!("/clusters/{id}?before={last}")), "a link to the older page");
    let older = c.get(&format!("/clusters/{id}?before={last}"), a).await;
    assert_eq!(older.body.matches("data-kind=").count(), 11);
    assert!(older.body.contains(r#"data-testid="events-newest""#) && !older.body.contains("events-older"));
}

/// The audit log records sign-ins, failed sign-ins of existing accounts (not
/// names that are no account: they may be passwords typed in the wrong
/// field), and an admin's edits and deletions of another user's cluster;
/// entries name the owner and stay after the cluster's row is gone.
#[tokio::test]
async fn sign_ins_and_admin_changes_to_others_clusters_are_audited() {
    let (c, _d) = console().await;
    let alice = c.login("alice", PW).await;
    let r = c.json("POST", "/api/auth/login", None, json!({"username": "alice", "password": "wrong password!"})).await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    let r = c
        .json("POST", "/api/auth/login", None, json!({"username": "hunter2-secret", "password": "whatever12345"}))
        .await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    let id =
        c.json("POST", "/api/console/clusters", Some(&alice), cluster("hers", json!({"enabled": false}))).await.json()
            ["id"]
            .as_i64()
            .unwrap();
    let admin = c.login("admin", PW).await;
    let path = format!("/api/console/clusters/{id}");
    let r = c
        .json("PATCH", &path, Some(&admin), json!({"resources": {"cpu": "3", "memory_gib": 4, "storage_gib": 20}}))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(c.send("DELETE", &path, Some(&admin), None, "").await.status, StatusCode::ACCEPTED);
    // The row goes once the host has uninstalled it; the entries stay.
    sqlx::query("DELETE FROM clusters WHERE id = $1").bind(id).execute(&c.pool).await.unwrap();

    let log = c.get("/api/admin/audit", Some(&admin)).await.json();
    let entries = support::http::audit_rows(&log);
    let find = |action: &str| entries.iter().find(|e| e.1 == action).unwrap_or_else(|| panic!("{action}: {entries:?}"));
    assert_eq!(find("sign_in_failed").0, "anonymous");
    assert_eq!(find("sign_in_failed").2, "user:alice");
    assert!(entries.iter().filter(|e| e.1 == "signed_in").any(|e| e.0 == "alice"));
    let changed = find("cluster_changed_by_admin");
    assert_eq!((changed.0.as_str(), changed.2.as_str()), ("admin", "cluster:hers"));
    assert!(changed.3.starts_with("owner: alice; ") && changed.3.contains("resources"), "{}", changed.3);
    assert_eq!(find("cluster_deleted_by_admin").3, "owner: alice");
    assert!(!log.to_string().contains("hunter2"), "a name that is no account is never written down");
}

/// Privileged pods are the operator's (issue 40 item 4): an admin's
/// `pod_security: privileged` is refused unless `KUBEBYON_ALLOW_PRIVILEGED_PODS`
/// is on, and nothing is stored.
#[tokio::test]
async fn privileged_pods_are_the_operators_choice() {
    use kubebyon::server::config::Config;
    for allowed in [false, true] {
        let (c, _d) =
            console_with(Config { data_dir: "unused".into(), allow_privileged_pods: allowed, ..Config::default() })
                .await;
        let admin = c.login("admin", PW).await;
        let mut settings = c.get("/api/admin/system-settings", Some(&admin)).await.json();
        settings["pod_security"] = json!("privileged");
        let r = c.json("PUT", "/api/admin/system-settings", Some(&admin), settings).await;
        let stored = c.get("/api/admin/system-settings", Some(&admin)).await.json()["pod_security"].clone();
        if allowed {
            assert_eq!((r.status, stored), (StatusCode::OK, json!("privileged")), "{}", r.body);
        } else {
            assert_eq!(r.json(), json!({"code": "pod_security_not_allowed", "field": "pod_security"}));
            assert_eq!(stored, json!("baseline"), "nothing stored");
        }
    }
}

/// Gateway hosts (issue 40 item 6): without the admin's domain suffix any
/// name would be first come, first served, so gateway mode then needs the
/// operator's `KUBEBYON_GATEWAY_ANY_HOST` (the settings page says which);
/// `localhost` and the host cluster's own names are never a cluster's (nor
/// the console's own host: `config::tests::the_consoles_own_host_is_reserved`).
/// Refusals store nothing.
#[tokio::test]
async fn gateway_hosts_need_a_suffix_or_the_operators_leave_and_reserved_names_are_refused() {
    use kubebyon::server::config::Config;
    for any_host in [false, true] {
        let (c, _d) =
            console_with(Config { data_dir: "unused".into(), gateway_any_host: any_host, ..Config::default() }).await;
        let admin = c.login("admin", PW).await;
        let alice = c.login("alice", PW).await;
        let a = Some(alice.as_str());
        let mut settings = c.get("/api/admin/system-settings", Some(&admin)).await.json();
        settings["gateway"] = json!({"namespace": "gw", "name": "shared", "listener": null});
        let r = c.json("PUT", "/api/admin/system-settings", Some(&admin), settings.clone()).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.body);
        let gateway = |host: &str| json!({"enabled": true, "mode": "gateway", "control_plane_host": host});
        let page = c.get("/admin/settings", Some(&admin)).await.body;
        let r = c.json("POST", "/api/console/clusters", a, cluster("g1", gateway("g1.other.org"))).await;
        if any_host {
            assert_eq!(r.status, StatusCode::CREATED, "any name, with the operator's leave: {}", r.body);
            assert!(page.contains(r#"data-warning="any_host""#), "the settings page warns");
        } else {
            assert_eq!(
                (r.status, r.json()),
                (
                    StatusCode::UNPROCESSABLE_ENTITY,
                    json!({"code": "gateway_suffix_required", "field": "public_access_mode"})
                )
            );
            assert!(page.contains(r#"data-warning="suffix_required""#), "the settings page says why");
        }
        for host in ["kubernetes.default.svc", "localhost", "a.localhost", "x.svc.cluster.local"] {
            let r = c.json("POST", "/api/console/clusters", a, cluster("g2", gateway(host))).await;
            let want = if any_host { "gateway_host_reserved" } else { "gateway_suffix_required" };
            assert_eq!(r.code(), want, "{host}: {}", r.body);
        }
        // With a suffix: a reserved name under it is still refused.
        settings["gateway_domain_suffix"] = json!("cluster.local");
        let r = c.json("PUT", "/api/admin/system-settings", Some(&admin), settings.clone()).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.body);
        let r = c.json("POST", "/api/console/clusters", a, cluster("g3", gateway("api.cluster.local"))).await;
        assert_eq!(
            (r.status, r.json()),
            (StatusCode::UNPROCESSABLE_ENTITY, json!({"code": "gateway_host_reserved", "field": "control_plane_host"}))
        );
        settings["gateway_domain_suffix"] = json!("example.com");
        let r = c.json("PUT", "/api/admin/system-settings", Some(&admin), settings).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.body);
        create(&c, a, cluster("g4", gateway("g4.example.com"))).await;
        assert_eq!(count(&c, "clusters").await, if any_host { 2 } else { 1 });
    }
}

/// The join script (no session) answers every refusal alike (issue 40
/// item 7): an own-nodes cluster whose control plane cannot be read (here:
/// no host at all; before, `502 join_script_unavailable` to any well-formed
/// token, never counted), an unknown cluster, a malformed id and a
/// malformed token all get one `404 not_found` after the same second; every
/// one counts against the client, so the 21st is `429`.
#[tokio::test]
async fn the_join_script_refuses_alike_and_counts_every_refusal() {
    let (c, _d) = console().await;
    let admin = c.login("admin", PW).await;
    let mut offer = c.get("/api/admin/system-settings", Some(&admin)).await.json();
    offer["private_nodes"] = json!(true);
    let r = c.json("PUT", "/api/admin/system-settings", Some(&admin), offer).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let mut body =
        cluster("own", json!({"enabled": true, "mode": "loadbalancer", "control_plane_host": "own.example.com"}));
    body["own_nodes"] = json!(true);
    let id = create(&c, Some(&admin), body).await;
    let token = "abcdef.0123456789abcdef";
    let asks = [
        (id.to_string(), token.to_owned()),
        ("9999".to_owned(), token.to_owned()),
        ("not-an-id".to_owned(), token.to_owned()),
        (id.to_string(), "not-a-token".to_owned()),
    ];
    let started = std::time::Instant::now();
    let answers = futures::future::join_all((0..kubebyon::server::db::shared::MAX_JOIN_FAILURES).map(|n| {
        let (cluster, token) = &asks[n as usize % asks.len()];
        let c = &c;
        async move {
            let r = c.get(&format!("/api/join/clusters/{cluster}/script?token={token}"), None).await;
            ((cluster.clone(), token.clone()), r.status, r.code())
        }
    }))
    .await;
    let took = started.elapsed();
    for (ask, status, code) in &answers {
        assert_eq!((*status, code.as_str()), (StatusCode::NOT_FOUND, "not_found"), "{ask:?}");
    }
    assert!(took >= std::time::Duration::from_secs(1), "each refusal takes a second: {took:?}");
    let r = c.get(&format!("/api/join/clusters/{id}/script?token={token}"), None).await;
    assert_eq!((r.status, r.code().as_str()), (StatusCode::TOO_MANY_REQUESTS, "join_rate_limited"), "{}", r.body);
}

/// Own nodes (vCluster private nodes): only when the admin offers them, only
/// with a LoadBalancer endpoint, chosen at creation and kept; a refusal
/// stores nothing.
#[tokio::test]
async fn own_nodes_need_the_admins_offer_and_a_load_balancer() {
    let (c, _d) = console().await;
    let admin = c.login("admin", PW).await;
    let alice = c.login("alice", PW).await;
    let a = Some(alice.as_str());
    let own = |name: &str, access: Value| {
        let mut body = cluster(name, access);
        body["own_nodes"] = json!(true);
        body
    };
    let lb = json!({"enabled": true, "mode": "loadbalancer", "control_plane_host": "n1.example.com"});

    let r = c.json("POST", "/api/console/clusters", a, own("n1", lb.clone())).await;
    assert_eq!(
        (r.status, r.json()),
        (StatusCode::UNPROCESSABLE_ENTITY, json!({"code": "own_nodes_not_offered", "field": "own_nodes"}))
    );
    assert_eq!(count(&c, "clusters").await, 0);

    // The admin offers them, with the Secret holding the Platform key.
    let got = c.get("/api/admin/system-settings", Some(&admin)).await.json();
    assert_eq!((&got["private_nodes"], &got["platform_api_key"]), (&json!(false), &Value::Null));
    let mut offer = got.clone();
    offer["private_nodes"] = json!(true);
    offer["platform_api_key"] = json!("Not A Ref");
    let r = c.json("PUT", "/api/admin/system-settings", Some(&admin), offer.clone()).await;
    assert_eq!(r.json(), json!({"code": "platform_api_key_invalid", "field": "platform_api_key"}));
    // Only in the operator's namespace (each own-nodes control plane may read it).
    offer["platform_api_key"] = json!("kube-system/vcluster-key");
    let r = c.json("PUT", "/api/admin/system-settings", Some(&admin), offer.clone()).await;
    assert_eq!(r.json(), json!({"code": "platform_api_key_namespace", "field": "platform_api_key"}));
    // Nor the console's own namespace, by default (its Secrets are no control plane's to read).
    offer["platform_api_key"] = json!("kubebyon/vcluster-key");
    let r = c.json("PUT", "/api/admin/system-settings", Some(&admin), offer.clone()).await;
    assert_eq!(r.json(), json!({"code": "platform_api_key_namespace", "field": "platform_api_key"}));
    offer["platform_api_key"] = json!("kubebyon-platform-key/vcluster-key");
    let r = c.json("PUT", "/api/admin/system-settings", Some(&admin), offer).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(
        (&r.json()["private_nodes"], &r.json()["platform_api_key"]),
        (&json!(true), &json!("kubebyon-platform-key/vcluster-key"))
    );

    for access in [json!({"enabled": true, "mode": "nodeport"}), json!({"enabled": false})] {
        let r = c.json("POST", "/api/console/clusters", a, own("n1", access)).await;
        assert_eq!(r.json(), json!({"code": "own_nodes_need_load_balancer", "field": "public_access_mode"}));
    }
    assert_eq!(count(&c, "clusters").await, 0);

    let r = c.json("POST", "/api/console/clusters", a, own("n1", lb)).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let id = r.json()["id"].as_i64().unwrap();
    assert_eq!(r.json()["spec"]["own_nodes"], true);
    // Clusters made without it have none.
    let r =
        c.json("POST", "/api/console/clusters", a, cluster("n2", json!({"enabled": true, "mode": "nodeport"}))).await;
    assert_eq!(r.json()["spec"]["own_nodes"], false, "{}", r.body);
    let n2 = r.json()["id"].as_i64().unwrap();

    // Leaving the LoadBalancer would cut the nodes off: refused, nothing changes.
    let path = format!("/api/console/clusters/{id}");
    let before = c.get(&path, a).await.json();
    let r = c.json("PATCH", &path, a, json!({"public_access": {"enabled": true, "mode": "nodeport"}})).await;
    assert_eq!(r.json(), json!({"code": "own_nodes_need_load_balancer", "field": "public_access_mode"}));
    assert_eq!(c.get(&path, a).await.json(), before);
    // Own nodes are fixed: not a field an edit takes.
    let r = c.json("PATCH", &path, a, json!({"own_nodes": false})).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    // A new host at the LoadBalancer is an ordinary edit.
    let r = c
        .json("PATCH", &path, a, json!({"public_access": {"enabled": true, "mode": "loadbalancer", "control_plane_host": "n1b.example.com"}}))
        .await;
    assert_eq!((r.status, &r.json()["spec"]["own_nodes"]), (StatusCode::OK, &json!(true)), "{}", r.body);

    // The join page says why a join would fail; without own nodes it offers no command.
    for (cluster, warnings, form) in
        [(id, &["not_ready", "control_plane_unavailable"][..], true), (n2, &["own_nodes_off"][..], false)]
    {
        let page = c.get(&format!("/clusters/{cluster}/join"), a).await;
        assert_eq!(page.status, StatusCode::OK);
        let shown: Vec<&str> = page.body.split("data-warning=\"").skip(1).filter_map(|s| s.split('"').next()).collect();
        assert_eq!(shown, warnings, "{cluster}");
        assert_eq!(page.body.contains(r#"data-form="create-token""#), form, "{cluster}");
    }
}

/// Issue 42: the admin sets the longest a user's own kubeconfig may last (8
/// hours unless set); the GET shows it in seconds and takes it back; a
/// download asking for longer is refused in its field before anything is
/// made; out-of-range settings are refused and change nothing.
#[tokio::test]
async fn the_admins_longest_kubeconfig_lifetime_bounds_downloads() {
    let (c, _d) = console().await;
    let admin = c.login("admin", PW).await;
    let alice = c.login("alice", PW).await;
    let got = c.get("/api/admin/system-settings", Some(&admin)).await.json();
    assert_eq!(got["kubeconfig_max_lifetime"], 28_800, "8 hours unless set");
    let id = create(&c, Some(&alice), cluster("short", json!({"enabled": false}))).await;
    let download = |lifetime: &'static str| {
        let (c, alice) = (&c, &alice);
        let path = format!("/api/console/clusters/{id}/kubeconfig");
        async move { c.json("POST", &path, Some(alice), json!({ "lifetime": lifetime })).await }
    };
    let r = download("1d").await;
    assert_eq!(r.json(), json!({"code": "credential_lifetime_over_limit", "field": "lifetime"}), "{}", r.body);
    // Within the bound: refused only because there is no kubeconfig yet.
    assert_eq!(download("8h").await.code(), "kubeconfig_unavailable");
    // A lifetime ending in a character wider than a byte: refused in its
    // field, never a panic (it split a byte index before).
    for odd in ["1é", "8ｈ", "🦀"] {
        let r = download(odd).await;
        assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY, "{odd}: {}", r.body);
        assert_eq!(r.json(), json!({"code": "credential_lifetime_invalid", "field": "lifetime"}), "{odd}");
    }

    let mut changed = got.clone();
    changed["kubeconfig_max_lifetime"] = json!("30d");
    let r = c.json("PUT", "/api/admin/system-settings", Some(&admin), changed.clone()).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.json()["kubeconfig_max_lifetime"], 2_592_000);
    assert_eq!(download("1d").await.code(), "kubeconfig_unavailable", "now within the bound");
    assert_eq!(download("31d").await.code(), "credential_lifetime_over_limit");
    for bad in [json!("5m"), json!("2y"), json!(3_601), json!(59), json!("soon")] {
        changed["kubeconfig_max_lifetime"] = bad.clone();
        let r = c.json("PUT", "/api/admin/system-settings", Some(&admin), changed.clone()).await;
        assert_eq!(
            r.json(),
            json!({"code": "credential_lifetime_invalid", "field": "kubeconfig_max_lifetime"}),
            "{bad}: {}",
            r.body
        );
    }
    // Seconds as the GET shows them are taken back as they are.
    changed["kubeconfig_max_lifetime"] = json!(3_600);
    let r = c.json("PUT", "/api/admin/system-settings", Some(&admin), changed).await;
    assert_eq!(r.json()["kubeconfig_max_lifetime"], 3_600, "{}", r.body);
    let r = download("").await;
    assert_eq!(r.code(), "kubeconfig_unavailable", "the default shrinks to the bound: {}", r.body);
}
