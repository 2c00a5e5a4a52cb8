//! Request services: the one place each use case lives, shared by server
//! functions (pages) and the JSON API. They take the signed-in user and raw
//! input, apply the domain rules, and call the repositories. Database errors
//! are logged here and reach the caller only as `ErrorCode::Internal`.

pub mod accounts;
pub mod audit;
pub mod clusters;
pub mod migration;
pub mod quota;
pub mod settings;
pub mod write_limit;

use crate::domain::{AppError, ErrorCode};
use crate::server::db::DbError;

/// Tells this process's reconciler, when it runs one, that a change was
/// stored (another replica's finds it on its next pass). The only wake call
/// outside the reconciler.
pub fn wake(host: Option<&std::sync::Arc<crate::server::controllers::reconciler::Context>>) {
    if let Some(host) = host {
        host.wake();
    }
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
