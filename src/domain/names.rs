//! Names and references as Kubernetes writes them: qualified names (label
//! and annotation keys, topology keys) and `namespace/name` references to a
//! host Secret. The settings, placement, egress and own-nodes rules all read
//! them; nothing here reads those.

use serde::{Deserialize, Serialize};

use super::{AppError, ErrorCode, Field};

/// Kubernetes qualified name: optional DNS-subdomain prefix and `/`, then a
/// name of up to 63 characters `[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?`.
pub(crate) fn is_qualified_name(s: &str) -> bool {
    let (prefix, name) = match s.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, s),
    };
    let name_ok = !name.is_empty()
        && name.len() <= 63
        && name.as_bytes()[0].is_ascii_alphanumeric()
        && name.as_bytes()[name.len() - 1].is_ascii_alphanumeric()
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    let prefix_ok = prefix.is_none_or(|p| {
        p.len() <= 253
            && p.split('.').all(|l| {
                !l.is_empty()
                    && l.len() <= 63
                    && !l.starts_with('-')
                    && !l.ends_with('-')
                    && l.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            })
    });
    name_ok && prefix_ok
}

/// A Secret in the host cluster, `namespace/name` (both DNS-1123 labels, the
/// name may be a subdomain), e.g. the vCluster Platform key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "String", try_from = "String")]
pub struct SecretRef {
    pub namespace: String,
    pub name: String,
}

impl SecretRef {
    pub fn parse(raw: &str) -> Result<Self, AppError> {
        let bad = || AppError::at(ErrorCode::PlatformApiKeyInvalid, Field::PlatformApiKey);
        let (namespace, name) = raw.trim().split_once('/').ok_or_else(bad)?;
        use super::host::{dns_label, dns_subdomain};
        if !dns_label(namespace) || !dns_subdomain(name) {
            return Err(bad());
        }
        Ok(Self { namespace: namespace.to_owned(), name: name.to_owned() })
    }
}

impl From<SecretRef> for String {
    fn from(r: SecretRef) -> Self {
        r.to_string()
    }
}

impl TryFrom<String> for SecretRef {
    type Error = String;

    fn try_from(raw: String) -> Result<Self, String> {
        Self::parse(&raw).map_err(|_| format!("not a namespace/name: {raw:?}"))
    }
}

impl std::fmt::Display for SecretRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qualified_names() {
        for ok in ["a", "metallb.io/address-pool", "kube-vip.io/kube-vip-class", "A_b.c-D"] {
            assert!(is_qualified_name(ok), "{ok}");
        }
        for bad in ["", "/x", "x/", "-a", "a-", "Upper.IO/x", "a b", &"a".repeat(64)] {
            assert!(!is_qualified_name(bad), "{bad}");
        }
    }
}
