//! Access bound to identity (issue 42), on both real backends through the
//! real router: a disabled account signs in no more and its sessions end;
//! password sign-in limited to admins or switched off; an organisation
//! (OpenID Connect) sign-in makes its account just in time and follows the
//! provider's groups. (The flow against a real provider, bad tokens
//! included, is `end2end/tests/oidc.spec.ts`; that the bindings drop a
//! disabled user inside a real control plane is
//! `tests/reconciler.rs::per_user_kubeconfigs_follow_membership`.)

mod support;

use kubebyon::domain::ErrorCode;
use kubebyon::server::auth::oidc::Identity;
use kubebyon::server::config::{Config, LocalSignIn};
use kubebyon::server::db;
use kubebyon::server::service::accounts;
use serde_json::{Value, json};
use support::each_backend;
use support::http::{Console, audit_rows};

const PW: &str = "correct horse battery";
const FORM: Option<&str> = Some("application/x-www-form-urlencoded");

fn code(body: &str) -> String {
    serde_json::from_str::<Value>(body).ok().and_then(|v| v["code"].as_str().map(str::to_owned)).unwrap_or_default()
}

#[tokio::test]
async fn a_disabled_account_signs_in_no_more_and_its_sessions_end() {
    for t in each_backend().await {
        let c = Console::new(t.pool.clone());
        for (name, admin) in [("admin", true), ("bob", false)] {
            c.user(name, PW, admin).await;
        }
        let (admin, bob) = (c.login("admin", PW).await, c.login("bob", PW).await);
        let bob_id = db::users::by_username(&t.pool, "bob").await.unwrap().unwrap().id;
        let admin_id = db::users::by_username(&t.pool, "admin").await.unwrap().unwrap().id;
        assert_eq!(c.get("/api/console/clusters", Some(&bob)).await.status, 200, "{}", t.backend);

        // Bob may not disable anyone; an admin may not disable themself.
        let disable = |id: i64, on: bool| format!("user_id={id}&disabled={on}");
        let r = c.send("POST", "/fn/users/disabled", Some(&bob), FORM, disable(admin_id, true)).await;
        assert_eq!(r.status, 403, "{}: {}", t.backend, r.body);
        let r = c.send("POST", "/fn/users/disabled", Some(&admin), FORM, disable(admin_id, true)).await;
        assert_eq!((r.status.as_u16(), code(&r.body)), (409, "cannot_disable_self".into()), "{}", t.backend);
        let r = c.send("POST", "/fn/users/disabled", Some(&admin), FORM, disable(999_999, true)).await;
        assert_eq!(r.status, 404, "{}: {}", t.backend, r.body);

        // Disabled: the session Bob had ends; the right password says so, a
        // wrong one says only "wrong".
        let r = c.send("POST", "/fn/users/disabled", Some(&admin), FORM, disable(bob_id, true)).await;
        assert!(r.status.is_success() || r.status.is_redirection(), "{}: {} {}", t.backend, r.status, r.body);
        assert_eq!(c.get("/api/console/clusters", Some(&bob)).await.status, 401, "{}", t.backend);
        let login = |pw: &str| json!({"username": "bob", "password": pw});
        let r = c.json("POST", "/api/auth/login", None, login(PW)).await;
        assert_eq!((r.status.as_u16(), code(&r.body)), (403, "account_disabled".into()), "{}", t.backend);
        assert!(r.session_cookie().is_none(), "{}", t.backend);
        let r = c.json("POST", "/api/auth/login", None, login("not the password")).await;
        assert_eq!((r.status.as_u16(), code(&r.body)), (401, "login_failed".into()), "{}", t.backend);
        // The users page shows it, with the button that enables it again.
        let page = c.get("/admin/users", Some(&admin)).await.body;
        assert!(page.contains(r#"data-user="bob" data-disabled="true""#), "{}", t.backend);
        assert!(page.contains("Enable bob"), "{}", t.backend);
        // No Disable button on the admin's own row (the service refuses it too, above).
        assert!(page.contains("Disable bob") || page.contains("Enable bob"), "{}", t.backend);
        assert!(!page.contains("Disable admin"), "{}", t.backend);
        // Not a console admin any more either: it counts for no "last admin".
        assert_eq!(db::users::count_admins(&t.pool).await.unwrap(), 1, "{}", t.backend);
        // A disabled admin may be demoted although one enabled admin is left.
        c.user("old-admin", PW, true).await;
        let old = db::users::by_username(&t.pool, "old-admin").await.unwrap().unwrap().id;
        let r = c.send("POST", "/fn/users/disabled", Some(&admin), FORM, disable(old, true)).await;
        assert!(r.status.is_success() || r.status.is_redirection(), "{}: {}", t.backend, r.body);
        let r = c.send("POST", "/fn/users/role", Some(&admin), FORM, format!("user_id={old}&role=user")).await;
        assert!(r.status.is_success() || r.status.is_redirection(), "{}: {} {}", t.backend, r.status, r.body);
        // `kubebyon admin` is the way back in: it enables the account too.
        accounts::upsert_admin(&t.pool, "old-admin", "a new long password").await.unwrap();
        c.login("old-admin", "a new long password").await;

        // Enabled again: Bob signs in.
        let r = c.send("POST", "/fn/users/disabled", Some(&admin), FORM, disable(bob_id, false)).await;
        assert!(r.status.is_success() || r.status.is_redirection(), "{}: {}", t.backend, r.body);
        let bob = c.login("bob", PW).await;
        assert_eq!(c.get("/api/console/clusters", Some(&bob)).await.status, 200, "{}", t.backend);

        let log = audit_rows(&c.get("/api/admin/audit", Some(&admin)).await.json());
        let said: Vec<_> = log
            .iter()
            .filter(|(_, action, ..)| action.starts_with("user_"))
            .map(|(actor, action, target, _)| (actor.as_str(), action.as_str(), target.as_str()))
            .collect();
        assert_eq!(
            said,
            [
                ("admin", "user_enabled", "user:bob"),
                ("admin", "user_disabled", "user:old-admin"),
                ("admin", "user_disabled", "user:bob")
            ],
            "{}",
            t.backend
        );
    }
}

#[tokio::test]
async fn password_sign_in_can_be_kept_for_admins_or_switched_off() {
    for t in each_backend().await {
        let config = |local| Config { data_dir: "unused".into(), local_sign_in: local, ..Config::default() };
        let admins = Console::with(t.pool.clone(), None, config(LocalSignIn::Admins));
        admins.user("admin", PW, true).await;
        admins.user("alice", PW, false).await;
        let r = admins.json("POST", "/api/auth/login", None, json!({"username": "alice", "password": PW})).await;
        assert_eq!((r.status.as_u16(), code(&r.body)), (403, "local_sign_in_off".into()), "{}", t.backend);
        assert!(r.session_cookie().is_none(), "{}", t.backend);
        // Alice's refused sign-in left no session behind.
        let sessions: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM sessions").fetch_one(&t.pool).await.unwrap();
        assert_eq!(sessions, 0, "{}", t.backend);
        let root = admins.login("admin", PW).await;
        assert!(admins.get("/login", None).await.body.contains(r#"name="password""#), "{}", t.backend);
        // At start the policy ends the password sessions it no longer allows
        // (Alice's, signed in before; with `admins` the admin's stay).
        let before = Console::new(t.pool.clone()).login("alice", PW).await;
        db::sessions::end_password_sessions(&t.pool, true).await.unwrap();
        assert_eq!(admins.get("/api/console/clusters", Some(&before)).await.status, 401, "{}", t.backend);
        assert_eq!(admins.get("/api/console/clusters", Some(&root)).await.status, 200, "{}", t.backend);
        db::sessions::end_password_sessions(&t.pool, false).await.unwrap();
        assert_eq!(admins.get("/api/console/clusters", Some(&root)).await.status, 401, "{}", t.backend);

        let off = Console::with(t.pool.clone(), None, config(LocalSignIn::Off));
        let r = off.json("POST", "/api/auth/login", None, json!({"username": "admin", "password": PW})).await;
        assert_eq!((r.status.as_u16(), code(&r.body)), (403, "local_sign_in_off".into()), "{}", t.backend);
        let page = off.get("/login", None).await.body;
        assert!(!page.contains(r#"name="password""#), "{}: no password form", t.backend);
        assert!(page.contains("Password sign-in is switched off here."), "{}", t.backend);
        // Without a provider there is no organisation sign-in button either,
        // and its routes send the browser back with the reason.
        assert!(!page.contains("data-sign-in=\"organisation\""), "{}", t.backend);
        let r = off.get("/auth/oidc/start", None).await;
        let to = r.headers.get("location").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
        assert!(r.status == 303 && to.starts_with("/login?__path=%2Fauth%2Foidc&__err="), "{}: {to}", t.backend);
        let shown = off.get(&to, None).await.body;
        assert!(shown.contains(r#"data-error-code="oidc_unavailable""#), "{}", t.backend);
    }
}

#[tokio::test]
async fn an_organisation_sign_in_makes_its_account_and_follows_its_groups() {
    for t in each_backend().await {
        let c = Console::new(t.pool.clone());
        c.user("admin", PW, true).await;
        c.user("bob", PW, false).await;
        let admin = c.login("admin", PW).await;
        for team in ["platform", "dev"] {
            let r = c.json("POST", "/api/admin/teams", Some(&admin), json!({"name": team})).await;
            assert_eq!(r.status, 201, "{}: {}", t.backend, r.body);
        }
        let teams_of = |name: &'static str| {
            let (c, admin) = (&c, admin.clone());
            async move {
                let teams = c.get("/api/admin/teams", Some(&admin)).await.json();
                let mut of: Vec<String> = teams
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter(|t| t["members"].as_array().unwrap().iter().any(|m| m == name))
                    .map(|t| t["name"].as_str().unwrap().to_owned())
                    .collect();
                of.sort();
                of
            }
        };
        let ada = |groups: &[&str], admin: Option<bool>| Identity {
            subject: "https://id.example.com 00u1ada".into(),
            username: Some("ada".into()),
            teams: groups.iter().map(|g| (*g).to_owned()).collect(),
            admin,
        };

        // First sign-in: the account is made, in the teams its groups name.
        let user = accounts::oidc_account(&t.pool, None, &ada(&["dev", "elsewhere"], Some(false))).await.unwrap();
        assert_eq!((user.username.as_str(), user.is_admin()), ("ada", false), "{}", t.backend);
        assert_eq!(teams_of("ada").await, ["dev"], "{}", t.backend);
        // Again, moved to the admin group and another team: both follow.
        let user = accounts::oidc_account(&t.pool, None, &ada(&["platform"], Some(true))).await.unwrap();
        assert!(user.is_admin(), "{}", t.backend);
        assert_eq!(teams_of("ada").await, ["platform"], "{}", t.backend);
        let row = db::users::by_username(&t.pool, "ada").await.unwrap().unwrap();
        assert_eq!(row.oidc_subject.as_deref(), Some("https://id.example.com 00u1ada"), "{}", t.backend);
        // The same subject under a new name is the same account.
        let renamed = Identity { username: Some("ada.l".into()), ..ada(&[], None) };
        let user = accounts::oidc_account(&t.pool, None, &renamed).await.unwrap();
        assert_eq!((user.id, user.username.as_str(), user.is_admin()), (row.id, "ada", true), "{}", t.backend);
        assert!(teams_of("ada").await.is_empty(), "{}", t.backend);

        // The account has no password: none signs in, not even an empty one.
        for pw in ["", PW] {
            let r = c.json("POST", "/api/auth/login", None, json!({"username": "ada", "password": pw})).await;
            assert_eq!((r.status.as_u16(), code(&r.body)), (401, "login_failed".into()), "{}", t.backend);
        }

        // Nor may an admin give it one: a second way in the provider cannot take back.
        let r = c
            .send(
                "POST",
                "/fn/users/password",
                Some(&admin),
                FORM,
                format!("user_id={}&password=a+long+enough+pw", row.id),
            )
            .await;
        assert_eq!((r.status.as_u16(), code(&r.body)), (409, "organisation_account".into()), "{}", t.backend);
        let page = c.get("/admin/users", Some(&admin)).await.body;
        assert!(!page.contains("New password for ada") && page.contains("New password for bob"), "{}", t.backend);

        // Not through `kubebyon admin` either.
        let e = accounts::upsert_admin(&t.pool, "ada", "a long enough password").await.unwrap_err();
        assert_eq!(e.code, ErrorCode::OrganisationAccount, "{}", t.backend);

        // A local account's name is never taken over (refused in its own
        // words), and no usable name makes no account.
        for (username, what, want) in [
            (Some("bob"), "a local account's", ErrorCode::OidcUsernameTaken),
            (Some("Not Valid!"), "invalid", ErrorCode::OidcUsernameUnusable),
            (None, "none", ErrorCode::OidcUsernameUnusable),
        ] {
            let who = Identity {
                subject: format!("https://id.example.com other-{what}"),
                username: username.map(str::to_owned),
                teams: vec!["platform".into()],
                admin: Some(true),
            };
            let e = accounts::oidc_account(&t.pool, None, &who).await.unwrap_err();
            assert_eq!(e.code, want, "{}: {what}", t.backend);
        }
        let rows: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM users").fetch_one(&t.pool).await.unwrap();
        assert_eq!(rows, 3, "{}: admin, bob, ada", t.backend);
        // A first sign-in in the admin group: an admin, and audited as the promotion it is.
        let cy = Identity {
            subject: "https://id.example.com cyd".into(),
            username: Some("cyd".into()),
            teams: vec![],
            admin: Some(true),
        };
        assert!(accounts::oidc_account(&t.pool, None, &cy).await.unwrap().is_admin(), "{}", t.backend);
        let log = audit_rows(&c.get("/api/admin/audit", Some(&admin)).await.json());
        assert!(
            log.iter().any(|e| e.0 == "cyd" && e.1 == "role_changed" && e.3.starts_with("role: user → admin")),
            "{}: {log:?}",
            t.backend
        );
        assert!(teams_of("bob").await.is_empty(), "{}", t.backend);

        // Disabled, the provider's word does not let it in.
        let r =
            c.send("POST", "/fn/users/disabled", Some(&admin), FORM, format!("user_id={}&disabled=true", row.id)).await;
        assert!(r.status.is_success() || r.status.is_redirection(), "{}: {}", t.backend, r.body);
        let e = accounts::oidc_account(&t.pool, None, &ada(&["platform"], Some(true))).await.unwrap_err();
        assert_eq!(e.code, ErrorCode::AccountDisabled, "{}", t.backend);

        // Every change the groups made is in the audit log, by the account.
        let log = audit_rows(&c.get("/api/admin/audit", Some(&admin)).await.json());
        let by_ada: Vec<_> = log
            .iter()
            .filter(|(actor, ..)| actor == "ada")
            .map(|(_, action, target, _)| format!("{action} {target}"))
            .collect();
        assert_eq!(
            by_ada,
            [
                "team_member_removed team:platform",
                "team_member_added team:platform",
                "team_member_removed team:dev",
                "role_changed user:ada",
                "team_member_added team:dev",
            ],
            "{}",
            t.backend
        );
    }
}

/// `kubebyon access …` mirrors the pages: share, list, take back, teams,
/// a new owner, disable and enable, each through the same services (audited
/// under `--as`); refusals exit non-zero with their code.
#[tokio::test]
async fn the_cli_mirrors_members_teams_owners_and_accounts() {
    let (url, dir) = support::sqlite_url();
    let pool = db::connect(&url).await.unwrap();
    let c = Console::new(pool.clone());
    for (name, admin) in [("root", true), ("alice", false), ("bob", false)] {
        c.user(name, PW, admin).await;
    }
    let alice = c.login("alice", PW).await;
    let body = json!({"name": "cli-one", "resources": {"cpu": "1", "memory_gib": 1, "storage_gib": 1}, "public_access": {"enabled": false}});
    assert_eq!(c.json("POST", "/api/console/clusters", Some(&alice), body).await.status, 201);
    let run = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_kubebyon"))
            .arg("access")
            .args(args)
            .args(["--as", "root"])
            .env("KUBEBYON_DATA_DIR", dir.path())
            .env_remove("DATABASE_URL")
            .env("KUBECONFIG", dir.path().join("no-host.kubeconfig"))
            .output()
            .expect("run kubebyon access");
        (out.status.code(), String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr))
    };
    let ok = |args: &[&str]| {
        let (code, out) = run(args);
        assert_eq!(code, Some(0), "{args:?}: {out}");
        out
    };
    assert!(ok(&["team-create", "ops"]).contains("team ops made"));
    assert!(ok(&["team-add", "ops", "bob"]).contains("ops: bob"));
    let out = ok(&["share", "cli-one", "team:ops", "edit"]);
    assert!(out.contains("owner: alice") && out.contains("team:ops edit"), "{out}");
    let bob = c.login("bob", PW).await;
    let cluster = c.get("/api/console/clusters", Some(&bob)).await.json();
    assert_eq!(cluster[0]["spec"]["name"], "cli-one", "{cluster}");
    assert!(ok(&["unshare", "cli-one", "team:ops"]).contains("owner: alice"));
    assert!(ok(&["team-remove", "ops", "bob"]).contains("ops: "));
    assert!(ok(&["owner", "cli-one", "bob"]).contains("cli-one is bob's"));
    assert!(ok(&["members", "cli-one"]).contains("owner: bob"));
    assert!(ok(&["disable", "bob"]).contains("bob disabled"));
    assert_eq!(c.get("/api/console/clusters", Some(&bob)).await.status, 401, "his session ended");
    assert!(ok(&["enable", "bob"]).contains("bob enabled"));
    assert!(ok(&["teams"]).contains("ops: "));
    assert!(ok(&["team-delete", "ops"]).contains("team ops deleted"));

    // Refused: with the code, non-zero.
    for (args, says) in [
        (&["share", "cli-one", "nobody", "view"][..], "member_unknown"),
        (&["share", "cli-one", "alice", "owner"][..], "member_role_invalid"),
        (&["owner", "no-such-cluster", "bob"][..], "no cluster"),
        (&["disable", "root"][..], "cannot_disable_self"),
    ] {
        let (code, out) = run(args);
        assert_eq!(code, Some(1), "{args:?}: {out}");
        assert!(out.contains(says), "{args:?}: {out}");
    }
    let log = audit_rows(&c.get("/api/admin/audit", Some(&c.login("root", PW).await)).await.json());
    for action in
        ["team_created", "team_member_added", "member_added", "member_removed", "owner_changed", "user_disabled"]
    {
        assert!(log.iter().any(|e| e.0 == "root" && e.1 == action), "{action} by root: {log:?}");
    }
}

/// The browser tests' OpenID provider (npm `oidc-provider`,
/// `end2end/oidc/provider.mjs`) on a free loopback port, stopped on drop.
struct NpmProvider {
    child: std::process::Child,
    issuer: String,
}

impl NpmProvider {
    fn start(redirect: &str) -> Self {
        use std::io::BufRead;
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let mut child = std::process::Command::new("node")
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .args(["end2end/oidc/provider.mjs", &port.to_string(), redirect])
            .env("OIDC_CLIENT_SECRET", "identity-test-secret")
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("node (Debian's nodejs; `make test` installs the npm packages first)");
        let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
        assert!(
            lines.any(|l| l.is_ok_and(|l| l == "ready")),
            "the npm OpenID provider did not start (npm packages installed? scripts/install-tools.sh --test)"
        );
        // Whatever it prints later is read, so it never blocks on a full pipe.
        std::thread::spawn(move || lines.for_each(drop));
        Self { child, issuer: format!("http://127.0.0.1:{port}") }
    }

    /// A console (at `http://127.0.0.1:3000`) that trusts this provider.
    fn console_config(&self) -> Config {
        Config {
            data_dir: "unused".into(),
            public_url: Some("http://127.0.0.1:3000".into()),
            oidc_issuer: Some(self.issuer.clone()),
            oidc_client_id: Some("kubebyon".into()),
            oidc_client_secret: Some("identity-test-secret".into()),
            ..Config::default()
        }
    }
}

impl Drop for NpmProvider {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Rows in every table of the console's schema (both backends).
async fn rows_per_table(pool: &sqlx::AnyPool, backend: &str) -> Vec<(String, i64)> {
    let tables = match backend {
        "sqlite" => "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name",
        _ => "SELECT table_name::text FROM information_schema.tables WHERE table_schema = current_schema() ORDER BY 1",
    };
    let names: Vec<String> = sqlx::query_scalar(tables).fetch_all(pool).await.unwrap();
    let mut rows = vec![];
    for name in names {
        let n: i64 = sqlx::query_scalar(&format!("SELECT COUNT(*) FROM {name}")).fetch_one(pool).await.unwrap();
        rows.push((name, n));
    }
    rows
}

/// `GET /auth/oidc/start` anonymously: where it sends the browser, the
/// state cookie it sets, and the `state` in the provider's URL.
async fn oidc_start(c: &Console) -> (String, String, String) {
    let r = c.get("/auth/oidc/start?next=/clusters/7", None).await;
    assert_eq!(r.status, 303, "{}", r.body);
    let to = r.headers.get("location").unwrap().to_str().unwrap().to_owned();
    let cookie = r
        .headers
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find_map(|v| v.strip_prefix("kubebyon_oidc_state="))
        .map(|v| v.split(';').next().unwrap().to_owned())
        .unwrap();
    let state = to.split(['?', '&']).find_map(|p| p.strip_prefix("state=")).unwrap().to_owned();
    (to, cookie, state)
}

/// Issue 55: an anonymous `GET /auth/oidc/start` writes nothing — the
/// sign-in under way is sealed into the browser's cookie — so 10,000 of
/// them from one client leave every table as it was (the sealing key is
/// made once, by the first). The callback takes only a cookie this console
/// sealed, for the `state` it carries: altered, foreign or missing, the
/// sign-in page says `oidc_state_invalid`, nothing is written or audited.
#[tokio::test]
async fn anonymous_sign_in_starts_write_nothing_and_only_a_sealed_state_comes_back() {
    let provider = NpmProvider::start("http://127.0.0.1:3000/auth/oidc/callback");
    for t in each_backend().await {
        let c = Console::with(t.pool.clone(), None, provider.console_config());
        let (first, cookie, state) = oidc_start(&c).await;
        assert!(first.starts_with(&format!("{}/", provider.issuer)), "{}: {first}", t.backend);
        assert!(!cookie.contains(&state), "{}: the cookie is sealed, not the state in clear", t.backend);
        let before = rows_per_table(&t.pool, t.backend).await;
        let keys = before.iter().find(|(n, _)| n == "console_keys").map(|(_, n)| *n);
        assert_eq!(keys, Some(1), "{}: one sealing key, made by the first start", t.backend);
        let timer = std::time::Instant::now();
        let mut cookies = std::collections::HashSet::new();
        for _ in 0..10_000 {
            cookies.insert(oidc_start(&c).await.1);
        }
        eprintln!("{}: 10,000 sign-in starts in {:.1} s", t.backend, timer.elapsed().as_secs_f64());
        assert_eq!(cookies.len(), 10_000, "{}: each start its own sealed sign-in", t.backend);
        assert_eq!(rows_per_table(&t.pool, t.backend).await, before, "{}: no table grew", t.backend);

        // Back at the callback: only the cookie sealed for this state.
        let mut altered = cookie.clone().into_bytes();
        let i = altered.len() / 2;
        altered[i] = if altered[i] == b'A' { b'B' } else { b'A' };
        let altered = String::from_utf8(altered).unwrap();
        let (_, other_cookie, _) = oidc_start(&c).await;
        for (what, jar) in [
            ("no cookie", None),
            ("an altered cookie", Some(altered)),
            ("another sign-in's cookie", Some(other_cookie)),
            ("the state in clear", Some(state.clone())),
        ] {
            let jar = jar.map(|v| format!("kubebyon_oidc_state={v}"));
            let r = c.get(&format!("/auth/oidc/callback?code=made-up&state={state}"), jar.as_deref()).await;
            let to = r.headers.get("location").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
            let shown = c.get(&to, None).await.body;
            assert!(shown.contains(r#"data-error-code="oidc_state_invalid""#), "{}: {what}: {to}", t.backend);
        }
        // The provider's refusal with the right cookie is the provider's
        // word (audited); nothing was spent or stored.
        let jar = format!("kubebyon_oidc_state={cookie}");
        let r = c.get(&format!("/auth/oidc/callback?error=access_denied&state={state}"), Some(&jar)).await;
        let to = r.headers.get("location").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
        assert!(c.get(&to, None).await.body.contains(r#"data-error-code="oidc_denied""#), "{}: {to}", t.backend);
        let after = rows_per_table(&t.pool, t.backend).await;
        let grew: Vec<_> = after.iter().zip(&before).filter(|(a, b)| a != b).map(|(a, _)| a.0.as_str()).collect();
        assert_eq!(grew, ["audit_log"], "{}: only the provider's refusal, audited", t.backend);
    }
}

/// `make bench`: a signed-in user's cluster list (in-process router, a
/// SQLite file), alone and while one client starts 10,000 anonymous
/// sign-ins beside it: its median and 95th percentile each time, how long
/// the starts took, and whether any table grew.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a benchmark: make bench"]
async fn bench_sign_in_starts_beside_a_users_requests() {
    use std::sync::Arc;
    use std::time::{Duration, Instant};
    let provider = NpmProvider::start("http://127.0.0.1:3000/auth/oidc/callback");
    let (url, _dir) = support::sqlite_url();
    let pool = db::connect(&url).await.unwrap();
    let c = Arc::new(Console::with(pool.clone(), None, provider.console_config()));
    c.user("bench", PW, false).await;
    let cookie = c.login("bench", PW).await;
    oidc_start(&c).await;
    let before = rows_per_table(&pool, "sqlite").await;
    // The list's latency until `until` says stop (at least 200 requests).
    async fn sample(c: &Console, cookie: &str, until: impl Fn() -> bool) -> (Duration, Duration, usize) {
        let mut took = Vec::new();
        while took.len() < 200 || !until() {
            let t = Instant::now();
            let r = c.get("/api/console/clusters", Some(cookie)).await;
            assert_eq!(r.status, 200, "{}", r.body);
            took.push(t.elapsed());
        }
        took.sort();
        (took[took.len() / 2], took[took.len() * 95 / 100], took.len())
    }
    let alone = sample(&c, &cookie, || true).await;
    let flood = {
        let c = c.clone();
        tokio::spawn(async move {
            let t = Instant::now();
            for _ in 0..10_000 {
                oidc_start(&c).await;
            }
            t.elapsed()
        })
    };
    let beside = sample(&c, &cookie, || flood.is_finished()).await;
    let starts = flood.await.unwrap();
    println!("== a user's cluster list, alone: p50 {:?}, p95 {:?} ({} requests)", alone.0, alone.1, alone.2);
    println!(
        "== beside 10,000 anonymous sign-in starts: p50 {:?}, p95 {:?} ({} requests); the starts took {:.1} s",
        beside.0,
        beside.1,
        beside.2,
        starts.as_secs_f64()
    );
    let grew = rows_per_table(&pool, "sqlite").await != before;
    println!("== tables grown by the starts: {}", if grew { "some (a regression)" } else { "none" });
}
