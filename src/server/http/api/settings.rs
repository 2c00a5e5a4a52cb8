//! The platform's settings (admins).

use axum::Json;
use axum::extract::State;
use axum::routing::{MethodRouter, get};
use serde::{Deserialize, Serialize};

use super::{ApiError, ApiJson, ApiResult, ApiUser};
use crate::domain::resources::NumberOrText;
use crate::domain::settings::GatewayPlacementText;
use crate::domain::{AppError, ErrorCode, SystemSettings};
use crate::server::service::settings;
use crate::server::state::AppState;

/// The routes of the settings.
pub(crate) fn routes() -> Vec<(&'static str, MethodRouter<AppState>)> {
    vec![("/api/admin/system-settings", get(get_settings).put(update_settings))]
}

/// The settings as the API shows them: every stored field, what the console
/// detected on the host (`null` without a host) and, after a change, how many
/// clusters are re-rendered.
#[derive(Serialize)]
pub(crate) struct SettingsReply {
    #[serde(flatten)]
    settings: SystemSettings,
    detected_address_request: Option<crate::domain::settings::AddressRequest>,
    /// k3s's ServiceLB seen serving the console's LoadBalancer Services
    /// (`null` without a host).
    detected_servicelb: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    clusters_rerendered: Option<usize>,
}

pub(crate) async fn get_settings(State(st): State<AppState>, ApiUser(u): ApiUser) -> ApiResult<SettingsReply> {
    let (detected_address_request, detected_servicelb) = settings::detected(st.host.as_ref());
    Ok(Json(SettingsReply {
        settings: settings::get(&st.pool, &u).await?,
        detected_address_request,
        detected_servicelb,
        clusters_rerendered: None,
    }))
}

/// The settings body: the four original fields are required (a PUT replaces
/// the whole set; `null` clears the optional ones); the fields added later
/// (address request, chart, quota, pod security, network policy) keep their
/// stored value when left out.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SettingsBody {
    default_cluster_public_access_mode: String,
    #[serde(deserialize_with = "present")]
    nodeport_public_host: Option<String>,
    #[serde(deserialize_with = "present")]
    load_balancer_annotations: Option<std::collections::BTreeMap<String, String>>,
    #[serde(deserialize_with = "present")]
    load_balancer_class: Option<String>,
    #[serde(default)]
    load_balancer_address_request: Option<String>,
    #[serde(default)]
    chart_repo: Option<String>,
    #[serde(default)]
    chart_version: Option<String>,
    /// The platform's quota, as the GET reply shows it (`null` per dimension: no limit).
    #[serde(default)]
    quota: Option<crate::domain::quota::Quota>,
    #[serde(default)]
    pod_security: Option<String>,
    #[serde(default)]
    network_policy: Option<bool>,
    #[serde(default)]
    private_nodes: Option<bool>,
    /// `namespace/name`; `""` clears it; missing keeps it.
    #[serde(default)]
    platform_api_key: Option<String>,
    /// `{namespace, name, listener}`; `null` clears it (no gateway mode); missing keeps it.
    #[serde(default, deserialize_with = "given")]
    gateway: Option<Option<crate::domain::gateway::GatewayRef>>,
    /// A DNS name; `null` clears it; missing keeps it.
    #[serde(default, deserialize_with = "given")]
    gateway_domain_suffix: Option<Option<String>>,
    /// `{spread, topology_key, storage_class}` for new clusters; missing keeps it.
    #[serde(default)]
    placement: Option<crate::domain::placement::Placement>,
    /// The longest a user's own kubeconfig may last: seconds as the GET
    /// reply shows them (600 … 31,536,000, whole minutes), or text (`30d`);
    /// missing keeps it.
    #[serde(default)]
    kubeconfig_max_lifetime: Option<crate::domain::resources::NumberOrText>,
    /// Extra egress for control planes, as the GET reply shows it
    /// (`[{port, to}]`); missing keeps it.
    #[serde(default)]
    extra_egress: Option<crate::domain::egress::ExtraEgress>,
    /// Read-only fields of the GET reply, accepted (and ignored) so a client
    /// can GET, change a field and PUT the result back.
    #[serde(default, rename = "detected_address_request")]
    _detected_address_request: Option<serde::de::IgnoredAny>,
    #[serde(default, rename = "clusters_rerendered")]
    _clusters_rerendered: Option<serde::de::IgnoredAny>,
    #[serde(default, rename = "detected_servicelb")]
    _detected_servicelb: Option<serde::de::IgnoredAny>,
}

