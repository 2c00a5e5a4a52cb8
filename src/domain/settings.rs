//! Platform defaults an admin sets: the public access mode for new clusters, the
//! NodePort public host, what LoadBalancer Services carry (annotations, class,
//! how the host's address is asked for) and which vCluster chart is installed.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::gateway::{GatewayRef, GatewayRules};
use super::placement::Placement;
use super::quota::{Quota, QuotaInput};
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
    pub platform_api_key: Option<crate::domain::nodes::SecretRef>,
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
    /// The longest a user's own kubeconfig may last (issue 42): 10 minutes
    /// to 1 year, 8 hours unless the admin sets another.
    #[serde(default)]
    pub kubeconfig_max_lifetime: crate::domain::membership::CredentialLifetime,
    /// What control planes may reach besides the host API server and the
    /// chart repository (`domain::egress`): rules added to every cluster
    /// namespace's NetworkPolicy.
    #[serde(default)]
    pub extra_egress: crate::domain::egress::ExtraEgress,
}

/// The vCluster chart installed unless the admin picks another.
pub(crate) const DEFAULT_CHART_REPO: &str = "https://charts.loft.sh";
pub(crate) const DEFAULT_CHART_VERSION: &str = "0.30.0";

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

/// The gateway and placement settings as their form fields show them (what a
/// form or API request that leaves a field out keeps).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct GatewayPlacementText {
    pub gateway: String,
    pub gateway_listener: String,
    pub gateway_domain_suffix: String,
    pub spread: String,
    pub spread_topology_key: String,
    pub storage_class: String,
}

impl GatewayPlacementText {
    /// The Gateway's two fields (no Gateway: empty); the others empty.
    pub(crate) fn of_gateway(gateway: Option<&GatewayRef>) -> Self {
        Self {
            gateway: gateway.map(GatewayRef::key).unwrap_or_default(),
            gateway_listener: gateway.and_then(|g| g.listener.clone()).unwrap_or_default(),
            ..Self::default()
        }
    }

    /// The placement's three fields; the others empty.
    pub(crate) fn of_placement(placement: &Placement) -> Self {
        Self {
            spread: placement.spread.as_str().to_owned(),
            spread_topology_key: placement.topology_key.clone(),
            storage_class: placement.storage_class.clone().unwrap_or_default(),
            ..Self::default()
        }
    }
}

impl SystemSettings {
    pub(crate) fn gateway_placement_text(&self) -> GatewayPlacementText {
        let gateway = GatewayPlacementText::of_gateway(self.gateway.as_ref());
        GatewayPlacementText {
            gateway: gateway.gateway,
            gateway_listener: gateway.gateway_listener,
            gateway_domain_suffix: self.gateway_domain_suffix.as_ref().map(ToString::to_string).unwrap_or_default(),
            ..GatewayPlacementText::of_placement(&self.placement)
        }
    }

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

/// How a LoadBalancer provider is asked for a specific address (the cluster's
/// IP `control_plane_host`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, strum::IntoStaticStr)]
#[serde(rename_all = "kebab-case")]
#[strum(serialize_all = "kebab-case")]
pub enum AddressRequest {
    /// The `metallb.io/loadBalancerIPs` annotation.
    #[serde(rename = "metallb")]
    #[strum(serialize = "metallb")]
    MetalLb,
    /// The `kube-vip.io/loadbalancerIPs` annotation.
    KubeVip,
    /// Not asked: the provider picks (the host must then point at what it picks).
    None,
}

impl AddressRequest {
    /// The wire and form name (as serde writes it).
    pub(crate) fn as_str(self) -> &'static str {
        self.into()
    }
}

/// The admin's choice: one of the [`AddressRequest`]s, or `auto` (what the
/// console detects on the host: MetalLB when its `IPAddressPool` CRD is served).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Serialize,
    Deserialize,
    Default,
    strum::IntoStaticStr,
    strum::EnumString,
    strum::VariantArray,
)]
#[serde(rename_all = "kebab-case")]
#[strum(serialize_all = "kebab-case")]
pub enum AddressStyle {
    #[default]
    Auto,
    #[serde(rename = "metallb")]
    #[strum(serialize = "metallb")]
    MetalLb,
    KubeVip,
    None,
}

impl AddressStyle {
    pub(crate) fn as_str(self) -> &'static str {
        self.into()
    }

    /// The request the admin fixed; `None` for `auto`.
    pub(crate) fn fixed(self) -> Option<AddressRequest> {
        match self {
            Self::Auto => None,
            Self::MetalLb => Some(AddressRequest::MetalLb),
            Self::KubeVip => Some(AddressRequest::KubeVip),
            Self::None => Some(AddressRequest::None),
        }
    }

    pub(crate) fn parse(s: &str) -> Option<Self> {
        s.trim().parse().ok()
    }

    /// The request made, given what was detected on the host (if a host is connected).
    pub(crate) fn resolve(self, detected: Option<AddressRequest>) -> AddressRequest {
        self.fixed().or(detected).unwrap_or(AddressRequest::None)
    }
}

