//! The admin audit log. An entry is appended once the change it records is
//! stored; if appending fails, the change stands and the failure is logged
//! (the change cannot be taken back at that point).

use sqlx::AnyPool;

use crate::domain::audit::{AuditAction, AuditEntry};
use crate::domain::user::CurrentUser;
use crate::domain::{AppError, ErrorCode};
use crate::server::db;

pub async fn record(pool: &AnyPool, actor: &CurrentUser, action: AuditAction, target: &str, detail: &str) {
    if let Err(e) = db::audit::record(pool, actor, action, target, detail).await {
        tracing::error!(error = %e, action = action.as_str(), target, "writing the audit log failed");
    }
}

/// The newest entries below `before` (admins only).
pub async fn list(pool: &AnyPool, user: &CurrentUser, before: Option<i64>) -> Result<Vec<AuditEntry>, AppError> {
    if !user.is_admin() {
        return Err(AppError::new(ErrorCode::Forbidden));
    }
    Ok(db::audit::list(pool, before, crate::domain::audit::PAGE).await?)
}
