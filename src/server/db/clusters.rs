//! The `clusters` table. Spec columns are written here by request handlers;
//! status columns only by `write_status` (the reconciler). A row becomes a
//! domain `Cluster` in exactly one place, `ClusterRow::into_cluster`.

use sqlx::any::AnyArguments;
use sqlx::query::Query;
use sqlx::{Any, AnyPool, FromRow, Row};

use super::{DbError, now, operations};
use crate::domain::change::Operation;
use crate::domain::cluster::Cluster;
use crate::domain::listing::{ListQuery, ModeFilter};
use crate::domain::placement::Placement;
use crate::domain::quota::{Quota, Usage};
use crate::domain::{
    ClusterName, ClusterSpec, ClusterStatus, ConnectionStatus, Phase, PublicAccess, PublicAccessMode, Reason, Resources,
};

#[derive(Debug, Clone, FromRow, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ClusterRow {
    pub id: i64,
    pub owner_id: i64,
    pub owner: String,
    pub name: String,
    pub cpu_millis: i64,
    pub memory_gib: i64,
    pub storage_gib: i64,
    /// Booleans are read as 0/1: sqlx's Any driver cannot decode SQLite BOOLEAN.
    pub public_access_enabled: i64,
    pub public_access_mode: String,
    pub own_nodes: i64,
    pub spread: String,
    pub spread_topology_key: String,
    pub storage_class: Option<String>,
    pub telemetry: String,
    pub control_plane_host: Option<String>,
    pub generation: i64,
    pub deletion_requested_at: Option<i64>,
    pub phase: String,
    pub message: String,
    pub public_access_port: Option<i64>,
    pub api_endpoint: Option<String>,
    pub kubeconfig_available: i64,
    pub connection_status: String,
    pub observed_generation: i64,
    pub created_at: i64,
    pub updated_at: i64,
    pub old_endpoint_host: Option<String>,
    pub old_endpoint_until: Option<i64>,
    pub old_endpoint_closed: i64,
    pub old_endpoint_notice_dismissed: i64,
    pub old_endpoint_mode: Option<String>,
    pub revision: i64,
}

/// Reads a stored status value; one this build does not know is logged.
fn known<T: ToString>(id: i64, column: &'static str, raw: &str, parse: impl Fn(&str) -> T) -> T {
    let value = parse(raw);
    if value.to_string() != raw {
        super::unknown_value(column, id, raw);
    }
    value
}

/// Cluster rows decoded since the process started (every read of a row
/// becomes a `Cluster` here): what the observer's "reads no row when nothing
/// changed" is counted by (`tests/observer.rs`, `make bench-scale`).
pub static ROWS_READ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

impl ClusterRow {
    pub(crate) fn into_cluster(self) -> Result<Cluster, DbError> {
        ROWS_READ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let corrupt = |what: &str| DbError::CorruptRow(format!("cluster {}: {what}", self.id));
        let name = ClusterName::parse(&self.name).map_err(|_| corrupt("name"))?;
        // A host stored before validation that is not a host: the row still
        // reads (the list never fails on it), marked for attention.
        let enabled = self.public_access_enabled != 0;
        let raw_host = self.control_plane_host.as_deref().map(str::trim).filter(|h| !h.is_empty());
        let unusable_host = raw_host.filter(|h| enabled && crate::domain::Host::parse(h).is_err()).map(str::to_owned);
        let public_access =
            PublicAccess::from_columns(enabled, &self.public_access_mode, self.control_plane_host.as_deref())
                .unwrap_or(PublicAccess::Disabled);
        let to_u32 = |v: i64| u32::try_from(v).map_err(|_| corrupt("resources"));
        let resources = Resources {
            cpu_millis: to_u32(self.cpu_millis)?,
            memory_gib: to_u32(self.memory_gib)?,
            storage_gib: to_u32(self.storage_gib)?,
        };
        Ok(Cluster {
            id: self.id,
            owner_id: self.owner_id,
            owner: self.owner,
            spec: ClusterSpec {
                name,
                resources,
                public_access,
                own_nodes: self.own_nodes != 0,
                placement: Placement::from_columns(
                    &self.spread,
                    &self.spread_topology_key,
                    self.storage_class.as_deref(),
                ),
                telemetry: known(self.id, "telemetry", &self.telemetry, crate::domain::Telemetry::parse),
            },
            status: ClusterStatus {
                phase: known(self.id, "phase", &self.phase, Phase::parse),
                reason: known(self.id, "message", &self.message, Reason::parse),
                public_access_port: self.public_access_port.and_then(|p| u16::try_from(p).ok()),
                api_endpoint: self.api_endpoint,
                kubeconfig_available: self.kubeconfig_available != 0,
                connection_status: known(
                    self.id,
                    "connection_status",
                    &self.connection_status,
                    ConnectionStatus::parse,
                ),
                observed_generation: self.observed_generation,
            },
            generation: self.generation,
            revision: self.revision,
            deletion_requested: self.deletion_requested_at.is_some(),
            created_at: self.created_at,
            updated_at: self.updated_at,
            unusable_host,
            old_endpoint: self.old_endpoint_host.zip(self.old_endpoint_until).map(|(host, until)| {
                crate::domain::cluster::OldEndpoint {
                    host,
                    until,
                    closed: self.old_endpoint_closed != 0,
                    dismissed: self.old_endpoint_notice_dismissed != 0,
                    mode: self.old_endpoint_mode.as_deref().and_then(PublicAccessMode::parse).unwrap_or_default(),
                }
            }),
        })
    }
}

