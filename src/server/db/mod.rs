//! Storage: one sqlx `AnyPool` over SQLite (embedded default) or PostgreSQL
//! (`DATABASE_URL=postgres://…`). Queries are written once, with `$n`
//! placeholders both drivers accept; migrations are per dialect.

pub mod audit;
pub mod clusters;
pub mod members;
pub mod moves;
pub mod node_removals;
pub(crate) mod oidc;
pub mod operations;
pub mod sessions;
pub mod settings;
pub mod shared;
pub mod users;

use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use sqlx::AnyPool;
use sqlx::any::{AnyPoolOptions, install_default_drivers};
use sqlx::migrate::Migrator;

pub(crate) static SQLITE_MIGRATIONS: Migrator = sqlx::migrate!("migrations/sqlite");
pub(crate) static POSTGRES_MIGRATIONS: Migrator = sqlx::migrate!("migrations/postgres");

/// Each variant's text holds its cause (what the logs show), so none is also
/// reported as `source()`: `{:#}` at the binary's edge would print it twice.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    #[error("connecting to the database: {0}")]
    Connect(sqlx::Error),
    #[error("migrating the database: {0}")]
    Migrate(sqlx::migrate::MigrateError),
    #[error("creating the data folder {0}: {1}")]
    DataDir(String, std::io::Error),
    #[error("query failed: {0}")]
    Query(sqlx::Error),
    #[error("stored row is not valid: {0}")]
    CorruptRow(String),
    /// The write would take its owner over a quota limit; nothing was written.
    #[error("over the owner's quota: {0:?}")]
    OverQuota(crate::domain::quota::Dimension),
}

/// A stored value this build does not know (written by a newer replica, or
/// by hand): the row still reads, the value reads one way (see each type's
/// `parse`), and it is logged once per process and value.
pub(crate) fn unknown_value(column: &'static str, id: i64, raw: &str) {
    use std::collections::HashSet;
    use std::sync::{LazyLock, Mutex};
    static SEEN: LazyLock<Mutex<HashSet<(&'static str, String)>>> = LazyLock::new(Mutex::default);
    let first = SEEN.lock().map(|mut seen| seen.len() < 1024 && seen.insert((column, raw.to_owned())));
    if first.unwrap_or(true) {
        tracing::warn!(column, id, value = raw, "stored value not known to this build");
    }
}

impl From<sqlx::Error> for DbError {
    fn from(e: sqlx::Error) -> Self {
        Self::Query(e)
    }
}

impl DbError {
    /// True when a UNIQUE constraint refused the write.
    pub fn is_unique_violation(&self) -> bool {
        matches!(self, Self::Query(sqlx::Error::Database(e)) if e.is_unique_violation())
    }

    /// A unique violation of the LoadBalancer host claim (`clusters_lb_host`):
    /// another cluster holds that host. PostgreSQL names the index, SQLite the column.
    pub fn is_lb_host_taken(&self) -> bool {
        matches!(self, Self::Query(sqlx::Error::Database(e)) if e.is_unique_violation()
            && (e.constraint() == Some("clusters_lb_host") || e.message().contains("clusters.lb_host")))
    }
}

/// True when the URL names PostgreSQL (else it is SQLite).
pub(crate) fn is_postgres_url(url: &str) -> bool {
    url.starts_with("postgres:") || url.starts_with("postgresql:")
}

/// Which dialect a URL speaks.
/// A trivial query: the database answers.
pub(crate) async fn ping(pool: &AnyPool) -> Result<(), DbError> {
    sqlx::query_scalar::<_, i32>("SELECT 1").fetch_one(pool).await?;
    Ok(())
}

pub(crate) fn migrator_for(url: &str) -> &'static Migrator {
    if is_postgres_url(url) { &POSTGRES_MIGRATIONS } else { &SQLITE_MIGRATIONS }
}

