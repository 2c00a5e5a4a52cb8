//! The platform's settings (admins).

use axum::Json;
use axum::extract::State;
use axum::routing::{MethodRouter, get};
use serde::{Deserialize, Serialize};

use super::{ApiError, ApiJson, ApiResult, ApiUser};
use crate::domain::gateway::GatewayRef;
use crate::domain::names::SecretRef;
use crate::domain::resources::NumberOrText;
use crate::domain::settings::{AddressStyle, PodSecurity, SettingsPatch};
use crate::domain::{AppError, ErrorCode, Field, Host, PublicAccessMode, SystemSettings};
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
    /// The body as typed values, each through its domain type's own
    /// constructor (the same rules, codes and fields as the form's text), in
    /// the form's order (the first bad field is the one reported): a field
    /// left out keeps its stored value; `null` clears a nullable one.
    fn into_patch(self) -> Result<SettingsPatch, AppError> {
        use crate::domain::membership::CredentialLifetime;
        use crate::domain::{chart, gateway, load_balancer, placement::Placement, quota::Quota};
        let default_mode = PublicAccessMode::parse(&self.default_cluster_public_access_mode)
            .ok_or(AppError::at(ErrorCode::ModeInvalid, Field::DefaultMode))?;
        let nodeport_public_host = Host::parse_optional(self.nodeport_public_host.as_deref().unwrap_or_default())
            .map_err(|_| AppError::at(ErrorCode::HostInvalid, Field::NodeportPublicHost))?;
        let annotations = load_balancer::annotations(self.load_balancer_annotations.unwrap_or_default())?;
        let class = load_balancer::class(self.load_balancer_class.as_deref().unwrap_or_default())?;
        let address_request = when_given(self.load_balancer_address_request, |s| {
            AddressStyle::parse(&s)
                .ok_or(AppError::at(ErrorCode::AddressRequestInvalid, Field::LoadBalancerAddressRequest))
        })?;
        let chart_repo = when_given(self.chart_repo, |r| chart::repo(&r))?;
        let chart_version = when_given(self.chart_version, |v| chart::version(&v))?;
        let quota = when_given(self.quota, Quota::checked)?;
        let pod_security = when_given(self.pod_security, |s| {
            PodSecurity::parse(&s).ok_or(AppError::at(ErrorCode::BadRequest, Field::PodSecurity))
        })?;
        let platform_api_key = when_given(self.platform_api_key, |k| {
            if k.trim().is_empty() { Ok(None) } else { SecretRef::parse(&k).map(Some) }
        })?;
        let gateway = when_given(self.gateway, |g| g.map(GatewayRef::checked).transpose())?;
        let suffix =
            when_given(self.gateway_domain_suffix, |s| gateway::parse_suffix(s.as_deref().unwrap_or_default()))?;
        let placement = when_given(self.placement, Placement::checked)?;
        let lifetime = when_given(self.kubeconfig_max_lifetime, |l| {
            match l {
                NumberOrText::Number(secs) => CredentialLifetime::from_secs(secs),
                NumberOrText::Text(t) => CredentialLifetime::parse(&t),
            }
            .map_err(|_| AppError::at(ErrorCode::CredentialLifetimeInvalid, Field::KubeconfigMaxLifetime))
        })?;
        let extra_egress = when_given(self.extra_egress, |e| {
            e.checked().ok_or(AppError::at(ErrorCode::EgressInvalid, Field::ExtraEgress))
        })?;
        Ok(SettingsPatch {
            default_mode: Some(default_mode),
            nodeport_public_host: Some(nodeport_public_host),
            load_balancer_annotations: Some(annotations),
            load_balancer_class: Some(class),
            load_balancer_address_request: address_request,
            chart_repo,
            chart_version,
            quota_clusters: quota.map(|q| q.clusters),
            quota_cpu_millis: quota.map(|q| q.cpu_millis),
            quota_memory_gib: quota.map(|q| q.memory_gib),
            quota_storage_gib: quota.map(|q| q.storage_gib),
            pod_security,
            network_policy: self.network_policy,
            private_nodes: self.private_nodes,
            platform_api_key,
            gateway,
            gateway_domain_suffix: suffix,
            spread: placement.as_ref().map(|p| p.spread),
            spread_topology_key: placement.as_ref().map(|p| p.topology_key.clone()),
            storage_class: placement.map(|p| p.storage_class),
            kubeconfig_max_lifetime: lifetime,
            extra_egress,
        })
    }
}

/// A field the body may leave out, read when given.
fn when_given<T, U>(value: Option<T>, read: impl FnOnce(T) -> Result<U, AppError>) -> Result<Option<U>, AppError> {
    value.map(read).transpose()
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
    let patch = body.into_patch().map_err(ApiError)?;
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
