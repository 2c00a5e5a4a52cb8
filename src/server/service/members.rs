//! Sharing: a cluster's members, and the teams admins manage.
//! Who may change a cluster's members is `Can::ManageMembers` (its owner,
//! its admin members, console admins); teams are the console admins'.
//! Every change is audited.

use sqlx::AnyPool;

use crate::domain::audit::AuditAction;
use crate::domain::membership::{Can, Member, MemberKind, MemberRole, Team, TeamName};
use crate::domain::user::CurrentUser;
use crate::domain::{AppError, ErrorCode, Field};
use crate::server::db;
use crate::server::service::HostHandle;
use crate::server::service::write_limit::SpecWriteLimiter;

/// A member as a request names it: a user's or a team's name, and a role.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemberInput {
    /// `user` (the default) or `team`.
    #[serde(default)]
    pub kind: Option<String>,
    pub name: String,
    pub role: String,
}

/// A cluster's members (anyone who may see the cluster).
pub(crate) async fn list(pool: &AnyPool, user: &CurrentUser, cluster: i64) -> Result<Vec<Member>, AppError> {
    super::clusters::get(pool, user, cluster).await?;
    Ok(db::members::list(pool, cluster).await?)
}

/// A membership change stored: the cluster's members after, and why its
/// access inside is not in step yet, if it is not (the host's words; the
/// console keeps trying, and the cluster's page says so).
#[derive(Debug)]
pub(crate) struct Changed {
    pub members: Vec<Member>,
    pub pending: Option<String>,
}

/// Adds a member or changes its role; the cluster's members after. Each
/// well-formed change takes from the user's write budget
/// (`service::write_limit`, shared with cluster writes) before any name is
/// looked up: a cluster's owner cannot test usernames, or rewrite bindings
/// inside the cluster, at will.
pub(crate) async fn put(
    pool: &AnyPool,
    host: Option<&HostHandle>,
    writes: &SpecWriteLimiter,
    user: &CurrentUser,
    cluster: i64,
    input: &MemberInput,
) -> Result<Changed, AppError> {
    let c = super::clusters::get_for(pool, user, cluster, Can::ManageMembers).await?;
    let kind = input.kind.as_deref().map_or(Ok(MemberKind::User), MemberKind::parse)?;
    let role = MemberRole::parse(&input.role)?;
    writes.take(user.id)?;
    let name = input.name.trim();
    let unknown = || AppError::at(ErrorCode::MemberUnknown, Field::Member);
    let id = match kind {
        MemberKind::User => {
            let row = db::users::by_username(pool, name).await?.ok_or_else(unknown)?;
            if row.id == c.owner_id {
                return Err(AppError::at(ErrorCode::MemberIsOwner, Field::Member));
            }
            row.id
        }
        MemberKind::Team => db::members::team_id(pool, name).await?.ok_or_else(unknown)?,
    };
    // Two shares of the same member at once: the second's insert meets the
    // first's row (unique per cluster and member).
    let before = db::members::put(pool, cluster, kind, id, role, user.id)
        .await
        .map_err(|e| if e.is_unique_violation() { AppError::new(ErrorCode::ChangedConcurrently) } else { e.into() })?;
    let target = format!("cluster:{}", c.spec.name);
    let who = format!("{}:{name}", kind.as_str());
    let (action, detail) = match before {
        None => (AuditAction::MemberAdded, format!("{who} as {}", role.as_str())),
        Some(b) => (AuditAction::MemberRoleChanged, format!("{who}: {} → {}", b.as_str(), role.as_str())),
    };
    if before != Some(role) {
        super::audit::record(pool, user, action, &target, &detail).await;
    }
    tracing::info!(cluster, member = %who, role = role.as_str(), user = %user.username, "cluster member set");
    let pending = super::credentials::resync(pool, host, &[cluster]).await;
    Ok(Changed { members: db::members::list(pool, cluster).await?, pending })
}

