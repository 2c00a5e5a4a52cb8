//! Sign-in throttling's numbers (`auth::rate_limit` explains the policy):
//! one place for this process's limiter and the replicas' shared store
//! (`db::shared`).

/// Failures for one username from one client within [`WINDOW_SECS`].
pub const MAX_FAILURES: u32 = 5;
/// Failures from one client within [`WINDOW_SECS`], whatever the usernames.
pub const MAX_CLIENT_FAILURES: u32 = 30;
/// The throttling window.
pub const WINDOW_SECS: i64 = 15 * 60;
