//! System settings server functions (admins only).

use leptos::prelude::*;

use crate::domain::AppError;
use crate::domain::settings::SettingsView;

#[server(prefix = "/fn", endpoint = "settings/get")]
pub async fn load_settings() -> Result<SettingsView, AppError> {
    use crate::server::context::{require_admin, state};
    require_admin()?;
    let st = state()?;
    let settings = crate::server::service::settings::get(&st.pool).await?;
    Ok(SettingsView { settings, detected: st.host.as_ref().map(|h| h.detected()) })
}

#[server(prefix = "/fn", endpoint = "settings/save")]
#[allow(clippy::too_many_arguments)]
pub async fn save_settings(
    default_mode: String,
    nodeport_public_host: String,
    load_balancer_annotations: String,
    load_balancer_class: String,
    load_balancer_address_request: String,
    chart_repo: String,
    chart_version: String,
) -> Result<(), AppError> {
    use crate::domain::settings::SettingsInput;
    use crate::server::context::{require_admin, state};
    let input = SettingsInput {
        default_mode: &default_mode,
        nodeport_public_host: &nodeport_public_host,
        load_balancer_annotations: &load_balancer_annotations,
        load_balancer_class: &load_balancer_class,
        load_balancer_address_request: &load_balancer_address_request,
        chart_repo: &chart_repo,
        chart_version: &chart_version,
    };
    let st = state()?;
    let detected = st.host.as_ref().map(|h| h.detected());
    let (_, rerendered) = crate::server::service::settings::update(
        &st.pool,
        &require_admin()?,
        &input,
        detected,
        &st.config.chart_repos(),
    )
    .await?;
    if let Some(host) = &st.host {
        host.resync_all(); // re-render the clusters the change touches
    }
    leptos_axum::redirect(&format!("/admin/settings?saved=1&rerendered={rerendered}"));
    Ok(())
}
