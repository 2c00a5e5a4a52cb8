//! The LoadBalancer provider's decisions, MetalLB-style: address pools, the
//! `metallb.io/*` annotations and `loadBalancerClass`. Pure; `sim` does the I/O.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::str::FromStr;

use k8s_openapi::api::core::v1::Service;

/// The IPv4 addresses in a Service's `status.loadBalancer.ingress`.
pub fn ingress_ips(svc: &Service) -> Vec<Ipv4Addr> {
    let ingress = svc.status.as_ref().and_then(|s| s.load_balancer.as_ref()).and_then(|l| l.ingress.as_ref());
    ingress.map(|i| i.iter().filter_map(|i| i.ip.as_deref()?.parse().ok()).collect()).unwrap_or_default()
}

/// An address pool (MetalLB `IPAddressPool`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pool {
    pub name: String,
    pub addresses: Vec<Ipv4Addr>,
    /// `autoAssign: false` pools serve only Services that ask for them.
    pub auto_assign: bool,
    /// Answer with a hostname `<a-b-c-d>.<suffix>` instead of the address, as
    /// cloud providers like AWS do (the name is not in any DNS: clients connect to
    /// the address and verify the name, e.g. with kubeconfig `tls-server-name`).
    pub hostname_suffix: Option<String>,
}

impl FromStr for Pool {
    type Err = String;

    /// `NAME=FIRST[-LAST][,noauto][,hostname=SUFFIX]`, e.g. `default=127.0.0.200-127.0.0.239`.
    fn from_str(s: &str) -> Result<Self, String> {
        let (name, rest) = s.split_once('=').ok_or(format!("pool {s:?}: expected NAME=RANGE"))?;
        let mut parts = rest.split(',');
        let range = parts.next().unwrap_or_default();
        let mut auto_assign = true;
        let mut hostname_suffix = None;
        for opt in parts {
            match opt.split_once('=') {
                None if opt == "noauto" => auto_assign = false,
                Some(("hostname", suffix)) if !suffix.is_empty() => hostname_suffix = Some(suffix.to_owned()),
                _ => return Err(format!("pool {name}: unknown option {opt:?}")),
            }
        }
        let (first, last) = range.split_once('-').unwrap_or((range, range));
        let parse = |a: &str| a.trim().parse::<Ipv4Addr>().map_err(|e| format!("pool {name}: {a:?}: {e}"));
        let (first, last) = (u32::from(parse(first)?), u32::from(parse(last)?));
        if last < first || last - first > 4096 {
            return Err(format!("pool {name}: bad range"));
        }
        Ok(Self {
            name: name.to_owned(),
            addresses: (first..=last).map(Ipv4Addr::from).collect(),
            auto_assign,
            hostname_suffix,
        })
    }
}

/// Annotation on an `IPAddressPool` making the provider answer with hostnames
/// (hostsim's stand-in for a cloud load balancer such as AWS's; not MetalLB's).
pub const HOSTNAME_ANNOTATION: &str = "hostsim.kubebyon.dev/hostname-suffix";

/// The namespace MetalLB reads its configuration from.
pub const METALLB_NAMESPACE: &str = "metallb-system";

impl Pool {
    /// The `IPAddressPool` object (metallb.io/v1beta1) for this pool.
    pub fn to_object(&self) -> serde_json::Value {
        let (first, last) = (
            self.addresses.first().copied().unwrap_or(Ipv4Addr::UNSPECIFIED),
            self.addresses.last().copied().unwrap_or(Ipv4Addr::UNSPECIFIED),
        );
        let mut obj = serde_json::json!({
            "apiVersion": "metallb.io/v1beta1",
            "kind": "IPAddressPool",
            "metadata": {"name": self.name, "namespace": METALLB_NAMESPACE},
            "spec": {"addresses": [format!("{first}-{last}")], "autoAssign": self.auto_assign},
        });
        if let Some(suffix) = &self.hostname_suffix {
            obj["metadata"]["annotations"] = serde_json::json!({HOSTNAME_ANNOTATION: suffix});
        }
        obj
    }

