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
) -> Result<(), AppError> {
    use crate::domain::quota::{QuotaInput, QuotaText};
    use crate::domain::settings::SettingsInput;
    let (st, admin) = (state()?, require_admin()?);
    let stored = crate::server::service::settings::get(&st.pool, &admin).await?;
    let text = QuotaText::of(&stored.quota);
    let or = |v: &Option<String>, d: &str| v.clone().unwrap_or_else(|| d.to_owned());
    let quota_clusters = or(&quota_clusters, &text.clusters);
    let quota_cpu = or(&quota_cpu, &text.cpu);
    let quota_memory_gib = or(&quota_memory_gib, &text.memory_gib);
    let quota_storage_gib = or(&quota_storage_gib, &text.storage_gib);
    let pod_security = or(&pod_security, stored.pod_security.as_str());
    let network_policy = or(&network_policy, if stored.network_policy { "on" } else { "off" });
    let private_nodes = or(&private_nodes, if stored.private_nodes { "on" } else { "off" });
    let stored_key = stored.platform_api_key.as_ref().map(ToString::to_string).unwrap_or_default();
    let platform_api_key = or(&platform_api_key, &stored_key);
    let kept = stored.gateway_placement_text();
    let gateway = or(&gateway, &kept.gateway);
    let gateway_listener = or(&gateway_listener, &kept.gateway_listener);
    let gateway_domain_suffix = or(&gateway_domain_suffix, &kept.gateway_domain_suffix);
    let spread = or(&spread, &kept.spread);
    let spread_topology_key = or(&spread_topology_key, &kept.spread_topology_key);
    let storage_class = or(&storage_class, &kept.storage_class);
    use crate::server::context::{require_admin, state};
    let input = SettingsInput {
        default_mode: &default_mode,
        nodeport_public_host: &nodeport_public_host,
        load_balancer_annotations: &load_balancer_annotations,
        load_balancer_class: &load_balancer_class,
        load_balancer_address_request: &load_balancer_address_request,
        chart_repo: &chart_repo,
        chart_version: &chart_version,
        quota: QuotaInput {
            clusters: &quota_clusters,
            cpu: &quota_cpu,
            memory_gib: &quota_memory_gib,
            storage_gib: &quota_storage_gib,
        },
        pod_security: &pod_security,
        network_policy: &network_policy,
        private_nodes: &private_nodes,
        platform_api_key: &platform_api_key,
        gateway: &gateway,
        gateway_listener: &gateway_listener,
        gateway_domain_suffix: &gateway_domain_suffix,
        spread: &spread,
        spread_topology_key: &spread_topology_key,
        storage_class: &storage_class,
    };
    let (_, rerendered) = crate::server::service::settings::update(
        &st.pool,
        st.host.as_ref(),
        &admin,
        &input,
        &st.config.operator_limits(),
    )
    .await?;
    leptos_axum::redirect(&format!("/admin/settings?saved=1&rerendered={rerendered}"));
    Ok(())
}