/// A Helm chart repository: an `http(s)://` or `oci://` URL with a host and no
/// spaces, quotes or query.
pub(crate) fn is_chart_repo(s: &str) -> bool {
    // Only TLS or OCI, never credentials in the URL (`user:pass@host`).
    let rest = ["https://", "oci://"].iter().find_map(|p| s.strip_prefix(p));
    rest.is_some_and(|r| {
        let host = r.split('/').next().unwrap_or_default();
        s.len() <= 512
            && !host.is_empty()
            && !host.contains('@')
            && r.bytes().all(|b| b.is_ascii_graphic() && !matches!(b, b'"' | b'\'' | b'?' | b'#' | b'\\' | b'`'))
    })
}

/// Whether the operator allows the console's admins to point the host at
/// `repo` (`KUBEBYON_CHART_REPOS`; a HelmChart's Job runs with cluster-admin
/// rights on k3s, so the chart is the operator's choice, not only the
/// admin's). Compared without a trailing slash.
pub(crate) fn chart_repo_allowed(repo: &str, allowed: &[String]) -> bool {
    let bare = |s: &str| s.trim().trim_end_matches('/').to_owned();
    allowed.iter().any(|a| bare(a) == bare(repo))
}

/// The namespace the platform key's Secret must be in unless the operator
/// names another (`KUBEBYON_PLATFORM_KEY_NAMESPACE`), as `deploy/` names it:
/// a namespace of its own, never the console's (whose Secrets — the
/// database URL, the OpenID client secret — no control plane's `get` grant
/// may ever reach).
pub(crate) const DEFAULT_PLATFORM_KEY_NAMESPACE: &str = "kubebyon-platform-key";

/// What the operator decides of the settings (environment,
/// `deploy/configmap.yaml`), because each reaches the host itself, which a
/// console admin is not trusted with: the chart repositories (a HelmChart's
/// Job runs as cluster-admin on k3s), whether tenants' pods may run
/// privileged (Pod Security off: hostPath, host namespaces — root on the
/// node), and the one namespace the platform key's Secret may be read from
/// (the chart grants each own-nodes control plane `get` on that Secret).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OperatorLimits {
    /// `KUBEBYON_CHART_REPOS` (default: the vCluster repository).
    pub chart_repos: Vec<String>,
    /// `KUBEBYON_ALLOW_PRIVILEGED_PODS`: whether `pod_security: privileged` may be chosen.
    pub privileged_pods: bool,
    /// `KUBEBYON_PLATFORM_KEY_NAMESPACE`.
    pub platform_key_namespace: String,
}

impl Default for OperatorLimits {
    fn default() -> Self {
        Self {
            chart_repos: vec![DEFAULT_CHART_REPO.to_owned()],
            privileged_pods: false,
            platform_key_namespace: DEFAULT_PLATFORM_KEY_NAMESPACE.to_owned(),
        }
    }
}

impl OperatorLimits {
    /// Whether `settings`, as an admin saves them, stay within the limits.
    pub(crate) fn check(&self, settings: &SystemSettings) -> Result<(), AppError> {
        if !chart_repo_allowed(&settings.chart_repo, &self.chart_repos) {
            return Err(AppError::at(ErrorCode::ChartRepoNotAllowed, Field::ChartRepo));
        }
        if settings.pod_security == PodSecurity::Privileged && !self.privileged_pods {
            return Err(AppError::at(ErrorCode::PodSecurityNotAllowed, Field::PodSecurity));
        }
        if settings.platform_api_key.as_ref().is_some_and(|k| k.namespace != self.platform_key_namespace) {
            return Err(AppError::at(ErrorCode::PlatformApiKeyNamespace, Field::PlatformApiKey));
        }
        Ok(())
    }

    /// `settings` as they take effect on the host: what the operator does not
    /// allow (stored before the limit, or by an older console) falls back —
    /// `privileged` to `baseline`, a platform key elsewhere to none.
    pub(crate) fn cap(&self, mut settings: SystemSettings) -> SystemSettings {
        if !self.privileged_pods {
            settings.pod_security = PodSecurity::Baseline;
        }
        if settings.platform_api_key.as_ref().is_some_and(|k| k.namespace != self.platform_key_namespace) {
            settings.platform_api_key = None;
        }
        settings
    }
}

/// A chart version as Helm takes it exactly: SemVer 2 `MAJOR.MINOR.PATCH`, with
/// an optional pre-release and build (no ranges: a range would let helm upgrade
/// every cluster on its own).
pub(crate) fn is_chart_version(s: &str) -> bool {
    let (core, build) = s.split_once('+').map_or((s, None), |(c, b)| (c, Some(b)));
    let (core, pre) = core.split_once('-').map_or((core, None), |(c, p)| (c, Some(p)));
    let ident = |x: &str| !x.is_empty() && x.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
    let nums: Vec<&str> = core.split('.').collect();
    s.len() <= 64
        && nums.len() == 3
        && nums
            .iter()
            .all(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) && (n.len() == 1 || !n.starts_with('0')))
        && pre.is_none_or(|p| p.split('.').all(ident))
        && build.is_none_or(|b| b.split('.').all(ident))
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

