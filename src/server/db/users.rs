//! The `users` table.

use sqlx::{AnyPool, FromRow};

use super::{DbError, now};
use crate::domain::user::{CurrentUser, Role, Username};

#[derive(Debug, Clone, FromRow)]
pub struct UserRow {
    pub id: i64,
    pub username: String,
    pub password_hash: String,
    pub role: String,
    pub created_at: i64,
    pub quota_clusters: Option<i64>,
    pub quota_cpu_millis: Option<i64>,
    pub quota_memory_gib: Option<i64>,
    pub quota_storage_gib: Option<i64>,
    /// When an admin disabled the account (it signs in no more).
    pub disabled_at: Option<i64>,
    /// `"<issuer> <sub>"` for accounts made at an OpenID Connect sign-in.
    pub oidc_subject: Option<String>,
}

impl UserRow {
    pub fn current_user(&self) -> CurrentUser {
        CurrentUser { id: self.id, username: self.username.clone(), role: Role::parse(&self.role).unwrap_or_default() }
    }

    /// The user's own quota limits (`None` per dimension: the platform's).
    pub(crate) fn quota(&self) -> crate::domain::quota::Quota {
        let n = |v: Option<i64>| v.and_then(|v| u64::try_from(v).ok());
        crate::domain::quota::Quota {
            clusters: self.quota_clusters.and_then(|v| u32::try_from(v).ok()),
            cpu_millis: n(self.quota_cpu_millis),
            memory_gib: n(self.quota_memory_gib),
            storage_gib: n(self.quota_storage_gib),
        }
    }
}

pub(crate) const COLUMNS: &str = "id, username, password_hash, role, created_at, \
    quota_clusters, quota_cpu_millis, quota_memory_gib, quota_storage_gib, disabled_at, oidc_subject";

pub async fn insert(pool: &AnyPool, username: &Username, password_hash: &str, role: Role) -> Result<i64, DbError> {
    let t = now();
    let id: i64 = sqlx::query_scalar(
        "INSERT INTO users (username, password_hash, role, created_at, updated_at) VALUES ($1, $2, $3, $4, $4) RETURNING id",
    )
    .bind(username.as_str())
    .bind(password_hash)
    .bind(role.as_str())
    .bind(t)
    .fetch_one(pool)
    .await?;
    Ok(id)
}

pub async fn by_username(pool: &AnyPool, username: &str) -> Result<Option<UserRow>, DbError> {
    let sql = format!("SELECT {COLUMNS} FROM users WHERE username = $1");
    Ok(sqlx::query_as(&sql).bind(username).fetch_optional(pool).await?)
}

pub async fn by_id(pool: &AnyPool, id: i64) -> Result<Option<UserRow>, DbError> {
    let sql = format!("SELECT {COLUMNS} FROM users WHERE id = $1");
    Ok(sqlx::query_as(&sql).bind(id).fetch_optional(pool).await?)
}

pub(crate) async fn list(pool: &AnyPool) -> Result<Vec<UserRow>, DbError> {
    let sql = format!("SELECT {COLUMNS} FROM users ORDER BY username");
    Ok(sqlx::query_as(&sql).fetch_all(pool).await?)
}

pub async fn count_admins(pool: &AnyPool) -> Result<i64, DbError> {
    Ok(sqlx::query_scalar("SELECT COUNT(*) FROM users WHERE role = 'admin' AND disabled_at IS NULL")
        .fetch_one(pool)
        .await?)
}

/// The console admins' ids (enabled ones).
pub(crate) async fn admin_ids(pool: &AnyPool) -> Result<Vec<i64>, DbError> {
    Ok(sqlx::query_scalar("SELECT id FROM users WHERE role = 'admin' AND disabled_at IS NULL ORDER BY id")
        .fetch_all(pool)
        .await?)
}

/// The disabled accounts' ids (few: read whole).
pub(crate) async fn disabled_ids(pool: &AnyPool) -> Result<Vec<i64>, DbError> {
    Ok(sqlx::query_scalar("SELECT id FROM users WHERE disabled_at IS NOT NULL ORDER BY id").fetch_all(pool).await?)
}

/// The account an OpenID Connect subject signed in as before.
pub(crate) async fn by_oidc_subject(pool: &AnyPool, subject: &str) -> Result<Option<UserRow>, DbError> {
    let sql = format!("SELECT {COLUMNS} FROM users WHERE oidc_subject = $1");
    Ok(sqlx::query_as(&sql).bind(subject).fetch_optional(pool).await?)
}

