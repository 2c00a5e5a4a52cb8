//! Generated input against every JSON endpoint, server function and page the
//! router serves (read from the router, as the authorization matrix does),
//! in process, through the real router and a real SQLite file: 10,000 cases
//! by default (`KUBEBYON_FUZZ_CASES`), from a fixed seed so a failure
//! replays. Bodies are arbitrary JSON, form fields from the console's own
//! vocabulary with hostile values, valid bodies with one field mutated, and
//! raw bytes; path parameters, content types and callers vary too.
//!
//! Every answer must be below 500 and no handler may panic. Afterwards the
//! database must hold: no LoadBalancer cluster without a host, one operation
//! per generation of every cluster, no operation without its cluster, every
//! stored name and host valid by the domain's own rules.

mod support;

use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use support::http::Console;

const PW: &str = "correct horse battery";

const FIELDS: &[&str] = &[
    "name",
    "resources",
    "cpu",
    "memory_gib",
    "storage_gib",
    "public_access",
    "enabled",
    "mode",
    "host",
    "control_plane_host",
    "public_access_enabled",
    "public_access_mode",
    "id",
    "confirm",
    "username",
    "password",
    "role",
    "user_id",
    "default_cluster_public_access_mode",
    "default_mode",
    "nodeport_public_host",
    "load_balancer_annotations",
    "load_balancer_class",
    "load_balancer_address_request",
    "chart_repo",
    "chart_version",
    "all",
    "clusters",
    "include_disabled",
    "hosts",
    "template",
    "range",
    "typed",
    "concurrency",
    "grace_secs",
    "grace_days",
    "source",
    "query[q]",
    "query[page]",
    "query[mode]",
    "query[phase]",
    "form[clusters]",
    "form[source]",
    "form[hosts]",
    "form[concurrency]",
    "form[grace_days]",
    "before",
    "next",
    "action",
    "cluster_id",
    "lifetime",
    "query[lifetime]",
    "kubeconfig_max_lifetime",
    "extra_egress",
];

const VALUES: &[&str] = &[
    "",
    " ",
    "0",
    "1",
    "-1",
    "2",
    "9223372036854775807",
    "99999999999999999999",
    "1e309",
    "NaN",
    "true",
    "false",
    "on",
    "null",
    "nodeport",
    "loadbalancer",
    "disabled",
    "user",
    "admin",
    "auto",
    "metallb",
    "kube-vip",
    "none",
    "203.0.113.5",
    "10.0.0.1-10.0.0.9",
    "10.0.0.9-10.0.0.1",
    "0.0.0.0/0",
    "api.example.com",
    "{name}.example.com",
    "{name}{name}.x",
    "*.example.com",
    "https://api.example.com:6443/x",
    "a..b",
    "-a.com",
    "[::1]",
    "fe80::1%eth0",
    "web",
    "Web",
    "a-very-long-name-that-goes-on-and-on-past-forty-characters",
    "<script>alert(1)</script>",
    "'; DROP TABLE clusters; --",
    "\u{0}",
    "\u{202e}evil",
    "名前",
    "🦀",
    "%",
    "%00",
    "../../etc/passwd",
    "correct horse battery",
    "a long enough pw",
    "7d",
    "1h",
    "-5s",
    "36500d",
    "1é",
    "8ｈ",
    "10443 vcluster-platform",
    "https://charts.loft.sh",
    "0.30.0",
    "{\"a\":1}",
    "[]",
    "{}",
];

/// A value: one of ours, or arbitrary text (long, unicode, control characters).
fn value() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => proptest::sample::select(VALUES).prop_map(str::to_owned),
        1 => "\\PC{0,40}",
        1 => proptest::collection::vec(any::<char>(), 0..300).prop_map(|v| v.into_iter().collect()),
    ]
}

fn key() -> impl Strategy<Value = String> {
    prop_oneof![4 => proptest::sample::select(FIELDS).prop_map(str::to_owned), 1 => "[a-z_\\[\\]]{0,12}"]
}

fn json_value() -> impl Strategy<Value = serde_json::Value> {
    use serde_json::Value;
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(|f| serde_json::Number::from_f64(f).map(Value::Number).unwrap_or(Value::Null)),
        value().prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 40, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6).prop_map(serde_json::Value::Array),
            proptest::collection::btree_map(key(), inner, 0..8)
                .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Valid bodies the mutator starts from (JSON API and page forms).
const TEMPLATES: &[&str] = &[
    r#"{"name":"fz","resources":{"cpu":"1","memory_gib":2,"storage_gib":5},"public_access":{"enabled":true,"mode":"loadbalancer","control_plane_host":"api.example.com"}}"#,
    r#"{"public_access":{"enabled":true,"mode":"nodeport"}}"#,
    r#"{"default_cluster_public_access_mode":"nodeport","nodeport_public_host":null,"load_balancer_annotations":{},"load_balancer_class":null}"#,
    r#"{"all":true,"include_disabled":true,"hosts":{"range":"10.0.0.1-10.0.0.9"},"concurrency":2,"grace_secs":60}"#,
    r#"{"username":"alice","password":"nope"}"#,
];

