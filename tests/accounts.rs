//! Account use cases on both real backends: the bootstrap/CLI admin upsert,
//! user management rules, and sign-in throttling.

mod support;

use kubebyon::domain::user::{CurrentUser, Role};
use kubebyon::domain::{AppError, ErrorCode, Field};
use kubebyon::server::auth::rate_limit::{LoginLimiter, MAX_FAILURES};
use kubebyon::server::db;
use kubebyon::server::service::accounts;
use support::each_backend;

const PW: &str = "a long enough password";

/// Two fresh replicas starting together each make a first admin with their own
/// generated password: exactly one creates it, and the password that replica
/// reports is the one that works (the other's is never set).
#[tokio::test]
async fn two_first_starts_at_once_leave_the_reported_password_working() {
    for t in each_backend().await {
        let (one, two) = ("first replica's password", "second replica's password");
        let (a, b) = tokio::join!(
            accounts::create_first_admin(&t.pool, "admin", one),
            accounts::create_first_admin(&t.pool, "admin", two)
        );
        let (a, b) = (a.unwrap(), b.unwrap());
        assert!(a ^ b, "{}: exactly one created it ({a}, {b})", t.backend);
        let (reported, other) = if a { (one, two) } else { (two, one) };
        let limiter = LoginLimiter::default();
        assert!(accounts::login(&t.pool, &limiter, "admin", reported, "c").await.is_ok(), "{}", t.backend);
        let err = accounts::login(&t.pool, &limiter, "admin", other, "c2").await.unwrap_err();
        assert_eq!(err.code, ErrorCode::LoginFailed, "{}", t.backend);
    }
}

#[tokio::test]
async fn admin_upsert_creates_then_resets_and_promotes() {
    for t in each_backend().await {
        assert!(accounts::upsert_admin(&t.pool, "root-admin", PW).await.unwrap(), "{}: created", t.backend);
        let limiter = LoginLimiter::default();
        let (user, token) = accounts::login(&t.pool, &limiter, "root-admin", PW, "c").await.unwrap();
        assert!(user.is_admin());
        // Resetting ends the old session and changes the password.
        assert!(!accounts::upsert_admin(&t.pool, "root-admin", "another long password").await.unwrap());
        assert_eq!(accounts::user_for_token(&t.pool, &token).await.unwrap(), None, "{}", t.backend);
        let err = accounts::login(&t.pool, &limiter, "root-admin", PW, "c").await.unwrap_err();
        assert_eq!(err.code, ErrorCode::LoginFailed);
        // A plain user named by the CLI becomes an admin.
        let u = support::user(&t.pool, "plain", Role::User).await;
        accounts::upsert_admin(&t.pool, "plain", PW).await.unwrap();
        assert_eq!(db::users::by_id(&t.pool, u.id).await.unwrap().unwrap().role, "admin");
        // Bad input is refused before anything is written.
        assert_eq!(
            accounts::upsert_admin(&t.pool, "Bad Name", PW).await.unwrap_err(),
            AppError::at(ErrorCode::UsernameInvalid, Field::Username)
        );
        assert_eq!(
            accounts::upsert_admin(&t.pool, "shorty", "short").await.unwrap_err(),
            AppError::at(ErrorCode::PasswordTooShort, Field::Password)
        );
        assert!(db::users::by_username(&t.pool, "shorty").await.unwrap().is_none());
    }
}

#[tokio::test]
async fn user_management_rules() {
    for t in each_backend().await {
        let admin = support::user(&t.pool, "boss", Role::Admin).await;
        let user = CurrentUser { id: 0, username: "nobody".into(), role: Role::User };
        let forbidden = AppError::new(ErrorCode::Forbidden);
        assert_eq!(accounts::create_user(&t.pool, &user, "eve", PW, "admin").await.unwrap_err(), forbidden);
        assert_eq!(accounts::list_users(&t.pool, &user).await.unwrap_err(), forbidden);

        let id = accounts::create_user(&t.pool, &admin, "dora", PW, "user").await.unwrap();
        assert_eq!(
            accounts::create_user(&t.pool, &admin, "dora", PW, "user").await.unwrap_err(),
            AppError::at(ErrorCode::UsernameTaken, Field::Username),
            "{}",
            t.backend
        );
        assert_eq!(
            accounts::create_user(&t.pool, &admin, "eddy", PW, "root").await.unwrap_err(),
            AppError::at(ErrorCode::RoleInvalid, Field::Role)
        );
        // The last admin keeps the role; with a second admin it can go.
        assert_eq!(
            accounts::set_role(&t.pool, None, &admin, admin.id, "user").await.unwrap_err(),
            AppError::at(ErrorCode::LastAdmin, Field::Role)
        );
        accounts::set_role(&t.pool, None, &admin, id, "admin").await.unwrap();
        accounts::set_role(&t.pool, None, &admin, admin.id, "user").await.unwrap();
        assert_eq!(
            accounts::set_role(&t.pool, None, &admin, 9999, "user").await.unwrap_err().code,
            ErrorCode::NotFound
        );

        let names: Vec<String> =
            accounts::list_users(&t.pool, &admin).await.unwrap().into_iter().map(|u| u.username).collect();
        assert_eq!(names, ["boss", "dora"]);
        accounts::reset_password(&t.pool, &admin, id, "brand new password").await.unwrap();
        let limiter = LoginLimiter::default();
        assert!(accounts::login(&t.pool, &limiter, "dora", "brand new password", "c").await.is_ok());
    }
}

