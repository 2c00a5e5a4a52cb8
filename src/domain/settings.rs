//! Platform defaults an admin sets: the public access mode for new clusters, the
//! NodePort public host, what LoadBalancer Services carry (annotations, class,
//! how the host's address is asked for) and which vCluster chart is installed.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub(crate) use super::chart::{DEFAULT_CHART_REPO, DEFAULT_CHART_VERSION};
use super::egress::ExtraEgress;
use super::gateway::{GatewayRef, GatewayRules};
pub use super::load_balancer::{AddressRequest, AddressStyle};
use super::membership::CredentialLifetime;
use super::names::SecretRef;
use super::placement::{Placement, Spread};
use super::quota::Quota;
use super::{AppError, ErrorCode, Field, Host, PublicAccessMode};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SystemSettings {
    /// `default_cluster_public_access_mode`: the seed's name, on the wire both ways.
    #[serde(rename = "default_cluster_public_access_mode")]
    pub default_mode: PublicAccessMode,
    /// Where NodePort clusters are reached when they have no host of their own.
    pub nodeport_public_host: Option<Host>,
    pub load_balancer_annotations: BTreeMap<String, String>,
    pub load_balancer_class: Option<String>,
    /// How a LoadBalancer Service asks its provider for a cluster's IP host.
    pub load_balancer_address_request: AddressStyle,
    /// The vCluster chart's Helm repository and version.
    pub chart_repo: String,
    pub chart_version: String,
    /// Each user's limits unless an admin sets the user's own.
    pub quota: Quota,
    /// The Pod Security Standard each cluster namespace enforces, and each
    /// vCluster enforces inside (`policies.podSecurityStandard`).
    pub pod_security: PodSecurity,
    /// Whether each cluster namespace gets the console's NetworkPolicy
    /// (docs/runbooks/deploy.md, "Tenant isolation").
    pub network_policy: bool,
    /// Whether the create form offers own nodes (vCluster private nodes).
    #[serde(default)]
    pub private_nodes: bool,
    /// The host Secret holding the vCluster Platform key the private-nodes
    /// image needs (`external.platform.apiKey`); none: vCluster's default,
    /// Secret `vcluster-platform-api-key` in the cluster's namespace.
    #[serde(default)]
    pub platform_api_key: Option<SecretRef>,
    /// The shared Gateway gateway-mode clusters attach their `TLSRoute` to
    /// (none: the mode is not offered).
    #[serde(default)]
    pub gateway: Option<GatewayRef>,
    /// With it, a gateway cluster's host may be left empty (`<name>.<suffix>`),
    /// and hosts outside it are refused.
    #[serde(default)]
    pub gateway_domain_suffix: Option<Host>,
    /// Spread and storage class for clusters created from now on.
    #[serde(default)]
    pub placement: Placement,
    /// The longest a user's own kubeconfig may last: 10 minutes
    /// to 1 year, 8 hours unless the admin sets another.
    #[serde(default)]
    pub kubeconfig_max_lifetime: CredentialLifetime,
    /// What control planes may reach besides the host API server and the
    /// chart repository (`domain::egress`): rules added to every cluster
    /// namespace's NetworkPolicy.
    #[serde(default)]
    pub extra_egress: ExtraEgress,
}

impl Default for SystemSettings {
    fn default() -> Self {
        Self {
            default_mode: PublicAccessMode::default(),
            nodeport_public_host: None,
            load_balancer_annotations: BTreeMap::new(),
            load_balancer_class: None,
            load_balancer_address_request: AddressStyle::Auto,
            chart_repo: DEFAULT_CHART_REPO.to_owned(),
            chart_version: DEFAULT_CHART_VERSION.to_owned(),
            quota: Quota::default(),
            pod_security: PodSecurity::Baseline,
            network_policy: true,
            private_nodes: false,
            platform_api_key: None,
            gateway: None,
            gateway_domain_suffix: None,
            placement: Placement::default(),
            kubeconfig_max_lifetime: crate::domain::membership::CredentialLifetime::DEFAULT,
            extra_egress: Default::default(),
        }
    }
}

