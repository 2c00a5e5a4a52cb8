//! Quotas: what a user may hold, what they hold, and the admin's per-user
//! limits. The check itself runs inside the cluster write's transaction
//! (`db::clusters::insert` / `update_spec`).

use sqlx::AnyPool;

use crate::domain::audit::{AuditAction, diff};
use crate::domain::quota::{Quota, QuotaInput, QuotaView};
use crate::domain::user::CurrentUser;
use crate::domain::{AppError, ErrorCode};
use crate::server::db;

/// The limits `user`'s own writes are held to; `None` for admins (they set
/// the limits and are not held to them, also when they edit a user's cluster).
pub(crate) async fn limit_for(pool: &AnyPool, user: &CurrentUser) -> Result<Option<Quota>, AppError> {
    limit_for_owner(pool, user, user.id).await
}

/// The limit `user`'s change of a cluster `owner` owns is held to: the
/// owner's (quotas stay per owner when a member edits), none for admins.
pub(crate) async fn limit_for_owner(pool: &AnyPool, user: &CurrentUser, owner: i64) -> Result<Option<Quota>, AppError> {
    if user.is_admin() {
        return Ok(None);
    }
    let platform = db::settings::load(pool).await?.quota;
    let own = db::users::quota(pool, owner).await?;
    Ok(Some(Quota::effective(&platform, &own)))
}

/// What the create form shows: the user's clusters and resources, and their limits.
pub(crate) async fn view(pool: &AnyPool, user: &CurrentUser) -> Result<QuotaView, AppError> {
    let used = db::clusters::usage(pool, user.id, None).await?;
    Ok(QuotaView { used, limit: limit_for(pool, user).await? })
}

/// Sets a user's own limits (empty fields: the platform's). Admins only; audited.
pub(crate) async fn set_user_quota(
    pool: &AnyPool,
    admin: &CurrentUser,
    user_id: i64,
    input: &QuotaInput<'_>,
) -> Result<(), AppError> {
    admin.require_admin()?;
    let quota = Quota::parse(input)?;
    let before = db::users::by_id(pool, user_id).await?.ok_or(AppError::new(ErrorCode::NotFound))?;
    if !db::users::set_quota(pool, user_id, &quota).await? {
        return Err(AppError::new(ErrorCode::NotFound));
    }
    let json = |q: &Quota| serde_json::to_value(q).unwrap_or_default();
    let detail = diff(&json(&before.quota()), &json(&quota));
    tracing::info!(admin = %admin.username, user = user_id, "quota changed");
    let target = format!("user:{}", before.username);
    super::audit::record(pool, admin, AuditAction::QuotaChanged, &target, &detail).await;
    Ok(())
}