/// An account for an OpenID Connect subject: no password (an empty hash
/// never verifies).
pub(crate) async fn insert_oidc(
    pool: &AnyPool,
    username: &Username,
    subject: &str,
    role: Role,
) -> Result<i64, DbError> {
    let t = now();
    Ok(sqlx::query_scalar(
        "INSERT INTO users (username, password_hash, role, created_at, updated_at, oidc_subject) \
         VALUES ($1, '', $2, $3, $3, $4) RETURNING id",
    )
    .bind(username.as_str())
    .bind(role.as_str())
    .bind(t)
    .bind(subject)
    .fetch_one(pool)
    .await?)
}

/// The clusters whose bindings name `user` when nothing else changes: those
/// they own and those shared with them (directly or through a team).
pub(crate) async fn clusters_reaching(pool: &AnyPool, user: i64) -> Result<Vec<i64>, DbError> {
    Ok(sqlx::query_scalar(
        "SELECT id FROM clusters WHERE owner_id = $1 \
         UNION SELECT cluster_id FROM cluster_member_users WHERE user_id = $1 ORDER BY 1",
    )
    .bind(user)
    .fetch_all(pool)
    .await?)
}

/// Every cluster's id (a console admin's change reaches them all).
pub(crate) async fn all_cluster_ids(pool: &AnyPool) -> Result<Vec<i64>, DbError> {
    Ok(sqlx::query_scalar("SELECT id FROM clusters ORDER BY id").fetch_all(pool).await?)
}

/// Disables (`true`) or enables an account. Disabling ends its sessions in
/// the same transaction, and never leaves the platform without an enabled
/// admin (locked as [`set_role`] does).
pub(crate) async fn set_disabled(pool: &AnyPool, id: i64, disabled: bool) -> Result<RoleChange, DbError> {
    let mut tx = super::write_tx(pool).await?;
    sqlx::query("UPDATE users SET role = role WHERE role = 'admin'").execute(&mut *tx).await?;
    let current: Option<(String, Option<i64>)> =
        sqlx::query_as("SELECT role, disabled_at FROM users WHERE id = $1").bind(id).fetch_optional(&mut *tx).await?;
    let Some((role, was)) = current else {
        return Ok(RoleChange::NoSuchUser);
    };
    if disabled && was.is_none() && role == Role::Admin.as_str() {
        let admins: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM users WHERE role = 'admin' AND disabled_at IS NULL")
            .fetch_one(&mut *tx)
            .await?;
        if admins <= 1 {
            return Ok(RoleChange::LastAdmin);
        }
    }
    let t = now();
    sqlx::query("UPDATE users SET disabled_at = $1, updated_at = $2 WHERE id = $3")
        .bind(disabled.then_some(was.unwrap_or(t)))
        .bind(t)
        .bind(id)
        .execute(&mut *tx)
        .await?;
    if disabled {
        sqlx::query("DELETE FROM sessions WHERE user_id = $1").bind(id).execute(&mut *tx).await?;
    }
    tx.commit().await?;
    Ok(RoleChange::Done)
}

/// What changing a role did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RoleChange {
    Done,
    NoSuchUser,
    /// Refused: it would leave no admin.
    LastAdmin,
}

/// Sets a role, never leaving the platform without an admin. The first
/// statement writes every admin row, which locks them (PostgreSQL) or the
/// database (SQLite) until commit, so two concurrent demotions cannot both
/// see "another admin is left".
pub(crate) async fn set_role(pool: &AnyPool, id: i64, role: Role) -> Result<RoleChange, DbError> {
    let mut tx = super::write_tx(pool).await?;
    sqlx::query("UPDATE users SET role = role WHERE role = 'admin'").execute(&mut *tx).await?;
    let current: Option<(String, Option<i64>)> =
        sqlx::query_as("SELECT role, disabled_at FROM users WHERE id = $1").bind(id).fetch_optional(&mut *tx).await?;
    let Some((current, disabled)) = current else {
        return Ok(RoleChange::NoSuchUser);
    };
    // Only an enabled admin counts (a disabled one may be demoted freely).
    if current == Role::Admin.as_str() && disabled.is_none() && role != Role::Admin {
        let admins: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM users WHERE role = 'admin' AND disabled_at IS NULL")
            .fetch_one(&mut *tx)
            .await?;
        if admins <= 1 {
            return Ok(RoleChange::LastAdmin);
        }
    }
    sqlx::query("UPDATE users SET role = $1, updated_at = $2 WHERE id = $3")
        .bind(role.as_str())
        .bind(now())
        .bind(id)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(RoleChange::Done)
}