impl SystemSettings {
    /// What decides a gateway cluster's host, for a cluster called
    /// `cluster_name`, under the operator's `policy`.
    pub(crate) fn gateway_rules<'a>(
        &'a self,
        cluster_name: &'a str,
        policy: &'a crate::domain::gateway::HostPolicy,
    ) -> GatewayRules<'a> {
        GatewayRules {
            gateway: self.gateway.as_ref(),
            suffix: self.gateway_domain_suffix.as_ref(),
            policy: Some(policy),
            cluster_name,
        }
    }
}

/// The Pod Security Standard a cluster namespace enforces. `baseline` is the
/// strictest the vCluster chart's pod passes (it runs as user 0, which
/// `restricted` refuses); `privileged` turns the check off.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
#[derive(strum::IntoStaticStr, strum::EnumString, strum::VariantArray)]
#[strum(serialize_all = "lowercase")]
pub enum PodSecurity {
    #[default]
    Baseline,
    Privileged,
}

impl PodSecurity {
    pub(crate) fn as_str(self) -> &'static str {
        self.into()
    }

    pub(crate) fn parse(s: &str) -> Option<Self> {
        s.trim().parse().ok()
    }
}

/// `on` / `off` as the settings form sends a switch.
pub(crate) fn parse_switch(s: &str) -> Option<bool> {
    match s.trim() {
        "on" | "true" => Some(true),
        "off" | "false" => Some(false),
        _ => None,
    }
}

/// The settings page's data: the settings and what was detected on the host
/// (`None` when no host is connected).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct SettingsView {
    pub settings: SystemSettings,
    pub detected: Option<AddressRequest>,
    /// k3s's ServiceLB seen serving the console's LoadBalancer Services.
    pub servicelb: bool,
    /// Gateway API on the host (`None`: no host, or it did not answer).
    #[serde(default)]
    pub gateway_api: Option<crate::domain::gateway::GatewayApiView>,
    /// The host's StorageClasses (`None`: no host, or it did not answer).
    #[serde(default)]
    pub storage_classes: Option<Vec<StorageClassView>>,
    /// Whether the Secret the platform key names exists on the host (`None`:
    /// no key, own nodes not offered, no host, or it did not answer).
    #[serde(default)]
    pub platform_key_found: Option<bool>,
    /// The operator lets users claim any gateway host when there is no
    /// suffix (`KUBEBYON_GATEWAY_ANY_HOST`).
    #[serde(default)]
    pub gateway_any_host: bool,
    /// The host's helm-controller accepts no `failurePolicy` the console may
    /// write (creates and edits are refused): what it offers, what to run.
    #[serde(default)]
    pub helm_problem: Option<crate::domain::helm::HelmProblem>,
}

/// A StorageClass of the host, as the settings page lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StorageClassView {
    pub name: String,
    pub provisioner: String,
    /// `storageclass.kubernetes.io/is-default-class: "true"`.
    pub default: bool,
}

/// A change to the settings, typed: each field it gives (`None` keeps the
/// stored value; `Some(None)` clears an optional one). The settings form
/// (`actions::settings::SettingsForm`) and the JSON API each make one with the
/// domain types' own constructors; [`SettingsPatch::apply`] is the one merge
/// and [`SystemSettings::validate`] the rules across fields.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct SettingsPatch {
    pub default_mode: Option<PublicAccessMode>,
    pub nodeport_public_host: Option<Option<Host>>,
    pub load_balancer_annotations: Option<BTreeMap<String, String>>,
    pub load_balancer_class: Option<Option<String>>,
    pub load_balancer_address_request: Option<AddressStyle>,
    pub chart_repo: Option<String>,
    pub chart_version: Option<String>,
    pub quota_clusters: Option<Option<u32>>,
    pub quota_cpu_millis: Option<Option<u64>>,
    pub quota_memory_gib: Option<Option<u64>>,
    pub quota_storage_gib: Option<Option<u64>>,
    pub pod_security: Option<PodSecurity>,
    pub network_policy: Option<bool>,
    pub private_nodes: Option<bool>,
    pub platform_api_key: Option<Option<SecretRef>>,
    pub gateway: Option<Option<GatewayRef>>,
    pub gateway_domain_suffix: Option<Option<Host>>,
    pub spread: Option<Spread>,
    pub spread_topology_key: Option<String>,
    pub storage_class: Option<Option<String>>,
    pub kubeconfig_max_lifetime: Option<CredentialLifetime>,
    pub extra_egress: Option<ExtraEgress>,
}