/// [`ClusterRow`]'s columns: its field names and the SQL each is read from
/// (booleans as 0/1). The one list both reads use: [`SELECT`] (rows, decoded
/// by name with `FromRow`) and the list page's JSON (objects keyed by the
/// same names, decoded by serde; a missing or extra name fails the decode).
const COLUMNS: [(&str, &str); 32] = [
    ("id", "c.id"),
    ("owner_id", "c.owner_id"),
    ("owner", "u.username"),
    ("name", "c.name"),
    ("cpu_millis", "c.cpu_millis"),
    ("memory_gib", "c.memory_gib"),
    ("storage_gib", "c.storage_gib"),
    ("public_access_enabled", "CASE WHEN c.public_access_enabled THEN 1 ELSE 0 END"),
    ("public_access_mode", "c.public_access_mode"),
    ("own_nodes", "CASE WHEN c.own_nodes THEN 1 ELSE 0 END"),
    ("spread", "c.spread"),
    ("spread_topology_key", "c.spread_topology_key"),
    ("storage_class", "c.storage_class"),
    ("telemetry", "c.telemetry"),
    ("control_plane_host", "c.control_plane_host"),
    ("generation", "c.generation"),
    ("deletion_requested_at", "c.deletion_requested_at"),
    ("phase", "c.phase"),
    ("message", "c.message"),
    ("public_access_port", "c.public_access_port"),
    ("api_endpoint", "c.api_endpoint"),
    ("kubeconfig_available", "CASE WHEN c.kubeconfig_available THEN 1 ELSE 0 END"),
    ("connection_status", "c.connection_status"),
    ("observed_generation", "c.observed_generation"),
    ("created_at", "c.created_at"),
    ("updated_at", "c.updated_at"),
    ("old_endpoint_host", "c.old_endpoint_host"),
    ("old_endpoint_until", "c.old_endpoint_until"),
    ("old_endpoint_closed", "CASE WHEN c.old_endpoint_closed THEN 1 ELSE 0 END"),
    ("old_endpoint_notice_dismissed", "CASE WHEN c.old_endpoint_notice_dismissed THEN 1 ELSE 0 END"),
    ("old_endpoint_mode", "c.old_endpoint_mode"),
    ("revision", "c.revision"),
];

/// `SELECT <COLUMNS> FROM clusters c JOIN users u …`.
static SELECT: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    let columns: Vec<String> = COLUMNS.iter().map(|(name, sql)| format!("{sql} AS {name}")).collect();
    format!("SELECT {} FROM clusters c JOIN users u ON u.id = c.owner_id", columns.join(", "))
});

/// `'id', t.id, 'owner_id', t.owner_id, …`: the list page's JSON object
/// arguments, keyed by [`COLUMNS`]' names.
static JSON_OBJECT_ARGS: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    COLUMNS.iter().map(|(name, _)| format!("'{name}', t.{name}")).collect::<Vec<_>>().join(", ")
});