/// Removes a member (by kind and id, as the page lists them); metered as
/// [`put`] is.
pub(crate) async fn remove(
    pool: &AnyPool,
    host: Option<&HostHandle>,
    writes: &SpecWriteLimiter,
    user: &CurrentUser,
    cluster: i64,
    kind: &str,
    id: i64,
) -> Result<Changed, AppError> {
    let c = super::clusters::get_for(pool, user, cluster, Can::ManageMembers).await?;
    writes.take(user.id)?;
    let not_found = || AppError::new(ErrorCode::NotFound);
    let kind = MemberKind::parse(kind).map_err(|_| not_found())?;
    let members = db::members::list(pool, cluster).await?;
    let gone = members.iter().find(|m| m.kind == kind && m.id == id).ok_or_else(not_found)?;
    if !db::members::remove(pool, cluster, kind, id).await? {
        return Err(not_found());
    }
    let target = format!("cluster:{}", c.spec.name);
    let detail = format!("{}:{} (was {})", kind.as_str(), gone.name, gone.role.as_str());
    super::audit::record(pool, user, AuditAction::MemberRemoved, &target, &detail).await;
    // The binding goes at once: the member's certificates authorize nothing.
    let pending = super::credentials::resync(pool, host, &[cluster]).await;
    Ok(Changed { members: db::members::list(pool, cluster).await?, pending })
}

/// Every team (admins only).
pub(crate) async fn teams(pool: &AnyPool, admin: &CurrentUser) -> Result<Vec<Team>, AppError> {
    admin.require_admin()?;
    Ok(db::members::teams(pool).await?)
}

pub(crate) async fn create_team(pool: &AnyPool, admin: &CurrentUser, name: &str) -> Result<Team, AppError> {
    admin.require_admin()?;
    let name = TeamName::parse(name)?;
    let id = db::members::create_team(pool, &name).await.map_err(|e| {
        if e.is_unique_violation() { AppError::at(ErrorCode::TeamNameTaken, Field::TeamName) } else { e.into() }
    })?;
    super::audit::record(pool, admin, AuditAction::TeamCreated, &format!("team:{}", name.as_str()), "").await;
    Ok(Team { id, name: name.as_str().to_owned(), members: Vec::new() })
}

/// The team of that id, or `NotFound`.
async fn team(pool: &AnyPool, id: i64) -> Result<Team, AppError> {
    db::members::team(pool, id).await?.ok_or(AppError::new(ErrorCode::NotFound))
}

pub(crate) async fn delete_team(
    pool: &AnyPool,
    host: Option<&HostHandle>,
    admin: &CurrentUser,
    id: i64,
) -> Result<(), AppError> {
    admin.require_admin()?;
    let t = team(pool, id).await?;
    let shared = db::members::clusters_of_team(pool, id).await?;
    if db::members::delete_team(pool, id).await? {
        super::audit::record(pool, admin, AuditAction::TeamDeleted, &format!("team:{}", t.name), "").await;
        super::credentials::resync(pool, host, &shared).await;
    }
    Ok(())
}

/// Puts a user into a team (`member`) or takes them out; the team after.
pub(crate) async fn set_in_team(
    pool: &AnyPool,
    host: Option<&HostHandle>,
    admin: &CurrentUser,
    id: i64,
    username: &str,
    member: bool,
) -> Result<Team, AppError> {
    admin.require_admin()?;
    let t = team(pool, id).await?;
    let row = db::users::by_username(pool, username.trim())
        .await?
        .ok_or(AppError::at(ErrorCode::MemberUnknown, Field::Member))?;
    if db::members::set_in_team(pool, id, row.id, member).await? {
        let action = if member { AuditAction::TeamMemberAdded } else { AuditAction::TeamMemberRemoved };
        super::audit::record(pool, admin, action, &format!("team:{}", t.name), &format!("user:{}", row.username)).await;
        super::credentials::resync(pool, host, &db::members::clusters_of_team(pool, id).await?).await;
    }
    team(pool, id).await
}
