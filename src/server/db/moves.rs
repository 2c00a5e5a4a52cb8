//! The moves of NodePort clusters to LoadBalancer, and the clusters'
//! old-endpoint columns. The tables keep their names from before the rename,
//! `migrations` and `migration_items` (a rename would break the replica still
//! running the old code during a rolling upgrade); only the code says "move". Every item state
//! change is a conditional UPDATE from the state it is expected to be in, so
//! two drivers (two console replicas, or the console and `kubebyon move`)
//! never switch a cluster twice.

use sqlx::{AnyPool, FromRow, Row};

use super::{DbError, now, operations};
use crate::domain::change::{Change, Operation};
use crate::domain::moves::ItemState;

#[derive(Debug, Clone, FromRow)]
pub(crate) struct MoveRow {
    pub id: i64,
    /// `loadbalancer` or `gateway` ([`crate::domain::moves::MoveTarget`]).
    pub target: String,
    pub created_by: i64,
    pub created_by_name: Option<String>,
    pub concurrency: i64,
    pub grace_secs: i64,
    pub created_at: i64,
}

#[derive(Debug, Clone, FromRow)]
pub struct ItemRow {
    #[sqlx(rename = "migration_id")]
    pub move_id: i64,
    pub cluster_id: i64,
    pub cluster_name: Option<String>,
    pub position: i64,
    pub was_enabled: i64,
    pub old_host: Option<String>,
    pub old_endpoint: Option<String>,
    /// The mode before the move (`None`: NodePort, every move before gateway access).
    pub old_mode: Option<String>,
    pub new_host: String,
    pub state: String,
    pub target_generation: Option<i64>,
    pub reason: String,
    pub started_at: Option<i64>,
    pub finished_at: Option<i64>,
}

impl ItemRow {
    /// Its state; one this build does not know reads as failed (the admin
    /// decides), and is logged.
    pub fn state(&self) -> ItemState {
        ItemState::parse(&self.state).unwrap_or_else(|| {
            super::unknown_value("migration_items.state", self.cluster_id, &self.state);
            ItemState::Failed
        })
    }
}

/// One cluster of a new move.
#[derive(Debug, Clone)]
pub(crate) struct NewItem {
    pub cluster_id: i64,
    pub was_enabled: bool,
    pub old_host: Option<String>,
    pub old_endpoint: Option<String>,
    pub old_mode: crate::domain::PublicAccessMode,
    pub new_host: String,
}

const MOVE_COLUMNS: &str = "m.id, m.target, m.created_by, u.username AS created_by_name, m.concurrency, \
    m.grace_secs, m.created_at FROM migrations m LEFT JOIN users u ON u.id = m.created_by";

const ITEM_COLUMNS: &str = "i.migration_id, i.cluster_id, c.name AS cluster_name, i.position, \
    CASE WHEN i.was_enabled THEN 1 ELSE 0 END AS was_enabled, i.old_host, i.old_endpoint, i.old_mode, i.new_host, i.state, \
    i.target_generation, i.reason, i.started_at, i.finished_at \
    FROM migration_items i LEFT JOIN clusters c ON c.id = i.cluster_id";

