//! Sharing: `cluster_members`, `teams`, `team_members` and the
//! `cluster_member_users` view (memberships with teams expanded).
//!
//! Every change of who may see a cluster writes the cluster's row
//! (`revision = revision`), so its page, its owner's and its members' lists
//! follow by push (`server::push`) and the reconciler's observer sees it as
//! changed.

use sqlx::{AnyPool, FromRow};

use super::{DbError, now};
use crate::domain::membership::{Member, MemberKind, MemberRole, Team, TeamName};

/// The roles `user` holds on `cluster` through memberships (direct and each
/// team's); empty: none.
pub async fn roles_of(pool: &AnyPool, cluster: i64, user: i64) -> Result<Vec<MemberRole>, DbError> {
    let raw: Vec<String> =
        sqlx::query_scalar("SELECT role FROM cluster_member_users WHERE cluster_id = $1 AND user_id = $2")
            .bind(cluster)
            .bind(user)
            .fetch_all(pool)
            .await?;
    Ok(raw.iter().filter_map(|r| MemberRole::parse(r).ok()).collect())
}

#[derive(FromRow)]
struct MemberRow {
    kind: String,
    id: i64,
    name: String,
    role: String,
}

/// A cluster's members, users first, by name.
pub async fn list(pool: &AnyPool, cluster: i64) -> Result<Vec<Member>, DbError> {
    let rows: Vec<MemberRow> = sqlx::query_as(
        "SELECT 'user' AS kind, u.id AS id, u.username AS name, m.role AS role \
           FROM cluster_members m JOIN users u ON u.id = m.user_id WHERE m.cluster_id = $1 \
         UNION ALL \
         SELECT 'team', t.id, t.name, m.role \
           FROM cluster_members m JOIN teams t ON t.id = m.team_id WHERE m.cluster_id = $1 \
         ORDER BY 1 DESC, 3",
    )
    .bind(cluster)
    .fetch_all(pool)
    .await?;
    rows.into_iter()
        .map(|r| {
            let bad = || DbError::CorruptRow(format!("cluster member {}:{}", r.kind, r.id));
            Ok(Member {
                kind: MemberKind::parse(&r.kind).map_err(|_| bad())?,
                id: r.id,
                role: MemberRole::parse(&r.role).map_err(|_| bad())?,
                name: r.name,
            })
        })
        .collect()
}

/// Every user a cluster's memberships reach and the highest role each holds
/// (teams expanded), by user id: what its virtual cluster's RBAC binds.
pub(crate) async fn users_of(pool: &AnyPool, cluster: i64) -> Result<Vec<(i64, MemberRole)>, DbError> {
    let rows: Vec<(i64, String)> =
        sqlx::query_as("SELECT user_id, role FROM cluster_member_users WHERE cluster_id = $1 ORDER BY user_id")
            .bind(cluster)
            .fetch_all(pool)
            .await?;
    let mut out: Vec<(i64, MemberRole)> = Vec::new();
    for (user, role) in rows {
        let Ok(role) = MemberRole::parse(&role) else { continue };
        match out.last_mut() {
            Some((u, r)) if *u == user => *r = (*r).max(role),
            _ => out.push((user, role)),
        }
    }
    Ok(out)
}

fn column(kind: MemberKind) -> &'static str {
    match kind {
        MemberKind::User => "user_id",
        MemberKind::Team => "team_id",
    }
}

/// Adds a member, or sets the role of one already there. Returns the role
/// it had before (`None`: newly added).
pub async fn put(
    pool: &AnyPool,
    cluster: i64,
    kind: MemberKind,
    id: i64,
    role: MemberRole,
    by: i64,
) -> Result<Option<MemberRole>, DbError> {
    let col = column(kind);
    let mut tx = super::write_tx(pool).await?;
    let before: Option<String> =
        sqlx::query_scalar(&format!("SELECT role FROM cluster_members WHERE cluster_id = $1 AND {col} = $2"))
            .bind(cluster)
            .bind(id)
            .fetch_optional(&mut *tx)
            .await?;
    if before.is_some() {
        sqlx::query(&format!("UPDATE cluster_members SET role = $3 WHERE cluster_id = $1 AND {col} = $2"))
            .bind(cluster)
            .bind(id)
            .bind(role.as_str())
            .execute(&mut *tx)
            .await?;
    } else {
        sqlx::query(&format!(
            "INSERT INTO cluster_members (cluster_id, {col}, role, added_by, created_at) VALUES ($1, $2, $3, $4, $5)"
        ))
        .bind(cluster)
        .bind(id)
        .bind(role.as_str())
        .bind(by)
        .bind(now())
        .execute(&mut *tx)
        .await?;
    }
    touch(&mut tx, cluster).await?;
    tx.commit().await?;
    Ok(before.and_then(|r| MemberRole::parse(&r).ok()))
}