/// `Cluster::deletion_failed` in SQL, for a row named `c` (with
/// `deletion_requested_at IS NOT NULL`): the reconciler wrote `failed` for
/// the latest generation.
const REFUSED: &str = "(c.phase = 'failed' AND c.observed_generation = c.generation)";

type AnyQuery<'q> = Query<'q, Any, AnyArguments<'q>>;

/// Binds the spec columns as `$1..$7`, in the order both spec writers use;
/// `$7` is the host claim (`lb_host`, unique; NULL unless an enabled
/// LoadBalancer or gateway cluster: one host, one cluster, across both modes).
fn bind_spec<'q>(q: AnyQuery<'q>, spec: &ClusterSpec, remembered_mode: PublicAccessMode) -> AnyQuery<'q> {
    let claim = spec.public_access.claimed_host().map(ToString::to_string);
    q.bind(i64::from(spec.resources.cpu_millis))
        .bind(i64::from(spec.resources.memory_gib))
        .bind(i64::from(spec.resources.storage_gib))
        .bind(spec.public_access.is_enabled())
        .bind(spec.public_access.mode_column(remembered_mode).as_str())
        .bind(spec.public_access.host().map(ToString::to_string))
        .bind(claim)
}

/// What `owner`'s clusters hold, `except` one (the cluster being edited).
/// A cluster being deleted still holds its share: its row goes only once its
/// namespace is gone, and until then its pods may still run (through their
/// grace period), so create → delete → create cannot exceed the quota.
pub async fn usage<'e>(
    db: impl sqlx::Executor<'e, Database = Any>,
    owner: i64,
    except: Option<i64>,
) -> Result<Usage, DbError> {
    let (clusters, cpu, memory, storage): (i64, i64, i64, i64) = sqlx::query_as(
        "SELECT COUNT(*), CAST(COALESCE(SUM(cpu_millis), 0) AS BIGINT), CAST(COALESCE(SUM(memory_gib), 0) AS BIGINT), \
         CAST(COALESCE(SUM(storage_gib), 0) AS BIGINT) FROM clusters WHERE owner_id = $1 AND id <> $2",
    )
    .bind(owner)
    .bind(except.unwrap_or(-1))
    .fetch_one(db)
    .await?;
    let n = |v: i64| u64::try_from(v).unwrap_or(0);
    Ok(Usage {
        clusters: u32::try_from(clusters).unwrap_or(u32::MAX),
        cpu_millis: n(cpu),
        memory_gib: n(memory),
        storage_gib: n(storage),
    })
}

/// Inside a write's transaction: locks the owner's row (two writes of one
/// owner queue here, on PostgreSQL as on SQLite, so neither decides on a sum
/// the other is about to change), then refuses the write if it takes the
/// owner over `limit`. `from`: the edited cluster's id and current resources.
async fn hold_quota(
    tx: &mut sqlx::Transaction<'_, Any>,
    owner: i64,
    limit: Option<&Quota>,
    from: Option<(i64, Resources)>,
    to: Resources,
) -> Result<(), DbError> {
    let Some(limit) = limit else { return Ok(()) };
    sqlx::query("UPDATE users SET updated_at = updated_at WHERE id = $1").bind(owner).execute(&mut **tx).await?;
    let others = usage(&mut **tx, owner, from.map(|(id, _)| id)).await?;
    let before = match from {
        Some((_, r)) => others.with(None, r),
        None => others,
    };
    let after = others.with(None, to);
    match limit.refuses(&before, &after) {
        Some(dimension) => Err(DbError::OverQuota(dimension)),
        None => Ok(()),
    }
}