/// Submitted settings text, before validation.
#[derive(Debug, Clone, Default)]
pub(crate) struct SettingsInput<'a> {
    pub default_mode: &'a str,
    pub nodeport_public_host: &'a str,
    /// One `key: value` (or `key=value`) per line.
    pub load_balancer_annotations: &'a str,
    pub load_balancer_class: &'a str,
    pub load_balancer_address_request: &'a str,
    pub chart_repo: &'a str,
    pub chart_version: &'a str,
    pub quota: QuotaInput<'a>,
    pub pod_security: &'a str,
    /// `on` or `off`.
    pub network_policy: &'a str,
    /// `on` or `off` (empty: off).
    pub private_nodes: &'a str,
    /// `namespace/name`, or empty.
    pub platform_api_key: &'a str,
    /// `namespace/name`, or empty (no gateway mode).
    pub gateway: &'a str,
    pub gateway_listener: &'a str,
    pub gateway_domain_suffix: &'a str,
    /// `off` / `preferred` / `required` (empty: off).
    pub spread: &'a str,
    pub spread_topology_key: &'a str,
    pub storage_class: &'a str,
    /// `8h`, `30d` … (empty: 8 hours).
    pub kubeconfig_max_lifetime: &'a str,
    /// One `PORT [NAMESPACE | KEY=VALUE]` per line.
    pub extra_egress: &'a str,
}

/// Every settings field as text: what [`SystemSettings::parse`] reads, owned.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct SettingsText {
    pub default_mode: String,
    pub nodeport_public_host: String,
    pub load_balancer_annotations: String,
    pub load_balancer_class: String,
    pub load_balancer_address_request: String,
    pub chart_repo: String,
    pub chart_version: String,
    pub quota: crate::domain::quota::QuotaText,
    pub pod_security: String,
    pub network_policy: String,
    pub private_nodes: String,
    pub platform_api_key: String,
    pub placement: GatewayPlacementText,
    pub kubeconfig_max_lifetime: String,
    pub extra_egress: String,
}

impl SettingsText {
    /// The text of stored settings (parsed, it gives them back).
    pub(crate) fn of(s: &SystemSettings) -> Self {
        let switch = |on: bool| if on { "on" } else { "off" }.to_owned();
        Self {
            default_mode: s.default_mode.as_str().to_owned(),
            nodeport_public_host: s.nodeport_public_host.as_ref().map(ToString::to_string).unwrap_or_default(),
            load_balancer_annotations: s.annotations_text(),
            load_balancer_class: s.load_balancer_class.clone().unwrap_or_default(),
            load_balancer_address_request: s.load_balancer_address_request.as_str().to_owned(),
            chart_repo: s.chart_repo.clone(),
            chart_version: s.chart_version.clone(),
            quota: crate::domain::quota::QuotaText::of(&s.quota),
            pod_security: s.pod_security.as_str().to_owned(),
            network_policy: switch(s.network_policy),
            private_nodes: switch(s.private_nodes),
            platform_api_key: s.platform_api_key.as_ref().map(ToString::to_string).unwrap_or_default(),
            placement: s.gateway_placement_text(),
            kubeconfig_max_lifetime: s.kubeconfig_max_lifetime.text(),
            extra_egress: s.extra_egress.text(),
        }
    }

    /// What [`SystemSettings::parse`] reads.
    pub(crate) fn input(&self) -> SettingsInput<'_> {
        let p = &self.placement;
        SettingsInput {
            default_mode: &self.default_mode,
            nodeport_public_host: &self.nodeport_public_host,
            load_balancer_annotations: &self.load_balancer_annotations,
            load_balancer_class: &self.load_balancer_class,
            load_balancer_address_request: &self.load_balancer_address_request,
            chart_repo: &self.chart_repo,
            chart_version: &self.chart_version,
            quota: self.quota.as_input(),
            pod_security: &self.pod_security,
            network_policy: &self.network_policy,
            private_nodes: &self.private_nodes,
            platform_api_key: &self.platform_api_key,
            gateway: &p.gateway,
            gateway_listener: &p.gateway_listener,
            gateway_domain_suffix: &p.gateway_domain_suffix,
            spread: &p.spread,
            spread_topology_key: &p.spread_topology_key,
            storage_class: &p.storage_class,
            kubeconfig_max_lifetime: &self.kubeconfig_max_lifetime,
            extra_egress: &self.extra_egress,
        }
    }
}

