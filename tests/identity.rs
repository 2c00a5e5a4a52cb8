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
            groups: groups.iter().map(|g| (*g).to_owned()).collect(),
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
                groups: vec!["platform".into()],
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
            groups: vec![],
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