/// Moves `id` to `new_owner` if it fits their quota (`limit`; `None`: not
/// limited), in one transaction: a membership of the new owner's own goes
/// (the owner holds every right), the previous owner loses sight of it.
/// The previous owner's id; `None`: no such cluster.
pub(crate) async fn transfer(
    pool: &AnyPool,
    id: i64,
    new_owner: i64,
    limit: Option<&Quota>,
) -> Result<Option<i64>, DbError> {
    let mut tx = super::write_tx(pool).await?;
    // The cluster's row first: an edit under way commits before its
    // resources are read (and SQLite takes its write lock here, not midway).
    sqlx::query("UPDATE clusters SET updated_at = updated_at WHERE id = $1").bind(id).execute(&mut *tx).await?;
    let row: Option<(i64, i64, i64, i64)> =
        sqlx::query_as("SELECT owner_id, cpu_millis, memory_gib, storage_gib FROM clusters WHERE id = $1")
            .bind(id)
            .fetch_optional(&mut *tx)
            .await?;
    let Some((old, cpu, memory, storage)) = row else { return Ok(None) };
    if old == new_owner {
        return Ok(Some(old));
    }
    let n = |v: i64| u32::try_from(v).unwrap_or(u32::MAX);
    let resources = Resources { cpu_millis: n(cpu), memory_gib: n(memory), storage_gib: n(storage) };
    hold_quota(&mut tx, new_owner, limit, None, resources).await?;
    sqlx::query("UPDATE clusters SET owner_id = $1, updated_at = $2 WHERE id = $3")
        .bind(new_owner)
        .bind(now())
        .bind(id)
        .execute(&mut *tx)
        .await?;
    sqlx::query("DELETE FROM cluster_members WHERE cluster_id = $1 AND user_id = $2")
        .bind(id)
        .bind(new_owner)
        .execute(&mut *tx)
        .await?;
    super::members::lost_sight(&mut tx, "SELECT $1", "SELECT $2 AS id", id, old).await?;
    tx.commit().await?;
    Ok(Some(old))
}

/// Stores a new cluster and its `create` operation atomically, if it fits
/// the owner's quota (`limit`; `None`: not limited).
pub async fn insert(
    pool: &AnyPool,
    owner_id: i64,
    spec: &ClusterSpec,
    remembered_mode: PublicAccessMode,
    limit: Option<&Quota>,
) -> Result<i64, DbError> {
    let t = now();
    let mut tx = super::write_tx(pool).await?;
    hold_quota(&mut tx, owner_id, limit, None, spec.resources).await?;
    let insert = sqlx::query(
        "INSERT INTO clusters (cpu_millis, memory_gib, storage_gib, public_access_enabled, public_access_mode, \
         control_plane_host, lb_host, owner_id, name, own_nodes, spread, spread_topology_key, storage_class, \
         telemetry, generation, created_at, updated_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, 1, $15, $15) RETURNING id",
    );
    let row = bind_spec(insert, spec, remembered_mode)
        .bind(owner_id)
        .bind(spec.name.as_str())
        .bind(spec.own_nodes)
        .bind(spec.placement.spread.as_str())
        .bind(spec.placement.topology_key.as_str())
        .bind(spec.placement.storage_class.clone())
        .bind(spec.telemetry.as_str())
        .bind(t)
        .fetch_one(&mut *tx)
        .await?;
    let id: i64 = row.try_get(0)?;
    operations::insert(&mut tx, id, 1, &Operation::Create { spec: spec.clone() }, owner_id).await?;
    tx.commit().await?;
    Ok(id)
}

pub async fn get(pool: &AnyPool, id: i64) -> Result<Option<Cluster>, DbError> {
    let sql = format!("{} WHERE c.id = $1", *SELECT);
    let row: Option<ClusterRow> = sqlx::query_as(&sql).bind(id).fetch_optional(pool).await?;
    row.map(ClusterRow::into_cluster).transpose()
}

/// Every cluster, or only `owner`'s.
pub async fn list(pool: &AnyPool, owner: Option<i64>) -> Result<Vec<Cluster>, DbError> {
    let rows: Vec<ClusterRow> = match owner {
        Some(owner) => {
            let sql = format!("{} WHERE c.owner_id = $1 ORDER BY c.name", *SELECT);
            sqlx::query_as(&sql).bind(owner).fetch_all(pool).await?
        }
        None => {
            let sql = format!("{} ORDER BY c.name", *SELECT);
            sqlx::query_as(&sql).fetch_all(pool).await?
        }
    };
    rows.into_iter().map(ClusterRow::into_cluster).collect()
}

/// The clusters that have a kubeconfig and are not being deleted, by id
/// (the access sync's round: ids only).
pub async fn with_kubeconfig(pool: &AnyPool) -> Result<Vec<i64>, DbError> {
    Ok(sqlx::query_scalar(
        "SELECT id FROM clusters WHERE kubeconfig_available AND deletion_requested_at IS NULL ORDER BY id",
    )
    .fetch_all(pool)
    .await?)
}

