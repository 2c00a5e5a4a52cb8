//! What the create and edit forms show before anything is stored: the names
//! the cluster's API server certificate will cover, and whether a change of
//! public access breaks kubeconfigs already handed out.
//!
//! Mirrors vCluster's `pkg/server/cert` (`GenAPIServerServingCerts`,
//! `getExtraSANs`; see docs/architecture.md): fixed in-cluster names, the
//! release name and `<name>.<namespace>`, the Service's cluster IP and every
//! LoadBalancer ingress address, the node IP when the Service is a NodePort
//! (none for a gateway cluster, whose Service stays ClusterIP),
//! and `controlPlane.proxy.extraSANs` — where the console puts the public host
//! (`render::values`). Pure: the forms' island runs it in the browser too.

use super::host_objects::namespace;
use super::{Host, PublicAccess};

/// Names every API server certificate covers (vCluster's fixed in-cluster names).
pub(crate) const IN_CLUSTER: [&str; 6] = [
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
    "localhost",
    "127.0.0.1",
];

/// Names vCluster adds once the host knows them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AddedName {
    /// The address the LoadBalancer provider gives the Service.
    LoadBalancerAddress,
    /// The IP of the node the vCluster pod runs on (NodePort only).
    NodeAddress,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PlannedSans {
    /// `extraSANs`: the host kubeconfigs will name (the cluster's own, else
    /// for NodePort the admin's NodePort public host).
    pub public_host: Option<Host>,
    pub assigned: Option<AddedName>,
    /// Always covered: in-cluster names and the cluster's Service names.
    /// (The Service's cluster IP and the pod IP are too.)
    pub fixed: Vec<String>,
}

/// The names for a cluster called `name` (may still be empty while typing).
pub(crate) fn planned(name: &str, access: &PublicAccess, nodeport_public_host: Option<&Host>) -> PlannedSans {
    let name = name.trim();
    let mut fixed: Vec<String> = IN_CLUSTER.map(String::from).into();
    if !name.is_empty() {
        fixed.push(name.to_owned());
        fixed.push(format!("{name}.{}", namespace(name)));
    }
    let assigned = match access {
        // Gateway: the Service stays ClusterIP; only the host (SNI) is public.
        PublicAccess::Disabled | PublicAccess::Gateway { .. } => None,
        PublicAccess::NodePort { .. } => Some(AddedName::NodeAddress),
        PublicAccess::LoadBalancer { .. } => Some(AddedName::LoadBalancerAddress),
    };
    PlannedSans { public_host: access.public_host(nodeport_public_host).cloned(), assigned, fixed }
}

/// Whether changing public access from `current` to `planned` stops
/// kubeconfigs already downloaded from working: they name the current
/// endpoint, which goes away when access is turned off, the port changes
/// (NodePort port ↔ 443) or the public host changes. LoadBalancer ↔ gateway
/// with the same host keeps `https://<host>:443` and the CA (a values
/// upgrade keeps it): once DNS points at the new address, the files work.
pub(crate) fn breaks_kubeconfigs(
    current: &PublicAccess,
    planned: &PublicAccess,
    nodeport_public_host: Option<&Host>,
) -> bool {
    let port_443 = |a: &PublicAccess| matches!(a, PublicAccess::LoadBalancer { .. } | PublicAccess::Gateway { .. });
    let same_port = current.mode() == planned.mode() || (port_443(current) && port_443(planned));
    current.is_enabled()
        && (!same_port || current.public_host(nodeport_public_host) != planned.public_host(nodeport_public_host))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(s: &str) -> Host {
        Host::parse(s).unwrap()
    }

    /// Access, the admin's NodePort host, then the public host and assigned name wanted.
    type Case<'a> = (PublicAccess, Option<&'a Host>, Option<Host>, Option<AddedName>);

    #[test]
    fn planned_names_follow_the_mode_and_host() {
        let np_default = host("203.0.113.1");
        let cases: Vec<Case<'_>> = vec![
            (PublicAccess::Disabled, Some(&np_default), None, None),
            (PublicAccess::NodePort { host: None }, None, None, Some(AddedName::NodeAddress)),
            (
                PublicAccess::NodePort { host: None },
                Some(&np_default),
                Some(np_default.clone()),
                Some(AddedName::NodeAddress),
            ),
            (
                PublicAccess::NodePort { host: Some(host("n.example.com")) },
                Some(&np_default),
                Some(host("n.example.com")),
                Some(AddedName::NodeAddress),
            ),
            (
                PublicAccess::LoadBalancer { host: host("api.example.com") },
                Some(&np_default),
                Some(host("api.example.com")),
                Some(AddedName::LoadBalancerAddress),
            ),
            (PublicAccess::Gateway { host: host("a.k.test") }, Some(&np_default), Some(host("a.k.test")), None),
        ];
        for (access, np, public, assigned) in cases {
            let p = planned("demo", &access, np);
            assert_eq!((p.public_host, p.assigned), (public, assigned), "{access:?}");
            assert!(p.fixed.contains(&"demo.kubebyon-demo".to_string()));
            assert!(p.fixed.contains(&"kubernetes.default.svc.cluster.local".to_string()));
        }
        assert!(!planned("  ", &PublicAccess::Disabled, None).fixed.iter().any(|n| n.contains("kubebyon-")));
    }

    #[test]
    fn which_changes_break_kubeconfigs() {
        let np_default = host("203.0.113.1");
        let np = |h: Option<&str>| PublicAccess::NodePort { host: h.map(host) };
        let lb = |h: &str| PublicAccess::LoadBalancer { host: host(h) };
        let gw = |h: &str| PublicAccess::Gateway { host: host(h) };
        let off = PublicAccess::Disabled;
        let cases = [
            (off.clone(), lb("a.example.com"), false),
            (off.clone(), off.clone(), false),
            (np(None), np(None), false),
            (np(None), np(Some("203.0.113.1")), false),
            (np(None), np(Some("203.0.113.2")), true),
            (np(None), off.clone(), true),
            (np(None), lb("203.0.113.1"), true),
            (lb("a.example.com"), lb("a.example.com"), false),
            (lb("a.example.com"), lb("b.example.com"), true),
            (lb("a.example.com"), np(Some("a.example.com")), true),
            (lb("a.example.com"), off.clone(), true),
            (lb("a.example.com"), gw("a.example.com"), false),
            (gw("a.example.com"), lb("a.example.com"), false),
            (lb("198.51.100.1"), gw("a.example.com"), true),
            (np(None), gw("203.0.113.1.example"), true),
            (gw("a.example.com"), gw("b.example.com"), true),
            (gw("a.example.com"), off, true),
        ];
        for (current, planned, breaks) in cases {
            assert_eq!(breaks_kubeconfigs(&current, &planned, Some(&np_default)), breaks, "{current:?} -> {planned:?}");
        }
    }
}