/// A valid body (a fresh cluster name), or one with a field's value replaced.
fn body_from(templates: std::ops::Range<usize>) -> impl Strategy<Value = (Option<&'static str>, Vec<u8>)> {
    (
        templates.prop_map(|i| TEMPLATES[i]),
        "[a-z][a-z0-9-]{0,10}",
        proptest::option::of((any::<prop::sample::Index>(), json_value())),
    )
        .prop_map(|(t, name, change)| {
            let mut doc: serde_json::Value = serde_json::from_str(t).unwrap();
            if let Some(obj) = doc.as_object_mut() {
                if obj.contains_key("name") {
                    // Hosts are unique per cluster, like names.
                    if let Some(pa) = obj.get_mut("public_access").and_then(|p| p.as_object_mut())
                        && pa.contains_key("control_plane_host")
                    {
                        pa.insert("control_plane_host".into(), format!("{name}.example.com").into());
                    }
                    obj.insert("name".into(), name.into());
                }
                if let Some((at, v)) = change {
                    // Every (object, key) path, top level and one down.
                    let mut paths: Vec<(Option<String>, String)> = obj.keys().map(|k| (None, k.clone())).collect();
                    for (k, inner) in obj.iter() {
                        if let Some(o) = inner.as_object() {
                            paths.extend(o.keys().map(|ik| (Some(k.clone()), ik.clone())));
                        }
                    }
                    match at.get(&paths).clone() {
                        (None, k) => {
                            obj.insert(k, v);
                        }
                        (Some(outer), k) => {
                            if let Some(o) = obj.get_mut(&outer).and_then(|x| x.as_object_mut()) {
                                o.insert(k, v);
                            }
                        }
                    }
                }
            }
            (Some("application/json"), doc.to_string().into_bytes())
        })
}

fn body() -> impl Strategy<Value = (Option<&'static str>, Vec<u8>)> {
    let json = json_value().prop_map(|v| (Some("application/json"), v.to_string().into_bytes()));
    let mutated = body_from(0..TEMPLATES.len());
    let form = proptest::collection::vec((key(), value()), 0..10).prop_map(|pairs| {
        let mut s = form_urlencoded::Serializer::new(String::new());
        for (k, v) in &pairs {
            s.append_pair(k, v);
        }
        (Some("application/x-www-form-urlencoded"), s.finish().into_bytes())
    });
    let raw = (
        proptest::sample::select(vec![None, Some("application/json"), Some("text/plain"), Some("multipart/form-data")]),
        proptest::collection::vec(any::<u8>(), 0..200),
    );
    prop_oneof![2 => json, 3 => mutated, 4 => form, 1 => raw]
}

fn segment() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => proptest::sample::select(vec!["1", "2", "3", "0", "-1", "99999999999999999999", "abc", "%00", "%F0%9F%A6%80", "1.5", "%20", "retry", "rollback", "zh-CN", "xx"]).prop_map(str::to_owned),
        1 => "[a-zA-Z0-9._~-]{0,20}",
    ]
}

