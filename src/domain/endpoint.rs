//! Where a cluster's API server is reached, decided from the spec and what the
//! host cluster reports about the Service. Recomputed as a whole each time, so
//! a mode switch never leaves an old port or endpoint behind.

use std::net::IpAddr;

use super::{Host, PublicAccess};

/// The Service port for https (vCluster chart: 443 → 8443).
pub const HTTPS_PORT: u16 = 443;

/// One `status.loadBalancer.ingress[]` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ingress {
    Ip(IpAddr),
    Hostname(String),
}

/// What the host cluster reports about the cluster's Service.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ServiceObservation {
    pub https_node_port: Option<u16>,
    pub ingress: Vec<Ingress>,
}

/// The observed public access fields, as a whole.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ObservedAccess {
    pub api_endpoint: Option<String>,
    pub public_access_port: Option<u16>,
    /// LoadBalancer mode and the provider has not assigned an address yet.
    pub load_balancer_pending: bool,
}

pub fn observe(access: &PublicAccess, nodeport_public_host: Option<&Host>, svc: &ServiceObservation) -> ObservedAccess {
    match access {
        PublicAccess::Disabled => ObservedAccess::default(),
        PublicAccess::NodePort { host } => {
            let port = svc.https_node_port;
            let host = host.as_ref().or(nodeport_public_host);
            ObservedAccess {
                api_endpoint: host.zip(port).map(|(h, p)| url(&h.url_host(), p)),
                public_access_port: port,
                load_balancer_pending: false,
            }
        }
        PublicAccess::LoadBalancer { host } => {
            let pending = svc.ingress.is_empty();
            ObservedAccess {
                api_endpoint: (!pending).then(|| url(&host.url_host(), HTTPS_PORT)),
                public_access_port: None,
                load_balancer_pending: pending,
            }
        }
    }
}

/// Whether an observed endpoint (and port) can belong to this spec: a
/// LoadBalancer cluster's is `https://<host>:443`; a NodePort cluster's names
/// its own host when it has one and the observed node port; a disabled
/// cluster has none. An observation from before a mode or host change fails.
pub fn fits(access: &PublicAccess, endpoint: &str, port: Option<u16>) -> bool {
    match access {
        PublicAccess::Disabled => false,
        PublicAccess::LoadBalancer { host } => endpoint == url(&host.url_host(), HTTPS_PORT),
        PublicAccess::NodePort { host } => port.is_some_and(|p| match host {
            Some(h) => endpoint == url(&h.url_host(), p),
            None => endpoint.ends_with(&format!(":{p}")),
        }),
    }
}

fn url(host: &str, port: u16) -> String {
    format!("https://{host}:{port}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn svc(node_port: Option<u16>, ingress: Vec<Ingress>) -> ServiceObservation {
        ServiceObservation { https_node_port: node_port, ingress }
    }

    #[test]
    fn endpoint_table() {
        let admin = Host::Ipv4([198, 51, 100, 1].into());
        let own = Host::Dns("np.example.com".into());
        let lb_host = Host::Dns("api.example.com".into());
        let v6 = Host::Ipv6("2001:db8::10".parse().unwrap());
        let lb_ip = vec![Ingress::Ip([10, 0, 0, 50].into())];
        let np = |host: Option<Host>| PublicAccess::NodePort { host };
        let lb = |host: Host| PublicAccess::LoadBalancer { host };
        let obs = |e: Option<&str>, p: Option<u16>, pending| ObservedAccess {
            api_endpoint: e.map(Into::into),
            public_access_port: p,
            load_balancer_pending: pending,
        };
        let cases = [
            // disabled clears everything, whatever the Service still shows
            (PublicAccess::Disabled, Some(&admin), svc(Some(30443), lb_ip.clone()), obs(None, None, false)),
            // nodeport: control_plane_host first, then the admin's public host
            (
                np(Some(own.clone())),
                Some(&admin),
                svc(Some(30443), vec![]),
                obs(Some("https://np.example.com:30443"), Some(30443), false),
            ),
            (
                np(None),
                Some(&admin),
                svc(Some(30443), vec![]),
                obs(Some("https://198.51.100.1:30443"), Some(30443), false),
            ),
            (np(None), None, svc(Some(30443), vec![]), obs(None, Some(30443), false)),
            (np(Some(own.clone())), None, svc(None, vec![]), obs(None, None, false)),
            (
                np(Some(v6.clone())),
                None,
                svc(Some(31000), vec![]),
                obs(Some("https://[2001:db8::10]:31000"), Some(31000), false),
            ),
            // loadbalancer: the host, port 443, never the nodePort the Service keeps
            (
                lb(lb_host.clone()),
                Some(&admin),
                svc(Some(30443), lb_ip.clone()),
                obs(Some("https://api.example.com:443"), None, false),
            ),
            (
                lb(lb_host.clone()),
                None,
                svc(Some(30443), vec![Ingress::Hostname("x.elb.example".into())]),
                obs(Some("https://api.example.com:443"), None, false),
            ),
            (lb(lb_host), None, svc(Some(30443), vec![]), obs(None, None, true)),
            (lb(v6), None, svc(None, lb_ip), obs(Some("https://[2001:db8::10]:443"), None, false)),
        ];
        for (i, (access, admin_host, service, want)) in cases.into_iter().enumerate() {
            assert_eq!(observe(&access, admin_host, &service), want, "case {i}: {access:?}");
        }
    }
}
