//! What a cluster should look like on the host, pure: the vCluster values (only
//! keys the chart's `values.schema.json` has) and the HelmChart carrying them. This
//! is the one place that decides the Service type, `extraSANs`, the provider's
//! address annotation, `loadBalancerClass` and resources. Same input, same bytes:
//! helm-controller upgrades a release only when its config hash changes.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{Value, json};

use crate::domain::cluster::{Cluster, OldEndpoint};
use crate::domain::{ClusterSpec, Host, PublicAccess, SystemSettings};

pub use crate::domain::settings::AddressRequest;

/// The label every host object of the console carries.
pub const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", "kubebyon");
/// The label naming the console's cluster id.
pub const CLUSTER_ID_LABEL: &str = "kubebyon.io/cluster-id";
/// The label naming the console installation that created the object (its
/// id is generated once and kept in the database): only the console's own
/// create writes it, and nothing without it is ever changed or deleted.
pub const INSTALLATION_LABEL: &str = "kubebyon.io/installation";

pub use crate::domain::sans::namespace;

#[derive(Serialize, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Values {
    pub control_plane: ControlPlane,
}

#[derive(Serialize, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ControlPlane {
    pub service: Service,
    pub proxy: Proxy,
    pub stateful_set: StatefulSet,
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
    /// `false` once a migrated cluster's old NodePort endpoint is closed.
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
    pub resources: Resources,
    pub persistence: Persistence,
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
pub struct VolumeClaim {
    pub size: String,
}

/// The host a kubeconfig for this spec will name, if any: the cluster's own, else
/// (NodePort) the admin's NodePort public host.
pub fn public_host<'a>(spec: &'a ClusterSpec, settings: &'a SystemSettings) -> Option<&'a Host> {
    spec.public_access.public_host(settings.nodeport_public_host.as_ref())
}

/// The names the API server certificate is asked to cover beyond vCluster's own
/// (`extraSANs`). vCluster adds the Service's LoadBalancer ingress and, for
/// NodePort, the pod's node IP by itself.
pub fn planned_sans(spec: &ClusterSpec, settings: &SystemSettings) -> Vec<String> {
    public_host(spec, settings).map(|h| vec![h.to_string()]).unwrap_or_default()
}

/// The vCluster values for a spec. Never a `httpsNodePort` (the API server's
/// allocation stays across upgrades, also NodePort → LoadBalancer, which is
/// what keeps a migrated cluster's old endpoint answering), never
/// `spec.loadBalancerIP` (deprecated). A migrated LoadBalancer cluster
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
    if let (PublicAccess::LoadBalancer { .. }, Some(old)) = (&spec.public_access, old) {
        if !old.closed && !extra_sans.contains(&old.host) {
            extra_sans.push(old.host.clone());
        }
        if old.closed && request != AddressRequest::None {
            allocate_node_ports = Some(false);
        }
    }
    let (type_, annotations, class) = match &spec.public_access {
        PublicAccess::Disabled => ("ClusterIP", BTreeMap::new(), None),
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
    let r = spec.resources;
    let quantities = Quantities { cpu: format!("{}m", r.cpu_millis), memory: format!("{}Gi", r.memory_gib) };
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
                resources: Resources { limits: quantities.clone(), requests: quantities },
                persistence: Persistence { volume_claim: VolumeClaim { size: format!("{}Gi", r.storage_gib) } },
            },
        },
    }
}

/// The values as the YAML text of the HelmChart's `valuesContent`.
pub fn values_yaml(values: &Values) -> String {
    // A struct of strings, maps and lists always serialises.
    serde_yaml::to_string(values).unwrap_or_default()
}

/// The whole HelmChart a cluster should have on the host: values rendered
/// for the spec and settings, the admin's chart.
pub fn desired(cluster: &Cluster, settings: &SystemSettings, request: AddressRequest) -> Value {
    let values = values(&cluster.spec, cluster.old_endpoint.as_ref(), settings, request);
    helm_chart(cluster.id, &cluster.spec, &values_yaml(&values), settings)
}

/// The cluster's HelmChart, as a server-side apply body.
pub fn helm_chart(cluster_id: i64, spec: &ClusterSpec, values_content: &str, chart: &SystemSettings) -> Value {
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
            // klipper-helm's `entry` on a failed release: `reinstall` (the
            // default) uninstalls and installs again (a new CA: every
            // kubeconfig broken), `abort` waits for an operator, `retry`
            // upgrades again, so a corrected spec recovers and nothing is
            // reinstalled behind the user's back.
            "failurePolicy": "retry",
        },
    })
}

/// The cluster's namespace `ns`, as the body of its create.
pub fn namespace_object(cluster_id: i64, installation: &str, ns: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": ns,
            "labels": {
                MANAGED_BY.0: MANAGED_BY.1,
                CLUSTER_ID_LABEL: cluster_id.to_string(),
                INSTALLATION_LABEL: installation,
            },
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{ClusterName, Resources as Res};

    fn spec(access: PublicAccess) -> ClusterSpec {
        ClusterSpec { name: ClusterName::parse("demo").unwrap(), resources: Res::default(), public_access: access }
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
    fn rendering_is_deterministic_and_carries_resources() {
        let sp = spec(PublicAccess::LoadBalancer { host: host("198.51.100.7") });
        let a = values_yaml(&values(&sp, None, &settings(), AddressRequest::MetalLb));
        let b = values_yaml(&values(&sp, None, &settings(), AddressRequest::MetalLb));
        assert_eq!(a, b);
        assert!(a.contains("cpu: 2000m") && a.contains("memory: 4Gi") && a.contains("size: 20Gi"), "{a}");
        let hc = helm_chart(7, &sp, &a, &SystemSettings::default());
        assert_eq!(hc["metadata"]["namespace"], "kubebyon-demo");
        assert_eq!(hc["spec"]["targetNamespace"], "kubebyon-demo");
        assert_eq!(hc["spec"]["valuesContent"], a);
        assert_eq!(hc["metadata"]["labels"][CLUSTER_ID_LABEL], "7");
        assert_eq!(hc["spec"]["failurePolicy"], "retry", "a failed upgrade is upgraded again, never reinstalled");
    }
}
