//! The authorization matrix: every JSON route, every server function and
//! every page, as read from the router itself (`router::api_routes`, the
//! server function registry, leptos' route list), called by anonymous, Alice
//! (the owner), Dora (an admin member), Erin (an editor), Vic (a viewer,
//! through a team), Bob (no member) and a console admin through the real
//! router and a real SQLite file (issue 42). Each answer must be the status the matrix names; a route
//! without a matrix entry, or an entry for a route that no longer exists,
//! fails the test.

mod support;

use std::collections::BTreeSet;

use kubebyon::domain::membership::MemberKind::{Team, User};
use kubebyon::domain::membership::MemberRole;
use kubebyon::server::auth::session;
use kubebyon::server::db::members;
use serde_json::json;
use support::http::Console;

const PW: &str = "correct horse battery";

/// Who calls. `Anon` has no cookie; the others get a fresh session per call
/// (so a sign-out row cannot end a later row's session). Alice owns the
/// cluster; Dora is its admin member, Erin its editor, Vic a viewer through
/// the team `viewers`; Bob has nothing to do with it; Admin is a console admin.
#[derive(Clone, Copy, Debug)]
enum Who {
    Anon,
    Alice,
    Dora,
    Erin,
    Vic,
    Bob,
    Admin,
}
const WHO: [Who; 7] = [Who::Anon, Who::Alice, Who::Dora, Who::Erin, Who::Vic, Who::Bob, Who::Admin];
const N: usize = WHO.len();