/// Sets a new hash and ends the user's sessions, in one transaction.
pub async fn set_password(pool: &AnyPool, id: i64, password_hash: &str) -> Result<bool, DbError> {
    set_password_and_role(pool, id, password_hash, None).await
}

/// Sets a new hash (and, if given, the role: `kubebyon admin`, the way back
/// in, which also enables the account) and ends the user's sessions, in one
/// transaction.
pub(crate) async fn set_password_and_role(
    pool: &AnyPool,
    id: i64,
    password_hash: &str,
    role: Option<Role>,
) -> Result<bool, DbError> {
    let mut tx = super::write_tx(pool).await?;
    let done = sqlx::query(
        "UPDATE users SET password_hash = $1, role = COALESCE($2, role), \
             disabled_at = CASE WHEN $2 IS NULL THEN disabled_at ELSE NULL END, updated_at = $3 WHERE id = $4",
    )
    .bind(password_hash)
    .bind(role.map(Role::as_str))
    .bind(now())
    .bind(id)
    .execute(&mut *tx)
    .await?;
    sqlx::query("DELETE FROM sessions WHERE user_id = $1").bind(id).execute(&mut *tx).await?;
    tx.commit().await?;
    Ok(done.rows_affected() == 1)
}

/// A user's own quota limits (`None` per dimension: the platform's).
pub(crate) async fn quota(pool: &AnyPool, id: i64) -> Result<crate::domain::quota::Quota, DbError> {
    Ok(by_id(pool, id).await?.map(|r| r.quota()).unwrap_or(crate::domain::quota::Quota::UNLIMITED))
}

/// Sets a user's own quota limits; false if there is no such user.
pub async fn set_quota(pool: &AnyPool, id: i64, quota: &crate::domain::quota::Quota) -> Result<bool, DbError> {
    let n = |v: Option<u64>| v.and_then(|v| i64::try_from(v).ok());
    let done = sqlx::query(
        "UPDATE users SET quota_clusters = $1, quota_cpu_millis = $2, quota_memory_gib = $3, quota_storage_gib = $4, \
         updated_at = $5 WHERE id = $6",
    )
    .bind(quota.clusters.map(i64::from))
    .bind(n(quota.cpu_millis))
    .bind(n(quota.memory_gib))
    .bind(n(quota.storage_gib))
    .bind(now())
    .bind(id)
    .execute(pool)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Binds console admin `user` as admin inside `cluster` until `until`
/// (Unix seconds; a later grant extends it, an earlier one changes nothing).
pub(crate) async fn grant_admin(pool: &AnyPool, cluster: i64, user: i64, until: i64) -> Result<(), DbError> {
    sqlx::query(
        "INSERT INTO admin_grants (cluster_id, user_id, expires_at) VALUES ($1, $2, $3) \
         ON CONFLICT (cluster_id, user_id) DO UPDATE SET expires_at = excluded.expires_at \
         WHERE admin_grants.expires_at < excluded.expires_at",
    )
    .bind(cluster)
    .bind(user)
    .bind(until)
    .execute(pool)
    .await?;
    Ok(())
}

/// The console admins bound in `cluster` at `now` by a grant: still
/// admins, enabled, the grant not expired. By id.
pub(crate) async fn granted_admins(pool: &AnyPool, cluster: i64, now: i64) -> Result<Vec<i64>, DbError> {
    Ok(sqlx::query_scalar(
        "SELECT g.user_id FROM admin_grants g JOIN users u ON u.id = g.user_id \
         WHERE g.cluster_id = $1 AND g.expires_at > $2 AND u.role = 'admin' AND u.disabled_at IS NULL \
         ORDER BY g.user_id",
    )
    .bind(cluster)
    .bind(now)
    .fetch_all(pool)
    .await?)
}

/// Sweeps grants that ended before `now` (their bindings went at the
/// resync after; `admin_grants_expires_at`).
pub(crate) async fn delete_expired_grants(pool: &AnyPool, now: i64) -> Result<u64, DbError> {
    Ok(sqlx::query("DELETE FROM admin_grants WHERE expires_at <= $1").bind(now).execute(pool).await?.rows_affected())
}