/// The database's latest revision (`change_counter`): every revision at or
/// below it is committed (the counter's row is locked to commit).
pub async fn revision_now(pool: &AnyPool) -> Result<i64, DbError> {
    Ok(sqlx::query_scalar("SELECT value FROM change_counter WHERE id = 1").fetch_one(pool).await?)
}

/// What changed after revision `after`: the rows written since (whole
/// clusters), the ids deleted since, and the revision they bring the reader
/// to. Nothing changed: one read of the counter, no cluster row.
#[derive(Debug, Default)]
pub struct Changes {
    pub clusters: Vec<Cluster>,
    pub deleted: Vec<i64>,
    pub revision: i64,
}

pub async fn changed_since(pool: &AnyPool, after: i64) -> Result<Changes, DbError> {
    let Some(upto) = changed_upto(pool, after).await? else {
        return Ok(Changes { revision: after, ..Changes::default() });
    };
    let sql = format!("{} WHERE c.revision > $1 AND c.revision <= $2 ORDER BY c.revision", *SELECT);
    let rows: Vec<ClusterRow> = sqlx::query_as(&sql).bind(after).bind(upto).fetch_all(pool).await?;
    let deleted: Vec<i64> =
        sqlx::query_scalar("SELECT cluster_id FROM cluster_tombstones WHERE revision > $1 AND revision <= $2")
            .bind(after)
            .bind(upto)
            .fetch_all(pool)
            .await?;
    let clusters = rows.into_iter().map(ClusterRow::into_cluster).collect::<Result<_, _>>()?;
    Ok(Changes { clusters, deleted, revision: upto })
}

/// The revision to read up to when anything changed after `after` (one
/// read of the counter; `None`: nothing did). The reads that follow are
/// bounded above by it: a revision committed meanwhile is the next read's,
/// not skipped.
async fn changed_upto(pool: &AnyPool, after: i64) -> Result<Option<i64>, DbError> {
    let upto = revision_now(pool).await?;
    Ok((upto > after).then_some(upto))
}

/// Which clusters changed after revision `after` (id, a user whose list
/// shows it — its owner, and each member — and revision; deleted ones
/// included; no whole row), and the revision read up to.
pub async fn touched_since(pool: &AnyPool, after: i64) -> Result<(Vec<(i64, i64, i64)>, i64), DbError> {
    let Some(upto) = changed_upto(pool, after).await? else { return Ok((Vec::new(), after)) };
    let touched: Vec<(i64, i64, i64)> = sqlx::query_as(
        "SELECT id, owner_id, revision FROM clusters WHERE revision > $1 AND revision <= $2 \
         UNION ALL SELECT cluster_id, owner_id, revision FROM cluster_tombstones WHERE revision > $1 AND revision <= $2 \
         UNION ALL SELECT c.id, m.user_id, c.revision FROM clusters c JOIN cluster_member_users m ON m.cluster_id = c.id \
           WHERE c.revision > $1 AND c.revision <= $2 \
         UNION ALL SELECT cluster_id, user_id, revision FROM access_losses WHERE revision > $1 AND revision <= $2",
    )
    .bind(after)
    .bind(upto)
    .fetch_all(pool)
    .await?;
    Ok((touched, upto))
}

/// The clusters shared with the user `$user`, as a subquery.
const SHARED_WITH: &str = "SELECT cluster_id FROM cluster_member_users WHERE user_id = $user";

/// The version of the list of `user` (every cluster: `None`): the highest
/// revision among their own clusters, their deletions, the clusters shared
/// with them and those they lost sight of.
pub async fn list_revision(pool: &AnyPool, user: Option<i64>) -> Result<i64, DbError> {
    let Some(user) = user else { return revision_now(pool).await };
    let v: Option<i64> = sqlx::query_scalar(
        "SELECT MAX(r) FROM (SELECT MAX(revision) AS r FROM clusters WHERE owner_id = $1 \
         UNION ALL SELECT MAX(revision) FROM cluster_tombstones WHERE owner_id = $1 \
         UNION ALL SELECT MAX(c.revision) FROM clusters c JOIN cluster_member_users m ON m.cluster_id = c.id \
           WHERE m.user_id = $1 \
         UNION ALL SELECT MAX(revision) FROM access_losses WHERE user_id = $1) t",
    )
    .bind(user)
    .fetch_one(pool)
    .await?;
    Ok(v.unwrap_or(0))
}