/// A change to the settings as the form posts it or the JSON API is turned
/// into: each field's text, `None` where the request left the field out (the
/// stored value is kept). [`SettingsPatch::over`] is the one merge.
#[derive(Debug, Clone, Default)]
pub(crate) struct SettingsPatch {
    pub default_mode: Option<String>,
    pub nodeport_public_host: Option<String>,
    pub load_balancer_annotations: Option<String>,
    pub load_balancer_class: Option<String>,
    pub load_balancer_address_request: Option<String>,
    pub chart_repo: Option<String>,
    pub chart_version: Option<String>,
    pub quota_clusters: Option<String>,
    pub quota_cpu: Option<String>,
    pub quota_memory_gib: Option<String>,
    pub quota_storage_gib: Option<String>,
    pub pod_security: Option<String>,
    pub network_policy: Option<String>,
    pub private_nodes: Option<String>,
    pub platform_api_key: Option<String>,
    pub gateway: Option<String>,
    pub gateway_listener: Option<String>,
    pub gateway_domain_suffix: Option<String>,
    pub spread: Option<String>,
    pub spread_topology_key: Option<String>,
    pub storage_class: Option<String>,
    pub kubeconfig_max_lifetime: Option<String>,
    pub extra_egress: Option<String>,
}

impl SettingsPatch {
    /// The whole settings' text: each field the patch gives, else the stored one's.
    pub(crate) fn over(self, stored: &SystemSettings) -> SettingsText {
        let kept = SettingsText::of(stored);
        let pick = |given: Option<String>, kept: String| given.unwrap_or(kept);
        let (q, p) = (kept.quota, kept.placement);
        SettingsText {
            default_mode: pick(self.default_mode, kept.default_mode),
            nodeport_public_host: pick(self.nodeport_public_host, kept.nodeport_public_host),
            load_balancer_annotations: pick(self.load_balancer_annotations, kept.load_balancer_annotations),
            load_balancer_class: pick(self.load_balancer_class, kept.load_balancer_class),
            load_balancer_address_request: pick(self.load_balancer_address_request, kept.load_balancer_address_request),
            chart_repo: pick(self.chart_repo, kept.chart_repo),
            chart_version: pick(self.chart_version, kept.chart_version),
            quota: crate::domain::quota::QuotaText {
                clusters: pick(self.quota_clusters, q.clusters),
                cpu: pick(self.quota_cpu, q.cpu),
                memory_gib: pick(self.quota_memory_gib, q.memory_gib),
                storage_gib: pick(self.quota_storage_gib, q.storage_gib),
            },
            pod_security: pick(self.pod_security, kept.pod_security),
            network_policy: pick(self.network_policy, kept.network_policy),
            private_nodes: pick(self.private_nodes, kept.private_nodes),
            platform_api_key: pick(self.platform_api_key, kept.platform_api_key),
            placement: GatewayPlacementText {
                gateway: pick(self.gateway, p.gateway),
                gateway_listener: pick(self.gateway_listener, p.gateway_listener),
                gateway_domain_suffix: pick(self.gateway_domain_suffix, p.gateway_domain_suffix),
                spread: pick(self.spread, p.spread),
                spread_topology_key: pick(self.spread_topology_key, p.spread_topology_key),
                storage_class: pick(self.storage_class, p.storage_class),
            },
            kubeconfig_max_lifetime: pick(self.kubeconfig_max_lifetime, kept.kubeconfig_max_lifetime),
            extra_egress: pick(self.extra_egress, kept.extra_egress),
        }
    }
}

