//! The `node_removals` table: each removal of a joined node, from the
//! request to its end (`controllers::node_removal` drives it). Every step the
//! driver takes inside the virtual cluster is idempotent, and a removal ends
//! by a conditional UPDATE from `draining`, so replicas driving at once
//! finish it once.

use sqlx::{AnyPool, FromRow};

use super::{DbError, now};
use crate::domain::nodes::{RemovalReason, RemovalState, RemovalView};

#[derive(Debug, Clone, FromRow)]
pub struct RemovalRow {
    pub id: i64,
    pub cluster_id: i64,
    pub node: String,
    pub drain: i64,
    pub requested_by_name: Option<String>,
    pub state: String,
    pub pods_left: Option<i64>,
    pub reason: String,
    pub pod: String,
    pub created_at: i64,
    pub finished_at: Option<i64>,
}

impl RemovalRow {
    /// As shown; a state this build does not know reads as failed, an unknown
    /// reason as none (both logged).
    pub fn view(&self) -> RemovalView {
        let state = self.state.parse().unwrap_or_else(|_| {
            super::unknown_value("node_removals.state", self.id, &self.state);
            RemovalState::Failed
        });
        let reason = match self.reason.as_str() {
            "" => None,
            raw => raw
                .parse::<RemovalReason>()
                .inspect_err(|_| super::unknown_value("node_removals.reason", self.id, raw))
                .ok(),
        };
        RemovalView {
            id: self.id,
            node: self.node.clone(),
            drain: self.drain != 0,
            state,
            pods_left: self.pods_left,
            reason,
            pod: Some(self.pod.clone()).filter(|p| !p.is_empty()),
            requested_by: self.requested_by_name.clone(),
            created_at: self.created_at,
            finished_at: self.finished_at,
        }
    }
}

const COLUMNS: &str = "id, cluster_id, node, CASE WHEN drain THEN 1 ELSE 0 END AS drain, \
    (SELECT username FROM users u WHERE u.id = requested_by) AS requested_by_name, \
    state, pods_left, reason, pod, created_at, finished_at";

/// Starts removing `node` of `cluster_id`, or returns the removal already
/// running for it (the same request twice is one removal).
pub async fn start(
    pool: &AnyPool,
    cluster_id: i64,
    node: &str,
    drain: bool,
    requested_by: i64,
) -> Result<(RemovalRow, bool), DbError> {
    let t = now();
    let inserted = sqlx::query(
        "INSERT INTO node_removals (cluster_id, node, drain, requested_by, created_at, updated_at) \
         VALUES ($1, $2, $3, $4, $5, $5) ON CONFLICT (cluster_id, node) WHERE state = 'draining' DO NOTHING",
    )
    .bind(cluster_id)
    .bind(node)
    .bind(drain)
    .bind(requested_by)
    .bind(t)
    .execute(pool)
    .await?
    .rows_affected()
        == 1;
    let sql = format!(
        "SELECT {COLUMNS} FROM node_removals WHERE cluster_id = $1 AND node = $2 AND state = 'draining' ORDER BY id DESC LIMIT 1"
    );
    let row: Option<RemovalRow> = sqlx::query_as(&sql).bind(cluster_id).bind(node).fetch_optional(pool).await?;
    // Finished between the two statements: started again.
    match row {
        Some(row) => Ok((row, inserted)),
        None => Box::pin(start(pool, cluster_id, node, drain, requested_by)).await,
    }
}

/// Every running removal, oldest first.
pub async fn running(pool: &AnyPool) -> Result<Vec<RemovalRow>, DbError> {
    let sql = format!("SELECT {COLUMNS} FROM node_removals WHERE state = 'draining' ORDER BY id");
    Ok(sqlx::query_as(&sql).fetch_all(pool).await?)
}

/// A cluster's most recent removals, newest first.
pub async fn recent(pool: &AnyPool, cluster_id: i64, limit: i64) -> Result<Vec<RemovalRow>, DbError> {
    let sql = format!("SELECT {COLUMNS} FROM node_removals WHERE cluster_id = $1 ORDER BY id DESC LIMIT $2");
    Ok(sqlx::query_as(&sql).bind(cluster_id).bind(limit).fetch_all(pool).await?)
}

/// Records how a running removal stands (only while it runs).
pub async fn progress(
    pool: &AnyPool,
    id: i64,
    pods_left: Option<i64>,
    reason: Option<RemovalReason>,
    pod: Option<&str>,
) -> Result<(), DbError> {
    let reason: &str = reason.map(<&str>::from).unwrap_or_default();
    sqlx::query(
        "UPDATE node_removals SET pods_left = COALESCE($1, pods_left), reason = $2, pod = $3, updated_at = $4 \
         WHERE id = $5 AND state = 'draining'",
    )
    .bind(pods_left)
    .bind(reason)
    .bind(pod.unwrap_or_default())
    .bind(now())
    .bind(id)
    .execute(pool)
    .await?;
    Ok(())
}

/// Ends a running removal: done, or failed with `reason`. True for the one
/// call that ended it.
pub async fn finish(pool: &AnyPool, id: i64, failed: Option<RemovalReason>) -> Result<bool, DbError> {
    let (state, reason, left): (&str, &str, Option<i64>) = match failed {
        None => ("done", "", Some(0)),
        Some(r) => ("failed", r.into(), None),
    };
    let t = now();
    let done = sqlx::query(
        "UPDATE node_removals SET state = $1, reason = $2, pods_left = COALESCE($3, pods_left), pod = '', \
         updated_at = $4, finished_at = $4 WHERE id = $5 AND state = 'draining'",
    )
    .bind(state)
    .bind(reason)
    .bind(left)
    .bind(t)
    .bind(id)
    .execute(pool)
    .await?;
    Ok(done.rows_affected() == 1)
}
