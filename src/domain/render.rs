//! What a cluster should look like on the host, pure: the vCluster values (only
//! keys the chart's `values.schema.json` has) and the HelmChart carrying them. This
//! is the one place that decides the Service type, `extraSANs`, the provider's
//! address annotation, `loadBalancerClass` and resources. Same input, same bytes:
//! helm-controller upgrades a release only when its config hash changes.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{Value, json};

use crate::domain::cluster::{Cluster, OldEndpoint};
use crate::domain::endpoint::{Endpoint, HTTPS_PORT};
pub use crate::domain::helm::FailurePolicy;
use crate::domain::host_objects::namespace;
use crate::domain::names::SecretRef;
use crate::domain::settings::PodSecurity;
use crate::domain::{ClusterSpec, Host, PublicAccess, SystemSettings};

pub use crate::domain::settings::AddressRequest;

/// The label every host object of the console carries.
pub(crate) const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", "kubebyon");
/// The label naming the console's cluster id.
pub(crate) const CLUSTER_ID_LABEL: &str = "kubebyon.io/cluster-id";
/// The label naming the console installation that created the object (its
/// id is generated once and kept in the database): only the console's own
/// create writes it, and nothing without it is ever changed or deleted.
pub const INSTALLATION_LABEL: &str = "kubebyon.io/installation";

#[derive(Serialize, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Values {
    pub control_plane: ControlPlane,
    pub policies: Policies,
    /// Own nodes only (`domain::nodes`); absent otherwise, so other
    /// clusters' values keep their bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub private_nodes: Option<PrivateNodes>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub external: Option<External>,
    /// `telemetry.enabled: false` for clusters created with it off; absent
    /// (the chart's default) for clusters created before, so their values
    /// keep their bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub telemetry: Option<Enabled>,
}

/// `privateNodes` (chart v0.30 `values.yaml` ~L805): on, and no automatic
/// upgrades (they fetch Kubernetes bundles from the internet by default).
#[derive(Serialize, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PrivateNodes {
    pub enabled: bool,
    pub auto_upgrade: Enabled,
}

/// `external.platform.apiKey`: where the Pro image finds its vCluster
/// Platform key (a Secret reference; the key itself never passes here).
#[derive(Serialize, Debug, PartialEq)]
pub struct External {
    pub platform: Platform,
}

#[derive(Serialize, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Platform {
    pub api_key: PlatformApiKey,
}

#[derive(Serialize, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PlatformApiKey {
    pub secret_name: String,
    pub namespace: String,
    /// Whether the chart writes the Role that lets vCluster read it: never
    /// (`false`): the console writes it (`platform_key_role`).
    #[serde(rename = "createRBAC")]
    pub create_rbac: bool,
}

/// `controlPlane.distro`: private nodes need `k8s` (vCluster
/// `pkg/config/validation.go`).
#[derive(Serialize, Debug, PartialEq)]
pub struct Distro {
    pub k8s: Enabled,
}

/// vCluster's own isolation (`policies.*`, chart v0.30 `values.yaml`): the
/// Pod Security Standard enforced inside the virtual cluster, and the
/// ResourceQuota and LimitRange the chart creates in the cluster's namespace
/// (`templates/resourcequota.yaml`, `limitrange.yaml`).
#[derive(Serialize, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Policies {
    /// `baseline`, or empty for no check (the chart's "" default).
    pub pod_security_standard: &'static str,
    pub resource_quota: ResourceQuota,
    pub limit_range: Enabled,
}

#[derive(Serialize, Debug, PartialEq)]
pub struct ResourceQuota {
    pub enabled: bool,
    /// Merged by helm over the chart's defaults (which set
    /// `services.nodeports: 0`: that would refuse the NodePort mode).
    pub quota: BTreeMap<&'static str, String>,
}

#[derive(Serialize, Debug, PartialEq)]
pub struct Enabled {
    pub enabled: bool,
}

/// What helm-controller's Job pod asks for (`--job-resources` default,
/// helm-controller v0.17.9 `pkg/app/app.go`): requests 0.1 CPU / 10M, limits
/// 32 CPU / 32G. The Job runs in the cluster's namespace on every install
/// and upgrade, so the quota must admit it beside a running control plane.
const JOB_REQUEST: (u64, u64) = (100, 128); // millicores, MiB (the LimitRange default request, 128Mi, is larger than 10M)
const JOB_LIMIT: (u64, u64) = (32_000, 30_518); // 32 CPU, 32G = 30,518 MiB (rounded up)
/// The virtual cluster's CoreDNS pod, synced into the namespace (chart
/// v0.30 `controlPlane.coredns.deployment.resources`): requests 20m / 64Mi,
/// limits 1 CPU / 170Mi.
const COREDNS_REQUEST: (u64, u64) = (20, 64);
const COREDNS_LIMIT: (u64, u64) = (1_000, 170);

/// The control plane's CPU limit: the cluster's CPU, and never less than one
/// core. The chart itself sets no CPU limit (v0.30 `values.yaml` L313-320:
/// requests 200m CPU and 256Mi, limits 4Gi memory only), but the console's
/// namespace quota caps `limits.cpu`, so every pod there must state one, and
/// the chart's LimitRange would give a pod without one its default (1 CPU),
/// which refuses any request above a core. A limit equal to a small request
/// starves the control plane on a real kubelet (CFS quota): at 100m,
/// kube-apiserver's ~2.7 CPU-seconds of start-up take ~30 s and every large
/// list is throttled. So: a burst of at least one core, the request as asked.
pub(crate) fn cpu_limit_millis(r: crate::domain::Resources) -> u32 {
    r.cpu_millis.max(1_000)
}

