//! Who is on the other end of a request, for login throttling: the socket's
//! peer address, or — when that peer is a trusted reverse proxy
//! (`KUBEBYON_TRUSTED_PROXIES`) — the right-most `X-Forwarded-For` hop that is
//! not itself a trusted proxy. Hops left of it are whatever the client wrote
//! and are never believed. Without trusted proxies the header is ignored.

use std::net::IpAddr;

/// An address block: `10.0.0.0/8`, `fd00::/8`, or one address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    addr: IpAddr,
    prefix: u8,
}

impl Cidr {
    pub(crate) fn parse(raw: &str) -> Option<Self> {
        let raw = raw.trim();
        let (addr, prefix) = match raw.split_once('/') {
            Some((a, p)) => (a.parse::<IpAddr>().ok()?, Some(p.parse::<u8>().ok()?)),
            None => (raw.parse::<IpAddr>().ok()?, None),
        };
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = prefix.unwrap_or(max);
        (prefix <= max).then_some(Self { addr, prefix })
    }

    /// A comma- or space-separated list; `Err` names the first bad entry.
    pub fn parse_list(raw: &str) -> Result<Vec<Self>, String> {
        raw.split([',', ' '])
            .filter(|s| !s.trim().is_empty())
            .map(|s| Self::parse(s).ok_or_else(|| s.to_owned()))
            .collect()
    }

    pub(crate) fn contains(&self, ip: IpAddr) -> bool {
        match (self.addr, ip.to_canonical()) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                masked(u32::from(net).into(), 32, self.prefix) == masked(u32::from(ip).into(), 32, self.prefix)
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                masked(u128::from(net), 128, self.prefix) == masked(u128::from(ip), 128, self.prefix)
            }
            _ => false,
        }
    }
}

fn masked(bits: u128, width: u8, prefix: u8) -> u128 {
    if prefix == 0 { 0 } else { bits >> (width - prefix) }
}

/// The client's address (see the module comment). `forwarded_for`: every
/// `X-Forwarded-For` header value, in order.
pub(crate) fn client_ip(peer: IpAddr, forwarded_for: &[&str], trusted: &[Cidr]) -> IpAddr {
    let is_trusted = |ip: IpAddr| trusted.iter().any(|c| c.contains(ip));
    let mut client = peer.to_canonical();
    if !is_trusted(client) {
        return client;
    }
    let hops = forwarded_for.iter().flat_map(|v| v.split(',')).map(str::trim).collect::<Vec<_>>();
    for hop in hops.into_iter().rev() {
        let unbracketed = hop.trim_start_matches('[').split(']').next().unwrap_or(hop);
        let Ok(ip) = unbracketed.parse::<IpAddr>() else {
            // Not written by a proxy we trust: stop at the last hop we believe.
            return client;
        };
        client = ip.to_canonical();
        if !is_trusted(client) {
            return client;
        }
    }
    client
}

/// The key a client is throttled by: its IPv4 address, or its IPv6 /64 (one
/// host usually holds a whole /64, so single addresses would be free to rotate).
pub(crate) fn client_key(ip: IpAddr) -> String {
    match ip.to_canonical() {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => {
            let s = v6.segments();
            format!("{:x}:{:x}:{:x}:{:x}::/64", s[0], s[1], s[2], s[3])
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn cidr_table() {
        let cases = [
            ("10.0.0.0/8", "10.200.1.1", true),
            ("10.0.0.0/8", "11.0.0.1", false),
            ("127.0.0.1", "127.0.0.1", true),
            ("127.0.0.1", "127.0.0.2", false),
            ("0.0.0.0/0", "203.0.113.9", true),
            ("fd00::/8", "fd12::1", true),
            ("fd00::/8", "fe80::1", false),
            ("10.0.0.0/8", "::ffff:10.1.2.3", true),
            ("10.0.0.0/8", "fd00::1", false),
        ];
        for (net, addr, inside) in cases {
            assert_eq!(Cidr::parse(net).unwrap().contains(ip(addr)), inside, "{net} ∋ {addr}");
        }
        for bad in ["10.0.0.0/33", "fd00::/129", "ten", "10.0.0.0/x", ""] {
            assert_eq!(Cidr::parse(bad), None, "{bad}");
        }
        assert_eq!(Cidr::parse_list("10.0.0.0/8, 127.0.0.1").unwrap().len(), 2);
        assert_eq!(Cidr::parse_list("10.0.0.0/8,nope"), Err("nope".into()));
        assert_eq!(Cidr::parse_list("  ").unwrap(), vec![]);
    }

    #[test]
    fn client_ip_table() {
        let proxies = Cidr::parse_list("10.0.0.0/8").unwrap();
        let cases: [(&str, &[&str], &[Cidr], &str); 8] = [
            // No trusted proxies: the header is ignored, whatever it says.
            ("203.0.113.5", &["198.51.100.1"], &[], "203.0.113.5"),
            // The peer is not a proxy we trust: the header is a lie.
            ("203.0.113.5", &["198.51.100.1"], &proxies, "203.0.113.5"),
            // Through our proxy: the hop it appended.
            ("10.0.0.2", &["198.51.100.1"], &proxies, "198.51.100.1"),
            // A client-written hop on the left is not believed.
            ("10.0.0.2", &["1.2.3.4, 198.51.100.1"], &proxies, "198.51.100.1"),
            // Two proxies of ours, across two headers.
            ("10.0.0.2", &["198.51.100.1, 10.0.0.7", "10.0.0.3"], &proxies, "198.51.100.1"),
            // Garbage where our proxy should have written: stop at the last trusted hop.
            ("10.0.0.2", &["198.51.100.1, garbage"], &proxies, "10.0.0.2"),
            // No header: the proxy itself.
            ("10.0.0.2", &[], &proxies, "10.0.0.2"),
            ("10.0.0.2", &["[2001:db8::1]"], &proxies, "2001:db8::1"),
        ];
        for (peer, xff, trusted, want) in cases {
            assert_eq!(client_ip(ip(peer), xff, trusted), ip(want), "{peer} {xff:?}");
        }
    }

    #[test]
    fn ipv6_clients_are_keyed_by_their_64() {
        assert_eq!(client_key(ip("2001:db8:1:2:aaaa::1")), client_key(ip("2001:db8:1:2:bbbb::9")));
        assert_ne!(client_key(ip("2001:db8:1:2::1")), client_key(ip("2001:db8:1:3::1")));
        assert_eq!(client_key(ip("::ffff:192.0.2.1")), "192.0.2.1");
    }
}
