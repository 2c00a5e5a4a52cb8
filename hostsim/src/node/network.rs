//! kube-proxy and MetalLB's speaker, as far as a client of the host can tell:
//! each NodePort (on every node's InternalIP) and each LoadBalancer ingress
//! address forwards to a **ready** endpoint of the Service (from the EndpointSlices
//! the real endpointslice controller writes from the pods' readiness), and has no
//! listener without one (connection refused). A MetalLB address answers only while
//! an `L2Advertisement` selects its pool (the speaker announces nothing else; the
//! controller allocates regardless), MetalLB `speaker/layer2_controller.go`.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr};

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::ResourceExt;
use serde_json::Value;

use crate::kubeproxy::Rule;

/// MetalLB's view: which pool holds an address, and which pools are advertised.
#[derive(Default, Debug)]
pub struct Advertised {
    /// (pool name, its labels, its addresses as ranges or CIDRs).
    pub pools: Vec<(String, BTreeMap<String, String>, Vec<String>)>,
    /// Each L2Advertisement's pool names and selectors; empty both = every pool.
    pub l2: Vec<Advertisement>,
}

/// An L2Advertisement's pool names and pool label selectors.
pub type Advertisement = (Vec<String>, Vec<BTreeMap<String, String>>);

impl Advertised {
    pub fn from_objects(pools: &[Value], l2: &[Value]) -> Self {
        let pools = pools
            .iter()
            .map(|p| {
                let name = p["metadata"]["name"].as_str().unwrap_or_default().to_owned();
                let labels = serde_json::from_value(p["metadata"]["labels"].clone()).unwrap_or_default();
                let addrs = serde_json::from_value(p["spec"]["addresses"].clone()).unwrap_or_default();
                (name, labels, addrs)
            })
            .collect();
        let l2 = l2
            .iter()
            .map(|a| {
                let names = serde_json::from_value(a["spec"]["ipAddressPools"].clone()).unwrap_or_default();
                let selectors: Vec<Value> =
                    serde_json::from_value(a["spec"]["ipAddressPoolSelectors"].clone()).unwrap_or_default();
                let selectors = selectors
                    .iter()
                    .map(|s| serde_json::from_value(s["matchLabels"].clone()).unwrap_or_default())
                    .collect();
                (names, selectors)
            })
            .collect();
        Self { pools, l2 }
    }

    /// Whether the speaker answers for this address.
    pub fn announces(&self, ip: Ipv4Addr) -> bool {
        let Some((name, labels, _)) = self.pools.iter().find(|(_, _, a)| a.iter().any(|r| range_contains(r, ip)))
        else {
            return false;
        };
        self.l2.iter().any(|(names, selectors)| {
            (names.is_empty() && selectors.is_empty())
                || names.contains(name)
                || selectors.iter().any(|sel| sel.iter().all(|(k, v)| labels.get(k) == Some(v)))
        })
    }
}

/// `A-B` or `A/len` or a single address.
fn range_contains(r: &str, ip: Ipv4Addr) -> bool {
    let r = r.trim();
    if let Some((a, b)) = r.split_once('-') {
        return match (a.trim().parse::<Ipv4Addr>(), b.trim().parse::<Ipv4Addr>()) {
            (Ok(a), Ok(b)) => a <= ip && ip <= b,
            _ => false,
        };
    }
    if let Some((net, len)) = r.split_once('/') {
        return match (net.parse::<Ipv4Addr>(), len.parse::<u32>()) {
            (Ok(net), Ok(len)) if len <= 32 => {
                let mask = if len == 0 { 0 } else { u32::MAX << (32 - len) };
                u32::from(net) & mask == u32::from(ip) & mask
            }
            _ => false,
        };
    }
    r.parse::<Ipv4Addr>() == Ok(ip)
}

