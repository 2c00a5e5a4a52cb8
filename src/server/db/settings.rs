//! The `system_settings` key/value table, read and written as one `SystemSettings`.

use std::collections::BTreeMap;

use sqlx::AnyPool;

use super::{DbError, now};
use crate::domain::gateway::{GatewayRef, parse_suffix};
use crate::domain::names::SecretRef;
use crate::domain::placement::Placement;
use crate::domain::settings::{AddressStyle, PodSecurity, parse_switch};
use crate::domain::{Host, PublicAccessMode, SystemSettings};

const DEFAULT_MODE: &str = "default_cluster_public_access_mode";
const NODEPORT_HOST: &str = "nodeport_public_host";
const LB_ANNOTATIONS: &str = "load_balancer_annotations";
const LB_CLASS: &str = "load_balancer_class";
const LB_ADDRESS: &str = "load_balancer_address_request";
const CHART_REPO: &str = "chart_repo";
const CHART_VERSION: &str = "chart_version";
const QUOTA: &str = "quota";
const POD_SECURITY: &str = "pod_security";
const NETWORK_POLICY: &str = "network_policy";
const PRIVATE_NODES: &str = "private_nodes";
const PLATFORM_API_KEY: &str = "platform_api_key";
const GATEWAY: &str = "gateway";
const GATEWAY_LISTENER: &str = "gateway_listener";
const GATEWAY_SUFFIX: &str = "gateway_domain_suffix";
const SPREAD: &str = "spread";
const SPREAD_TOPOLOGY_KEY: &str = "spread_topology_key";
const STORAGE_CLASS: &str = "storage_class";
const KUBECONFIG_MAX_LIFETIME: &str = "kubeconfig_max_lifetime";
const EXTRA_EGRESS: &str = "extra_egress";

/// Missing or unreadable keys take their defaults (`nodeport`, none, empty,
/// `auto`, the default chart, the default quota, `baseline`, a NetworkPolicy,
/// no own nodes, vCluster's default Platform key Secret).
pub async fn load(pool: &AnyPool) -> Result<SystemSettings, DbError> {
    let rows: Vec<(String, String)> = sqlx::query_as("SELECT key, value FROM system_settings").fetch_all(pool).await?;
    let get = |key: &str| rows.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str());
    let defaults = SystemSettings::default();
    Ok(SystemSettings {
        load_balancer_address_request: get(LB_ADDRESS).and_then(AddressStyle::parse).unwrap_or_default(),
        chart_repo: get(CHART_REPO)
            .filter(|r| crate::domain::chart::is_chart_repo(r))
            .map_or(defaults.chart_repo, str::to_owned),
        chart_version: get(CHART_VERSION)
            .filter(|v| crate::domain::chart::is_chart_version(v))
            .map_or(defaults.chart_version, str::to_owned),
        default_mode: get(DEFAULT_MODE).and_then(PublicAccessMode::parse).unwrap_or_default(),
        nodeport_public_host: get(NODEPORT_HOST).and_then(|h| Host::parse(h).ok()),
        load_balancer_annotations: get(LB_ANNOTATIONS)
            .and_then(|j| serde_json::from_str::<BTreeMap<String, String>>(j).ok())
            .unwrap_or_default(),
        load_balancer_class: get(LB_CLASS).filter(|c| !c.is_empty()).map(str::to_owned),
        quota: get(QUOTA).and_then(|j| serde_json::from_str(j).ok()).unwrap_or(defaults.quota),
        pod_security: get(POD_SECURITY).and_then(PodSecurity::parse).unwrap_or(defaults.pod_security),
        network_policy: get(NETWORK_POLICY).and_then(parse_switch).unwrap_or(defaults.network_policy),
        private_nodes: get(PRIVATE_NODES).and_then(parse_switch).unwrap_or(defaults.private_nodes),
        platform_api_key: get(PLATFORM_API_KEY).and_then(|r| SecretRef::parse(r).ok()),
        gateway: get(GATEWAY)
            .and_then(|g| GatewayRef::parse(g, get(GATEWAY_LISTENER).unwrap_or_default()).ok().flatten()),
        gateway_domain_suffix: get(GATEWAY_SUFFIX).and_then(|s| parse_suffix(s).ok().flatten()),
        placement: Placement::from_columns(
            get(SPREAD).unwrap_or_default(),
            get(SPREAD_TOPOLOGY_KEY).unwrap_or_default(),
            get(STORAGE_CLASS),
        ),
        kubeconfig_max_lifetime: get(KUBECONFIG_MAX_LIFETIME)
            .and_then(|t| crate::domain::membership::CredentialLifetime::parse(t).ok())
            .unwrap_or_default(),
        extra_egress: get(EXTRA_EGRESS).and_then(crate::domain::egress::ExtraEgress::parse).unwrap_or_default(),
    })
}

/// Writes every key in one transaction.
pub async fn save(pool: &AnyPool, settings: &SystemSettings) -> Result<(), DbError> {
    let annotations =
        serde_json::to_string(&settings.load_balancer_annotations).map_err(|e| DbError::CorruptRow(e.to_string()))?;
    let pairs = [
        (DEFAULT_MODE, settings.default_mode.as_str().to_owned()),
        (NODEPORT_HOST, settings.nodeport_public_host.as_ref().map(ToString::to_string).unwrap_or_default()),
        (LB_ANNOTATIONS, annotations),
        (LB_CLASS, settings.load_balancer_class.clone().unwrap_or_default()),
        (LB_ADDRESS, settings.load_balancer_address_request.as_str().to_owned()),
        (CHART_REPO, settings.chart_repo.clone()),
        (CHART_VERSION, settings.chart_version.clone()),
        (QUOTA, serde_json::to_string(&settings.quota).map_err(|e| DbError::CorruptRow(e.to_string()))?),
        (POD_SECURITY, settings.pod_security.as_str().to_owned()),
        (NETWORK_POLICY, settings.network_policy.to_string()),
        (PRIVATE_NODES, settings.private_nodes.to_string()),
        (PLATFORM_API_KEY, settings.platform_api_key.as_ref().map(ToString::to_string).unwrap_or_default()),
        (GATEWAY, settings.gateway.as_ref().map(GatewayRef::key).unwrap_or_default()),
        (GATEWAY_LISTENER, settings.gateway.as_ref().and_then(|g| g.listener.clone()).unwrap_or_default()),
        (GATEWAY_SUFFIX, settings.gateway_domain_suffix.as_ref().map(ToString::to_string).unwrap_or_default()),
        (SPREAD, settings.placement.spread.as_str().to_owned()),
        (SPREAD_TOPOLOGY_KEY, settings.placement.topology_key.clone()),
        (STORAGE_CLASS, settings.placement.storage_class.clone().unwrap_or_default()),
        (KUBECONFIG_MAX_LIFETIME, settings.kubeconfig_max_lifetime.text()),
        (EXTRA_EGRESS, settings.extra_egress.text()),
    ];
    let t = now();
    let mut tx = super::write_tx(pool).await?;
    for (key, value) in pairs {
        sqlx::query(
            "INSERT INTO system_settings (key, value, updated_at) VALUES ($1, $2, $3) \
             ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
        )
        .bind(key)
        .bind(value)
        .bind(t)
        .execute(&mut *tx)
        .await?;
    }
    tx.commit().await?;
    Ok(())
}