/// The hard limits of the cluster's namespace: the control plane (requests
/// the cluster's size; limits the same, CPU at least a core), helm-controller's Job, the virtual cluster's
/// CoreDNS, and synced workloads up to the cluster's size again; storage for
/// the control plane's volume and workload claims of the same size; the
/// cluster's own Service: one LoadBalancer, and two node ports, because the
/// chart's Service has two ports (`https` and `kubelet`, chart v0.30
/// `templates/service.yaml`) and a NodePort or LoadBalancer Service takes a node
/// port for each (found by running the real chart: with 1, the install failed
/// with "exceeded quota: … requested: services.nodeports=2").
pub(crate) fn namespace_quota(r: crate::domain::Resources) -> BTreeMap<&'static str, String> {
    let (cpu, mem) = (u64::from(r.cpu_millis), u64::from(r.memory_gib) * 1024);
    let mut q = BTreeMap::new();
    q.insert("requests.cpu", format!("{}m", 2 * cpu + JOB_REQUEST.0 + COREDNS_REQUEST.0));
    let cpu_limit = u64::from(cpu_limit_millis(r));
    q.insert("limits.cpu", format!("{}m", cpu_limit + cpu + JOB_LIMIT.0 + COREDNS_LIMIT.0));
    q.insert("requests.memory", format!("{}Mi", 2 * mem + JOB_REQUEST.1 + COREDNS_REQUEST.1));
    q.insert("limits.memory", format!("{}Mi", 2 * mem + JOB_LIMIT.1 + COREDNS_LIMIT.1));
    q.insert("requests.storage", format!("{}Gi", 2 * u64::from(r.storage_gib)));
    q.insert("services.nodeports", "2".into());
    q.insert("services.loadbalancers", "1".into());
    q
}

#[derive(Serialize, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ControlPlane {
    pub service: Service,
    pub proxy: Proxy,
    pub stateful_set: StatefulSet,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub distro: Option<Distro>,
    /// Where joined nodes reach the API server (`host:443`); own nodes only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
}

#[derive(Serialize, Debug, PartialEq)]
pub struct Service {
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    pub spec: ServiceSpec,
}

#[derive(Serialize, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ServiceSpec {
    #[serde(rename = "type")]
    pub type_: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub load_balancer_class: Option<String>,
    /// `false` once a moved cluster's old NodePort endpoint is closed.
    #[serde(rename = "allocateLoadBalancerNodePorts", skip_serializing_if = "Option::is_none")]
    pub allocate_load_balancer_node_ports: Option<bool>,
}

#[derive(Serialize, Debug, PartialEq)]
pub struct Proxy {
    #[serde(rename = "extraSANs")]
    pub extra_sans: Vec<String>,
}

#[derive(Serialize, Debug, PartialEq)]
pub struct StatefulSet {
    /// The syncer's image; shared-node clusters only (see [`OSS_IMAGE`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image: Option<Image>,
    pub resources: Resources,
    pub persistence: Persistence,
    /// Spread control planes (`domain::placement`); absent when off, so
    /// the values of clusters without it keep their bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scheduling: Option<Scheduling>,
}

/// `controlPlane.statefulSet.image` (chart v0.30 `values.yaml` L302-306:
/// registry `ghcr.io`, repository `loft-sh/vcluster-pro`, tag the chart's
/// appVersion).
#[derive(Serialize, Debug, PartialEq)]
pub struct Image {
    pub repository: &'static str,
}

/// Shared-node clusters run upstream's open-source build
/// (`ghcr.io/loft-sh/vcluster-oss`, the chart's own tag): no licence, and
/// the code the test host runs (docs/architecture.md, "The vCluster image").
/// Own-nodes clusters keep the chart's default, the Pro image, which private
/// nodes need.
pub const OSS_IMAGE: &str = "loft-sh/vcluster-oss";

/// `controlPlane.statefulSet.scheduling` (chart v0.30 `values.yaml` ~L664).
#[derive(Serialize, Debug, PartialEq)]
pub struct Scheduling {
    pub affinity: Value,
}

#[derive(Serialize, Debug, PartialEq)]
pub struct Resources {
    pub limits: Quantities,
    pub requests: Quantities,
}

#[derive(Serialize, Debug, PartialEq, Clone)]
pub struct Quantities {
    pub cpu: String,
    pub memory: String,
}

#[derive(Serialize, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Persistence {
    pub volume_claim: VolumeClaim,
}

#[derive(Serialize, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct VolumeClaim {
    pub size: String,
    /// The claim's StorageClass (`_persistence.tpl` renders
    /// `storageClassName` only when set); absent: the host's default.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub storage_class: Option<String>,
}

/// The host a kubeconfig for this spec will name, if any: the cluster's own, else
/// (NodePort) the admin's NodePort public host.
pub(crate) fn public_host<'a>(spec: &'a ClusterSpec, settings: &'a SystemSettings) -> Option<&'a Host> {
    spec.public_access.public_host(settings.nodeport_public_host.as_ref())
}

/// The names the API server certificate is asked to cover beyond vCluster's own
/// (`extraSANs`). vCluster adds the Service's LoadBalancer ingress and, for
/// NodePort, the pod's node IP by itself.
pub(crate) fn planned_sans(spec: &ClusterSpec, settings: &SystemSettings) -> Vec<String> {
    public_host(spec, settings).map(|h| vec![h.to_string()]).unwrap_or_default()
}

