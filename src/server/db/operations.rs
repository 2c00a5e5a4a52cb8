//! The `cluster_operations` table: every create/update/delete request is a row,
//! written in the same transaction as the spec change, and claimed later by the
//! reconciler. Claiming is a conditional UPDATE, so two console replicas never
//! run the same row; an expired claim (crashed worker) can be taken again.

use sqlx::{Any, AnyPool, FromRow, Transaction};

use super::{DbError, now, now_ms};
use crate::domain::change::{ClusterEvent, Operation, OperationState};

#[derive(Debug, Clone, FromRow)]
pub struct OperationRow {
    pub id: i64,
    pub cluster_id: i64,
    pub kind: String,
    pub generation: i64,
    pub detail: String,
    pub requested_by: Option<i64>,
    pub requested_by_name: Option<String>,
    pub state: String,
    pub attempts: i64,
    pub last_error: Option<String>,
    pub created_at: i64,
    pub finished_at: Option<i64>,
}

impl OperationRow {
    pub fn operation(&self) -> Result<Operation, DbError> {
        serde_json::from_str(&self.detail).map_err(|e| DbError::CorruptRow(format!("operation {}: {e}", self.id)))
    }

    /// The history entry users see (no raw error text).
    pub(crate) fn into_event(self) -> Result<ClusterEvent, DbError> {
        Ok(ClusterEvent {
            id: self.id,
            operation: self.operation()?,
            generation: self.generation,
            state: {
                let state = OperationState::parse(&self.state);
                if state.as_str() != self.state {
                    super::unknown_value("cluster_operations.state", self.id, &self.state);
                }
                state
            },
            attempts: self.attempts,
            requested_by: self.requested_by_name,
            created_at: self.created_at,
            finished_at: self.finished_at,
        })
    }
}

const COLUMNS: &str = "id, cluster_id, kind, generation, detail, requested_by, \
    (SELECT username FROM users u WHERE u.id = requested_by) AS requested_by_name, \
    state, attempts, last_error, created_at, finished_at";

pub(crate) async fn insert(
    tx: &mut Transaction<'_, Any>,
    cluster_id: i64,
    generation: i64,
    op: &Operation,
    requested_by: i64,
) -> Result<i64, DbError> {
    let detail = serde_json::to_string(op).map_err(|e| DbError::CorruptRow(e.to_string()))?;
    let id = sqlx::query_scalar(
        "INSERT INTO cluster_operations (cluster_id, kind, generation, detail, requested_by, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6) RETURNING id",
    )
    .bind(cluster_id)
    .bind(op.kind())
    .bind(generation)
    .bind(detail)
    .bind(requested_by)
    .bind(now())
    .fetch_one(&mut **tx)
    .await?;
    Ok(id)
}

/// A cluster's history, newest first.
pub async fn for_cluster(pool: &AnyPool, cluster_id: i64) -> Result<Vec<OperationRow>, DbError> {
    history_page(pool, cluster_id, None, i64::MAX).await
}

/// Up to `limit` of a cluster's operations older than `before` (an id), newest first.
pub(crate) async fn history_page(
    pool: &AnyPool,
    cluster_id: i64,
    before: Option<i64>,
    limit: i64,
) -> Result<Vec<OperationRow>, DbError> {
    let sql =
        format!("SELECT {COLUMNS} FROM cluster_operations WHERE cluster_id = $1 AND id < $2 ORDER BY id DESC LIMIT $3");
    Ok(sqlx::query_as(&sql).bind(cluster_id).bind(before.unwrap_or(i64::MAX)).bind(limit).fetch_all(pool).await?)
}

/// How many operations wait or run, and when the oldest of them was requested.
pub(crate) async fn queue_stats(pool: &AnyPool) -> Result<(i64, Option<i64>), DbError> {
    let row: (i64, Option<i64>) = sqlx::query_as(
        "SELECT COUNT(*), MIN(created_at) FROM cluster_operations WHERE state IN ('pending', 'running')",
    )
    .fetch_one(pool)
    .await?;
    Ok(row)
}

