//! Request services: the one place each use case lives, shared by server
//! functions (pages) and the JSON API. They take the signed-in user and raw
//! input, apply the domain rules, and call the repositories. Database errors
//! are logged here and reach the caller only as `ErrorCode::Internal`.

pub mod access;
pub mod accounts;
pub mod audit;
pub mod clusters;
pub mod credentials;
pub mod join;
pub mod join_script;
pub mod members;
pub mod moves;
pub mod quota;
pub mod settings;
pub mod write_limit;

use crate::domain::{AppError, ErrorCode};
use crate::server::db::DbError;

pub(crate) use crate::server::host::HostHandle;

/// Tells this process's reconciler, when it runs one, that a change was
/// stored (another replica's finds it on its next pass). The only wake call
/// outside the reconciler; entry points never call it (the use case does).
pub(crate) fn wake(host: Option<&HostHandle>) {
    if let Some(host) = host {
        host.wake();
    }
}

/// What a use case knows of the host: how its LoadBalancer provider is asked
/// for an address, and the host whose reconciler to wake after a change.
/// `kubebyon move` knows the first (it asks the host itself) and has no
/// reconciler to wake.
#[derive(Clone, Copy, Default)]
pub struct HostLink<'a> {
    pub detected: Option<crate::domain::settings::AddressRequest>,
    pub host: Option<&'a HostHandle>,
}

impl<'a> HostLink<'a> {
    /// The console's own host, as pages and the JSON API see it.
    pub(crate) fn of(host: Option<&'a HostHandle>) -> Self {
        Self { detected: host.map(|h| h.seen.detected()), host }
    }
}

/// The operation queue's depth and the age in seconds of its oldest entry (for `/metrics`).
pub(crate) async fn queue_stats(pool: &sqlx::AnyPool) -> Result<(i64, i64), DbError> {
    let (depth, oldest) = crate::server::db::operations::queue_stats(pool).await?;
    Ok((depth, oldest.map_or(0, |t| (crate::server::db::now() - t).max(0))))
}

/// Whether the database answers (for `/readyz`).
pub(crate) async fn database_answers(pool: &sqlx::AnyPool) -> Result<(), DbError> {
    crate::server::db::ping(pool).await
}

/// Logs a storage failure and turns it into the fixed internal error.
pub(crate) fn internal(err: impl std::fmt::Display) -> AppError {
    tracing::error!(error = %err, "request failed");
    AppError::new(ErrorCode::Internal)
}

impl From<DbError> for AppError {
    fn from(err: DbError) -> Self {
        match err {
            DbError::OverQuota(dimension) => dimension.error(),
            err => internal(err),
        }
    }
}