/// Two admins demoting each other at the same moment: one wins, one admin stays.
#[tokio::test]
async fn concurrent_demotions_leave_an_admin() {
    for t in each_backend().await {
        let a = support::user(&t.pool, "ada", Role::Admin).await;
        let b = support::user(&t.pool, "bea", Role::Admin).await;
        let (ra, rb) = tokio::join!(
            accounts::set_role(&t.pool, None, &a, b.id, "user"),
            accounts::set_role(&t.pool, None, &b, a.id, "user")
        );
        assert_eq!(u8::from(ra.is_ok()) + u8::from(rb.is_ok()), 1, "{}: {ra:?} {rb:?}", t.backend);
        // The losing side is refused for the right reason, not any error.
        let lost = ra.err().or(rb.err()).unwrap();
        assert_eq!(lost.code, ErrorCode::LastAdmin, "{}", t.backend);
        assert_eq!(db::users::count_admins(&t.pool).await.unwrap(), 1, "{}", t.backend);
    }
}

#[tokio::test]
async fn throttling_counts_per_user_and_client() {
    let t = each_backend().await.remove(0);
    accounts::upsert_admin(&t.pool, "target", PW).await.unwrap();
    let limiter = LoginLimiter::default();
    for _ in 0..MAX_FAILURES {
        let e = accounts::login(&t.pool, &limiter, "target", "wrong password", "10.0.0.1").await.unwrap_err();
        assert_eq!(e.code, ErrorCode::LoginFailed);
    }
    let e = accounts::login(&t.pool, &limiter, "target", PW, "10.0.0.1").await.unwrap_err();
    assert_eq!(e.code, ErrorCode::LoginRateLimited);
    assert!(accounts::login(&t.pool, &limiter, "target", PW, "10.0.0.2").await.is_ok(), "other client");
}

/// Two console replicas (two limiters, one database): failures made through
/// either count for both, so spreading guesses over replicas gains nothing;
/// a success through one forgives the pair on both. Both backends.
#[tokio::test]
async fn throttling_holds_across_replicas_on_one_database() {
    for t in each_backend().await {
        accounts::upsert_admin(&t.pool, "target", PW).await.unwrap();
        let (a, b) = (LoginLimiter::default(), LoginLimiter::default());
        for i in 0..MAX_FAILURES {
            let replica = if i % 2 == 0 { &a } else { &b };
            let e = accounts::login(&t.pool, replica, "target", "wrong password", "10.0.0.1").await.unwrap_err();
            assert_eq!(e.code, ErrorCode::LoginFailed, "{}", t.backend);
        }
        for replica in [&a, &b] {
            let e = accounts::login(&t.pool, replica, "target", PW, "10.0.0.1").await.unwrap_err();
            assert_eq!(e.code, ErrorCode::LoginRateLimited, "{}: refused on both replicas", t.backend);
        }
        // Another client is not affected; its success forgives only its own pair.
        assert!(accounts::login(&t.pool, &b, "target", PW, "10.0.0.2").await.is_ok(), "{}", t.backend);
        // Records are purged once their window has passed.
        let later = db::now() + kubebyon::server::auth::rate_limit::WINDOW_SECS + 1;
        assert!(db::shared::purge_attempts(&t.pool, later).await.unwrap() >= 1, "{}", t.backend);
        assert!(accounts::login(&t.pool, &LoginLimiter::default(), "target", PW, "10.0.0.1").await.is_ok());
    }
}

/// A join token's own budget of script fetches (issue 40 item 7): shared by
/// replicas, apart from other tokens and from every client's count, fresh
/// once its window has passed. Both backends.
#[tokio::test]
async fn a_join_tokens_fetches_have_their_own_budget() {
    use kubebyon::server::db::shared::{MAX_TOKEN_FETCHES, take_token_fetch};
    for t in each_backend().await {
        let now = db::now();
        for n in 0..MAX_TOKEN_FETCHES {
            assert!(take_token_fetch(&t.pool, 7, "abcdef", now).await.unwrap(), "{}: fetch {n}", t.backend);
        }
        assert!(!take_token_fetch(&t.pool, 7, "abcdef", now).await.unwrap(), "{}: used up", t.backend);
        assert!(take_token_fetch(&t.pool, 7, "bcdefg", now).await.unwrap(), "{}: another token", t.backend);
        assert!(take_token_fetch(&t.pool, 8, "abcdef", now).await.unwrap(), "{}: another cluster", t.backend);
        let later = now + kubebyon::server::auth::rate_limit::WINDOW_SECS;
        assert!(take_token_fetch(&t.pool, 7, "abcdef", later).await.unwrap(), "{}: a new window", t.backend);
    }
}

/// The observer lease: one holder at a time, renewable by its holder, taken
/// over only after it runs out. (Long leases where one must hold: a loaded
/// machine took over 300 ms between two writes of an earlier version.)
#[tokio::test]
async fn leases_have_one_holder_until_they_run_out() {
    const HELD: i64 = 60_000;
    for t in each_backend().await {
        let take = |who: &'static str, ttl| db::shared::acquire_lease(&t.pool, "x", who, ttl);
        assert!(take("a", HELD).await.unwrap(), "{}", t.backend);
        assert!(!take("b", HELD).await.unwrap(), "{}: held by a", t.backend);
        // a renews, for a second only.
        assert!(take("a", 1_000).await.unwrap(), "{}: a renews", t.backend);
        assert_eq!(db::shared::lease_holder(&t.pool, "x").await.unwrap().as_deref(), Some("a"));
        tokio::time::sleep(std::time::Duration::from_millis(1_100)).await;
        assert_eq!(db::shared::lease_holder(&t.pool, "x").await.unwrap(), None, "{}: ran out", t.backend);
        assert!(take("b", HELD).await.unwrap(), "{}: b takes it over", t.backend);
        assert!(!take("a", HELD).await.unwrap(), "{}: held by b", t.backend);
    }
}