    /// Reads an `IPAddressPool`: `addresses` as `a-b` ranges or CIDRs (IPv4; IPv6
    /// entries are skipped, as this provider has no IPv6), `autoAssign` default true.
    pub fn from_object(obj: &serde_json::Value) -> Result<Self, String> {
        let name = obj["metadata"]["name"].as_str().unwrap_or_default().to_owned();
        let spec = &obj["spec"];
        let mut addresses = Vec::new();
        for entry in spec["addresses"].as_array().into_iter().flatten() {
            let text = entry.as_str().unwrap_or_default().trim();
            if text.contains(':') {
                continue;
            }
            let (first, last) = if let Some((a, b)) = text.split_once('-') {
                let parse = |x: &str| {
                    x.trim().parse::<Ipv4Addr>().map_err(|_| format!("invalid CIDR {text:?} in pool {name:?}"))
                };
                (u32::from(parse(a)?), u32::from(parse(b)?))
            } else {
                let (ip, bits) = text.split_once('/').unwrap_or((text, "32"));
                let ip: Ipv4Addr = ip.parse().map_err(|_| format!("invalid CIDR {text:?} in pool {name:?}"))?;
                let bits: u32 =
                    bits.parse().ok().filter(|b| *b <= 32).ok_or(format!("invalid CIDR {text:?} in pool {name:?}"))?;
                let mask = if bits == 0 { 0 } else { u32::MAX << (32 - bits) };
                let base = u32::from(ip) & mask;
                (base, base | !mask)
            };
            if last < first || last - first > 65_536 {
                return Err(format!("invalid IP range {text:?} in pool {name:?}"));
            }
            addresses.extend((first..=last).map(Ipv4Addr::from));
        }
        if addresses.is_empty() {
            return Err(format!("pool {name:?}: pool has no prefixes defined"));
        }
        Ok(Self {
            auto_assign: spec["autoAssign"].as_bool().unwrap_or(true),
            hostname_suffix: obj["metadata"]["annotations"][HOSTNAME_ANNOTATION].as_str().map(str::to_owned),
            name,
            addresses,
        })
    }
}

/// The provider's configuration.
#[derive(Clone, Debug)]
pub struct Config {
    pub pools: Vec<Pool>,
    /// MetalLB's `--lb-class`: with it only that class is served, without it only
    /// Services without a class.
    pub class: Option<String>,
}

/// What the provider sees of one LoadBalancer Service.
#[derive(Clone, Debug, Default)]
pub struct Request<'a> {
    pub namespace: &'a str,
    pub name: &'a str,
    pub class: Option<&'a str>,
    pub load_balancer_ip: Option<&'a str>,
    /// `metallb.io/loadBalancerIPs` (or the old `metallb.universe.tf/` prefix).
    pub ips_annotation: Option<&'a str>,
    /// `metallb.io/address-pool`.
    pub pool_annotation: Option<&'a str>,
    /// The ingress IP it already has, if any.
    pub current: Option<Ipv4Addr>,
    /// How it may share an address with others.
    pub sharing: Sharing,
}

/// What MetalLB compares before two Services share an address
/// (`internal/allocator/allocator.go` `sharingOK`, `checkSharing`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Sharing {
    /// `metallb.io/allow-shared-ip`; empty = shares with nobody.
    pub key: String,
    /// With `externalTrafficPolicy: Local`, the selector (`k=v,…`); else empty.
    pub backend: String,
    /// `(protocol, port)` of each Service port, e.g. `("TCP", 443)`.
    pub ports: Vec<(String, i32)>,
}

/// A Service holding an address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Holder {
    /// `namespace/name`.
    pub service: String,
    pub sharing: Sharing,
}

/// Addresses in use and who holds them.
pub type InUse = BTreeMap<Ipv4Addr, Vec<Holder>>;

/// The outcome for one Service; every failure leaves it pending.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    Assign(Ipv4Addr),
    /// Another provider's class: MetalLB only logs this (no Event, no status).
    NotServed,
    /// An Event's reason and message, as MetalLB words them.
    Fail {
        reason: &'static str,
        message: String,
    },
}