impl SystemSettings {
    pub(crate) fn parse(input: &SettingsInput<'_>) -> Result<Self, AppError> {
        let default_mode = PublicAccessMode::parse(input.default_mode)
            .ok_or(AppError::at(ErrorCode::ModeInvalid, Field::DefaultMode))?;
        let nodeport_public_host = Host::parse_optional(input.nodeport_public_host)
            .map_err(|_| AppError::at(ErrorCode::HostInvalid, Field::NodeportPublicHost))?;
        let load_balancer_annotations = parse_annotations(input.load_balancer_annotations)
            .ok_or(AppError::at(ErrorCode::AnnotationsInvalid, Field::LoadBalancerAnnotations))?;
        let class = input.load_balancer_class.trim();
        let load_balancer_class = if class.is_empty() {
            None
        } else if is_qualified_name(class) {
            Some(class.to_owned())
        } else {
            return Err(AppError::at(ErrorCode::LoadBalancerClassInvalid, Field::LoadBalancerClass));
        };
        let load_balancer_address_request = AddressStyle::parse(input.load_balancer_address_request)
            .ok_or(AppError::at(ErrorCode::AddressRequestInvalid, Field::LoadBalancerAddressRequest))?;
        let chart_repo = input.chart_repo.trim();
        if !is_chart_repo(chart_repo) {
            return Err(AppError::at(ErrorCode::ChartRepoInvalid, Field::ChartRepo));
        }
        let chart_version = input.chart_version.trim();
        if !is_chart_version(chart_version) {
            return Err(AppError::at(ErrorCode::ChartVersionInvalid, Field::ChartVersion));
        }
        let quota = Quota::parse(&input.quota)?;
        let pod_security =
            PodSecurity::parse(input.pod_security).ok_or(AppError::at(ErrorCode::BadRequest, Field::PodSecurity))?;
        let network_policy =
            parse_switch(input.network_policy).ok_or(AppError::at(ErrorCode::BadRequest, Field::NetworkPolicy))?;
        let private_nodes = match input.private_nodes.trim() {
            "" => false,
            s => parse_switch(s).ok_or(AppError::at(ErrorCode::BadRequest, Field::PrivateNodes))?,
        };
        let platform_api_key = match input.platform_api_key.trim() {
            "" => None,
            s => Some(crate::domain::nodes::SecretRef::parse(s)?),
        };
        let gateway = GatewayRef::parse(input.gateway, input.gateway_listener)?;
        let gateway_domain_suffix = crate::domain::gateway::parse_suffix(input.gateway_domain_suffix)?;
        if default_mode == PublicAccessMode::Gateway && gateway.is_none() {
            return Err(AppError::at(ErrorCode::GatewayNotConfigured, Field::DefaultMode));
        }
        let placement = Placement::parse(input.spread, input.spread_topology_key, input.storage_class)?;
        let kubeconfig_max_lifetime =
            crate::domain::membership::CredentialLifetime::parse(input.kubeconfig_max_lifetime)
                .map_err(|_| AppError::at(ErrorCode::CredentialLifetimeInvalid, Field::KubeconfigMaxLifetime))?;
        let extra_egress = crate::domain::egress::ExtraEgress::parse(input.extra_egress)
            .ok_or(AppError::at(ErrorCode::EgressInvalid, Field::ExtraEgress))?;
        Ok(Self {
            kubeconfig_max_lifetime,
            extra_egress,
            gateway,
            gateway_domain_suffix,
            placement,
            default_mode,
            nodeport_public_host,
            load_balancer_annotations,
            load_balancer_class,
            load_balancer_address_request,
            chart_repo: chart_repo.to_owned(),
            chart_version: chart_version.to_owned(),
            quota,
            pod_security,
            network_policy,
            private_nodes,
            platform_api_key,
        })
    }

    /// The annotations as the settings form shows them, one per line.
    pub(crate) fn annotations_text(&self) -> String {
        self.load_balancer_annotations.iter().map(|(k, v)| format!("{k}: {v}")).collect::<Vec<_>>().join("\n")
    }
}

const MAX_ANNOTATION_VALUE: usize = 4096;

/// `key: value` lines; blank lines are skipped; keys are Kubernetes qualified names.
pub(crate) fn parse_annotations(text: &str) -> Option<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let (key, value) = match (line.find(':'), line.find('=')) {
            (Some(c), Some(e)) => line.split_at(c.min(e)),
            (Some(i), None) | (None, Some(i)) => line.split_at(i),
            (None, None) => return None,
        };
        let (key, value) = (key.trim(), value[1..].trim());
        if !is_qualified_name(key) || value.len() > MAX_ANNOTATION_VALUE || out.contains_key(key) {
            return None;
        }
        out.insert(key.to_owned(), value.to_owned());
    }
    Some(out)
}