/// A cluster's revision; `None` once its row is gone.
pub async fn revision_of(pool: &AnyPool, id: i64) -> Result<Option<i64>, DbError> {
    Ok(sqlx::query_scalar("SELECT revision FROM clusters WHERE id = $1").bind(id).fetch_optional(pool).await?)
}

/// How an edit is checked against its owner's quota.
#[derive(Debug, Clone, Copy)]
pub struct QuotaHold<'a> {
    pub owner: i64,
    pub limit: &'a Quota,
    /// The cluster's resources before the edit.
    pub from: Resources,
}

/// Writes a new spec and its `update` operation if the cluster is still at
/// `expected_generation` (no lost updates) and the edit fits the owner's
/// quota (`quota`; `None`: not limited). Returns the new generation, or
/// `None` when someone else changed it first.
#[allow(clippy::too_many_arguments)]
pub async fn update_spec(
    pool: &AnyPool,
    id: i64,
    expected_generation: i64,
    spec: &ClusterSpec,
    remembered_mode: PublicAccessMode,
    op: &Operation,
    requested_by: i64,
    quota: Option<QuotaHold<'_>>,
) -> Result<Option<i64>, DbError> {
    let mut tx = super::write_tx(pool).await?;
    if let Some(q) = quota {
        hold_quota(&mut tx, q.owner, Some(q.limit), Some((id, q.from)), spec.resources).await?;
    }
    // Held to an owner's quota: only while that is still the owner (a move
    // to another owner in between makes this edit a lost race, not a charge
    // to the wrong quota).
    let still_theirs = if quota.is_some() { " AND owner_id = $11" } else { "" };
    let sql = format!(
        "UPDATE clusters SET cpu_millis = $1, memory_gib = $2, storage_gib = $3, public_access_enabled = $4, \
         public_access_mode = $5, control_plane_host = CASE WHEN $4 THEN $6 ELSE control_plane_host END, \
         lb_host = $7, generation = generation + 1, updated_at = $8 \
         WHERE id = $9 AND generation = $10 AND deletion_requested_at IS NULL{still_theirs}"
    );
    let mut update = bind_spec(sqlx::query(&sql), spec, remembered_mode).bind(now()).bind(id).bind(expected_generation);
    if let Some(q) = quota {
        update = update.bind(q.owner);
    }
    let done = update.execute(&mut *tx).await?;
    if done.rows_affected() != 1 {
        return Ok(None);
    }
    let generation = expected_generation + 1;
    operations::insert(&mut tx, id, generation, op, requested_by).await?;
    tx.commit().await?;
    Ok(Some(generation))
}

/// Records a delete request and its operation; false if one is already
/// under way (requested, and not refused by the host).
pub async fn request_deletion(pool: &AnyPool, id: i64, requested_by: i64) -> Result<bool, DbError> {
    let t = now();
    let mut tx = super::write_tx(pool).await?;
    // Asked for again after the host refused it (`Cluster::deletion_failed`),
    // it is a new request: a new generation and operation, the first
    // request's time kept.
    let sql = format!(
        "UPDATE clusters AS c SET deletion_requested_at = COALESCE(c.deletion_requested_at, $1), \
         generation = c.generation + 1, updated_at = $1 \
         WHERE c.id = $2 AND (c.deletion_requested_at IS NULL OR {REFUSED}) RETURNING generation"
    );
    let generation: Option<i64> = sqlx::query_scalar(&sql).bind(t).bind(id).fetch_optional(&mut *tx).await?;
    let Some(generation) = generation else {
        return Ok(false);
    };
    operations::insert(&mut tx, id, generation, &Operation::Delete, requested_by).await?;
    tx.commit().await?;
    Ok(true)
}