/// An expected answer: an exact status, or any success/redirect.
#[derive(Clone, Copy, Debug)]
enum Want {
    Is(u16),
    Ok,
    /// A browser's download refused: back to the cluster's page (303) with the code.
    Back(&'static str),
}
use Want::{Back, Is, Ok};
/// A page that needs a signed-in user sends anonymous visitors to sign in.
const SIGN_IN: Want = Is(303);
/// No host cluster here: no kubeconfig yet.
const UNAVAILABLE: Want = Back("kubeconfig_unavailable");

struct Row {
    method: &'static str,
    /// The route as mounted (`{id}` etc.).
    route: &'static str,
    /// The request path: `{C}` Alice's cluster, `{F}` a fresh cluster of
    /// Alice's for this call, `{U}` user carol, `{who}` the caller's name.
    path: &'static str,
    body: &'static str,
    want: [Want; N],
}

const fn row(
    method: &'static str,
    route: &'static str,
    path: &'static str,
    body: &'static str,
    want: [Want; N],
) -> Row {
    Row { method, route, path, body, want }
}

/// Those who may see the cluster (its owner, members, admins); others: not found.
const SEE: [Want; N] = [Is(401), Ok, Ok, Ok, Ok, Is(404), Ok];
/// Those whose role may change it; a viewer is refused.
const EDIT: [Want; N] = [Is(401), Ok, Ok, Ok, Is(403), Is(404), Ok];
/// Those with the admin role on it (owner, admin member, console admin).
const ADMIN_ROLE: [Want; N] = [Is(401), Ok, Ok, Is(403), Is(403), Is(404), Ok];
/// The same, where the request then fails for everyone allowed with `code`.
const fn admin_role_then(code: u16) -> [Want; N] {
    [Is(401), Is(code), Is(code), Is(403), Is(403), Is(404), Is(code)]
}
/// Those who may see it, where the request then fails with `code`.
const fn see_then(code: u16) -> [Want; N] {
    [Is(401), Is(code), Is(code), Is(code), Is(code), Is(404), Is(code)]
}
const SIGNED_IN: [Want; N] = [Is(401), Ok, Ok, Ok, Ok, Ok, Ok];
const ADMIN_ONLY: [Want; N] = [Is(401), Is(403), Is(403), Is(403), Is(403), Is(403), Ok];
const fn admin_only_then(code: u16) -> [Want; N] {
    [Is(401), Is(403), Is(403), Is(403), Is(403), Is(403), Is(code)]
}
const ANYONE: [Want; N] = [Ok; N];
const PAGE_SIGNED_IN: [Want; N] = [SIGN_IN, Ok, Ok, Ok, Ok, Ok, Ok];
const PAGE_SEE: [Want; N] = [SIGN_IN, Ok, Ok, Ok, Ok, Is(404), Ok];
const PAGE_EDIT: [Want; N] = [SIGN_IN, Ok, Ok, Ok, Is(403), Is(404), Ok];
const PAGE_ADMIN: [Want; N] = [SIGN_IN, Is(403), Is(403), Is(403), Is(403), Is(403), Ok];
const PAGE_REDIRECT: [Want; N] = [SIGN_IN, Is(308), Is(308), Is(308), Is(308), Is(308), Is(308)];

const CREATE: &str =
    r#"{"name":"{who}-c","resources":{"cpu":"1","memory_gib":2,"storage_gib":5},"public_access":{"enabled":false}}"#;
const FORM_CREATE: &str = "name={who}-f&cpu=1&memory_gib=2&storage_gib=5";
const FORM_UPDATE: &str = "id={C}&cpu=1&memory_gib=2&storage_gib=5";
// Every cluster, disabled ones too: Alice's become the migration's (the
// driver does not run here, so nothing is switched).
const MOVE: &str =
    r#"{"all":true,"include_disabled":true,"hosts":{"template":"{name}.example.com"},"concurrency":2,"grace_secs":60}"#;
const FORM_MOVE: &str =
    "clusters=&include_disabled=on&source=template&hosts=%7Bname%7D.example.com&concurrency=2&grace_days=1";
const SETTINGS: &str = r#"{"default_cluster_public_access_mode":"nodeport","nodeport_public_host":null,"load_balancer_annotations":{},"load_balancer_class":null}"#;
const FORM_SETTINGS: &str = "default_mode=nodeport&nodeport_public_host=&load_balancer_annotations=&load_balancer_class=&load_balancer_address_request=auto&chart_repo=https%3A%2F%2Fcharts.loft.sh&chart_version=0.30.0";

fn matrix() -> Vec<Row> {
    vec![
        // JSON API
        row("GET", "/api/console/clusters", "/api/console/clusters", "", SIGNED_IN),
        row("POST", "/api/console/clusters", "/api/console/clusters", CREATE, SIGNED_IN),
        row("GET", "/api/console/quota", "/api/console/quota", "", SIGNED_IN),
        // Live pages' event streams (`server::push`): read up to the first event.
        row("GET", "/events/clusters", "/events/clusters", "", SIGNED_IN),
        row("GET", "/events/clusters/{id}", "/events/clusters/{C}", "", SEE),
        row("GET", "/api/console/clusters/{id}", "/api/console/clusters/{C}", "", SEE),
        row(
            "PATCH",
            "/api/console/clusters/{id}",
            "/api/console/clusters/{C}",
            r#"{"resources":{"cpu":"1","memory_gib":2,"storage_gib":5}}"#,
            EDIT,
        ),
        row("DELETE", "/api/console/clusters/{id}", "/api/console/clusters/{F}", "", ADMIN_ROLE),
        row("GET", "/api/console/clusters/{id}/events", "/api/console/clusters/{C}/events", "", SEE),
        // No host cluster here: everyone who may see the cluster may have
        // their own kubeconfig, and learns there is none yet.
        row(
            "POST",
            "/api/console/clusters/{id}/kubeconfig",
            "/api/console/clusters/{C}/kubeconfig",
            "{}",
            see_then(409),
        ),
        // The browser's download (a form post, as the break-glass one: anonymous 401);
        // a refusal goes back to the cluster's page, which says why.
        row(
            "POST",
            "/clusters/{id}/kubeconfig",
            "/clusters/{C}/kubeconfig",
            "lifetime=8h",
            [Is(401), UNAVAILABLE, UNAVAILABLE, UNAVAILABLE, UNAVAILABLE, Back("not_found"), UNAVAILABLE],
        ),
        // Break-glass: console admins only (those who see the cluster 403).
        row(
            "POST",
            "/api/console/clusters/{id}/admin-kubeconfig",
            "/api/console/clusters/{C}/admin-kubeconfig",
            r#"{"reason":"the matrix"}"#,
            [Is(401), Is(403), Is(403), Is(403), Is(403), Is(404), Is(409)],
        ),
        row(
            "POST",
            "/clusters/{id}/admin-kubeconfig",
            "/clusters/{C}/admin-kubeconfig",
            "reason=the+matrix",
            [
                Is(401),
                Back("forbidden"),
                Back("forbidden"),
                Back("forbidden"),
                Back("forbidden"),
                Back("not_found"),
                UNAVAILABLE,
            ],
        ),
        row("POST", "/api/console/clusters/{id}/probe", "/api/console/clusters/{C}/probe", "", see_then(409)),
        // Alice's cluster has no own nodes: those who may see it learn so.
        row(
            "GET",
            "/api/console/clusters/{id}/join-tokens",
            "/api/console/clusters/{C}/join-tokens",
            "",
            see_then(409),
        ),
        row(
            "POST",
            "/api/console/clusters/{id}/join-tokens",
            "/api/console/clusters/{C}/join-tokens",
            "{}",
            admin_role_then(409),
        ),
        row(
            "DELETE",
            "/api/console/clusters/{id}/join-tokens/{token}",
            "/api/console/clusters/{C}/join-tokens/abcdef",
            "",
            admin_role_then(409),
        ),
        row("GET", "/api/console/clusters/{id}/nodes", "/api/console/clusters/{C}/nodes", "", see_then(409)),
        row(
            "DELETE",
            "/api/console/clusters/{id}/nodes/{node}",
            "/api/console/clusters/{C}/nodes/byo-1",
            "",
            admin_role_then(409),
        ),
        // Read from the console's database: an empty list, not "no own nodes".
        row("GET", "/api/console/clusters/{id}/node-removals", "/api/console/clusters/{C}/node-removals", "", SEE),
        // Sharing (issue 42). `{M}`: carol, made a viewer member just before the call.
        row("GET", "/api/console/clusters/{id}/members", "/api/console/clusters/{C}/members", "", SEE),
        // Moving a cluster to another owner: console admins only (to Alice,
        // who owns it already: no change).
        row(
            "PUT",
            "/api/console/clusters/{id}/owner",
            "/api/console/clusters/{C}/owner",
            r#"{"username":"alice"}"#,
            ADMIN_ONLY,
        ),
        row(
            "PUT",
            "/api/console/clusters/{id}/members",
            "/api/console/clusters/{C}/members",
            r#"{"name":"carol","role":"view"}"#,
            ADMIN_ROLE,
        ),
        row(
            "DELETE",
            "/api/console/clusters/{id}/members/{kind}/{member}",
            "/api/console/clusters/{C}/members/user/{M}",
            "",
            ADMIN_ROLE,
        ),
        row("GET", "/api/admin/teams", "/api/admin/teams", "", ADMIN_ONLY),
        row("POST", "/api/admin/teams", "/api/admin/teams", r#"{"name":"{who}-team"}"#, admin_only_then(201)),
        row("DELETE", "/api/admin/teams/{id}", "/api/admin/teams/999", "", admin_only_then(404)),
        row("PUT", "/api/admin/teams/{id}/members/{username}", "/api/admin/teams/{T}/members/carol", "", ADMIN_ONLY),
        row("DELETE", "/api/admin/teams/{id}/members/{username}", "/api/admin/teams/{T}/members/carol", "", ADMIN_ONLY),
        // Machines, without a session: the same 404 for everyone when the
        // cluster has no own nodes (the token is never even looked up).
        row(
            "GET",
            "/api/join/clusters/{id}/script",
            "/api/join/clusters/{C}/script?token=abcdef.0123456789abcdef",
            "",
            [Is(404); N],
        ),
        row("GET", "/api/admin/system-settings", "/api/admin/system-settings", "", ADMIN_ONLY),
        row("PUT", "/api/admin/system-settings", "/api/admin/system-settings", SETTINGS, ADMIN_ONLY),
        row("GET", "/api/admin/audit", "/api/admin/audit", "", ADMIN_ONLY),
        row("GET", "/api/admin/moves", "/api/admin/moves", "", ADMIN_ONLY),
        // Paths from before the rename: redirected, whoever asks (the new path authorizes).
        row("GET", "/api/admin/migrations", "/api/admin/migrations", "", [Is(308); N]),
        row("POST", "/api/admin/migrations", "/api/admin/migrations", MOVE, [Is(308); N]),
        row("GET", "/api/admin/migrations/{*rest}", "/api/admin/migrations/999", "", [Is(308); N]),
        row("POST", "/api/admin/migrations/{*rest}", "/api/admin/migrations/dry-run", MOVE, [Is(308); N]),
        row("POST", "/fn/migrations/{*rest}", "/fn/migrations/plan", "", [Is(308); N]),
        row("POST", "/api/admin/moves", "/api/admin/moves", MOVE, admin_only_then(201)),
        row("POST", "/api/admin/moves/dry-run", "/api/admin/moves/dry-run", MOVE, ADMIN_ONLY),
        row("GET", "/api/admin/moves/{id}", "/api/admin/moves/999", "", admin_only_then(404)),
        row(
            "POST",
            "/api/admin/moves/{id}/clusters/{cluster}/{action}",
            "/api/admin/moves/999/clusters/{C}/retry",
            "",
            admin_only_then(404),
        ),
        // Each caller fails with its own name (one failure per account, so
        // no account reaches the lock).
        row(
            "POST",
            "/api/auth/login",
            "/api/auth/login",
            r#"{"username":"{who}","password":"not the password"}"#,
            [Is(401); N],
        ),
        row("POST", "/api/auth/logout", "/api/auth/logout", "", ANYONE),
        // No provider configured here: both send everyone to the sign-in page
        // with `oidc_unavailable` (tests/oidc.rs and end2end/tests/oidc.spec.ts have one).
        row("GET", "/auth/oidc/start", "/auth/oidc/start", "", [Is(303); N]),
        row("GET", "/auth/oidc/callback", "/auth/oidc/callback?code=c&state=s", "", [Is(303); N]),
        row("GET", "/api/{*rest}", "/api/no-such-thing", "", [Is(404); N]),
        row("GET", "/lang/{code}", "/lang/zh-CN", "", ANYONE),
        row("GET", "/healthz", "/healthz", "", ANYONE),
        row("GET", "/readyz", "/readyz", "", ANYONE),
        row("GET", "/metrics", "/metrics", "", ANYONE),
        // Server functions (what the pages call; form-encoded like a browser).
        row("POST", "/fn/login", "/fn/login", "username={who}&password=not+the+password", [Is(401); N]),
        row("POST", "/fn/logout", "/fn/logout", "", ANYONE),
        row("POST", "/fn/whoami", "/fn/whoami", "", ANYONE),
        row("POST", "/fn/clusters/list", "/fn/clusters/list", "query[q]=&query[page]=1", SIGNED_IN),
        row("POST", "/fn/clusters/get", "/fn/clusters/get", "id={C}", SEE),
        row("POST", "/fn/clusters/defaults", "/fn/clusters/defaults", "", SIGNED_IN),
        row("POST", "/fn/clusters/create", "/fn/clusters/create", FORM_CREATE, SIGNED_IN),
        row("POST", "/fn/clusters/update", "/fn/clusters/update", FORM_UPDATE, EDIT),
        row("POST", "/fn/clusters/delete", "/fn/clusters/delete", "id={C}&confirm=wrong", admin_role_then(422)),
        row("POST", "/fn/clusters/probe", "/fn/clusters/probe", "id={C}", see_then(409)),
        row("POST", "/fn/clusters/dismiss-moved", "/fn/clusters/dismiss-moved", "id={C}", EDIT),
        // The join page's functions: Alice's cluster has no own nodes.
        row("POST", "/fn/join/get", "/fn/join/get", "id={C}", SEE),
        row("POST", "/fn/join/create", "/fn/join/create", "id={C}&lifetime=1h", admin_role_then(409)),
        row("POST", "/fn/join/revoke", "/fn/join/revoke", "id={C}&token_id=abcdef", admin_role_then(409)),
        row("POST", "/fn/join/remove-node", "/fn/join/remove-node", "id={C}&node=byo-1", admin_role_then(409)),
        row(
            "POST",
            "/fn/members/put",
            "/fn/members/put",
            "id={C}&member_kind=user&member=carol&member_role=view",
            ADMIN_ROLE,
        ),
        row("POST", "/fn/members/remove", "/fn/members/remove", "id={C}&kind=user&member_id={M}", ADMIN_ROLE),
        row("POST", "/fn/teams/list", "/fn/teams/list", "", ADMIN_ONLY),
        row("POST", "/fn/teams/create", "/fn/teams/create", "team_name={who}-t", ADMIN_ONLY),
        row("POST", "/fn/teams/delete", "/fn/teams/delete", "team_id=999", admin_only_then(404)),
        // To Alice, who owns it already: no change, for admins only.
        row("POST", "/fn/clusters/owner", "/fn/clusters/owner", "id={C}&owner=alice", ADMIN_ONLY),
        row("POST", "/fn/teams/member", "/fn/teams/member", "team_id={T}&member=carol&add=true", ADMIN_ONLY),
        row("POST", "/fn/moves/movable", "/fn/moves/movable", "", ADMIN_ONLY),
        row(
            "POST",
            "/fn/moves/plan",
            "/fn/moves/plan",
            "form[clusters]=&form[include_disabled]=true&form[source]=template&form[hosts]=%7Bname%7D.example.com&form[concurrency]=2&form[grace_days]=1",
            ADMIN_ONLY,
        ),
        // Alice's clusters are in the migration started above by now.
        row("POST", "/fn/moves/start", "/fn/moves/start", FORM_MOVE, admin_only_then(409)),
        row("POST", "/fn/moves/get", "/fn/moves/get", "id=999", admin_only_then(404)),
        row("POST", "/fn/moves/recent", "/fn/moves/recent", "", ADMIN_ONLY),
        row("POST", "/fn/moves/item", "/fn/moves/item", "id=999&cluster_id={C}&action=retry", admin_only_then(404)),
        row("POST", "/fn/users/list", "/fn/users/list", "", ADMIN_ONLY),
        row(
            "POST",
            "/fn/users/create",
            "/fn/users/create",
            "username={who}-made&password=a+long+enough+pw&role=user",
            ADMIN_ONLY,
        ),
        row("POST", "/fn/users/role", "/fn/users/role", "user_id={U}&role=user", ADMIN_ONLY),
        row("POST", "/fn/users/password", "/fn/users/password", "user_id={U}&password=a+long+enough+pw", ADMIN_ONLY),
        row(
            "POST",
            "/fn/users/quota",
            "/fn/users/quota",
            "user_id={U}&quota_clusters=9&quota_cpu=&quota_memory_gib=&quota_storage_gib=",
            ADMIN_ONLY,
        ),
        row("POST", "/fn/users/disabled", "/fn/users/disabled", "user_id={U}&disabled=false", ADMIN_ONLY),
        row("POST", "/fn/audit/list", "/fn/audit/list", "", ADMIN_ONLY),
        row("POST", "/fn/settings/get", "/fn/settings/get", "", ADMIN_ONLY),
        row("POST", "/fn/settings/save", "/fn/settings/save", FORM_SETTINGS, ADMIN_ONLY),
        // Pages
        row("GET", "/", "/", "", PAGE_SIGNED_IN),
        row("GET", "/login", "/login", "", ANYONE),
        row("GET", "/clusters", "/clusters", "", PAGE_SIGNED_IN),
        row("GET", "/clusters/new", "/clusters/new", "", PAGE_SIGNED_IN),
        row("GET", "/clusters/{id}", "/clusters/{C}", "", PAGE_SEE),
        row("GET", "/clusters/{id}/edit", "/clusters/{C}/edit", "", PAGE_EDIT),
        row("GET", "/clusters/{id}/join", "/clusters/{C}/join", "", PAGE_SEE),
        row("GET", "/admin/settings", "/admin/settings", "", PAGE_ADMIN),
        row("GET", "/admin/users", "/admin/users", "", PAGE_ADMIN),
        row("GET", "/admin/teams", "/admin/teams", "", PAGE_ADMIN),
        row("GET", "/admin/moves", "/admin/moves", "", PAGE_ADMIN),
        row("GET", "/admin/migrations", "/admin/migrations", "", PAGE_REDIRECT),
        row("GET", "/admin/migrations/{*rest}", "/admin/migrations/999", "", PAGE_REDIRECT),
        row(
            "GET",
            "/admin/moves/{id}",
            "/admin/moves/999",
            "",
            [SIGN_IN, Is(403), Is(403), Is(403), Is(403), Is(403), Is(404)],
        ),
        row("GET", "/admin/audit", "/admin/audit", "", PAGE_ADMIN),
    ]
}

#[tokio::test]
async fn every_route_answers_each_caller_as_the_matrix_says() {
    let (url, _dir) = support::sqlite_url();
    let pool = kubebyon::server::db::connect(&url).await.unwrap();
    let c = Console::new(pool.clone());
    for (name, admin) in [
        ("admin", true),
        ("alice", false),
        ("bob", false),
        ("carol", false),
        ("dora", false),
        ("erin", false),
        ("vic", false),
    ] {
        c.user(name, PW, admin).await;
    }
    // Each row deletes or makes clusters of its own, and a cluster being
    // deleted counts against its owner's quota until the host lets it go
    // (none here): quotas are not what this matrix checks, so they are lifted.
    let mut settings = kubebyon::server::db::settings::load(&pool).await.unwrap();
    settings.quota = kubebyon::domain::quota::Quota::UNLIMITED;
    kubebyon::server::db::settings::save(&pool, &settings).await.unwrap();
    let id_of = |name: &'static str| {
        let pool = pool.clone();
        async move {
            sqlx::query_scalar::<_, i64>("SELECT id FROM users WHERE username = $1")
                .bind(name)
                .fetch_one(&pool)
                .await
                .unwrap()
        }
    };
    let (alice_id, bob_id, admin_id, carol_id) =
        (id_of("alice").await, id_of("bob").await, id_of("admin").await, id_of("carol").await);
    let (dora_id, erin_id, vic_id) = (id_of("dora").await, id_of("erin").await, id_of("vic").await);
    let name = kubebyon::domain::membership::TeamName::parse("viewers").unwrap();
    let viewers = members::create_team(&pool, &name).await.unwrap();
    assert!(members::set_in_team(&pool, viewers, vic_id, true).await.unwrap());
    // Dora, Erin and the team `viewers` on each of Alice's clusters.
    let share = |cluster: i64| {
        let pool = pool.clone();
        async move {
            for (kind, id, role) in [
                (User, dora_id, MemberRole::Admin),
                (User, erin_id, MemberRole::Edit),
                (Team, viewers, MemberRole::View),
            ] {
                members::put(&pool, cluster, kind, id, role, alice_id).await.unwrap();
            }
        }
    };
    let session = |who: Who| {
        let pool = pool.clone();
        async move {
            let uid = match who {
                Who::Anon => return None,
                Who::Alice => alice_id,
                Who::Dora => dora_id,
                Who::Erin => erin_id,
                Who::Vic => vic_id,
                Who::Bob => bob_id,
                Who::Admin => admin_id,
            };
            let token = session::new_token();
            kubebyon::server::db::sessions::insert(&pool, &session::token_hash(&token), uid, 3600).await.unwrap();
            Some(format!("{}={token}", session::COOKIE))
        }
    };
    let alice = session(Who::Alice).await.unwrap();
    let mut fresh = 0;
    let new_cluster = async |name: String| {
        let body = CREATE.replace("{who}-c", &name);
        let r = c.json("POST", "/api/console/clusters", Some(&alice), serde_json::from_str(&body).unwrap()).await;
        assert_eq!(r.status, 201, "{}", r.body);
        let id = r.json()["id"].as_i64().unwrap();
        share(id).await;
        id
    };
    let cluster = new_cluster("alices".into()).await;

    // Complete: the matrix names exactly what the router serves.
    let rows = matrix();
    let named: BTreeSet<(String, String)> = rows.iter().map(|r| (r.method.to_owned(), r.route.to_owned())).collect();
    assert_eq!(named.len(), rows.len(), "a route is in the matrix twice");
    let served = support::routes::served(&c).await;
    let missing: Vec<_> = served.difference(&named).collect();
    let stale: Vec<_> = named.difference(&served).collect();
    assert!(missing.is_empty(), "routes without a matrix entry: {missing:?}");
    assert!(stale.is_empty(), "matrix entries for routes the router does not serve: {stale:?}");
    // performance.md's figures are the router's count.
    let doc = "docs/performance.md";
    let text = std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(doc)).unwrap();
    let said = format!("{} routes × {} callers", served.len(), WHO.len());
    assert!(text.contains(&said), "{doc} does not say {said:?} (the router serves {} routes)", served.len());
    let over = format!("over {} routes", served.len());
    assert!(text.contains(&over), "{doc} does not say {over:?}");

