//! What a failed sign-in logs, in a test binary of its own: tracing caches
//! each log site's interest per process, so other tests logging at the same
//! sites on other threads (without this subscriber) would hide its lines.

mod support;

use kubebyon::domain::ErrorCode;
use kubebyon::server::auth::rate_limit::LoginLimiter;
use kubebyon::server::service::accounts;
use support::each_backend;

const PW: &str = "a long enough password";

/// What a failed sign-in logs: the account when it exists, never what was
/// typed into the username field (defect 10: a password typed there, or any
/// name, reached the log).
#[tokio::test(flavor = "current_thread")]
async fn failed_logins_never_log_what_was_typed_as_a_username() {
    let log = kubebyon::server::testing::LogCapture::start();

    let t = each_backend().await.remove(0);
    accounts::upsert_admin(&t.pool, "target", PW).await.unwrap();
    let limiter = LoginLimiter::default();
    for typed in ["hunter2-typed-here", "correct horse battery", "target"] {
        let e = accounts::login(&t.pool, &limiter, typed, "wrong password", "10.0.0.9").await.unwrap_err();
        assert_eq!(e.code, ErrorCode::LoginFailed);
    }
    let log = log.text();
    assert!(log.contains("login failed"), "{log}");
    assert!(!log.contains("hunter2") && !log.contains("correct horse"), "typed text in the log: {log}");
    assert!(log.contains(r#"account="target""#), "an existing account is named: {log}");
}