#[derive(Debug, Clone)]
struct Case {
    method: String,
    route: String,
    segments: Vec<String>,
    query: Option<String>,
    body: (Option<&'static str>, Vec<u8>),
    who: usize,
}

fn concrete(route: &str, segments: &[String]) -> String {
    let mut it = segments.iter();
    route
        .split('/')
        .map(|part| if part.starts_with('{') { it.next().cloned().unwrap_or_default() } else { part.to_owned() })
        .collect::<Vec<_>>()
        .join("/")
}

#[test]
fn generated_input_never_breaks_the_console_or_its_data() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let (url, _dir) = support::sqlite_url();
    let (c, routes, sessions) = rt.block_on(async {
        let pool = kubebyon::server::db::connect(&url).await.unwrap();
        let c = Console::new(pool);
        for (name, admin) in [("admin", true), ("alice", false), ("bob", false)] {
            c.user(name, PW, admin).await;
        }
        let routes: Vec<(String, String)> = support::routes::served(&c).await.into_iter().collect();
        let mut sessions = vec![None];
        for name in ["alice", "bob", "admin"] {
            sessions.push(Some(name));
        }
        (c, routes, sessions)
    });
    let cases: u32 = std::env::var("KUBEBYON_FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(10_000);
    // A quarter of the cases aim a template at the route it belongs to, so
    // clusters, settings and migrations get created and then changed.
    const AIMED: &[(&str, &str, usize)] = &[
        ("POST", "/api/console/clusters", 0),
        ("PATCH", "/api/console/clusters/{id}", 1),
        ("PATCH", "/api/console/clusters/{id}", 0),
        ("PUT", "/api/admin/system-settings", 2),
        ("POST", "/api/admin/moves/dry-run", 3),
        ("POST", "/api/admin/moves", 3),
    ];
    let any_route = proptest::sample::select(routes.clone()).prop_map(|r| (r, None));
    let aimed = (proptest::sample::select(AIMED), 0..TEMPLATES.len())
        .prop_flat_map(|((m, r, t), _)| (Just((m.to_owned(), r.to_owned())), body_from(t..t + 1)))
        .prop_map(|(r, b)| (r, Some(b)));
    let strategy = (
        prop_oneof![3 => any_route, 1 => aimed],
        proptest::collection::vec(segment(), 3),
        proptest::option::weighted(0.2, proptest::collection::vec((key(), value()), 0..4)),
        body(),
        0..4usize,
    )
        .prop_map(|(((method, route), aimed_body), segments, query, body, who)| Case {
            method,
            route,
            segments,
            query: query.map(|pairs| {
                let mut s = form_urlencoded::Serializer::new(String::new());
                for (k, v) in &pairs {
                    s.append_pair(k, v);
                }
                s.finish()
            }),
            body: aimed_body.unwrap_or(body),
            who,
        });
    let config = Config { cases, failure_persistence: None, max_shrink_iters: 200, ..Config::default() };
    let mut runner = TestRunner::new_with_rng(config, TestRng::deterministic_rng(RngAlgorithm::ChaCha));
    let started = std::time::Instant::now();
    let seen = std::sync::Mutex::new(std::collections::BTreeMap::<u16, u32>::new());
    let result = runner.run(&strategy, |case| {
        let mut path = concrete(&case.route, &case.segments);
        if let Some(q) = &case.query {
            path = format!("{path}?{q}");
        }
        let reply = rt.block_on(async {
            // A fresh session per call: a generated sign-out cannot end the next call's.
            let cookie = match sessions[case.who] {
                None => None,
                Some(name) => {
                    use kubebyon::server::auth::session;
                    let id: i64 = sqlx::query_scalar("SELECT id FROM users WHERE username = $1")
                        .bind(name)
                        .fetch_one(&c.pool)
                        .await
                        .unwrap();
                    let token = session::new_token();
                    kubebyon::server::db::sessions::insert(&c.pool, &session::token_hash(&token), id, 3600)
                        .await
                        .unwrap();
                    Some(format!("{}={token}", session::COOKIE))
                }
            };
            c.send(&case.method, &path, cookie.as_deref(), case.body.0, case.body.1.clone()).await
        });
        *seen.lock().unwrap().entry(reply.status.as_u16()).or_default() += 1;
        prop_assert!(
            reply.status.as_u16() < 500,
            "{} {path} ({:?}): {} {}",
            case.method,
            case.body.0,
            reply.status,
            reply.body
        );
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    println!(
        "fuzz: {cases} cases over {} routes in {:.1} s; statuses {:?}",
        routes.len(),
        started.elapsed().as_secs_f64(),
        seen.lock().unwrap()
    );

    // What the database must still hold.
    rt.block_on(async {
        let count = |sql: &'static str| {
            let pool = c.pool.clone();
            async move { sqlx::query_scalar::<_, i64>(sql).fetch_one(&pool).await.unwrap() }
        };
        let checks = [
            (
                "LoadBalancer clusters without a host",
                "SELECT COUNT(*) FROM clusters WHERE public_access_mode = 'loadbalancer' \
                 AND (control_plane_host IS NULL OR control_plane_host = '')",
            ),
            (
                "clusters whose operations are not one per generation",
                "SELECT COUNT(*) FROM clusters c WHERE c.generation <> \
                 (SELECT COUNT(DISTINCT o.generation) FROM cluster_operations o WHERE o.cluster_id = c.id) \
                 OR c.generation <> (SELECT COUNT(*) FROM cluster_operations o WHERE o.cluster_id = c.id)",
            ),
            (
                "operations without their cluster",
                "SELECT COUNT(*) FROM cluster_operations o WHERE NOT EXISTS (SELECT 1 FROM clusters c WHERE c.id = o.cluster_id)",
            ),
            ("sessions without their user", "SELECT COUNT(*) FROM sessions s WHERE NOT EXISTS (SELECT 1 FROM users u WHERE u.id = s.user_id)"),
            ("migration items without their migration", "SELECT COUNT(*) FROM migration_items i WHERE NOT EXISTS (SELECT 1 FROM migrations m WHERE m.id = i.migration_id)"),
        ];
        for (what, sql) in checks {
            assert_eq!(count(sql).await, 0, "{what}");
        }
        // Everything stored reads back through the domain's own parsers.
        let user = kubebyon::server::db::users::by_username(&c.pool, "admin").await.unwrap().unwrap().current_user();
        let clusters = kubebyon::server::db::clusters::list(&c.pool, None).await.expect("every stored cluster parses");
        for cl in &clusters {
            assert!(kubebyon::domain::cluster_name::ClusterName::parse(cl.spec.name.as_str()).is_ok());
        }
        let users = kubebyon::server::service::accounts::list_users(&c.pool, &user).await.unwrap();
        for u in &users {
            assert!(kubebyon::domain::user::Username::parse(&u.username).is_ok(), "{}", u.username);
        }
        println!("fuzz: database holds {} clusters, {} users; every invariant holds", clusters.len(), users.len());
    });
}