/// Stores a move and its items (in order) atomically; returns its id.
pub(crate) async fn create(
    pool: &AnyPool,
    created_by: i64,
    source: &str,
    concurrency: i64,
    grace_secs: i64,
    target: crate::domain::moves::MoveTarget,
    items: &[NewItem],
) -> Result<i64, DbError> {
    let mut tx = super::write_tx(pool).await?;
    let row = sqlx::query(
        "INSERT INTO migrations (created_by, source, concurrency, grace_secs, created_at, target) \
         VALUES ($1, $2, $3, $4, $5, $6) RETURNING id",
    )
    .bind(created_by)
    .bind(source)
    .bind(concurrency)
    .bind(grace_secs)
    .bind(now())
    .bind(target.as_str())
    .fetch_one(&mut *tx)
    .await?;
    let id: i64 = row.try_get(0)?;
    for (position, item) in (0_i64..).zip(items) {
        sqlx::query(
            "INSERT INTO migration_items (migration_id, cluster_id, position, was_enabled, old_host, old_endpoint, new_host, old_mode) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        )
        .bind(id)
        .bind(item.cluster_id)
        .bind(position)
        .bind(item.was_enabled)
        .bind(item.old_host.clone())
        .bind(item.old_endpoint.clone())
        .bind(item.new_host.clone())
        .bind(item.old_mode.as_str())
        .execute(&mut *tx)
        .await?;
    }
    tx.commit().await?;
    Ok(id)
}

pub(crate) async fn get(pool: &AnyPool, id: i64) -> Result<Option<MoveRow>, DbError> {
    let sql = format!("SELECT {MOVE_COLUMNS} WHERE m.id = $1");
    Ok(sqlx::query_as(&sql).bind(id).fetch_optional(pool).await?)
}

/// The newest moves first.
pub(crate) async fn list(pool: &AnyPool, limit: i64) -> Result<Vec<MoveRow>, DbError> {
    let sql = format!("SELECT {MOVE_COLUMNS} ORDER BY m.id DESC LIMIT $1");
    Ok(sqlx::query_as(&sql).bind(limit).fetch_all(pool).await?)
}

pub async fn items(pool: &AnyPool, move_id: i64) -> Result<Vec<ItemRow>, DbError> {
    let sql = format!("SELECT {ITEM_COLUMNS} WHERE i.migration_id = $1 ORDER BY i.position");
    Ok(sqlx::query_as(&sql).bind(move_id).fetch_all(pool).await?)
}

/// Moves with items still queued or switching, oldest first.
pub(crate) async fn active(pool: &AnyPool) -> Result<Vec<MoveRow>, DbError> {
    let sql = format!(
        "SELECT {MOVE_COLUMNS} WHERE EXISTS (SELECT 1 FROM migration_items i \
         WHERE i.migration_id = m.id AND i.state IN ('queued', 'switching')) ORDER BY m.id"
    );
    Ok(sqlx::query_as(&sql).fetch_all(pool).await?)
}

/// Clusters already in an unsettled item of any move (a cluster is moved by one at a time).
pub(crate) async fn busy_clusters(pool: &AnyPool) -> Result<Vec<i64>, DbError> {
    let rows = sqlx::query("SELECT cluster_id FROM migration_items WHERE state IN ('queued', 'switching')")
        .fetch_all(pool)
        .await?;
    rows.iter().map(|r| r.try_get::<i64, _>(0).map_err(DbError::from)).collect()
}

/// Moves an item from `from` to `to`; false when it was not in `from` (another driver was first).
pub async fn transition(
    pool: &AnyPool,
    move_id: i64,
    cluster_id: i64,
    from: ItemState,
    to: ItemState,
    reason: &str,
) -> Result<bool, DbError> {
    // One fixed statement per kind of state: the time it records, if any.
    let (state, reason) = (to.as_str(), reason.to_owned());
    let q = match to {
        ItemState::Switching => sqlx::query(
            "UPDATE migration_items SET state = $1, reason = $2, started_at = $3, finished_at = NULL \
             WHERE migration_id = $4 AND cluster_id = $5 AND state = $6",
        )
        .bind(state)
        .bind(reason)
        .bind(now()),
        ItemState::Queued => sqlx::query(
            "UPDATE migration_items SET state = $1, reason = $2, started_at = NULL, finished_at = NULL, \
             target_generation = NULL WHERE migration_id = $3 AND cluster_id = $4 AND state = $5",
        )
        .bind(state)
        .bind(reason),
        ItemState::Done | ItemState::Failed | ItemState::RolledBack => sqlx::query(
            "UPDATE migration_items SET state = $1, reason = $2, finished_at = $3 \
             WHERE migration_id = $4 AND cluster_id = $5 AND state = $6",
        )
        .bind(state)
        .bind(reason)
        .bind(now()),
    };
    let done = q.bind(move_id).bind(cluster_id).bind(from.as_str()).execute(pool).await?;
    Ok(done.rows_affected() == 1)
}

pub(crate) async fn set_target_generation(
    pool: &AnyPool,
    move_id: i64,
    cluster_id: i64,
    generation: i64,
) -> Result<(), DbError> {
    sqlx::query("UPDATE migration_items SET target_generation = $1 WHERE migration_id = $2 AND cluster_id = $3")
        .bind(generation)
        .bind(move_id)
        .bind(cluster_id)
        .execute(pool)
        .await?;
    Ok(())
}

/// Opens (or clears, with `None`) a cluster's old endpoint record.
pub(crate) async fn set_old_endpoint(
    pool: &AnyPool,
    cluster_id: i64,
    old: Option<(&str, i64, crate::domain::PublicAccessMode)>,
) -> Result<(), DbError> {
    sqlx::query(
        "UPDATE clusters SET old_endpoint_host = $1, old_endpoint_until = $2, old_endpoint_closed = FALSE, \
         old_endpoint_notice_dismissed = FALSE, old_endpoint_mode = $3 WHERE id = $4",
    )
    .bind(old.map(|(h, _, _)| h.to_owned()))
    .bind(old.map(|(_, until, _)| until))
    .bind(old.map(|(_, _, mode)| mode.as_str()))
    .bind(cluster_id)
    .execute(pool)
    .await?;
    Ok(())
}

/// Clusters whose old endpoint's grace period is over but which still answer there.
pub(crate) async fn old_endpoints_due(pool: &AnyPool) -> Result<Vec<(i64, i64, String)>, DbError> {
    let rows = sqlx::query(
        "SELECT id, generation, old_endpoint_host FROM clusters WHERE old_endpoint_host IS NOT NULL \
         AND NOT old_endpoint_closed AND old_endpoint_until <= $1 AND deletion_requested_at IS NULL",
    )
    .bind(now())
    .fetch_all(pool)
    .await?;
    rows.iter().map(|r| Ok((r.try_get(0)?, r.try_get(1)?, r.try_get(2)?))).collect()
}

/// Closes a cluster's old endpoint: a new generation and its `update`
/// operation (the reconciler renders the values without it), if the cluster
/// is still at `generation`. False when it changed meanwhile (try again later).
pub(crate) async fn close_old_endpoint(
    pool: &AnyPool,
    cluster_id: i64,
    generation: i64,
    host: &str,
    requested_by: i64,
) -> Result<bool, DbError> {
    let mut tx = super::write_tx(pool).await?;
    let done = sqlx::query(
        "UPDATE clusters SET old_endpoint_closed = TRUE, generation = generation + 1, updated_at = $1 \
         WHERE id = $2 AND generation = $3 AND NOT old_endpoint_closed AND deletion_requested_at IS NULL",
    )
    .bind(now())
    .bind(cluster_id)
    .bind(generation)
    .execute(&mut *tx)
    .await?;
    if done.rows_affected() != 1 {
        return Ok(false);
    }
    let op = Operation::Update { changes: vec![Change::OldEndpointClosed { host: host.to_owned() }] };
    operations::insert(&mut tx, cluster_id, generation + 1, &op, requested_by).await?;
    tx.commit().await?;
    Ok(true)
}

/// Marks a cluster's old endpoint closed without a new generation (a grace
/// period of 0, set before the switch that renders it).
pub(crate) async fn mark_old_endpoint_closed(pool: &AnyPool, cluster_id: i64) -> Result<(), DbError> {
    sqlx::query("UPDATE clusters SET old_endpoint_closed = TRUE WHERE id = $1").bind(cluster_id).execute(pool).await?;
    Ok(())
}

/// The admin who started the latest move of a cluster.
pub(crate) async fn mover_of(pool: &AnyPool, cluster_id: i64) -> Result<Option<i64>, DbError> {
    let row = sqlx::query(
        "SELECT m.created_by FROM migrations m JOIN migration_items i ON i.migration_id = m.id \
         WHERE i.cluster_id = $1 ORDER BY m.id DESC LIMIT 1",
    )
    .bind(cluster_id)
    .fetch_optional(pool)
    .await?;
    row.map(|r| r.try_get::<i64, _>(0)).transpose().map_err(DbError::from)
}

/// The owner has read the notice about a moved endpoint.
pub(crate) async fn dismiss_notice(pool: &AnyPool, cluster_id: i64) -> Result<(), DbError> {
    sqlx::query("UPDATE clusters SET old_endpoint_notice_dismissed = TRUE WHERE id = $1")
        .bind(cluster_id)
        .execute(pool)
        .await?;
    Ok(())
}
