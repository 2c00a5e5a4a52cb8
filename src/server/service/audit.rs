//! The admin audit log. An entry is appended once the change it records is
//! stored; if appending fails, the change stands and the failure is logged
//! (the change cannot be taken back at that point).

use sqlx::AnyPool;

use crate::domain::AppError;
use crate::domain::audit::{AuditAction, AuditEntry};
use crate::domain::user::CurrentUser;
use crate::server::db;

pub(crate) async fn record(pool: &AnyPool, actor: &CurrentUser, action: AuditAction, target: &str, detail: &str) {
    if let Err(e) = db::audit::record(pool, actor, action, target, detail).await {
        tracing::error!(error = %e, action = action.as_str(), target, "writing the audit log failed");
    }
}

/// A sign-in, or a failed one of an existing account (a name that is no
/// account is not written down: it may be a password typed in the wrong field).
pub(crate) async fn sign_in(pool: &AnyPool, account: &str, user: Option<&CurrentUser>, client: &str) {
    let target = format!("user:{account}");
    let detail = format!("client: {client}");
    let written = match user {
        Some(u) => db::audit::record(pool, u, AuditAction::SignedIn, &target, &detail).await,
        None => db::audit::record_as(pool, None, "anonymous", AuditAction::SignInFailed, &target, &detail).await,
    };
    if let Err(e) = written {
        tracing::error!(error = %e, "writing the audit log failed");
    }
}

/// An OpenID Connect sign-in refused (a replayed `state`, a token that did
/// not verify…): who is not known, so the entry names the client and the reason.
pub(crate) async fn oidc_refused(pool: &AnyPool, code: crate::domain::ErrorCode, client: &str) {
    let detail = format!("OpenID Connect: {}; client: {client}", code.as_str());
    let written = db::audit::record_as(pool, None, "anonymous", AuditAction::SignInFailed, "oidc", &detail).await;
    if let Err(e) = written {
        tracing::error!(error = %e, "writing the audit log failed");
    }
}

/// The newest entries below `before` (admins only).
pub(crate) async fn list(pool: &AnyPool, user: &CurrentUser, before: Option<i64>) -> Result<Vec<AuditEntry>, AppError> {
    user.require_admin()?;
    Ok(db::audit::list(pool, before, crate::domain::audit::PAGE).await?)
}