impl SettingsPatch {
    /// `stored` with every field this patch gives.
    pub(crate) fn apply(self, stored: SystemSettings) -> SystemSettings {
        let Self {
            default_mode,
            nodeport_public_host,
            load_balancer_annotations,
            load_balancer_class,
            load_balancer_address_request,
            chart_repo,
            chart_version,
            quota_clusters,
            quota_cpu_millis,
            quota_memory_gib,
            quota_storage_gib,
            pod_security,
            network_policy,
            private_nodes,
            platform_api_key,
            gateway,
            gateway_domain_suffix,
            spread,
            spread_topology_key,
            storage_class,
            kubeconfig_max_lifetime,
            extra_egress,
        } = self;
        let (q, p) = (stored.quota, stored.placement);
        SystemSettings {
            default_mode: default_mode.unwrap_or(stored.default_mode),
            nodeport_public_host: nodeport_public_host.unwrap_or(stored.nodeport_public_host),
            load_balancer_annotations: load_balancer_annotations.unwrap_or(stored.load_balancer_annotations),
            load_balancer_class: load_balancer_class.unwrap_or(stored.load_balancer_class),
            load_balancer_address_request: load_balancer_address_request
                .unwrap_or(stored.load_balancer_address_request),
            chart_repo: chart_repo.unwrap_or(stored.chart_repo),
            chart_version: chart_version.unwrap_or(stored.chart_version),
            quota: Quota {
                clusters: quota_clusters.unwrap_or(q.clusters),
                cpu_millis: quota_cpu_millis.unwrap_or(q.cpu_millis),
                memory_gib: quota_memory_gib.unwrap_or(q.memory_gib),
                storage_gib: quota_storage_gib.unwrap_or(q.storage_gib),
            },
            pod_security: pod_security.unwrap_or(stored.pod_security),
            network_policy: network_policy.unwrap_or(stored.network_policy),
            private_nodes: private_nodes.unwrap_or(stored.private_nodes),
            platform_api_key: platform_api_key.unwrap_or(stored.platform_api_key),
            gateway: gateway.unwrap_or(stored.gateway),
            gateway_domain_suffix: gateway_domain_suffix.unwrap_or(stored.gateway_domain_suffix),
            placement: Placement {
                spread: spread.unwrap_or(p.spread),
                topology_key: spread_topology_key.unwrap_or(p.topology_key),
                storage_class: storage_class.unwrap_or(p.storage_class),
            },
            kubeconfig_max_lifetime: kubeconfig_max_lifetime.unwrap_or(stored.kubeconfig_max_lifetime),
            extra_egress: extra_egress.unwrap_or(stored.extra_egress),
        }
    }

    /// The patch that gives every field of `s` (applied to anything, `s`):
    /// the table test's proof that no field is missed.
    #[cfg(test)]
    pub(crate) fn whole(s: SystemSettings) -> Self {
        Self {
            default_mode: Some(s.default_mode),
            nodeport_public_host: Some(s.nodeport_public_host),
            load_balancer_annotations: Some(s.load_balancer_annotations),
            load_balancer_class: Some(s.load_balancer_class),
            load_balancer_address_request: Some(s.load_balancer_address_request),
            chart_repo: Some(s.chart_repo),
            chart_version: Some(s.chart_version),
            quota_clusters: Some(s.quota.clusters),
            quota_cpu_millis: Some(s.quota.cpu_millis),
            quota_memory_gib: Some(s.quota.memory_gib),
            quota_storage_gib: Some(s.quota.storage_gib),
            pod_security: Some(s.pod_security),
            network_policy: Some(s.network_policy),
            private_nodes: Some(s.private_nodes),
            platform_api_key: Some(s.platform_api_key),
            gateway: Some(s.gateway),
            gateway_domain_suffix: Some(s.gateway_domain_suffix),
            spread: Some(s.placement.spread),
            spread_topology_key: Some(s.placement.topology_key),
            storage_class: Some(s.placement.storage_class),
            kubeconfig_max_lifetime: Some(s.kubeconfig_max_lifetime),
            extra_egress: Some(s.extra_egress),
        }
    }
}

