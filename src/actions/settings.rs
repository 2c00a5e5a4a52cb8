//! System settings server functions (admins only).

// The settings form's fields are the server function's arguments (one per
// field, as the HTML form posts them), and the macro repeats them.
#![allow(clippy::too_many_arguments)]

use leptos::prelude::*;

use crate::domain::AppError;
use crate::domain::settings::SettingsView;

#[server(prefix = "/fn", endpoint = "settings/get")]
pub(crate) async fn load_settings() -> Result<SettingsView, AppError> {
    use crate::server::context::{require_admin, state};
    let st = state()?;
    let (policy, limits) = (st.config.host_policy(), st.config.operator_limits());
    crate::server::service::settings::view(&st.pool, st.host.as_ref(), &policy, &limits, &require_admin()?).await
}

#[server(prefix = "/fn", endpoint = "settings/save")]
pub(crate) async fn save_settings(
    default_mode: String,
    nodeport_public_host: String,
    load_balancer_annotations: String,
    load_balancer_class: String,
    load_balancer_address_request: String,
    chart_repo: String,
    chart_version: String,
    // Added later: a form without them (an older page) keeps what is stored.
    quota_clusters: Option<String>,
    quota_cpu: Option<String>,
    quota_memory_gib: Option<String>,
    quota_storage_gib: Option<String>,
    pod_security: Option<String>,
    network_policy: Option<String>,
    private_nodes: Option<String>,
    platform_api_key: Option<String>,
    gateway: Option<String>,
    gateway_listener: Option<String>,
    gateway_domain_suffix: Option<String>,
    spread: Option<String>,
    spread_topology_key: Option<String>,
    storage_class: Option<String>,
    kubeconfig_max_lifetime: Option<String>,
    extra_egress: Option<String>,
) -> Result<(), AppError> {
    use crate::server::context::{require_admin, state};
    let (st, admin) = (state()?, require_admin()?);
    // The fields every form posts, and those an older page may lack (kept).
    let patch = crate::domain::settings::SettingsPatch {
        default_mode: Some(default_mode),
        nodeport_public_host: Some(nodeport_public_host),
        load_balancer_annotations: Some(load_balancer_annotations),
        load_balancer_class: Some(load_balancer_class),
        load_balancer_address_request: Some(load_balancer_address_request),
        chart_repo: Some(chart_repo),
        chart_version: Some(chart_version),
        quota_clusters,
        quota_cpu,
        quota_memory_gib,
        quota_storage_gib,
        pod_security,
        network_policy,
        private_nodes,
        platform_api_key,
        gateway,
        gateway_listener,
        gateway_domain_suffix,
        spread,
        spread_topology_key,
        storage_class,
        kubeconfig_max_lifetime,
        extra_egress,
    };
    let (_, rerendered) = crate::server::service::settings::update(
        &st.pool,
        st.host.as_ref(),
        &admin,
        patch,
        &st.config.operator_limits(),
    )
    .await?;
    leptos_axum::redirect(&format!("/admin/settings?saved=1&rerendered={rerendered}"));
    Ok(())
}