/// Removes a member; `false`: it was not one.
pub(crate) async fn remove(pool: &AnyPool, cluster: i64, kind: MemberKind, id: i64) -> Result<bool, DbError> {
    let col = column(kind);
    let mut tx = super::write_tx(pool).await?;
    let gone = sqlx::query(&format!("DELETE FROM cluster_members WHERE cluster_id = $1 AND {col} = $2"))
        .bind(cluster)
        .bind(id)
        .execute(&mut *tx)
        .await?
        .rows_affected()
        == 1;
    if gone {
        touch(&mut tx, cluster).await?;
        let users = match kind {
            MemberKind::User => "SELECT $2 AS id",
            MemberKind::Team => "SELECT user_id AS id FROM team_members WHERE team_id = $2",
        };
        lost_sight(&mut tx, "SELECT $1", users, cluster, id).await?;
    }
    tx.commit().await?;
    Ok(gone)
}

/// Those who may have lost sight of clusters (`users`, a query of user ids
/// named `id`) × (`clusters`, a query of cluster ids; between them they read
/// both `$1` and `$2`: PostgreSQL refuses an unread parameter), at each
/// cluster's new revision (touched first): their lists move by push
/// (`access_losses`). Someone who still sees the cluster another way only
/// gets a list that reads the same again.
pub(crate) async fn lost_sight(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    clusters: &str,
    users: &str,
    a: i64,
    b: i64,
) -> Result<(), DbError> {
    sqlx::query(&format!(
        "INSERT INTO access_losses (cluster_id, user_id, revision) \
         SELECT c.id, u.id, c.revision FROM clusters c, ({users}) u WHERE c.id IN ({clusters}) \
         ON CONFLICT (cluster_id, user_id) DO UPDATE SET revision = excluded.revision"
    ))
    .bind(a)
    .bind(b)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// A change of who may see `cluster`: its row's next revision.
async fn touch(tx: &mut sqlx::Transaction<'_, sqlx::Any>, cluster: i64) -> Result<(), DbError> {
    sqlx::query("UPDATE clusters SET revision = revision WHERE id = $1").bind(cluster).execute(&mut **tx).await?;
    Ok(())
}

/// The same for every cluster shared with `team`.
async fn touch_team(tx: &mut sqlx::Transaction<'_, sqlx::Any>, team: i64) -> Result<(), DbError> {
    sqlx::query("UPDATE clusters SET revision = revision WHERE id IN (SELECT cluster_id FROM cluster_members WHERE team_id = $1)")
        .bind(team)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// The clusters shared with `team`.
pub(crate) async fn clusters_of_team(pool: &AnyPool, team: i64) -> Result<Vec<i64>, DbError> {
    Ok(sqlx::query_scalar("SELECT cluster_id FROM cluster_members WHERE team_id = $1")
        .bind(team)
        .fetch_all(pool)
        .await?)
}

pub(crate) async fn team_id(pool: &AnyPool, name: &str) -> Result<Option<i64>, DbError> {
    Ok(sqlx::query_scalar("SELECT id FROM teams WHERE name = $1").bind(name).fetch_optional(pool).await?)
}

pub async fn create_team(pool: &AnyPool, name: &TeamName) -> Result<i64, DbError> {
    Ok(sqlx::query_scalar("INSERT INTO teams (name, created_at) VALUES ($1, $2) RETURNING id")
        .bind(name.as_str())
        .bind(now())
        .fetch_one(pool)
        .await?)
}

/// Deletes a team (its memberships go with it); `false`: there was none.
pub(crate) async fn delete_team(pool: &AnyPool, team: i64) -> Result<bool, DbError> {
    let mut tx = super::write_tx(pool).await?;
    touch_team(&mut tx, team).await?;
    let shared = "SELECT cluster_id FROM cluster_members WHERE team_id = $1";
    lost_sight(&mut tx, shared, "SELECT user_id AS id FROM team_members WHERE team_id = $2", team, team).await?;
    let gone = sqlx::query("DELETE FROM teams WHERE id = $1").bind(team).execute(&mut *tx).await?.rows_affected() == 1;
    tx.commit().await?;
    Ok(gone)
}

/// Adds (`true`) or removes (`false`) a user to or from a team; whether
/// anything changed.
pub async fn set_in_team(pool: &AnyPool, team: i64, user: i64, member: bool) -> Result<bool, DbError> {
    let mut tx = super::write_tx(pool).await?;
    let sql = if member {
        "INSERT INTO team_members (team_id, user_id) VALUES ($1, $2) ON CONFLICT DO NOTHING"
    } else {
        "DELETE FROM team_members WHERE team_id = $1 AND user_id = $2"
    };
    let changed = sqlx::query(sql).bind(team).bind(user).execute(&mut *tx).await?.rows_affected() == 1;
    if changed {
        touch_team(&mut tx, team).await?;
        if !member {
            let shared = "SELECT cluster_id FROM cluster_members WHERE team_id = $1";
            lost_sight(&mut tx, shared, "SELECT $2 AS id", team, user).await?;
        }
    }
    tx.commit().await?;
    Ok(changed)
}

/// Every team with its users' names, by name.
pub(crate) async fn teams(pool: &AnyPool) -> Result<Vec<Team>, DbError> {
    teams_where(pool, None).await
}

/// One team with its users' names.
pub(crate) async fn team(pool: &AnyPool, id: i64) -> Result<Option<Team>, DbError> {
    Ok(teams_where(pool, Some(id)).await?.pop())
}

async fn teams_where(pool: &AnyPool, id: Option<i64>) -> Result<Vec<Team>, DbError> {
    let rows: Vec<(i64, String, Option<String>)> = sqlx::query_as(
        "SELECT t.id, t.name, u.username FROM teams t \
         LEFT JOIN team_members tm ON tm.team_id = t.id LEFT JOIN users u ON u.id = tm.user_id \
         WHERE CAST($1 AS BIGINT) IS NULL OR t.id = $1 ORDER BY t.name, u.username",
    )
    .bind(id)
    .fetch_all(pool)
    .await?;
    let mut out: Vec<Team> = Vec::new();
    for (id, name, user) in rows {
        if out.last().is_none_or(|t| t.id != id) {
            out.push(Team { id, name, members: Vec::new() });
        }
        if let (Some(user), Some(team)) = (user, out.last_mut()) {
            team.members.push(user);
        }
    }
    Ok(out)
}

/// Records that `cluster`'s access bindings are out of step, for `reason`:
/// true when they were in step before (the change worth an audit entry).
pub(crate) async fn set_out_of_step(pool: &AnyPool, cluster: i64, reason: &str) -> Result<bool, DbError> {
    let new = sqlx::query(
        "INSERT INTO access_out_of_step (cluster_id, reason, since) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
    )
    .bind(cluster)
    .bind(reason)
    .bind(now())
    .execute(pool)
    .await?
    .rows_affected()
        == 1;
    if !new {
        sqlx::query("UPDATE access_out_of_step SET reason = $2 WHERE cluster_id = $1")
            .bind(cluster)
            .bind(reason)
            .execute(pool)
            .await?;
    }
    Ok(new)
}

/// Records that `cluster`'s access bindings are in step: true when they were not.
pub(crate) async fn clear_out_of_step(pool: &AnyPool, cluster: i64) -> Result<bool, DbError> {
    let done = sqlx::query("DELETE FROM access_out_of_step WHERE cluster_id = $1").bind(cluster).execute(pool).await?;
    Ok(done.rows_affected() == 1)
}

/// Why `cluster`'s access bindings are out of step, if they are.
pub(crate) async fn out_of_step(pool: &AnyPool, cluster: i64) -> Result<Option<String>, DbError> {
    Ok(sqlx::query_scalar("SELECT reason FROM access_out_of_step WHERE cluster_id = $1")
        .bind(cluster)
        .fetch_optional(pool)
        .await?)
}
