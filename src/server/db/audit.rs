//! The `audit_log` table: appended to after an admin's change is stored,
//! read newest first by the audit page and `GET /api/admin/audit`.

use sqlx::{AnyPool, FromRow};

use super::{DbError, now};
use crate::domain::audit::{AuditAction, AuditEntry};
use crate::domain::user::CurrentUser;

#[derive(FromRow)]
struct Row {
    id: i64,
    at: i64,
    actor: String,
    action: String,
    target: String,
    detail: String,
}

pub(crate) async fn record(
    pool: &AnyPool,
    actor: &CurrentUser,
    action: AuditAction,
    target: &str,
    detail: &str,
) -> Result<(), DbError> {
    record_as(pool, Some(actor.id), &actor.username, action, target, detail).await
}

/// An entry whose actor is not signed in (a failed sign-in: `anonymous`).
pub(crate) async fn record_as(
    pool: &AnyPool,
    actor_id: Option<i64>,
    actor: &str,
    action: AuditAction,
    target: &str,
    detail: &str,
) -> Result<(), DbError> {
    sqlx::query("INSERT INTO audit_log (at, actor_id, actor, action, target, detail) VALUES ($1, $2, $3, $4, $5, $6)")
        .bind(now())
        .bind(actor_id)
        .bind(actor)
        .bind(action.as_str())
        .bind(target)
        .bind(detail)
        .execute(pool)
        .await?;
    Ok(())
}

/// The newest `limit` entries with an id below `before` (all when `None`).
pub(crate) async fn list(pool: &AnyPool, before: Option<i64>, limit: i64) -> Result<Vec<AuditEntry>, DbError> {
    let rows: Vec<Row> = sqlx::query_as(
        "SELECT id, at, actor, action, target, detail FROM audit_log WHERE id < $1 ORDER BY id DESC LIMIT $2",
    )
    .bind(before.unwrap_or(i64::MAX))
    .bind(limit)
    .fetch_all(pool)
    .await?;
    rows.into_iter()
        .map(|r| {
            let action = AuditAction::parse(&r.action)
                .ok_or_else(|| DbError::CorruptRow(format!("audit entry {}: action {:?}", r.id, r.action)))?;
            Ok(AuditEntry { id: r.id, at: r.at, actor: r.actor, action, target: r.target, detail: r.detail })
        })
        .collect()
}