/// Claims a runnable operation for `worker` for `lease_secs`: of the owner
/// served longest ago (`queue_turns`, so claims rotate across owners and one
/// owner's thousands of queued edits do not hold up another's create), its
/// oldest. When another worker takes the chosen row first, the conditional
/// UPDATE matches nothing; then we look again while runnable rows remain.
pub async fn claim_next(pool: &AnyPool, worker: &str, lease_secs: i64) -> Result<Option<OperationRow>, DbError> {
    // Runnable: pending, or claimed by a worker whose lease ran out; and the
    // oldest unfinished operation of its cluster, so one cluster's operations
    // run in order and never two at once, across every console process.
    const RUNNABLE: &str = "(q.state = 'pending' OR (q.state = 'running' AND q.claimed_until < $3)) \
         AND NOT EXISTS (SELECT 1 FROM cluster_operations e WHERE e.cluster_id = q.cluster_id AND e.id < q.id \
         AND e.state IN ('pending', 'running'))";
    let sql = format!(
        "UPDATE cluster_operations SET state = 'running', claimed_by = $1, claimed_until = $2, attempts = attempts + 1 \
         WHERE id = (SELECT q.id FROM cluster_operations q JOIN clusters c ON c.id = q.cluster_id \
           LEFT JOIN queue_turns t ON t.owner_id = c.owner_id \
           WHERE {RUNNABLE} ORDER BY COALESCE(t.served_ms, 0), q.id LIMIT 1) \
         AND (state = 'pending' OR (state = 'running' AND claimed_until < $3)) \
         RETURNING {COLUMNS}"
    );
    let runnable = format!("SELECT COUNT(*) FROM cluster_operations q WHERE {}", RUNNABLE.replace("$3", "$1"));
    for _ in 0..16 {
        let t = now();
        let claimed: Option<OperationRow> =
            sqlx::query_as(&sql).bind(worker).bind(t + lease_secs).bind(t).fetch_optional(pool).await?;
        if let Some(op) = &claimed {
            // The owner's turn is used: the others come first next time.
            sqlx::query(
                "INSERT INTO queue_turns (owner_id, served_ms) SELECT owner_id, $2 FROM clusters WHERE id = $1 \
                 ON CONFLICT (owner_id) DO UPDATE SET served_ms = $2",
            )
            .bind(op.cluster_id)
            .bind(now_ms())
            .execute(pool)
            .await?;
            return Ok(claimed);
        }
        let left: i64 = sqlx::query_scalar(&runnable).bind(t).fetch_one(pool).await?;
        if left == 0 {
            return Ok(None);
        }
    }
    Ok(None)
}

/// Marks a claimed operation finished; only its current holder may.
pub async fn finish(pool: &AnyPool, id: i64, worker: &str, error: Option<&str>) -> Result<bool, DbError> {
    let state = if error.is_some() { OperationState::Failed } else { OperationState::Done }.as_str();
    let done = sqlx::query(
        "UPDATE cluster_operations SET state = $1, last_error = $2, finished_at = $3, claimed_until = NULL \
         WHERE id = $4 AND claimed_by = $5 AND state = 'running'",
    )
    .bind(state)
    .bind(error)
    .bind(now())
    .bind(id)
    .bind(worker)
    .execute(pool)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Finishes the cluster's other pending operations up to `generation`: the
/// handler applied the cluster's current spec, which they asked for (or
/// less), so running them again would only repeat it. Returns how many.
pub async fn supersede(pool: &AnyPool, cluster_id: i64, generation: i64) -> Result<u64, DbError> {
    let done = sqlx::query(
        "UPDATE cluster_operations SET state = 'done', finished_at = $1 \
         WHERE cluster_id = $2 AND state = 'pending' AND generation <= $3",
    )
    .bind(now())
    .bind(cluster_id)
    .bind(generation)
    .execute(pool)
    .await?;
    Ok(done.rows_affected())
}

/// Leaves a claimed operation to be tried again after `delay_secs` (its lease
/// becomes the timer); only its current holder may.
pub(crate) async fn retry_later(
    pool: &AnyPool,
    id: i64,
    worker: &str,
    delay_secs: i64,
    error: &str,
) -> Result<bool, DbError> {
    let done = sqlx::query(
        "UPDATE cluster_operations SET claimed_until = $1, last_error = $2 \
         WHERE id = $3 AND claimed_by = $4 AND state = 'running'",
    )
    .bind(now() + delay_secs)
    .bind(error)
    .bind(id)
    .bind(worker)
    .execute(pool)
    .await?;
    Ok(done.rows_affected() == 1)
}