/// Whether `svc` may use `ip` given who holds it; MetalLB's words when not.
pub fn check_sharing(ip: Ipv4Addr, svc: &str, sharing: &Sharing, in_use: &InUse) -> Result<(), String> {
    let others: Vec<&Holder> = in_use.get(&ip).into_iter().flatten().filter(|h| h.service != svc).collect();
    if others.is_empty() {
        return Ok(());
    }
    let compatible = others.iter().all(|h| {
        !h.sharing.key.is_empty()
            && !sharing.key.is_empty()
            && h.sharing.key == sharing.key
            && h.sharing.backend == sharing.backend
    });
    if !compatible {
        let names: Vec<&str> = others.iter().map(|h| h.service.as_str()).collect();
        return Err(format!("can't change sharing key for \"{svc}\", address also in use by {}", names.join(",")));
    }
    for (proto, port) in &sharing.ports {
        if others.iter().any(|h| h.sharing.ports.contains(&(proto.clone(), *port))) {
            return Err(format!("port {proto}/{port} is already in use on \"{ip}\""));
        }
    }
    Ok(())
}

impl Config {
    pub fn contains(&self, ip: Ipv4Addr) -> bool {
        self.pools.iter().any(|p| p.addresses.contains(&ip))
    }

    /// The pool an address belongs to.
    pub fn pool_of(&self, ip: Ipv4Addr) -> Option<&Pool> {
        self.pools.iter().find(|p| p.addresses.contains(&ip))
    }

    /// The `status.loadBalancer.ingress` entry announcing `ip`.
    pub fn ingress_for(&self, ip: Ipv4Addr) -> serde_json::Value {
        match self.pool_of(ip).and_then(|p| p.hostname_suffix.as_deref()) {
            Some(suffix) => {
                let dashed = ip.to_string().replace('.', "-");
                serde_json::json!({"hostname": format!("{dashed}.{suffix}")})
            }
            None => serde_json::json!({"ip": ip.to_string(), "ipMode": "VIP"}),
        }
    }

    /// The addresses a Service's ingress stands for: its IPs, and the address
    /// behind each hostname this provider gave out.
    pub fn addresses(&self, svc: &Service) -> Vec<Ipv4Addr> {
        let mut out = ingress_ips(svc);
        let ingress = svc.status.as_ref().and_then(|s| s.load_balancer.as_ref()).and_then(|l| l.ingress.as_ref());
        for host in ingress.into_iter().flatten().filter_map(|i| i.hostname.as_deref()) {
            let decoded = host.split_once('.').and_then(|(dashed, suffix)| {
                let ip: Ipv4Addr = dashed.replace('-', ".").parse().ok()?;
                let pool = self.pool_of(ip)?;
                (pool.hostname_suffix.as_deref() == Some(suffix)).then_some(ip)
            });
            out.extend(decoded);
        }
        out
    }

