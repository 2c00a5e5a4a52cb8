//! MetalLB's configuration as the admin writes it: an address pool given on the
//! command line (`--pool`) becomes an `IPAddressPool` object, which the real
//! MetalLB controller allocates from. Pure; [`crate::node::seed_pools`] writes them.

use std::net::Ipv4Addr;
use std::str::FromStr;

use k8s_openapi::api::core::v1::Service;

/// The namespace MetalLB reads its configuration from.
pub const METALLB_NAMESPACE: &str = "metallb-system";

/// The IPv4 addresses in a Service's `status.loadBalancer.ingress`.
pub fn ingress_ips(svc: &Service) -> Vec<Ipv4Addr> {
    let ingress = svc.status.as_ref().and_then(|s| s.load_balancer.as_ref()).and_then(|l| l.ingress.as_ref());
    ingress.map(|i| i.iter().filter_map(|i| i.ip.as_deref()?.parse().ok()).collect()).unwrap_or_default()
}

/// An address pool (MetalLB `IPAddressPool`): a range of addresses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pool {
    pub name: String,
    pub first: Ipv4Addr,
    pub last: Ipv4Addr,
    /// `autoAssign: false` pools serve only Services that ask for them.
    pub auto_assign: bool,
}

impl FromStr for Pool {
    type Err = String;

    /// `NAME=FIRST[-LAST][,noauto]`, e.g. `default=127.0.0.200-127.0.0.239`.
    fn from_str(s: &str) -> Result<Self, String> {
        let (name, rest) = s.split_once('=').ok_or(format!("pool {s:?}: expected NAME=RANGE"))?;
        let mut parts = rest.split(',');
        let range = parts.next().unwrap_or_default();
        let mut auto_assign = true;
        for opt in parts {
            match opt {
                "noauto" => auto_assign = false,
                _ => return Err(format!("pool {name}: unknown option {opt:?}")),
            }
        }
        let (first, last) = range.split_once('-').unwrap_or((range, range));
        let parse = |a: &str| a.trim().parse::<Ipv4Addr>().map_err(|e| format!("pool {name}: {a:?}: {e}"));
        let (first, last) = (parse(first)?, parse(last)?);
        if name.is_empty() || last < first {
            return Err(format!("pool {s:?}: bad name or range"));
        }
        Ok(Self { name: name.to_owned(), first, last, auto_assign })
    }
}

impl Pool {
    /// The `IPAddressPool` object (metallb.io/v1beta1) for this pool.
    pub fn to_object(&self) -> serde_json::Value {
        serde_json::json!({
            "apiVersion": "metallb.io/v1beta1",
            "kind": "IPAddressPool",
            "metadata": {"name": self.name, "namespace": METALLB_NAMESPACE},
            "spec": {"addresses": [format!("{}-{}", self.first, self.last)], "autoAssign": self.auto_assign},
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pools_parse_into_ip_address_pools() {
        let pool: Pool = "tiny=127.0.0.20,noauto".parse().unwrap();
        let obj = pool.to_object();
        assert_eq!(obj["spec"]["addresses"][0], "127.0.0.20-127.0.0.20");
        assert_eq!(obj["spec"]["autoAssign"], false);
        let pool: Pool = "default=127.0.0.10-127.0.0.11".parse().unwrap();
        assert_eq!(
            pool.to_object()["spec"],
            serde_json::json!({"addresses": ["127.0.0.10-127.0.0.11"], "autoAssign": true})
        );
        for bad in ["x", "x=1.2.3", "x=127.0.0.5-127.0.0.1", "x=127.0.0.1,bogus", "=127.0.0.1"] {
            assert!(bad.parse::<Pool>().is_err(), "{bad}");
        }
    }

    #[test]
    fn ingress_addresses_are_read_from_the_status() {
        let svc: Service = serde_json::from_value(serde_json::json!({
            "status": {"loadBalancer": {"ingress": [{"ip": "127.0.0.50"}, {"hostname": "lb.example.test"}]}}
        }))
        .unwrap();
        assert_eq!(ingress_ips(&svc), vec![Ipv4Addr::new(127, 0, 0, 50)]);
    }
}