/// Kubernetes qualified name: optional DNS-subdomain prefix and `/`, then a
/// name of up to 63 characters `[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?`.
pub(crate) fn is_qualified_name(s: &str) -> bool {
    let (prefix, name) = match s.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, s),
    };
    let name_ok = !name.is_empty()
        && name.len() <= 63
        && name.as_bytes()[0].is_ascii_alphanumeric()
        && name.as_bytes()[name.len() - 1].is_ascii_alphanumeric()
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    let prefix_ok = prefix.is_none_or(|p| {
        p.len() <= 253
            && p.split('.').all(|l| {
                !l.is_empty()
                    && l.len() <= 63
                    && !l.starts_with('-')
                    && !l.ends_with('-')
                    && l.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            })
    });
    name_ok && prefix_ok
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chart_repos_the_operator_allows() {
        let allowed = vec!["https://charts.loft.sh".to_owned(), "oci://registry.example/charts/".to_owned()];
        for (repo, ok) in [
            ("https://charts.loft.sh", true),
            ("https://charts.loft.sh/", true),
            ("oci://registry.example/charts", true),
            ("https://charts.example.com", false),
            ("https://charts.loft.sh.evil.example", false),
            ("oci://registry.example", false),
        ] {
            assert_eq!(chart_repo_allowed(repo, &allowed), ok, "{repo}");
        }
    }

    /// What the operator decides: checked when an admin saves, capped where
    /// the settings take effect.
    #[test]
    fn the_operator_limits_what_reaches_the_host() {
        use crate::domain::nodes::SecretRef;
        let strict = OperatorLimits::default();
        let open = OperatorLimits { privileged_pods: true, ..OperatorLimits::default() };
        let key = |ns: &str| Some(SecretRef::parse(&format!("{ns}/vcluster-key")).unwrap());
        let with =
            |pod_security, platform_api_key| SystemSettings { pod_security, platform_api_key, ..Default::default() };
        let refused = |code, field| Err(AppError::at(code, field));
        for (why, limits, settings, want, capped) in [
            ("the defaults", &strict, with(PodSecurity::Baseline, None), Ok(()), (PodSecurity::Baseline, None)),
            (
                "privileged, not allowed",
                &strict,
                with(PodSecurity::Privileged, None),
                refused(ErrorCode::PodSecurityNotAllowed, Field::PodSecurity),
                (PodSecurity::Baseline, None),
            ),
            (
                "privileged, allowed",
                &open,
                with(PodSecurity::Privileged, None),
                Ok(()),
                (PodSecurity::Privileged, None),
            ),
            (
                "the key in the operator's namespace",
                &strict,
                with(PodSecurity::Baseline, key("kubebyon-platform-key")),
                Ok(()),
                (PodSecurity::Baseline, key("kubebyon-platform-key")),
            ),
            (
                "the key in the console's own namespace (its Secrets are no control plane's)",
                &strict,
                with(PodSecurity::Baseline, key("kubebyon")),
                refused(ErrorCode::PlatformApiKeyNamespace, Field::PlatformApiKey),
                (PodSecurity::Baseline, None),
            ),
            (
                "the key elsewhere (the console's own Secrets' namespace of another name)",
                &open,
                with(PodSecurity::Baseline, key("kube-system")),
                refused(ErrorCode::PlatformApiKeyNamespace, Field::PlatformApiKey),
                (PodSecurity::Baseline, None),
            ),
        ] {
            assert_eq!(limits.check(&settings), want, "{why}");
            let c = limits.cap(settings);
            assert_eq!((c.pod_security, c.platform_api_key), capped, "{why}");
        }
        let repo = SystemSettings { chart_repo: "https://charts.example".into(), ..Default::default() };
        assert_eq!(strict.check(&repo), refused(ErrorCode::ChartRepoNotAllowed, Field::ChartRepo));
    }

    fn input<'a>(mode: &'a str, host: &'a str, ann: &'a str, class: &'a str) -> SettingsInput<'a> {
        SettingsInput {
            default_mode: mode,
            nodeport_public_host: host,
            load_balancer_annotations: ann,
            load_balancer_class: class,
            load_balancer_address_request: "auto",
            chart_repo: DEFAULT_CHART_REPO,
            chart_version: DEFAULT_CHART_VERSION,
            quota: QuotaInput { clusters: "5", cpu: "16", memory_gib: "64", storage_gib: "500" },
            pod_security: "baseline",
            network_policy: "on",
            private_nodes: "",
            platform_api_key: "",
            gateway: "",
            gateway_listener: "",
            gateway_domain_suffix: "",
            spread: "",
            spread_topology_key: "",
            storage_class: "",
            kubeconfig_max_lifetime: "",
            extra_egress: "",
        }
    }

    #[test]
    fn extra_egress_is_parsed_and_refused_with_its_field() {
        let base = input("nodeport", "", "", "");
        let ok =
            SystemSettings::parse(&SettingsInput { extra_egress: "10443 vcluster-platform\n5556", ..base.clone() });
        assert_eq!(ok.unwrap().extra_egress.text(), "10443 vcluster-platform\n5556");
        let bad = SystemSettings::parse(&SettingsInput { extra_egress: "10443 Not A Namespace", ..base });
        assert_eq!(bad.unwrap_err(), AppError::at(ErrorCode::EgressInvalid, Field::ExtraEgress));
    }

    /// Gateway and placement settings: parsed, refused with their field, and
    /// a gateway default mode only with a Gateway.
    #[test]
    fn gateway_and_placement_settings() {
        let base = input("nodeport", "", "", "");
        let ok = SystemSettings::parse(&SettingsInput {
            gateway: "kube-system/shared",
            gateway_listener: "tls",
            gateway_domain_suffix: "K.Test",
            spread: "preferred",
            storage_class: "fast",
            ..base.clone()
        })
        .unwrap();
        assert_eq!(
            ok.gateway.as_ref().map(|g| (g.key(), g.listener.clone())),
            Some(("kube-system/shared".into(), Some("tls".into())))
        );
        assert_eq!(ok.gateway_domain_suffix, Some(Host::Dns("k.test".into())));
        assert_eq!(ok.placement.storage_class.as_deref(), Some("fast"));
        assert_eq!(ok.gateway_placement_text().spread, "preferred");
        let err = |i: SettingsInput<'_>| SystemSettings::parse(&i).unwrap_err();
        assert_eq!(err(SettingsInput { default_mode: "gateway", ..base.clone() }).field, Some(Field::DefaultMode));
        assert_eq!(err(SettingsInput { gateway: "shared", ..base.clone() }).field, Some(Field::Gateway));
        assert_eq!(
            err(SettingsInput { gateway_domain_suffix: "10.0.0.1", ..base.clone() }).field,
            Some(Field::GatewayDomainSuffix)
        );
        assert_eq!(err(SettingsInput { spread: "sometimes", ..base.clone() }).field, Some(Field::Spread));
        assert_eq!(err(SettingsInput { storage_class: "Bad Class", ..base }).field, Some(Field::StorageClass));
    }

    #[test]
    fn address_style_and_chart_table() {
        let with = |style: &'static str, repo: &'static str, version: &'static str| SettingsInput {
            load_balancer_address_request: style,
            chart_repo: repo,
            chart_version: version,
            ..input("nodeport", "", "", "")
        };
        let ok = SystemSettings::parse(&with("kube-vip", " oci://registry.example/charts ", "0.31.0-rc.1+b7")).unwrap();
        assert_eq!(ok.load_balancer_address_request, AddressStyle::KubeVip);
        assert_eq!(
            (ok.chart_repo.as_str(), ok.chart_version.as_str()),
            ("oci://registry.example/charts", "0.31.0-rc.1+b7")
        );
        let err = |code, field| Err(AppError::at(code, field));
        let style = err(ErrorCode::AddressRequestInvalid, Field::LoadBalancerAddressRequest);
        let repo = err(ErrorCode::ChartRepoInvalid, Field::ChartRepo);
        let version = err(ErrorCode::ChartVersionInvalid, Field::ChartVersion);
        let bad = [
            (with("", DEFAULT_CHART_REPO, "0.30.0"), style.clone()),
            (with("cilium", DEFAULT_CHART_REPO, "0.30.0"), style),
            (with("auto", "", "0.30.0"), repo.clone()),
            (with("auto", "charts.loft.sh", "0.30.0"), repo.clone()),
            (with("auto", "https://", "0.30.0"), repo.clone()),
            (with("auto", "https://a b", "0.30.0"), repo.clone()),
            (with("auto", "https://x/?q=1", "0.30.0"), repo.clone()),
            (with("auto", "http://charts.loft.sh", "0.30.0"), repo.clone()),
            (with("auto", "https://user:secret@charts.example.com", "0.30.0"), repo.clone()),
            (with("auto", "oci://token@registry.example/charts", "0.30.0"), repo.clone()),
            (with("auto", "file:///etc/charts", "0.30.0"), repo),
            (with("auto", DEFAULT_CHART_REPO, ""), version.clone()),
            (with("auto", DEFAULT_CHART_REPO, "v0.30.0"), version.clone()),
            (with("auto", DEFAULT_CHART_REPO, "0.30"), version.clone()),
            (with("auto", DEFAULT_CHART_REPO, "^0.30.0"), version.clone()),
            (with("auto", DEFAULT_CHART_REPO, "0.030.0"), version.clone()),
            (with("auto", DEFAULT_CHART_REPO, "0.30.0-"), version),
        ];
        for (inp, want) in bad {
            assert_eq!(SystemSettings::parse(&inp), want, "{inp:?}");
        }
    }

    #[test]
    fn auto_follows_what_was_detected() {
        let table = [
            (AddressStyle::Auto, Some(AddressRequest::MetalLb), AddressRequest::MetalLb),
            (AddressStyle::Auto, Some(AddressRequest::None), AddressRequest::None),
            (AddressStyle::Auto, None, AddressRequest::None),
            (AddressStyle::KubeVip, Some(AddressRequest::MetalLb), AddressRequest::KubeVip),
            (AddressStyle::None, Some(AddressRequest::MetalLb), AddressRequest::None),
            (AddressStyle::MetalLb, None, AddressRequest::MetalLb),
        ];
        for (style, detected, want) in table {
            assert_eq!(style.resolve(detected), want, "{style:?} {detected:?}");
        }
        for &s in <AddressStyle as strum::VariantArray>::VARIANTS {
            assert_eq!(AddressStyle::parse(s.as_str()), Some(s));
            assert_eq!(serde_json::to_string(&s).unwrap(), format!("\"{}\"", s.as_str()));
        }
    }

    #[test]
    fn defaults_to_nodeport() {
        assert_eq!(SystemSettings::default().default_mode, PublicAccessMode::NodePort);
    }

    #[test]
    fn parse_table() {
        let ok = SystemSettings::parse(&input(
            "loadbalancer",
            " 203.0.113.10 ",
            "metallb.io/address-pool: public\n\nmetallb.io/allow-shared-ip=team-a\n",
            "metallb.io/metallb",
        ))
        .unwrap();
        assert_eq!(ok.default_mode, PublicAccessMode::LoadBalancer);
        assert_eq!(ok.nodeport_public_host, Some(Host::Ipv4([203, 0, 113, 10].into())));
        assert_eq!(ok.load_balancer_annotations.len(), 2);
        assert_eq!(ok.load_balancer_annotations["metallb.io/allow-shared-ip"], "team-a");
        assert_eq!(ok.load_balancer_class.as_deref(), Some("metallb.io/metallb"));
        assert_eq!(SystemSettings::parse(&input("nodeport", "", "", "")).unwrap(), SystemSettings::default());

        let err = |code, field| Err(AppError::at(code, field));
        let bad = [
            (input("", "", "", ""), err(ErrorCode::ModeInvalid, Field::DefaultMode)),
            (input("ingress", "", "", ""), err(ErrorCode::ModeInvalid, Field::DefaultMode)),
            (input("nodeport", "http://x", "", ""), err(ErrorCode::HostInvalid, Field::NodeportPublicHost)),
            (
                input("nodeport", "", "no separator", ""),
                err(ErrorCode::AnnotationsInvalid, Field::LoadBalancerAnnotations),
            ),
            (
                input("nodeport", "", "bad key!: x", ""),
                err(ErrorCode::AnnotationsInvalid, Field::LoadBalancerAnnotations),
            ),
            (
                input("nodeport", "", "a: 1\na: 2", ""),
                err(ErrorCode::AnnotationsInvalid, Field::LoadBalancerAnnotations),
            ),
            (
                input("nodeport", "", "", "not a class!"),
                err(ErrorCode::LoadBalancerClassInvalid, Field::LoadBalancerClass),
            ),
        ];
        for (inp, want) in bad {
            assert_eq!(SystemSettings::parse(&inp), want, "{inp:?}");
        }
    }

    /// Stored settings' text parses back to them, and a patch changes only
    /// the fields it gives: the one merge the form and the JSON API share.
    #[test]
    fn a_patch_keeps_what_it_leaves_out() {
        let mut full = SettingsText::of(&SystemSettings::default());
        full.default_mode = "loadbalancer".into();
        full.nodeport_public_host = "203.0.113.7".into();
        full.load_balancer_annotations = "metallb.io/address-pool: public".into();
        full.load_balancer_class = "metallb".into();
        full.quota = crate::domain::quota::QuotaText {
            clusters: "3".into(),
            cpu: "2.5".into(),
            memory_gib: "8".into(),
            storage_gib: String::new(),
        };
        full.pod_security = "privileged".into();
        full.network_policy = "off".into();
        full.private_nodes = "on".into();
        full.platform_api_key = "kubebyon/platform-key".into();
        full.placement.gateway = "gateways/shared".into();
        full.placement.gateway_listener = "tls".into();
        full.placement.gateway_domain_suffix = "clusters.example.com".into();
        full.placement.spread = "required".into();
        full.placement.storage_class = "fast".into();
        let stored = SystemSettings::parse(&full.input()).expect("valid");
        for s in [SystemSettings::default(), stored.clone()] {
            assert_eq!(SystemSettings::parse(&SettingsText::of(&s).input()).as_ref(), Ok(&s), "{s:?}");
            // Nothing given: nothing changes.
            assert_eq!(SettingsPatch::default().over(&s), SettingsText::of(&s));
        }
        // (the patch, what the stored settings become)
        type Change = fn(&mut SystemSettings);
        let cases: [(SettingsPatch, Change); 5] = [
            (SettingsPatch { quota_cpu: Some(String::new()), ..Default::default() }, |s| s.quota.cpu_millis = None),
            (SettingsPatch { network_policy: Some("on".into()), ..Default::default() }, |s| s.network_policy = true),
            (
                SettingsPatch {
                    gateway: Some(String::new()),
                    gateway_listener: Some(String::new()),
                    ..Default::default()
                },
                |s| s.gateway = None,
            ),
            (SettingsPatch { gateway_domain_suffix: Some(String::new()), ..Default::default() }, |s| {
                s.gateway_domain_suffix = None
            }),
            (SettingsPatch { load_balancer_class: Some(String::new()), ..Default::default() }, |s| {
                s.load_balancer_class = None
            }),
        ];
        for (patch, change) in cases {
            let what = format!("{patch:?}");
            let mut want = stored.clone();
            change(&mut want);
            assert_eq!(SystemSettings::parse(&patch.over(&stored).input()), Ok(want), "{what}");
        }
    }

    #[test]
    fn annotations_text_round_trips() {
        let s = SystemSettings::parse(&input("nodeport", "", "b.io/x: 1\na.io/y: two words", "")).unwrap();
        assert_eq!(s.annotations_text(), "a.io/y: two words\nb.io/x: 1");
        assert_eq!(parse_annotations(&s.annotations_text()), Some(s.load_balancer_annotations));
    }

    #[test]
    fn qualified_names() {
        for ok in ["a", "metallb.io/address-pool", "kube-vip.io/kube-vip-class", "A_b.c-D"] {
            assert!(is_qualified_name(ok), "{ok}");
        }
        for bad in ["", "/x", "x/", "-a", "a-", "Upper.IO/x", "a b", &"a".repeat(64)] {
            assert!(!is_qualified_name(bad), "{bad}");
        }
    }
}
