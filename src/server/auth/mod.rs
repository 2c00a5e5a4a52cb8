//! Accounts and sessions: password hashing, session cookies, failed-login
//! throttling and the same-origin check for state-changing requests.

pub mod client;
pub mod oidc;
pub(crate) mod origin;
pub mod password;
pub mod rate_limit;
pub(crate) mod sealed;
pub mod session;