/// The reconciler's only write: the whole observed status, never spec columns.
/// A stale write (for an older generation than already observed, or a newer
/// one than exists) changes nothing and returns false.
pub async fn write_status(pool: &AnyPool, id: i64, status: &ClusterStatus) -> Result<bool, DbError> {
    let done = sqlx::query(
        "UPDATE clusters SET phase = $1, message = $2, public_access_port = $3, api_endpoint = $4, \
         kubeconfig_available = $5, connection_status = $6, observed_generation = $7 \
         WHERE id = $8 AND observed_generation <= $7 AND $7 <= generation",
    )
    .bind(status.phase.as_str())
    .bind(status.reason.to_string())
    .bind(status.public_access_port.map(i64::from))
    .bind(status.api_endpoint.as_deref())
    .bind(status.kubeconfig_available)
    .bind(status.connection_status.as_str())
    .bind(status.observed_generation)
    .bind(id)
    .execute(pool)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// The stored `public_access_mode`, which a disabled cluster keeps so that
/// turning access back on without naming a mode returns to it.
/// The host a cluster had when public access was turned off (kept, like the
/// mode, so turning it on again needs no retyping); `None` when enabled or unset.
pub(crate) async fn remembered_host(pool: &AnyPool, id: i64) -> Result<Option<crate::domain::Host>, DbError> {
    let host: Option<Option<String>> =
        sqlx::query_scalar("SELECT control_plane_host FROM clusters WHERE id = $1 AND NOT public_access_enabled")
            .bind(id)
            .fetch_optional(pool)
            .await?;
    Ok(host.flatten().and_then(|h| crate::domain::Host::parse(&h).ok()))
}

pub async fn remembered_mode(pool: &AnyPool, id: i64) -> Result<PublicAccessMode, DbError> {
    let mode: Option<String> = sqlx::query_scalar("SELECT public_access_mode FROM clusters WHERE id = $1")
        .bind(id)
        .fetch_optional(pool)
        .await?;
    Ok(mode.as_deref().and_then(PublicAccessMode::parse).unwrap_or_default())
}

/// Whether another cluster (`except` aside) is a LoadBalancer cluster on
/// `host` (its normal form): two would cross their endpoints.
pub(crate) async fn load_balancer_host_taken(pool: &AnyPool, host: &str, except: Option<i64>) -> Result<bool, DbError> {
    let n: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM clusters WHERE control_plane_host = $1 AND public_access_mode = 'loadbalancer' \
         AND public_access_enabled AND id <> $2",
    )
    .bind(host)
    .bind(except.unwrap_or(-1))
    .fetch_one(pool)
    .await?;
    Ok(n > 0)
}

/// What the console knows of a cluster's objects on the host: the UID of the
/// namespace it created, and whether objects applied before the console
/// labelled its creations (migration 6) may still be taken over once.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostRecord {
    pub namespace_uid: Option<String>,
    pub adopt_legacy: bool,
}

pub async fn host_record(pool: &AnyPool, id: i64) -> Result<HostRecord, DbError> {
    let row: Option<(Option<String>, i64)> =
        sqlx::query_as("SELECT namespace_uid, CASE WHEN adopt_legacy THEN 1 ELSE 0 END FROM clusters WHERE id = $1")
            .bind(id)
            .fetch_optional(pool)
            .await?;
    Ok(row.map(|(namespace_uid, adopt)| HostRecord { namespace_uid, adopt_legacy: adopt != 0 }).unwrap_or_default())
}

/// Remembers the namespace the console created (or took over) for a cluster.
pub async fn record_namespace(pool: &AnyPool, id: i64, uid: &str) -> Result<(), DbError> {
    sqlx::query("UPDATE clusters SET namespace_uid = $1 WHERE id = $2").bind(uid).bind(id).execute(pool).await?;
    Ok(())
}

/// The one take-over of a pre-migration cluster is over (its namespace and
/// HelmChart now carry what the console knows them by).
pub async fn end_adoption(pool: &AnyPool, id: i64) -> Result<(), DbError> {
    sqlx::query("UPDATE clusters SET adopt_legacy = FALSE WHERE id = $1 AND adopt_legacy")
        .bind(id)
        .execute(pool)
        .await?;
    Ok(())
}

/// Removes a cluster whose uninstall finished (its history goes with it); the
/// name is free again. Only a cluster whose deletion was requested.
pub(crate) async fn delete_row(pool: &AnyPool, id: i64) -> Result<bool, DbError> {
    let done = sqlx::query("DELETE FROM clusters WHERE id = $1 AND deletion_requested_at IS NOT NULL")
        .bind(id)
        .execute(pool)
        .await?;
    Ok(done.rows_affected() == 1)
}

