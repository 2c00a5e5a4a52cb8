//! The audit log (admins).

use axum::Json;
use axum::extract::State;
use axum::routing::{MethodRouter, get};

use super::{ApiError, ApiResult, ApiUser, BeforeQuery};
use crate::domain::{AppError, ErrorCode};
use crate::server::state::AppState;

/// The routes of the audit log.
pub(crate) fn routes() -> Vec<(&'static str, MethodRouter<AppState>)> {
    vec![("/api/admin/audit", get(list_audit))]
}

/// `GET /api/admin/audit[?before=ID]`: the newest 50 entries (older ones
/// with `before` = the last id seen).
pub(crate) async fn list_audit(
    State(st): State<AppState>,
    ApiUser(u): ApiUser,
    query: Result<axum::extract::Query<BeforeQuery>, axum::extract::rejection::QueryRejection>,
) -> ApiResult<Vec<crate::domain::audit::AuditEntry>> {
    let axum::extract::Query(q) = query.map_err(|_| ApiError(AppError::new(ErrorCode::BadRequest)))?;
    Ok(Json(crate::server::service::audit::list(&st.pool, &u, q.before).await?))
}
