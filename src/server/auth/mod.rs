//! Accounts and sessions: password hashing, session cookies, failed-login
//! throttling and the same-origin check for state-changing requests.

pub mod client;
pub mod oidc;
pub(crate) mod origin;
pub mod password;
pub mod rate_limit;
pub(crate) mod sealed;
pub mod session;

/// Who may sign in with a password (`KUBEBYON_LOCAL_SIGN_IN`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LocalSignIn {
    #[default]
    On,
    /// Console admins only.
    Admins,
    Off,
}