/// Forwarding rules for every Service with a ready endpoint; `local` maps a pod
/// IP to the address its container really listens on.
pub fn rules(
    services: &[Service],
    slices: &[EndpointSlice],
    nodes: &[Ipv4Addr],
    mlb: &Advertised,
    local: &dyn Fn(Ipv4Addr) -> Option<Ipv4Addr>,
) -> Vec<Rule> {
    let mut rules = Vec::new();
    for svc in services {
        let ns = svc.namespace().unwrap_or_default();
        let name = svc.name_any();
        let Some(spec) = &svc.spec else { continue };
        let kind = spec.type_.as_deref().unwrap_or("ClusterIP");
        if !matches!(kind, "NodePort" | "LoadBalancer") {
            continue;
        }
        let mine: Vec<&EndpointSlice> = slices
            .iter()
            .filter(|s| {
                s.namespace().as_deref() == Some(ns.as_str())
                    && s.labels().get("kubernetes.io/service-name") == Some(&name)
            })
            .collect();
        let ingress: Vec<Ipv4Addr> = crate::lb::ingress_ips(svc).into_iter().filter(|ip| mlb.announces(*ip)).collect();
        for port in spec.ports.iter().flatten() {
            let Some(backend) = ready_backend(&mine, port.name.as_deref(), local) else { continue };
            let service = format!("{ns}/{name}");
            let mut listen = Vec::new();
            if let Some(np) = port.node_port.and_then(|p| u16::try_from(p).ok()).filter(|p| *p > 0) {
                listen.extend(nodes.iter().map(|n| SocketAddr::from((*n, np))));
            }
            if kind == "LoadBalancer"
                && let Ok(p) = u16::try_from(port.port)
            {
                listen.extend(ingress.iter().map(|ip| SocketAddr::from((*ip, p))));
            }
            rules.extend(listen.into_iter().map(|listen| Rule { listen, backend, service: service.clone() }));
        }
    }
    rules
}

/// The first ready endpoint for the Service port named `port` (the slice's port
/// of the same name carries the resolved target port).
pub(crate) fn ready_backend(
    slices: &[&EndpointSlice],
    port: Option<&str>,
    local: &dyn Fn(Ipv4Addr) -> Option<Ipv4Addr>,
) -> Option<SocketAddr> {
    for s in slices {
        let Some(p) = s.ports.iter().flatten().find(|p| p.name.as_deref().unwrap_or("") == port.unwrap_or("")) else {
            continue;
        };
        let Some(target) = p.port.and_then(|p| u16::try_from(p).ok()) else { continue };
        for e in s.endpoints.iter().flatten() {
            let ready = e.conditions.as_ref().and_then(|c| c.ready).unwrap_or(false);
            let ip = e.addresses.first().and_then(|a| a.parse::<Ipv4Addr>().ok()).and_then(local);
            if let (true, Some(ip)) = (ready, ip) {
                return Some(SocketAddr::from((ip, target)));
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_speaker_announces_only_advertised_pools() {
        let pools = [
            json!({"metadata": {"name": "a", "labels": {"tier": "x"}}, "spec": {"addresses": ["127.1.2.100-127.1.2.110"]}}),
            json!({"metadata": {"name": "b"}, "spec": {"addresses": ["127.1.3.0/24"]}}),
        ];
        let ip_a: Ipv4Addr = "127.1.2.105".parse().unwrap();
        let ip_b: Ipv4Addr = "127.1.3.9".parse().unwrap();
        let none = Advertised::from_objects(&pools, &[]);
        assert!(!none.announces(ip_a) && !none.announces(ip_b));
        let all = Advertised::from_objects(&pools, &[json!({"spec": {}})]);
        assert!(all.announces(ip_a) && all.announces(ip_b));
        let by_name = Advertised::from_objects(&pools, &[json!({"spec": {"ipAddressPools": ["b"]}})]);
        assert!(!by_name.announces(ip_a) && by_name.announces(ip_b));
        let by_label = Advertised::from_objects(
            &pools,
            &[json!({"spec": {"ipAddressPoolSelectors": [{"matchLabels": {"tier": "x"}}]}})],
        );
        assert!(by_label.announces(ip_a) && !by_label.announces(ip_b));
        assert!(!all.announces("10.0.0.1".parse().unwrap()));
    }
}