/// Where an own-nodes cluster's machines join (`host:443`, the chart's
/// `controlPlane.endpoint`): its LoadBalancer host (domain::nodes refuses any
/// other mode); `None` for shared nodes.
pub(crate) fn join_endpoint(spec: &ClusterSpec) -> Option<String> {
    match (&spec.public_access, spec.own_nodes) {
        (PublicAccess::LoadBalancer { host }, true) => Some(Endpoint::load_balancer(host.clone()).authority()),
        _ => None,
    }
}

/// The vCluster values for a spec. Never a `httpsNodePort` (the API server's
/// allocation stays across upgrades, also NodePort → LoadBalancer, which is
/// what keeps a moved cluster's old endpoint answering), never
/// `spec.loadBalancerIP` (deprecated). A moved LoadBalancer cluster
/// (`old`): while its old endpoint is open its host stays in `extraSANs`;
/// once closed, with MetalLB or kube-vip, `allocateLoadBalancerNodePorts:
/// false` makes the API server release the node port (a cloud provider may
/// route through node ports, so then it stays).
pub fn values(
    spec: &ClusterSpec,
    old: Option<&OldEndpoint>,
    settings: &SystemSettings,
    request: AddressRequest,
) -> Values {
    let mut extra_sans = planned_sans(spec, settings);
    let mut allocate_node_ports = None;
    if let (PublicAccess::LoadBalancer { .. } | PublicAccess::Gateway { .. }, Some(old)) = (&spec.public_access, old) {
        if !old.closed && !extra_sans.contains(&old.host) {
            extra_sans.push(old.host.clone());
        }
        if old.closed
            && request != AddressRequest::None
            && matches!(spec.public_access, PublicAccess::LoadBalancer { .. })
        {
            allocate_node_ports = Some(false);
        }
    }
    // A cluster moved to gateway access keeps its old Service type (and so its
    // node port or LoadBalancer address) beside the route until the grace
    // period ends; then ClusterIP.
    let old_service = match (&spec.public_access, old) {
        (PublicAccess::Gateway { .. }, Some(old)) if !old.closed => match old.mode {
            crate::domain::PublicAccessMode::LoadBalancer => {
                Host::parse(&old.host).ok().map(|host| PublicAccess::LoadBalancer { host })
            }
            _ => Some(PublicAccess::NodePort { host: None }),
        },
        _ => None,
    };
    let (type_, annotations, class) = match old_service.as_ref().unwrap_or(&spec.public_access) {
        // Gateway: the shared Gateway's TLSRoute reaches the Service inside the host.
        PublicAccess::Disabled | PublicAccess::Gateway { .. } => ("ClusterIP", BTreeMap::new(), None),
        PublicAccess::NodePort { .. } => ("NodePort", BTreeMap::new(), None),
        PublicAccess::LoadBalancer { host } => {
            let mut annotations = settings.load_balancer_annotations.clone();
            if let Host::Ipv4(_) | Host::Ipv6(_) = host {
                let key = match request {
                    AddressRequest::MetalLb => Some("metallb.io/loadBalancerIPs"),
                    AddressRequest::KubeVip => Some("kube-vip.io/loadbalancerIPs"),
                    AddressRequest::None => None,
                };
                if let Some(key) = key {
                    annotations.insert(key.into(), host.to_string());
                }
            }
            ("LoadBalancer", annotations, settings.load_balancer_class.clone())
        }
    };
    let joined_at = join_endpoint(spec);
    let private_nodes = joined_at.is_some();
    let r = spec.resources;
    let requests = Quantities { cpu: format!("{}m", r.cpu_millis), memory: format!("{}Gi", r.memory_gib) };
    let limits = Quantities { cpu: format!("{}m", cpu_limit_millis(r)), ..requests.clone() };
    Values {
        control_plane: ControlPlane {
            service: Service {
                annotations,
                spec: ServiceSpec {
                    type_,
                    load_balancer_class: class,
                    allocate_load_balancer_node_ports: allocate_node_ports,
                },
            },
            proxy: Proxy { extra_sans },
            stateful_set: StatefulSet {
                image: (!private_nodes).then_some(Image { repository: OSS_IMAGE }),
                resources: Resources { limits, requests },
                persistence: Persistence {
                    volume_claim: VolumeClaim {
                        size: format!("{}Gi", r.storage_gib),
                        storage_class: spec.placement.storage_class.clone(),
                    },
                },
                scheduling: spec.placement.affinity(MANAGED_BY).map(|affinity| Scheduling { affinity }),
            },
            distro: private_nodes.then_some(Distro { k8s: Enabled { enabled: true } }),
            endpoint: joined_at,
        },
        policies: Policies {
            pod_security_standard: match settings.pod_security {
                PodSecurity::Baseline => "baseline",
                PodSecurity::Privileged => "",
            },
            resource_quota: ResourceQuota { enabled: true, quota: namespace_quota(r) },
            limit_range: Enabled { enabled: true },
        },
        // Node upgrades stay the owner's to start: an upgrade drains and
        // restarts kubelet on the user's machines whenever a chart upgrade
        // moves Kubernetes, and where v0.30 takes its bundle from is not
        // settled (its CLI defaults `--bundle-repository` to GitHub;
        // docs/runbooks/own-nodes.md, "Upgrades").
        private_nodes: private_nodes
            .then_some(PrivateNodes { enabled: true, auto_upgrade: Enabled { enabled: false } }),
        // The console grants the key's `get` itself (`platform_key_role`,
        // `platform_key_binding`): helm, running as cluster-admin, writes no RBAC.
        external: platform_key(spec, settings).map(|key| External {
            platform: Platform {
                api_key: PlatformApiKey {
                    secret_name: key.name.clone(),
                    namespace: key.namespace.clone(),
                    create_rbac: false,
                },
            },
        }),
        telemetry: match spec.telemetry {
            crate::domain::Telemetry::ChartDefault => None,
            crate::domain::Telemetry::Off => Some(Enabled { enabled: false }),
        },
    }
}

