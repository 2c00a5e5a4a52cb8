//! `Host`: the address a cluster's API server is reached at — an IPv4 or IPv6
//! address or a DNS name, never a URL. It ends up in certificate SANs and in
//! kubeconfig `server:` lines, so anything else is refused at the edge.

use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};

use serde::{Deserialize, Serialize};

/// Why a string is not a host. Callers turn it into a field error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("not a host")]
pub struct InvalidHost;

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum Host {
    Ipv4(Ipv4Addr),
    Ipv6(Ipv6Addr),
    /// Lowercased, without a trailing dot.
    Dns(String),
}

const MAX_NAME_LEN: usize = 253;
const MAX_LABEL_LEN: usize = 63;

impl Host {
    /// Parses user input. Surrounding whitespace is ignored; an IPv6 address may
    /// be written in brackets. Schemes, ports, paths, wildcards and spaces are refused.
    pub fn parse(raw: &str) -> Result<Self, InvalidHost> {
        let s = raw.trim();
        // Addresses nobody can connect to: "any" (0.0.0.0, ::), broadcast, multicast.
        if let Ok(v4) = s.parse::<Ipv4Addr>() {
            let unusable = v4.is_unspecified() || v4.is_broadcast() || v4.is_multicast();
            return if unusable { Err(InvalidHost) } else { Ok(Self::Ipv4(v4)) };
        }
        let unbracketed = s.strip_prefix('[').and_then(|rest| rest.strip_suffix(']')).unwrap_or(s);
        if let Ok(v6) = unbracketed.parse::<Ipv6Addr>() {
            // One canonical form per address: an IPv4-mapped IPv6 address
            // (`::ffff:a.b.c.d`) is that IPv4 address, so it claims the same host.
            if let Some(v4) = v6.to_ipv4_mapped() {
                return Self::parse(&v4.to_string());
            }
            let unusable = v6.is_unspecified() || v6.is_multicast();
            return if unusable { Err(InvalidHost) } else { Ok(Self::Ipv6(v6)) };
        }
        Self::parse_dns(s).map(Self::Dns)
    }

    /// Parses an optional field: empty means `None`.
    pub(crate) fn parse_optional(raw: &str) -> Result<Option<Self>, InvalidHost> {
        if raw.trim().is_empty() { Ok(None) } else { Self::parse(raw).map(Some) }
    }

    fn parse_dns(s: &str) -> Result<String, InvalidHost> {
        if s.is_empty() || s.len() > MAX_NAME_LEN {
            return Err(InvalidHost);
        }
        let labels: Vec<&str> = s.split('.').collect();
        let label_ok = |l: &&str| {
            !l.is_empty()
                && l.len() <= MAX_LABEL_LEN
                && !l.starts_with('-')
                && !l.ends_with('-')
                && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        };
        // An all-numeric last label would make "1.2.3.999" a "name" (RFC 3696 §2).
        let tld_ok = labels.last().is_some_and(|l| !l.bytes().all(|b| b.is_ascii_digit()));
        if labels.iter().all(label_ok) && tld_ok { Ok(s.to_ascii_lowercase()) } else { Err(InvalidHost) }
    }

    /// The host as it appears in a URL authority: IPv6 in brackets.
    pub(crate) fn url_host(&self) -> String {
        match self {
            Self::Ipv6(v6) => format!("[{v6}]"),
            other => other.to_string(),
        }
    }
}

impl fmt::Display for Host {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Ipv4(v4) => v4.fmt(f),
            Self::Ipv6(v6) => v6.fmt(f),
            Self::Dns(name) => f.write_str(name),
        }
    }
}

impl TryFrom<String> for Host {
    type Error = InvalidHost;
    fn try_from(value: String) -> Result<Self, Self::Error> {
        Self::parse(&value)
    }
}

impl From<Host> for String {
    fn from(value: Host) -> Self {
        value.to_string()
    }
}

/// A Kubernetes object name of the DNS-1123 label form (a namespace, a
/// Service): 1–63 of `a-z`, `0-9`, `-`, not starting or ending with `-`.
pub(crate) fn dns_label(s: &str) -> bool {
    (1..=63).contains(&s.len())
        && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// A Kubernetes object name of the DNS-1123 subdomain form (most objects: a
/// Gateway, a Secret, a StorageClass): dot-separated [`dns_label`]s, at most 253.
pub(crate) fn dns_subdomain(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(dns_label)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepted_hosts_and_their_normal_form() {
        let cases = [
            ("10.0.0.5", "10.0.0.5", "10.0.0.5"),
            (" 203.0.113.7 ", "203.0.113.7", "203.0.113.7"),
            ("2001:db8::1", "2001:db8::1", "[2001:db8::1]"),
            ("[2001:db8::1]", "2001:db8::1", "[2001:db8::1]"),
            ("::1", "::1", "[::1]"),
            ("api.example.com", "api.example.com", "api.example.com"),
            ("API.Example.COM", "api.example.com", "api.example.com"),
            ("k8s-1.dev.example", "k8s-1.dev.example", "k8s-1.dev.example"),
            ("localhost", "localhost", "localhost"),
            ("xn--fiq228c.example", "xn--fiq228c.example", "xn--fiq228c.example"),
            // An IPv4-mapped IPv6 address is its IPv4 address (one claim per address).
            ("::ffff:203.0.113.7", "203.0.113.7", "203.0.113.7"),
            ("[::FFFF:cb00:7107]", "203.0.113.7", "203.0.113.7"),
            ("2001:DB8:0:0:0:0:0:1", "2001:db8::1", "[2001:db8::1]"),
        ];
        for (raw, display, url) in cases {
            let host = Host::parse(raw).unwrap_or_else(|_| panic!("{raw:?} should parse"));
            assert_eq!(host.to_string(), display, "{raw:?}");
            assert_eq!(host.url_host(), url, "{raw:?}");
        }
    }

    #[test]
    fn refused_hosts() {
        let long_label = format!("{}.example.com", "a".repeat(64));
        let long_name = format!("{}.com", ["abcdefghij"; 25].join("."));
        let cases = [
            "",
            "   ",
            "https://api.example.com",
            "api.example.com:6443",
            "10.0.0.5:443",
            "[2001:db8::1]:443",
            "api.example.com/path",
            "api example.com",
            "*.example.com",
            "-api.example.com",
            "api-.example.com",
            "api..example.com",
            ".example.com",
            "example.com.",
            "1.2.3.999",
            "300.1.1.1",
            "api_example.com",
            "例子.com",
            "0.0.0.0",
            "::ffff:0.0.0.0",
            "::ffff:255.255.255.255",
            "255.255.255.255",
            "224.0.0.1",
            "::",
            "[::]",
            "ff02::1",
            long_label.as_str(),
            long_name.as_str(),
        ];
        for raw in cases {
            assert_eq!(Host::parse(raw), Err(InvalidHost), "{raw:?} should be refused");
        }
    }

    #[test]
    fn optional_empty_is_none() {
        assert_eq!(Host::parse_optional("  "), Ok(None));
        assert_eq!(Host::parse_optional("vip.example.com"), Ok(Some(Host::Dns("vip.example.com".into()))));
        assert_eq!(Host::parse_optional("a b"), Err(InvalidHost));
    }
}