impl SystemSettings {
    /// The rules across fields (each field's own rules are its type's): a
    /// gateway default mode needs a Gateway.
    pub(crate) fn validate(&self) -> Result<(), AppError> {
        if self.default_mode == PublicAccessMode::Gateway && self.gateway.is_none() {
            return Err(AppError::at(ErrorCode::GatewayNotConfigured, Field::DefaultMode));
        }
        Ok(())
    }
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_to_nodeport() {
        assert_eq!(SystemSettings::default().default_mode, PublicAccessMode::NodePort);
    }

    /// Settings with every field away from its default.
    fn every_field_changed() -> SystemSettings {
        let d = SystemSettings::default();
        SystemSettings {
            default_mode: PublicAccessMode::Gateway,
            nodeport_public_host: Some(Host::Dns("nodes.example.com".into())),
            load_balancer_annotations: BTreeMap::from([("metallb.io/address-pool".into(), "public".into())]),
            load_balancer_class: Some("metallb".into()),
            load_balancer_address_request: AddressStyle::KubeVip,
            chart_repo: "oci://registry.example/charts".into(),
            chart_version: "0.31.0".into(),
            quota: Quota { clusters: Some(3), cpu_millis: None, memory_gib: Some(8), storage_gib: Some(1) },
            pod_security: PodSecurity::Privileged,
            network_policy: !d.network_policy,
            private_nodes: !d.private_nodes,
            platform_api_key: Some(SecretRef::parse("kubebyon-platform-key/key").unwrap()),
            gateway: Some(GatewayRef {
                namespace: "gateways".into(),
                name: "shared".into(),
                listener: Some("tls".into()),
            }),
            gateway_domain_suffix: Some(Host::Dns("clusters.example.com".into())),
            placement: Placement {
                spread: Spread::Required,
                topology_key: "zone".into(),
                storage_class: Some("fast".into()),
            },
            kubeconfig_max_lifetime: CredentialLifetime::parse("30d").unwrap(),
            extra_egress: ExtraEgress::parse("10443 vcluster-platform").unwrap(),
        }
    }

    /// A patch carrying every field of non-default settings, applied to the
    /// default, gives them back (the patch cannot miss a field); an empty
    /// patch changes nothing; each field alone changes only itself.
    #[test]
    fn a_patch_gives_every_field_and_keeps_the_rest() {
        let (base, changed) = (SystemSettings::default(), every_field_changed());
        let fields = serde_json::to_value(&changed).unwrap().as_object().unwrap().len();
        let differ = |a: &SystemSettings, b: &SystemSettings| {
            let (a, b) = (serde_json::to_value(a).unwrap(), serde_json::to_value(b).unwrap());
            a.as_object().unwrap().iter().filter(|(k, v)| b.get(k.as_str()) != Some(v)).count()
        };
        assert_eq!(differ(&base, &changed), fields, "every field away from its default");
        assert_eq!(SettingsPatch::whole(changed.clone()).apply(base.clone()), changed);
        assert_eq!(SettingsPatch::default().apply(changed.clone()), changed);
        let one = |patch: SettingsPatch| differ(&base, &patch.apply(base.clone()));
        assert_eq!(one(SettingsPatch { network_policy: Some(false), ..Default::default() }), 1);
        assert_eq!(one(SettingsPatch { storage_class: Some(Some("fast".into())), ..Default::default() }), 1);
        assert_eq!(one(SettingsPatch { quota_cpu_millis: Some(None), ..Default::default() }), 1);
        assert_eq!(one(SettingsPatch { gateway_domain_suffix: Some(None), ..Default::default() }), 0);
    }

    #[test]
    fn a_gateway_default_mode_needs_a_gateway() {
        let gateway_mode = SystemSettings { default_mode: PublicAccessMode::Gateway, ..Default::default() };
        assert_eq!(gateway_mode.validate(), Err(AppError::at(ErrorCode::GatewayNotConfigured, Field::DefaultMode)));
        assert_eq!(every_field_changed().validate(), Ok(()));
        assert_eq!(SystemSettings::default().validate(), Ok(()));
    }
}