/// The values as the YAML text of the HelmChart's `valuesContent`.
pub fn values_yaml(values: &Values) -> String {
    // A struct of strings, maps and lists always serialises.
    serde_yaml::to_string(values).unwrap_or_default()
}

/// The whole HelmChart a cluster should have on the host: values rendered
/// for the spec and settings, the admin's chart, the failure policy the
/// host's helm-controller accepts (`domain::helm`).
pub(crate) fn desired(
    cluster: &Cluster,
    settings: &SystemSettings,
    request: AddressRequest,
    policy: FailurePolicy,
) -> Value {
    let values = values(&cluster.spec, cluster.old_endpoint.as_ref(), settings, request);
    helm_chart(cluster.id, &cluster.spec, &values_yaml(&values), settings, policy)
}

/// The cluster's HelmChart, as a server-side apply body.
pub(crate) fn helm_chart(
    cluster_id: i64,
    spec: &ClusterSpec,
    values_content: &str,
    chart: &SystemSettings,
    policy: FailurePolicy,
) -> Value {
    let name = spec.name.as_str();
    let ns = namespace(name);
    json!({
        "apiVersion": "helm.cattle.io/v1",
        "kind": "HelmChart",
        "metadata": {
            "name": name,
            "namespace": ns,
            "labels": {MANAGED_BY.0: MANAGED_BY.1, CLUSTER_ID_LABEL: cluster_id.to_string()},
        },
        "spec": {
            "chart": "vcluster",
            "repo": chart.chart_repo,
            "version": chart.chart_version,
            "targetNamespace": ns,
            "valuesContent": values_content,
            // Never `reinstall` (helm-controller's default: uninstalls and
            // installs again, a new CA, every kubeconfig broken): `retry`
            // where the host's helm-controller accepts it, else `abort`
            // (`domain::helm`).
            "failurePolicy": policy.as_str(),
        },
    })
}

/// The platform key an own-nodes cluster's control plane reads
/// (`external.platform.apiKey`): the admin's, for a cluster with its own
/// nodes (which is always a LoadBalancer one, `domain::nodes`).
pub fn platform_key<'a>(spec: &ClusterSpec, settings: &'a SystemSettings) -> Option<&'a SecretRef> {
    let own_nodes = spec.own_nodes && matches!(spec.public_access, PublicAccess::LoadBalancer { .. });
    settings.platform_api_key.as_ref().filter(|_| own_nodes)
}

/// The Role the console writes once in the platform key's namespace: `get`
/// on that one Secret. The chart would write it per cluster as helm runs
/// (`chart/templates/platform-rbac.yaml`, vCluster v0.30.0); the console
/// renders `createRBAC: false` and writes it, so the grant follows the
/// operator's key namespace (`KUBEBYON_PLATFORM_KEY_NAMESPACE`), not values.
pub const PLATFORM_KEY_ROLE: &str = "kubebyon-platform-key";

pub(crate) fn platform_key_role(key: &SecretRef, installation: &str) -> Value {
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {
            "name": PLATFORM_KEY_ROLE,
            "namespace": key.namespace,
            "labels": {MANAGED_BY.0: MANAGED_BY.1, INSTALLATION_LABEL: installation},
        },
        "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"], "resourceNames": [key.name]}],
    })
}

/// One RoleBinding per own-nodes cluster, named after its namespace, beside
/// the Role: the subject is the chart's control-plane ServiceAccount
/// (`vc-<release>` in the release's namespace, as `platform-rbac.yaml` names it).
pub(crate) fn platform_key_binding(cluster_id: i64, installation: &str, name: &str, key: &SecretRef) -> Value {
    let ns = namespace(name);
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": { "name": ns, "namespace": key.namespace, "labels": owner_labels(cluster_id, installation) },
        "subjects": [{"kind": "ServiceAccount", "name": format!("vc-{name}"), "namespace": ns}],
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": PLATFORM_KEY_ROLE},
    })
}

/// The labels only the console's create writes on a cluster's objects.
fn owner_labels(cluster_id: i64, installation: &str) -> Value {
    json!({
        MANAGED_BY.0: MANAGED_BY.1,
        CLUSTER_ID_LABEL: cluster_id.to_string(),
        INSTALLATION_LABEL: installation,
    })
}

/// The cluster's namespace `ns`, as the body of its create: the console's
/// labels and Pod Security admission's (`enforce` at the admin's level,
/// `warn` and `audit` at `restricted` so what would not pass it shows).
pub(crate) fn namespace_object(cluster_id: i64, installation: &str, ns: &str, pod_security: PodSecurity) -> Value {
    let mut labels = owner_labels(cluster_id, installation);
    for (key, value) in [
        ("pod-security.kubernetes.io/enforce", pod_security.as_str()),
        ("pod-security.kubernetes.io/enforce-version", "latest"),
        ("pod-security.kubernetes.io/warn", "restricted"),
        ("pod-security.kubernetes.io/warn-version", "latest"),
        ("pod-security.kubernetes.io/audit", "restricted"),
        ("pod-security.kubernetes.io/audit-version", "latest"),
    ] {
        labels[key] = value.into();
    }
    json!({
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": { "name": ns, "labels": labels },
    })
}

