//! Application state shared by every request: one pool, the limiter, options.

use std::sync::Arc;

use axum::extract::FromRef;
use leptos::config::LeptosOptions;
use sqlx::AnyPool;

use super::auth::rate_limit::LoginLimiter;
use super::config::Config;
use super::host::Host;

#[derive(Clone, FromRef)]
pub struct AppState {
    pub leptos_options: LeptosOptions,
    pub pool: AnyPool,
    pub limiter: Arc<LoginLimiter>,
    /// Spec writes per user ([`super::service::write_limit`]).
    pub spec_writes: Arc<super::service::write_limit::SpecWriteLimiter>,
    pub config: Arc<Config>,
    /// The console's handle on the host cluster, when there is a host.
    pub host: Option<Arc<Host>>,
    /// The live pages' event streams ([`super::push`]).
    pub push: Arc<super::push::Hub>,
    /// The OpenID Connect provider, when the operator configured one.
    pub oidc: Option<Arc<super::auth::oidc::Provider>>,
}

impl AppState {
    /// The operator's policy on hosts ([`Config::host_policy`]) with what the
    /// host cluster allows now: creates and edits are refused while its
    /// helm-controller accepts no `failurePolicy` the console may write.
    pub(crate) fn host_policy(&self) -> crate::domain::gateway::HostPolicy {
        let mut policy = self.config.host_policy();
        policy.helm_unsupported = self.host.as_ref().is_some_and(|h| h.seen.helm().refuses_changes());
        policy
    }
}
