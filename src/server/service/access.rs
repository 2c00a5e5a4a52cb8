//! Who reaches a cluster, and how: the owner, a console admin, or a member
//! (directly or through a team) at the highest role held. Every service
//! that acts on one cluster asks here first.

use sqlx::AnyPool;

use crate::domain::cluster::Cluster;
use crate::domain::membership::Access;
use crate::domain::user::CurrentUser;
use crate::domain::{AppError, ErrorCode};
use crate::server::db;

/// The cluster and how `user` reaches it; `NotFound` without any access.
pub(crate) async fn with_access(pool: &AnyPool, user: &CurrentUser, id: i64) -> Result<(Cluster, Access), AppError> {
    let not_found = || AppError::new(ErrorCode::NotFound);
    let cluster = db::clusters::get(pool, id).await?.ok_or_else(not_found)?;
    let access = access_of(pool, user, &cluster).await?.ok_or_else(not_found)?;
    Ok((cluster.shown(), access))
}

/// How `user` reaches `cluster`, if at all.
pub(crate) async fn access_of(
    pool: &AnyPool,
    user: &CurrentUser,
    cluster: &Cluster,
) -> Result<Option<Access>, AppError> {
    Ok(if cluster.owner_id == user.id {
        Some(Access::Owner)
    } else if user.is_admin() {
        Some(Access::ConsoleAdmin)
    } else {
        Access::of_memberships(db::members::roles_of(pool, cluster.id, user.id).await?)
    })
}