/// A gateway cluster's `TLSRoute`, named after the cluster in its
/// namespace: `hostnames` its host, attached to the admin's Gateway (and
/// listener), forwarding the TLS stream to the vCluster Service's https port
/// (443; the Service is named after the release). `TLSRouteSpec` in
/// `apis/v1/tlsroute_types.go` (v1.6.3); v1alpha2 and v1alpha3 take the same fields.
pub(crate) fn tls_route(
    cluster_id: i64,
    installation: &str,
    name: &str,
    host: &Host,
    gateway: &crate::domain::gateway::GatewayRef,
    version: crate::domain::gateway::RouteVersion,
) -> Value {
    let mut parent = json!({
        "group": crate::domain::gateway::GROUP,
        "kind": "Gateway",
        "namespace": gateway.namespace,
        "name": gateway.name,
    });
    if let Some(listener) = &gateway.listener {
        parent["sectionName"] = listener.as_str().into();
    }
    json!({
        "apiVersion": version.api_version(),
        "kind": "TLSRoute",
        "metadata": { "name": name, "namespace": namespace(name), "labels": owner_labels(cluster_id, installation) },
        "spec": {
            "parentRefs": [parent],
            "hostnames": [host.to_string()],
            "rules": [{"backendRefs": [{"group": "", "kind": "Service", "name": name, "port": HTTPS_PORT}]}],
        },
    })
}

/// The name of the console's NetworkPolicy in each cluster namespace.
pub(crate) const NETWORK_POLICY: &str = "kubebyon-isolation";
/// The vCluster API server's container port (`controlPlane.proxy.port`), the
/// Service's target port in every public mode.
pub(crate) const API_PORT: u16 = 8443;

/// The konnectivity server's port in a private-nodes control plane (the
/// chart's Service port `konnectivity`, `templates/service.yaml`): joined
/// nodes dial it so the API server reaches their kubelets.
pub(crate) const KONNECTIVITY_PORT: u16 = 8132;

