//! System settings server functions (admins only).

use leptos::prelude::*;

use crate::domain::{AppError, SystemSettings};

#[server(prefix = "/fn", endpoint = "settings/get")]
pub async fn load_settings() -> Result<SystemSettings, AppError> {
    use crate::server::context::{require_admin, state};
    require_admin()?;
    crate::server::service::settings::get(&state()?.pool).await
}

#[server(prefix = "/fn", endpoint = "settings/save")]
pub async fn save_settings(
    default_mode: String,
    nodeport_public_host: String,
    load_balancer_annotations: String,
    load_balancer_class: String,
) -> Result<(), AppError> {
    use crate::domain::settings::SettingsInput;
    use crate::server::context::{require_admin, state};
    let input = SettingsInput {
        default_mode: &default_mode,
        nodeport_public_host: &nodeport_public_host,
        load_balancer_annotations: &load_balancer_annotations,
        load_balancer_class: &load_balancer_class,
    };
    let st = state()?;
    crate::server::service::settings::update(&st.pool, &require_admin()?, &input).await?;
    if let Some(host) = &st.host {
        host.resync_all(); // re-render the clusters the change touches
    }
    leptos_axum::redirect("/admin/settings?saved=1");
    Ok(())
}
