//! Reading and changing the platform defaults (admins only for changes).

use sqlx::AnyPool;

use crate::domain::cluster::Cluster;
use crate::domain::settings::{AddressRequest, SettingsInput};
use crate::domain::user::CurrentUser;
use crate::domain::{AppError, ErrorCode, SystemSettings};
use crate::server::db;
use crate::server::reconciler::render;

pub async fn get(pool: &AnyPool) -> Result<SystemSettings, AppError> {
    Ok(db::settings::load(pool).await?)
}

/// Validates and stores the settings; returns them and how many clusters'
/// HelmCharts render differently under them (the reconciler re-applies those).
/// `detected` is the host's LoadBalancer provider, when a host is connected.
pub async fn update(
    pool: &AnyPool,
    user: &CurrentUser,
    input: &SettingsInput<'_>,
    detected: Option<AddressRequest>,
    allowed_repos: &[String],
) -> Result<(SystemSettings, usize), AppError> {
    if !user.is_admin() {
        return Err(AppError::new(ErrorCode::Forbidden));
    }
    let settings = SystemSettings::parse(input)?;
    if !crate::domain::settings::chart_repo_allowed(&settings.chart_repo, allowed_repos) {
        return Err(AppError::at(ErrorCode::ChartRepoNotAllowed, crate::domain::Field::ChartRepo));
    }
    let before = db::settings::load(pool).await?;
    db::settings::save(pool, &settings).await?;
    let clusters = db::clusters::list(pool, None).await?;
    let rerendered = rerendered(&clusters, &before, &settings, detected);
    tracing::info!(admin = %user.username, default_mode = %settings.default_mode, rerendered, "system settings changed");
    let json = |s: &SystemSettings| serde_json::to_value(s).unwrap_or_default();
    let changed = crate::domain::audit::diff(&json(&before), &json(&settings));
    super::audit::record(pool, user, crate::domain::audit::AuditAction::SettingsChanged, "settings", &changed).await;
    Ok((settings, rerendered))
}

/// The clusters (not being deleted) whose HelmChart differs between two settings.
pub fn rerendered(
    clusters: &[Cluster],
    before: &SystemSettings,
    after: &SystemSettings,
    detected: Option<AddressRequest>,
) -> usize {
    let chart =
        |c: &Cluster, s: &SystemSettings| render::desired(c, s, s.load_balancer_address_request.resolve(detected));
    clusters.iter().filter(|c| !c.deletion_requested && chart(c, before) != chart(c, after)).count()
}