/// The console's NetworkPolicy for a cluster namespace: every pod may talk to
/// the others in the namespace; the API port is open to anyone (the public
/// endpoint, NodePort or LoadBalancer, arrives there), and for a cluster with
/// its own nodes konnectivity's port too (the nodes dial it at the same
/// address); out: DNS to kube-system's kube-dns, and TCP 443 and 6443
/// anywhere (the host API server, which vCluster syncs to, is no pod a
/// selector can name, and helm's Job fetches the chart over HTTPS), and the
/// ports of the HTTP(S) proxies helm's Job is told to use (`helm_egress`:
/// helm-controller copies its `HTTP(S)_PROXY` into every Job it makes), and
/// the admin's extra egress (`extra`: an in-cluster Platform, OpenID
/// provider, …). Everything else is denied.
pub fn network_policy_object(
    cluster_id: i64,
    installation: &str,
    ns: &str,
    own_nodes: bool,
    helm_egress: &std::collections::BTreeSet<u16>,
    extra: &crate::domain::egress::ExtraEgress,
) -> Value {
    let tcp = |port: u16| json!({"protocol": "TCP", "port": port});
    let out: Vec<Value> = [443, 6443]
        .into_iter()
        .chain(helm_egress.iter().copied().filter(|p| ![443, 6443].contains(p)))
        .map(tcp)
        .collect();
    let open: Vec<Value> = std::iter::once(API_PORT).chain(own_nodes.then_some(KONNECTIVITY_PORT)).map(tcp).collect();
    let mut egress = vec![
        json!({"to": [{"podSelector": {}}]}),
        json!({
            "to": [{
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
                "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}},
            }],
            "ports": [{"protocol": "UDP", "port": 53}, tcp(53)],
        }),
        json!({"ports": out}),
    ];
    egress.extend(extra.0.iter().map(crate::domain::egress::EgressRule::policy_rule));
    json!({
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": { "name": NETWORK_POLICY, "namespace": ns, "labels": owner_labels(cluster_id, installation) },
        "spec": {
            "podSelector": {},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [
                {"from": [{"podSelector": {}}]},
                {"ports": open},
            ],
            "egress": egress,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{ClusterName, Resources as Res};

    fn spec(access: PublicAccess) -> ClusterSpec {
        ClusterSpec {
            name: ClusterName::parse("demo").unwrap(),
            resources: Res::default(),
            public_access: access,
            own_nodes: false,
            placement: Default::default(),
            telemetry: Default::default(),
        }
    }

    fn host(s: &str) -> Host {
        Host::parse(s).unwrap()
    }

    fn settings() -> SystemSettings {
        SystemSettings {
            nodeport_public_host: Some(host("203.0.113.9")),
            load_balancer_annotations: BTreeMap::from([("example.com/tier".into(), "public".into())]),
            load_balancer_class: Some("example.com/lb".into()),
            ..SystemSettings::default()
        }
    }

    /// One row: access, address request, Service type, extraSANs, annotations, class.
    type Case = (
        PublicAccess,
        AddressRequest,
        &'static str,
        Vec<&'static str>,
        Vec<(&'static str, &'static str)>,
        Option<&'static str>,
    );

    /// Every mode × host kind: Service type, extraSANs, annotations, class, and
    /// never a nodePort or loadBalancerIP in the YAML.
    /// The namespace quota admits the control plane, helm-controller's Job
    /// (at its default limits) and CoreDNS at once, with the cluster's size
    /// again for workloads; it allows the cluster's own NodePort (the chart's
    /// default of 0 would refuse the NodePort mode).
    #[test]
    fn namespace_quota_admits_what_must_run() {
        use crate::domain::Resources as R;
        for r in [
            R { cpu_millis: 100, memory_gib: 1, storage_gib: 1 },
            R { cpu_millis: 2_000, memory_gib: 4, storage_gib: 20 },
            R { cpu_millis: 64_000, memory_gib: 512, storage_gib: 4_096 },
        ] {
            let q = namespace_quota(r);
            let millis = |k: &str| q[k].trim_end_matches('m').parse::<u64>().unwrap();
            let mib = |k: &str| q[k].trim_end_matches("Mi").parse::<u64>().unwrap();
            let (cpu, mem) = (u64::from(r.cpu_millis), u64::from(r.memory_gib) * 1024);
            // Control plane + Job + CoreDNS + workloads of the cluster's size.
            assert!(millis("limits.cpu") >= u64::from(cpu_limit_millis(r)) + 32_000 + 1_000 + cpu, "{q:?}");
            assert!(millis("requests.cpu") >= cpu + 100 + 20 + cpu, "{q:?}");
            assert!(mib("limits.memory") * 1024 * 1024 >= (mem + mem + 170) * 1024 * 1024 + 32_000_000_000, "{q:?}");
            assert!(mib("requests.memory") >= mem + 128 + 64 + mem, "{q:?}");
            assert_eq!(q["requests.storage"], format!("{}Gi", 2 * r.storage_gib));
            assert_eq!((q["services.nodeports"].as_str(), q["services.loadbalancers"].as_str()), ("2", "1"));
        }
        let privileged = SystemSettings { pod_security: PodSecurity::Privileged, ..settings() };
        let v = values(&spec(PublicAccess::Disabled), None, &privileged, AddressRequest::None);
        assert_eq!(v.policies.pod_security_standard, "");
        let v = values(&spec(PublicAccess::Disabled), None, &settings(), AddressRequest::None);
        assert_eq!(v.policies.pod_security_standard, "baseline");
        assert!(v.policies.resource_quota.enabled && v.policies.limit_range.enabled);
        let ns = namespace_object(7, "inst", "kubebyon-demo", PodSecurity::Baseline);
        assert_eq!(ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"], "baseline");
        assert_eq!(ns["metadata"]["labels"][INSTALLATION_LABEL], "inst");
        let none = std::collections::BTreeSet::new();
        let np = network_policy_object(7, "inst", "kubebyon-demo", false, &none, &Default::default());
        assert_eq!(np["metadata"]["namespace"], "kubebyon-demo");
        assert_eq!(np["spec"]["policyTypes"], json!(["Ingress", "Egress"]));
        assert_eq!(np["spec"]["ingress"][1]["ports"], json!([{"protocol": "TCP", "port": 8443}]));
        let tcp = |p: u16| json!({"protocol": "TCP", "port": p});
        assert_eq!(np["spec"]["egress"][2]["ports"], json!([tcp(443), tcp(6443)]));
        // helm's Job leaves by its proxy's port too (once, whatever is named twice).
        let proxies = std::collections::BTreeSet::from([3128, 443, 8080]);
        let np = network_policy_object(7, "inst", "kubebyon-demo", false, &proxies, &Default::default());
        assert_eq!(np["spec"]["egress"][2]["ports"], json!([tcp(443), tcp(6443), tcp(3128), tcp(8080)]));
        let np = network_policy_object(7, "inst", "kubebyon-demo", true, &none, &Default::default());
        assert_eq!(
            np["spec"]["ingress"][1]["ports"],
            json!([{"protocol": "TCP", "port": 8443}, {"protocol": "TCP", "port": 8132}]),
            "joined nodes dial konnectivity at the cluster's address"
        );
    }

    #[test]
    fn values_for_every_mode() {
        let s = settings();
        let cases: Vec<Case> = vec![
            (PublicAccess::Disabled, AddressRequest::MetalLb, "ClusterIP", vec![], vec![], None),
            (
                PublicAccess::NodePort { host: None },
                AddressRequest::MetalLb,
                "NodePort",
                vec!["203.0.113.9"],
                vec![],
                None,
            ),
            (
                PublicAccess::NodePort { host: Some(host("np.example.com")) },
                AddressRequest::MetalLb,
                "NodePort",
                vec!["np.example.com"],
                vec![],
                None,
            ),
            (
                PublicAccess::LoadBalancer { host: host("198.51.100.7") },
                AddressRequest::MetalLb,
                "LoadBalancer",
                vec!["198.51.100.7"],
                vec![("example.com/tier", "public"), ("metallb.io/loadBalancerIPs", "198.51.100.7")],
                Some("example.com/lb"),
            ),
            (
                PublicAccess::LoadBalancer { host: host("198.51.100.7") },
                AddressRequest::KubeVip,
                "LoadBalancer",
                vec!["198.51.100.7"],
                vec![("example.com/tier", "public"), ("kube-vip.io/loadbalancerIPs", "198.51.100.7")],
                Some("example.com/lb"),
            ),
            (
                PublicAccess::LoadBalancer { host: host("198.51.100.7") },
                AddressRequest::None,
                "LoadBalancer",
                vec!["198.51.100.7"],
                vec![("example.com/tier", "public")],
                Some("example.com/lb"),
            ),
            (
                PublicAccess::LoadBalancer { host: host("api.example.com") },
                AddressRequest::MetalLb,
                "LoadBalancer",
                vec!["api.example.com"],
                vec![("example.com/tier", "public")],
                Some("example.com/lb"),
            ),
            (
                PublicAccess::LoadBalancer { host: host("2001:db8::7") },
                AddressRequest::MetalLb,
                "LoadBalancer",
                vec!["2001:db8::7"],
                vec![("example.com/tier", "public"), ("metallb.io/loadBalancerIPs", "2001:db8::7")],
                Some("example.com/lb"),
            ),
        ];
        for (access, request, type_, sans, annotations, class) in cases {
            let v = values(&spec(access.clone()), None, &s, request);
            let svc = &v.control_plane.service;
            assert_eq!(svc.spec.type_, type_, "{access:?}");
            assert_eq!(v.control_plane.proxy.extra_sans, sans, "{access:?}");
            let want: BTreeMap<String, String> =
                annotations.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
            assert_eq!(svc.annotations, want, "{access:?}");
            assert_eq!(svc.spec.load_balancer_class.as_deref(), class, "{access:?}");
            let yaml = values_yaml(&v);
            for forbidden in ["NodePort:", "httpsNodePort", "loadBalancerIP:", "nodePort"] {
                assert!(!yaml.contains(forbidden), "{forbidden} in {yaml}");
            }
        }
    }

    /// A cluster moved to gateway access keeps its old Service (NodePort, or
    /// its LoadBalancer with the address asked for) and old host in the
    /// certificate during the grace period; then ClusterIP and the host only.
    #[test]
    fn a_cluster_moved_to_a_gateway_keeps_its_old_service_through_the_grace_period() {
        use crate::domain::PublicAccessMode as M;
        let gw = spec(PublicAccess::Gateway { host: host("a.k.test") });
        let old = |h: &str, mode, closed| OldEndpoint { host: h.into(), until: 0, closed, dismissed: false, mode };
        let cases = [
            (None, "ClusterIP", vec!["a.k.test"], None),
            (Some(old("203.0.113.1", M::NodePort, false)), "NodePort", vec!["a.k.test", "203.0.113.1"], None),
            (Some(old("203.0.113.1", M::NodePort, true)), "ClusterIP", vec!["a.k.test"], None),
            (
                Some(old("198.51.100.7", M::LoadBalancer, false)),
                "LoadBalancer",
                vec!["a.k.test", "198.51.100.7"],
                Some("198.51.100.7"),
            ),
            (Some(old("198.51.100.7", M::LoadBalancer, true)), "ClusterIP", vec!["a.k.test"], None),
        ];
        for (old, type_, sans, ip) in cases {
            let v = values(&gw, old.as_ref(), &settings(), AddressRequest::MetalLb);
            assert_eq!(v.control_plane.service.spec.type_, type_, "{old:?}");
            assert_eq!(v.control_plane.proxy.extra_sans, sans, "{old:?}");
            assert_eq!(
                v.control_plane.service.annotations.get("metallb.io/loadBalancerIPs").map(String::as_str),
                ip,
                "{old:?}"
            );
            assert_eq!(v.control_plane.service.spec.allocate_load_balancer_node_ports, None, "{old:?}");
        }
    }

    #[test]
    fn nodeport_without_any_host_asks_for_no_extra_san() {
        let v = values(
            &spec(PublicAccess::NodePort { host: None }),
            None,
            &SystemSettings::default(),
            AddressRequest::MetalLb,
        );
        assert!(v.control_plane.proxy.extra_sans.is_empty());
    }

    #[test]
    fn own_nodes_turn_on_private_nodes_at_the_load_balancer_endpoint() {
        let key = crate::domain::names::SecretRef::parse("licences/vcluster-key").ok();
        let with_key = SystemSettings { private_nodes: true, platform_api_key: key, ..settings() };
        for (access, own, settings, want) in [
            (
                PublicAccess::LoadBalancer { host: host("api.example.com") },
                true,
                &with_key,
                Some("api.example.com:443"),
            ),
            (PublicAccess::LoadBalancer { host: host("2001:db8::5") }, true, &with_key, Some("[2001:db8::5]:443")),
            (PublicAccess::LoadBalancer { host: host("api.example.com") }, false, &with_key, None),
            // Not a mode own nodes allow (refused before it is stored): nothing rendered.
            (PublicAccess::NodePort { host: None }, true, &with_key, None),
        ] {
            let sp = ClusterSpec { own_nodes: own, ..spec(access.clone()) };
            let v = values(&sp, None, settings, AddressRequest::MetalLb);
            assert_eq!(v.control_plane.endpoint.as_deref(), want, "{access:?} {own}");
            let yaml = values_yaml(&v);
            if want.is_some() {
                for line in [
                    "privateNodes:\n  enabled: true\n  autoUpgrade:\n    enabled: false",
                    "distro:\n    k8s:\n      enabled: true",
                    "external:\n  platform:\n    apiKey:\n      secretName: vcluster-key\n      namespace: licences\n      createRBAC: false",
                ] {
                    assert!(yaml.contains(line), "{line:?} in {yaml}");
                }
            } else {
                // Other clusters' values keep their bytes: no new keys at all.
                for key in ["privateNodes", "distro", "endpoint", "external"] {
                    assert!(!yaml.contains(key), "{key} in {yaml}");
                }
            }
        }
        // No key Secret set: vCluster's default Secret in the namespace.
        let no_key = SystemSettings { private_nodes: true, ..settings() };
        let sp = ClusterSpec { own_nodes: true, ..spec(PublicAccess::LoadBalancer { host: host("a.example.com") }) };
        assert!(values(&sp, None, &no_key, AddressRequest::MetalLb).external.is_none());
        assert_eq!(platform_key(&sp, &no_key), None);
    }

    /// What `chart/templates/platform-rbac.yaml` (vCluster v0.30.0) would make
    /// per cluster, made by the console instead: one Role on the one Secret,
    /// one binding per cluster naming the chart's ServiceAccount.
    #[test]
    fn the_platform_key_grant_is_one_role_and_a_binding_per_cluster() {
        let key = crate::domain::names::SecretRef::parse("kubebyon-platform-key/vcluster-key").unwrap();
        let role = platform_key_role(&key, "inst");
        assert_eq!(role["metadata"]["namespace"], "kubebyon-platform-key");
        assert_eq!(role["metadata"]["name"], PLATFORM_KEY_ROLE);
        assert_eq!(
            role["rules"],
            json!([{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"], "resourceNames": ["vcluster-key"]}])
        );
        let binding = platform_key_binding(7, "inst", "join", &key);
        assert_eq!(binding["metadata"]["namespace"], "kubebyon-platform-key");
        assert_eq!(binding["metadata"]["name"], "kubebyon-join");
        assert_eq!(binding["metadata"]["labels"][INSTALLATION_LABEL], "inst");
        assert_eq!(binding["metadata"]["labels"][CLUSTER_ID_LABEL], "7");
        assert_eq!(
            binding["subjects"],
            json!([{"kind": "ServiceAccount", "name": "vc-join", "namespace": "kubebyon-join"}])
        );
        assert_eq!(binding["roleRef"]["name"], PLATFORM_KEY_ROLE);
        let with_key = SystemSettings { private_nodes: true, platform_api_key: Some(key.clone()), ..settings() };
        for (access, own, want) in [
            (PublicAccess::LoadBalancer { host: host("a.example.com") }, true, Some(&key)),
            (PublicAccess::LoadBalancer { host: host("a.example.com") }, false, None),
            (PublicAccess::NodePort { host: None }, true, None),
        ] {
            let sp = ClusterSpec { own_nodes: own, ..spec(access.clone()) };
            assert_eq!(platform_key(&sp, &with_key), want, "{access:?} {own}");
        }
    }

    /// Telemetry off is rendered for the clusters created with it off; a
    /// cluster created before keeps its values' bytes (no key at all), so an
    /// upgrade of the console restarts no control plane.
    #[test]
    fn telemetry_is_off_only_for_clusters_created_with_it_off() {
        use crate::domain::Telemetry;
        let access = PublicAccess::NodePort { host: None };
        for (telemetry, want) in
            [(Telemetry::ChartDefault, None), (Telemetry::Off, Some("telemetry:\n  enabled: false\n"))]
        {
            let sp = ClusterSpec { telemetry, ..spec(access.clone()) };
            let yaml = values_yaml(&values(&sp, None, &settings(), AddressRequest::MetalLb));
            if let Some(line) = want {
                assert!(yaml.contains(line), "{telemetry:?}: {yaml}");
            }
            assert_eq!(yaml.contains("telemetry"), want.is_some(), "{telemetry:?}: {yaml}");
        }
        // Stored as text, read back the same; an unknown value reads as the chart's default.
        for t in [Telemetry::ChartDefault, Telemetry::Off] {
            assert_eq!(Telemetry::parse(t.as_str()), t);
        }
        assert_eq!(Telemetry::parse("sometimes"), Telemetry::ChartDefault);
    }

    #[test]
    fn the_control_plane_requests_its_size_and_may_burst_to_a_core() {
        for (cpu_millis, memory_gib, want_limit) in
            [(100, 1, "1000m"), (999, 1, "1000m"), (1_000, 2, "1000m"), (2_500, 4, "2500m")]
        {
            let r = Res { cpu_millis, memory_gib, storage_gib: 5 };
            let v = values(
                &ClusterSpec { resources: r, ..spec(PublicAccess::Disabled) },
                None,
                &settings(),
                AddressRequest::None,
            );
            let res = &v.control_plane.stateful_set.resources;
            assert_eq!(res.requests.cpu, format!("{cpu_millis}m"));
            assert_eq!(res.limits.cpu, want_limit, "{cpu_millis}m");
            assert_eq!(
                (res.requests.memory.clone(), res.limits.memory.clone()),
                (format!("{memory_gib}Gi"), format!("{memory_gib}Gi"))
            );
        }
    }

    #[test]
    fn rendering_is_deterministic_and_carries_resources() {
        let sp = spec(PublicAccess::LoadBalancer { host: host("198.51.100.7") });
        let a = values_yaml(&values(&sp, None, &settings(), AddressRequest::MetalLb));
        let b = values_yaml(&values(&sp, None, &settings(), AddressRequest::MetalLb));
        assert_eq!(a, b);
        assert!(a.contains("cpu: 2000m") && a.contains("memory: 4Gi") && a.contains("size: 20Gi"), "{a}");
        let hc = helm_chart(7, &sp, &a, &SystemSettings::default(), FailurePolicy::Retry);
        assert_eq!(hc["metadata"]["namespace"], "kubebyon-demo");
        assert_eq!(hc["spec"]["targetNamespace"], "kubebyon-demo");
        assert_eq!(hc["spec"]["valuesContent"], a);
        assert_eq!(hc["metadata"]["labels"][CLUSTER_ID_LABEL], "7");
        assert_eq!(hc["spec"]["failurePolicy"], "retry", "a failed upgrade is upgraded again, never reinstalled");
        let hc = helm_chart(7, &sp, &a, &SystemSettings::default(), FailurePolicy::Abort);
        assert_eq!(hc["spec"]["failurePolicy"], "abort", "helm-controller before v0.17.6: never reinstalled either");
    }
}
