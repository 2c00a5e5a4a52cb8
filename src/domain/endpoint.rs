//! Where a cluster's API server is reached, decided from the spec and what the
//! host cluster reports about the Service. Recomputed as a whole each time, so
//! a mode switch never leaves an old port or endpoint behind.

use std::fmt;
use std::net::IpAddr;

use super::{Host, PublicAccess};

/// The Service port for https (vCluster chart: 443 → 8443).
pub(crate) const HTTPS_PORT: u16 = 443;

/// A cluster's public API endpoint, `https://<host>:<port>` with an IPv6 host
/// in brackets: every endpoint the console shows, stores or probes is written
/// by its `Display` and read by [`Endpoint::parse`], nowhere else.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Endpoint {
    pub host: Host,
    pub port: u16,
}

impl Endpoint {
    pub(crate) fn new(host: Host, port: u16) -> Self {
        Self { host, port }
    }

    /// A LoadBalancer cluster's: its host, port 443.
    pub(crate) fn load_balancer(host: Host) -> Self {
        Self::new(host, HTTPS_PORT)
    }

    /// Reads `https://host:port` (a trailing `/` allowed; an IPv6 host only in
    /// brackets); `None` for anything else.
    pub(crate) fn parse(s: &str) -> Option<Self> {
        let rest = s.strip_prefix("https://")?;
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        let (host, port) = rest.rsplit_once(':')?;
        if host.contains(':') && !host.starts_with('[') {
            return None;
        }
        Some(Self::new(Host::parse(host).ok()?, port.parse().ok()?))
    }

    /// `host:port` (an IPv6 host in brackets), as vCluster's `controlPlane.endpoint` takes it.
    pub(crate) fn authority(&self) -> String {
        format!("{}:{}", self.host.url_host(), self.port)
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "https://{}", self.authority())
    }
}

/// One `status.loadBalancer.ingress[]` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Ingress {
    Ip(IpAddr),
    Hostname(String),
}

/// What the host cluster reports about the cluster's Service.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct ServiceObservation {
    pub https_node_port: Option<u16>,
    pub ingress: Vec<Ingress>,
}

/// The observed public access fields, as a whole.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct ObservedAccess {
    pub api_endpoint: Option<String>,
    pub public_access_port: Option<u16>,
    /// LoadBalancer mode and the provider has not assigned an address yet.
    pub load_balancer_pending: bool,
}

pub(crate) fn observe(
    access: &PublicAccess,
    nodeport_public_host: Option<&Host>,
    svc: &ServiceObservation,
) -> ObservedAccess {
    match access {
        PublicAccess::Disabled => ObservedAccess::default(),
        PublicAccess::NodePort { host } => {
            let port = svc.https_node_port;
            let host = host.as_ref().or(nodeport_public_host);
            ObservedAccess {
                api_endpoint: host.zip(port).map(|(h, p)| Endpoint::new(h.clone(), p).to_string()),
                public_access_port: port,
                load_balancer_pending: false,
            }
        }
        // Gateway: the host at 443 through the shared Gateway, known from the
        // spec (the route's and the Gateway's state are the status's to say).
        PublicAccess::Gateway { host } => ObservedAccess {
            api_endpoint: Some(Endpoint::load_balancer(host.clone()).to_string()),
            public_access_port: None,
            load_balancer_pending: false,
        },
        PublicAccess::LoadBalancer { host } => {
            let pending = svc.ingress.is_empty();
            ObservedAccess {
                api_endpoint: (!pending).then(|| Endpoint::load_balancer(host.clone()).to_string()),
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
pub(crate) fn fits(access: &PublicAccess, endpoint: &str, port: Option<u16>) -> bool {
    let Some(seen) = Endpoint::parse(endpoint) else { return false };
    match access {
        PublicAccess::Disabled => false,
        PublicAccess::LoadBalancer { host } | PublicAccess::Gateway { host } => {
            seen == Endpoint::load_balancer(host.clone())
        }
        PublicAccess::NodePort { host } => port.is_some_and(|p| match host {
            Some(h) => seen == Endpoint::new(h.clone(), p),
            None => seen.port == p,
        }),
    }
}

/// The host of an `https://host:port` endpoint, as text (IPv6 without brackets).
pub(crate) fn url_host(endpoint: &str) -> Option<String> {
    Endpoint::parse(endpoint).map(|e| e.host.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoint_hosts() {
        assert_eq!(url_host("https://10.0.0.1:30443").as_deref(), Some("10.0.0.1"));
        assert_eq!(url_host("https://[2001:db8::1]:30443").as_deref(), Some("2001:db8::1"));
        assert_eq!(url_host("https://n.example.com:31000").as_deref(), Some("n.example.com"));
        assert_eq!(url_host("http://x:1"), None);
    }

    fn svc(node_port: Option<u16>, ingress: Vec<Ingress>) -> ServiceObservation {
        ServiceObservation { https_node_port: node_port, ingress }
    }

    #[test]
    fn endpoints_are_written_and_read_in_one_place() {
        let v6 = Host::Ipv6("2001:db8::1".parse().unwrap());
        let parsed = Endpoint::parse("https://[2001:db8::1]:443").unwrap();
        assert_eq!(parsed, Endpoint::load_balancer(v6.clone()));
        assert_eq!(parsed.host.url_host(), "[2001:db8::1]");
        assert_eq!(parsed.to_string(), "https://[2001:db8::1]:443");
        let named = Endpoint::parse("https://api.example.com:6443/").unwrap();
        assert_eq!((named.host.url_host(), named.port), ("api.example.com".into(), 6443));
        for bad in
            ["http://x:1", "https://2001:db8::1:443", "https://a.example", "https://a.example:99999", "https://:443"]
        {
            assert_eq!(Endpoint::parse(bad), None, "{bad}");
        }
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
            // gateway: the host at 443 whatever the (ClusterIP) Service shows
            (
                PublicAccess::Gateway { host: Host::Dns("a.k.test".into()) },
                Some(&admin),
                svc(Some(30443), vec![]),
                obs(Some("https://a.k.test:443"), None, false),
            ),
        ];
        for (i, (access, admin_host, service, want)) in cases.into_iter().enumerate() {
            assert_eq!(observe(&access, admin_host, &service), want, "case {i}: {access:?}");
        }
    }
}