    let mut wrong = Vec::new();
    let mut calls = 0;
    for r in &rows {
        for (who, want) in WHO.into_iter().zip(r.want) {
            let name = format!("{who:?}").to_lowercase();
            if r.path.contains("{M}") || r.body.contains("{M}") {
                members::put(&pool, cluster, User, carol_id, MemberRole::View, alice_id).await.unwrap();
            }
            let fill = |t: &str| {
                t.replace("{C}", &cluster.to_string())
                    .replace("{U}", &carol_id.to_string())
                    .replace("{M}", &carol_id.to_string())
                    .replace("{T}", &viewers.to_string())
            };
            let mut path = fill(r.path);
            if path.contains("{F}") {
                fresh += 1;
                path = path.replace("{F}", &new_cluster(format!("fresh-{fresh}")).await.to_string());
            }
            let body = fill(r.body).replace("{who}", &name);
            let content_type = if body.starts_with('{') {
                Some("application/json")
            } else if r.path.starts_with("/fn/") || body.contains('=') {
                Some("application/x-www-form-urlencoded")
            } else {
                None
            };
            let cookie = session(who).await;
            let reply = c.send(r.method, &path, cookie.as_deref(), content_type, body).await;
            calls += 1;
            let s = reply.status.as_u16();
            let fine = match want {
                Is(code) => s == code,
                Ok => reply.status.is_success() || reply.status.is_redirection(),
                Back(code) => {
                    let to = reply.headers.get(http::header::LOCATION).and_then(|l| l.to_str().ok());
                    s == 303 && to == Some(format!("/clusters/{cluster}?download_error={code}").as_str())
                }
            };
            assert!(s < 500, "{} {path} as {who:?}: {s} {}", r.method, reply.body);
            if !fine {
                wrong.push(format!(
                    "{} {path} as {who:?}: got {s}, want {want:?}: {}",
                    r.method,
                    &reply.body[..reply.body.len().min(120)]
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "{} of {calls} answers differ from the matrix:\n{}", wrong.len(), wrong.join("\n"));
    println!("authorization matrix: {} routes × {N} callers = {calls} calls, all as expected", rows.len());
    // Nothing of Alice's was changed by anyone else: her cluster is hers, not deleted.
    let r = c.get(&format!("/api/console/clusters/{cluster}"), Some(&alice)).await;
    assert_eq!(r.json()["deletion_requested"], json!(false), "{}", r.body);
}