/// The embedded default: a SQLite file in the data folder, created if missing.
pub fn sqlite_url(data_dir: &Path) -> Result<String, DbError> {
    std::fs::create_dir_all(data_dir).map_err(|e| DbError::DataDir(data_dir.display().to_string(), e))?;
    Ok(format!("sqlite://{}?mode=rwc", data_dir.join("kubebyon.db").display()))
}

/// Connects without migrating (the migration test drives migrations itself).
pub async fn connect_only(url: &str) -> Result<AnyPool, DbError> {
    install_default_drivers();
    let sqlite = !is_postgres_url(url);
    let options = AnyPoolOptions::new()
        // SQLite has one writer; more connections only wait on its lock.
        .max_connections(if sqlite { 4 } else { 16 })
        // A pooled SQLite connection is a file handle in this process: it
        // cannot go stale, and pinging it cost a worker round trip before
        // every query (`make bench`). PostgreSQL's can (server restart,
        // proxy timeout), so there the pool still checks before lending one.
        .test_before_acquire(!sqlite)
        .after_connect(move |conn, _| {
            Box::pin(async move {
                if sqlite {
                    use sqlx::Executor;
                    conn.execute("PRAGMA foreign_keys = ON; PRAGMA journal_mode = WAL; PRAGMA busy_timeout = 5000;")
                        .await?;
                }
                Ok(())
            })
        });
    options.connect(url).await.map_err(DbError::Connect)
}

/// A transaction that writes. SQLite's plain `BEGIN` is deferred: one that
/// reads and then writes fails at once with `SQLITE_BUSY` — the busy timeout
/// does not apply — when another connection committed between its read and
/// its first write (the reconciler writes a status every pass; a membership
/// change answered 500 under load, 2026-12-07). `BEGIN IMMEDIATE` takes the
/// write lock first, waiting up to the busy timeout for it. PostgreSQL's
/// `BEGIN` is already right (row locks, its own retries are not needed here).
pub(crate) async fn write_tx(pool: &AnyPool) -> Result<sqlx::Transaction<'static, sqlx::Any>, sqlx::Error> {
    if is_postgres_url(pool.connect_options().database_url.as_str()) {
        pool.begin().await
    } else {
        pool.begin_with("BEGIN IMMEDIATE").await
    }
}

/// Connects and brings the schema up to date.
pub async fn connect(url: &str) -> Result<AnyPool, DbError> {
    let pool = connect_only(url).await?;
    migrator_for(url).run(&pool).await.map_err(DbError::Migrate)?;
    Ok(pool)
}

pub fn now() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or_default()
}

/// Unix time in milliseconds (leases, queue turns).
pub(crate) fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// A transaction that reads and then writes, while another connection
    /// writes between the two: with SQLite's deferred `BEGIN` the other one
    /// commits and this one's write fails at once (`SQLITE_BUSY`, no busy
    /// wait); with `write_tx` the other one waits for the lock, and both land.
    #[tokio::test]
    async fn a_write_transaction_that_reads_first_survives_another_writer() {
        let dir = tempfile::tempdir().unwrap();
        let pool = connect_only(&sqlite_url(dir.path()).unwrap()).await.unwrap();
        sqlx::query("CREATE TABLE t (n INTEGER NOT NULL)").execute(&pool).await.unwrap();
        sqlx::query("INSERT INTO t (n) VALUES (0)").execute(&pool).await.unwrap();

        let mut tx = write_tx(&pool).await.unwrap();
        let n: i64 = sqlx::query_scalar("SELECT n FROM t").fetch_one(&mut *tx).await.unwrap();
        let other = tokio::spawn({
            let pool = pool.clone();
            async move { sqlx::query("UPDATE t SET n = n + 10").execute(&pool).await.map(|_| ()) }
        });
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(!other.is_finished(), "the other writer waits for this transaction");
        sqlx::query("UPDATE t SET n = $1").bind(n + 1).execute(&mut *tx).await.unwrap();
        tx.commit().await.unwrap();
        other.await.unwrap().unwrap();
        let n: i64 = sqlx::query_scalar("SELECT n FROM t").fetch_one(&pool).await.unwrap();
        assert_eq!(n, 11);
    }
}