impl SettingsBody {
    /// The body as the form's text (so the rules are one): a field left out
    /// keeps its stored value; `null` clears a nullable one.
    fn into_patch(self) -> Result<crate::domain::settings::SettingsPatch, ApiError> {
        let annotations = self.load_balancer_annotations.unwrap_or_default();
        if annotations.values().any(|v| v.contains('\n')) || annotations.keys().any(|k| k.contains([':', '=', '\n'])) {
            return Err(ApiError(AppError::at(
                ErrorCode::AnnotationsInvalid,
                crate::domain::Field::LoadBalancerAnnotations,
            )));
        }
        let switch = |on: bool| if on { "on" } else { "off" }.to_owned();
        let quota = self.quota.as_ref().map(crate::domain::quota::QuotaText::of);
        // The objects through the form's text: `null` is an empty field.
        let gateway = self.gateway.map(|g| GatewayPlacementText::of_gateway(g.as_ref()));
        let placement = self.placement.as_ref().map(GatewayPlacementText::of_placement);
        Ok(crate::domain::settings::SettingsPatch {
            default_mode: Some(self.default_cluster_public_access_mode),
            nodeport_public_host: Some(self.nodeport_public_host.unwrap_or_default()),
            load_balancer_annotations: Some(annotations.iter().map(|(k, v)| format!("{k}: {v}\n")).collect()),
            load_balancer_class: Some(self.load_balancer_class.unwrap_or_default()),
            load_balancer_address_request: self.load_balancer_address_request,
            chart_repo: self.chart_repo,
            chart_version: self.chart_version,
            quota_clusters: quota.as_ref().map(|q| q.clusters.clone()),
            quota_cpu: quota.as_ref().map(|q| q.cpu.clone()),
            quota_memory_gib: quota.as_ref().map(|q| q.memory_gib.clone()),
            quota_storage_gib: quota.as_ref().map(|q| q.storage_gib.clone()),
            pod_security: self.pod_security,
            network_policy: self.network_policy.map(switch),
            private_nodes: self.private_nodes.map(switch),
            platform_api_key: self.platform_api_key,
            gateway: gateway.as_ref().map(|g| g.gateway.clone()),
            gateway_listener: gateway.as_ref().map(|g| g.gateway_listener.clone()),
            gateway_domain_suffix: self.gateway_domain_suffix.map(Option::unwrap_or_default),
            spread: placement.as_ref().map(|p| p.spread.clone()),
            spread_topology_key: placement.as_ref().map(|p| p.spread_topology_key.clone()),
            storage_class: placement.map(|p| p.storage_class),
            kubeconfig_max_lifetime: self.kubeconfig_max_lifetime.map(|l| match l {
                // Seconds as minutes; a number that is not whole minutes stays
                // unreadable, so the rules refuse it.
                NumberOrText::Number(s) if s % 60 == 0 => format!("{}m", s / 60),
                NumberOrText::Number(s) => format!("{s}s"),
                NumberOrText::Text(t) => t,
            }),
            // Through the form's text: the one set of rules judges it.
            extra_egress: self.extra_egress.map(|e| e.text()),
        })
    }
}

/// A nullable field that may be missing: missing is `None`, `null` is `Some(None)`.
fn given<'de, D: serde::Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

/// A nullable field that must still be present: serde treats a missing
/// `Option` as `None` unless a custom deserializer is named.
fn present<'de, D: serde::Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    Option::<T>::deserialize(d)
}

pub(crate) async fn update_settings(
    State(st): State<AppState>,
    ApiUser(u): ApiUser,
    ApiJson(body): ApiJson<SettingsBody>,
) -> ApiResult<SettingsReply> {
    u.require_admin()?;
    let patch = body.into_patch()?;
    let (saved, rerendered) =
        settings::update(&st.pool, st.host.as_ref(), &u, patch, &st.config.operator_limits()).await?;
    let (detected_address_request, detected_servicelb) = settings::detected(st.host.as_ref());
    Ok(Json(SettingsReply {
        settings: saved,
        detected_address_request,
        detected_servicelb,
        clusters_rerendered: Some(rerendered),
    }))
}