/// One page of clusters (or only `owner`'s) matching `query`, by name, and how
/// many match in all. The filters are bound parameters; the name search is a
/// `LIKE` with its wildcards escaped.
pub async fn list_page(
    pool: &AnyPool,
    owner: Option<i64>,
    query: &ListQuery,
    page_size: u32,
) -> Result<(Vec<Cluster>, u64), DbError> {
    let mut conds: Vec<String> = Vec::new();
    let mut binds: Vec<String> = Vec::new();
    let bind = |v: String, binds: &mut Vec<String>| {
        binds.push(v);
        format!("${}", binds.len())
    };
    if let Some(o) = owner {
        // An id, not user input: written into the SQL as a number. A user's
        // list: their own clusters and those shared with them.
        conds.push(format!("(c.owner_id = {o} OR c.id IN ({SHARED_WITH}))").replace("$user", &o.to_string()));
    }
    if !query.q.is_empty() {
        let escaped: String = query
            .q
            .chars()
            .flat_map(|ch| match ch {
                '\\' | '%' | '_' => vec!['\\', ch],
                c => vec![c],
            })
            .collect();
        let p = bind(format!("%{escaped}%"), &mut binds);
        conds.push(format!("c.name LIKE {p} ESCAPE '\\'"));
    }
    match query.mode {
        Some(ModeFilter::Disabled) => conds.push("NOT c.public_access_enabled".into()),
        Some(ModeFilter::Mode(m)) => {
            let p = bind(m.as_str().to_owned(), &mut binds);
            conds.push(format!("c.public_access_enabled AND c.public_access_mode = {p}"));
        }
        None => {}
    }
    // The phase users see (`shown_phase`): a requested deletion is
    // `deleting` until the host refuses it for good; then it is `failed`.
    match query.phase {
        Some(Phase::Deleting) => conds.push(format!("c.deletion_requested_at IS NOT NULL AND NOT {REFUSED}")),
        Some(Phase::Failed) => {
            conds.push(format!("c.phase = 'failed' AND (c.deletion_requested_at IS NULL OR {REFUSED})"))
        }
        Some(p) => {
            let b = bind(p.as_str().to_owned(), &mut binds);
            conds.push(format!("c.phase = {b} AND c.deletion_requested_at IS NULL"));
        }
        None => {}
    }
    if let Some(o) = &query.owner {
        let p = bind(o.clone(), &mut binds);
        conds.push(format!("u.username = {p}"));
    }
    let filter = if conds.is_empty() { String::new() } else { format!(" WHERE {}", conds.join(" AND ")) };
    // The join is needed only to filter by owner name: counting 10,000 rows
    // through it cost ~0.8 ms of the list page's ~2.3 ms data path
    // (`make bench`); without it SQLite counts from an index.
    let from = if query.owner.is_some() { "clusters c JOIN users u ON u.id = c.owner_id" } else { "clusters c" };
    let count_sql = format!("SELECT COUNT(*) FROM {from}{filter}");
    // The page comes back as one row: its clusters as one JSON array, and the
    // total. Fetched as 50 rows, each row cost ~20 µs: sqlx's SQLite driver
    // hands every row from its worker thread to the request's task (`perf`,
    // docs/performance.md). The aggregate is ordered like the page.
    let offset = u64::from(query.page.max(1) - 1) * u64::from(page_size);
    let rows_sql = format!("{}{filter} ORDER BY c.name LIMIT {page_size} OFFSET {offset}", *SELECT);
    let (agg, row) = if super::is_postgres_url(pool.connect_options().database_url.as_str()) {
        ("json_agg", "json_build_object")
    } else {
        ("json_group_array", "json_object")
    };
    let fields = &*JSON_OBJECT_ARGS;
    let page_sql = format!(
        "SELECT CAST(COALESCE({agg}({row}({fields}) ORDER BY t.name), '[]') AS TEXT) AS page, \
         ({count_sql}) AS total FROM ({rows_sql}) t"
    );
    let mut q = sqlx::query_as::<_, (String, i64)>(&page_sql);
    for b in &binds {
        q = q.bind(b.clone());
    }
    let (page, total) = q.fetch_one(pool).await?;
    let rows: Vec<ClusterRow> =
        serde_json::from_str(&page).map_err(|e| DbError::CorruptRow(format!("clusters page: {e}")))?;
    let clusters = rows.into_iter().map(ClusterRow::into_cluster).collect::<Result<_, _>>()?;
    Ok((clusters, u64::try_from(total).unwrap_or(0)))
}