    /// Decides one Service; `in_use` holds the addresses other Services have.
    /// Mirrors MetalLB's `controller/service.go` and `internal/allocator`.
    pub fn decide(&self, req: &Request<'_>, in_use: &InUse) -> Decision {
        if req.class != self.class.as_deref() {
            return Decision::NotServed;
        }
        let key = format!("{}/{}", req.namespace, req.name);
        let fail = |message: String| Decision::Fail {
            reason: "AllocationFailed",
            message: format!("Failed to allocate IP for \"{key}\": {message}"),
        };
        let requested: Result<Vec<Ipv4Addr>, String> = match (req.ips_annotation, req.load_balancer_ip) {
            (Some(_), Some(ip)) if !ip.is_empty() => {
                Err("service can not have both metallb.io/loadBalancerIPs and svc.Spec.LoadBalancerIP".into())
            }
            (Some(list), _) => list
                .split(',')
                .map(str::trim)
                .map(|a| a.parse().map_err(|_| format!("invalid metallb.io/loadBalancerIPs: {list:?}")))
                .collect(),
            (None, Some(ip)) if !ip.is_empty() => {
                ip.parse().map(|ip| vec![ip]).map_err(|_| format!("invalid spec.loadBalancerIP {ip:?}"))
            }
            _ => Ok(vec![]),
        };
        let requested = match requested {
            Ok(r) => r,
            Err(e) => return fail(e),
        };
        let pools: Vec<&Pool> = match req.pool_annotation {
            Some(name) => match self.pools.iter().find(|p| p.name == name) {
                Some(p) => vec![p],
                None => return fail(format!("unknown pool {name:?}")),
            },
            // Requested addresses may come from any pool (autoAssign is not checked).
            None if !requested.is_empty() => self.pools.iter().collect(),
            None => self.pools.iter().filter(|p| p.auto_assign).collect(),
        };
        if let Some(ip) = requested.first().copied() {
            if !pools.iter().any(|p| p.addresses.contains(&ip)) {
                if req.pool_annotation.is_some() && self.contains(ip) {
                    return fail(format!(
                        "requested loadBalancer IP(s) [\"{ip}\"] is not compatible with requested address pool {}",
                        req.pool_annotation.unwrap_or_default()
                    ));
                }
                return fail(format!("[\"{ip}\"] is not allowed in config"));
            }
            return match check_sharing(ip, &key, &req.sharing, in_use) {
                Ok(()) => Decision::Assign(ip),
                Err(e) => fail(e),
            };
        }
        // An existing allocation is kept when it is still allowed.
        if let Some(cur) = req.current
            && pools.iter().any(|p| p.addresses.contains(&cur))
            && check_sharing(cur, &key, &req.sharing, in_use).is_ok()
        {
            return Decision::Assign(cur);
        }
        // The lowest address that is free or compatibly shared (`getIPFromCIDR`).
        let found = pools
            .iter()
            .flat_map(|p| p.addresses.iter())
            .find(|ip| check_sharing(**ip, &key, &req.sharing, in_use).is_ok());
        match (found, req.pool_annotation) {
            (Some(ip), _) => Decision::Assign(*ip),
            (None, Some(pool)) => fail(format!("no available IPs in pool {pool}")),
            (None, None) => fail("no available IPs".into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> Config {
        Config {
            pools: vec!["default=127.0.0.10-127.0.0.11".parse().unwrap(), "tiny=127.0.0.20,noauto".parse().unwrap()],
            class: None,
        }
    }

    fn req<'a>() -> Request<'a> {
        Request { namespace: "ns", name: "svc", ..Default::default() }
    }

    fn ip(s: &str) -> Ipv4Addr {
        s.parse().unwrap()
    }

    fn held(ips: &[&str]) -> InUse {
        ips.iter().map(|a| (ip(a), vec![Holder { service: format!("ns/{a}"), sharing: Sharing::default() }])).collect()
    }

    fn fail_message(d: Decision) -> String {
        match d {
            Decision::Fail { reason, message } => {
                assert_eq!(reason, "AllocationFailed");
                message
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn allocates_first_free_from_auto_pools_and_keeps_current() {
        let c = cfg();
        assert_eq!(c.decide(&req(), &held(&["127.0.0.10"])), Decision::Assign(ip("127.0.0.11")));
        let keep = Request { current: Some(ip("127.0.0.10")), ..req() };
        assert_eq!(c.decide(&keep, &InUse::new()), Decision::Assign(ip("127.0.0.10")));
    }

    #[test]
    fn failures_are_worded_like_metallb() {
        let c = cfg();
        let prefix = "Failed to allocate IP for \"ns/svc\": ";
        for (r, used, want) in [
            (req(), held(&["127.0.0.10", "127.0.0.11"]), "no available IPs"),
            (
                Request { pool_annotation: Some("tiny"), ..req() },
                held(&["127.0.0.20"]),
                "no available IPs in pool tiny",
            ),
            (Request { pool_annotation: Some("nope"), ..req() }, InUse::new(), "unknown pool \"nope\""),
            (
                Request { ips_annotation: Some("10.0.0.1"), ..req() },
                InUse::new(),
                "[\"10.0.0.1\"] is not allowed in config",
            ),
            (
                Request { ips_annotation: Some("127.0.0.10"), load_balancer_ip: Some("127.0.0.10"), ..req() },
                InUse::new(),
                "service can not have both metallb.io/loadBalancerIPs and svc.Spec.LoadBalancerIP",
            ),
            (Request { ips_annotation: Some("x"), ..req() }, InUse::new(), "invalid metallb.io/loadBalancerIPs: \"x\""),
            (
                Request { ips_annotation: Some("127.0.0.10"), ..req() },
                held(&["127.0.0.10"]),
                "can't change sharing key for \"ns/svc\", address also in use by ns/127.0.0.10",
            ),
        ] {
            assert_eq!(fail_message(c.decide(&r, &used)), format!("{prefix}{want}"), "{r:?}");
        }
    }

    #[test]
    fn annotations_pick_pool_or_address() {
        let c = cfg();
        let by_pool = Request { pool_annotation: Some("tiny"), ..req() };
        assert_eq!(c.decide(&by_pool, &InUse::new()), Decision::Assign(ip("127.0.0.20")));
        // autoAssign does not apply to requested addresses.
        let by_ip = Request { ips_annotation: Some("127.0.0.20"), ..req() };
        assert_eq!(c.decide(&by_ip, &InUse::new()), Decision::Assign(ip("127.0.0.20")));
    }

    #[test]
    fn sharing_follows_metallb_rules() {
        let share = |key: &str, backend: &str, ports: &[i32]| Sharing {
            key: key.into(),
            backend: backend.into(),
            ports: ports.iter().map(|p| ("TCP".to_owned(), *p)).collect(),
        };
        let a = ip("127.0.0.10");
        let in_use: InUse = [(a, vec![Holder { service: "ns/a".into(), sharing: share("k", "", &[443]) }])].into();
        let ok = |s: Sharing| check_sharing(a, "ns/b", &s, &in_use);
        assert_eq!(ok(share("k", "", &[8443])), Ok(()));
        assert_eq!(ok(share("k", "", &[443])), Err("port TCP/443 is already in use on \"127.0.0.10\"".into()));
        let key_err = Err("can't change sharing key for \"ns/b\", address also in use by ns/a".to_owned());
        assert_eq!(ok(share("other", "", &[8443])), key_err);
        assert_eq!(ok(share("", "", &[8443])), key_err);
        assert_eq!(ok(share("k", "app=x", &[8443])), key_err, "Local with another selector");
        // Its own address is always its own.
        assert_eq!(check_sharing(a, "ns/a", &share("", "", &[443]), &in_use), Ok(()));
        // Auto-assignment reuses a compatibly shared address before a free one.
        let r = Request { sharing: share("k", "", &[8443]), ..req() };
        assert_eq!(cfg().decide(&r, &in_use), Decision::Assign(a));
    }

    #[test]
    fn class_must_match() {
        let c = cfg();
        let other = Request { class: Some("example.com/lb"), ..req() };
        assert_eq!(c.decide(&other, &InUse::new()), Decision::NotServed);
        let c = Config { class: Some("example.com/lb".into()), ..cfg() };
        assert_eq!(c.decide(&req(), &InUse::new()), Decision::NotServed);
        assert!(matches!(c.decide(&other, &InUse::new()), Decision::Assign(_)));
    }

    #[test]
    fn pool_syntax_errors_are_reported() {
        assert!("x".parse::<Pool>().is_err());
        assert!("x=1.2.3".parse::<Pool>().is_err());
        assert!("x=127.0.0.5-127.0.0.1".parse::<Pool>().is_err());
        assert!("x=127.0.0.1,bogus".parse::<Pool>().is_err());
        assert!("x=127.0.0.1,hostname=".parse::<Pool>().is_err());
    }

    #[test]
    fn pools_round_trip_through_ip_address_pool_objects() {
        for text in ["default=127.0.0.10-127.0.0.11", "tiny=127.0.0.20,noauto", "aws=127.0.0.50,noauto,hostname=lb.x"] {
            let pool: Pool = text.parse().unwrap();
            assert_eq!(Pool::from_object(&pool.to_object()), Ok(pool), "{text}");
        }
        let cidr = serde_json::json!({"metadata": {"name": "c"}, "spec": {"addresses": ["10.0.0.0/30", "fd00::/64"]}});
        let pool = Pool::from_object(&cidr).unwrap();
        assert_eq!(pool.addresses.len(), 4, "CIDR network and broadcast count, IPv6 skipped");
        assert!(pool.auto_assign);
        let empty = serde_json::json!({"metadata": {"name": "e"}, "spec": {"addresses": []}});
        assert!(Pool::from_object(&empty).is_err());
    }

    #[test]
    fn hostname_pools_announce_and_decode_names() {
        let c = Config { pools: vec!["aws=127.0.0.50,noauto,hostname=lb.example.test".parse().unwrap()], class: None };
        let entry = c.ingress_for(ip("127.0.0.50"));
        assert_eq!(entry, serde_json::json!({"hostname": "127-0-0-50.lb.example.test"}));
        let svc: Service = serde_json::from_value(serde_json::json!({
            "status": {"loadBalancer": {"ingress": [entry, {"hostname": "127-0-0-50.elsewhere.test"}]}}
        }))
        .unwrap();
        assert_eq!(c.addresses(&svc), vec![ip("127.0.0.50")]);
    }
}
