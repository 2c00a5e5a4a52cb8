//! Bring your own nodes: vCluster's private nodes (`privateNodes.enabled`,
//! chart v0.30). The admin offers it (with the Secret holding the vCluster
//! Platform key the Pro image needs); a cluster chooses it when it is created
//! and keeps it (vCluster cannot turn it on or off later).
//!
//! Joined nodes reach the control plane at `controlPlane.endpoint` on 443 and
//! its konnectivity server on 8132: the chart puts both on the cluster's one
//! Service (`templates/service.yaml`, port `konnectivity` when private nodes
//! are on). A LoadBalancer address serves both ports as they are; a NodePort
//! would put 8132 on a random node port that `controlPlane.endpoint` (one
//! `host:port`) cannot name, and public access off leaves nodes nothing to
//! reach. So own nodes need a LoadBalancer endpoint.

use serde::{Deserialize, Serialize};

use crate::domain::{AppError, ErrorCode, Field, PublicAccess, SystemSettings};

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
        let label = |s: &str| {
            (1..=63).contains(&s.len())
                && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !s.starts_with('-')
                && !s.ends_with('-')
        };
        let subdomain = |s: &str| s.len() <= 253 && s.split('.').all(label);
        if !label(namespace) || !subdomain(name) {
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

/// Whether a new cluster may have own nodes with this public access.
pub(crate) fn check_create(own_nodes: bool, access: &PublicAccess, settings: &SystemSettings) -> Result<(), AppError> {
    if !own_nodes {
        return Ok(());
    }
    if !settings.private_nodes {
        return Err(AppError::at(ErrorCode::OwnNodesNotOffered, Field::OwnNodes));
    }
    check_access(true, access)
}

/// Whether a cluster with (or without) own nodes may have this public access.
pub(crate) fn check_access(own_nodes: bool, access: &PublicAccess) -> Result<(), AppError> {
    match access {
        PublicAccess::LoadBalancer { .. } => Ok(()),
        _ if own_nodes => Err(AppError::at(ErrorCode::OwnNodesNeedLoadBalancer, Field::PublicAccessMode)),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::Host;

    #[test]
    fn secret_refs() {
        for (raw, ok) in [
            ("kubebyon-system/vcluster-platform-api-key", Some(("kubebyon-system", "vcluster-platform-api-key"))),
            (" licences/key.v1 ", Some(("licences", "key.v1"))),
            ("key", None),
            ("/key", None),
            ("ns/", None),
            ("Ns/key", None),
            ("ns/key/more", None),
            ("-ns/key", None),
            ("ns/key-", None),
            ("a.b/key", None),
        ] {
            let got = SecretRef::parse(raw).ok().map(|r| (r.namespace, r.name));
            assert_eq!(got, ok.map(|(n, k)| (n.to_owned(), k.to_owned())), "{raw:?}");
        }
        let r = SecretRef::parse("ns/key").unwrap();
        assert_eq!(r.to_string(), "ns/key");
        assert_eq!(
            SecretRef::parse("nope").unwrap_err(),
            AppError::at(ErrorCode::PlatformApiKeyInvalid, Field::PlatformApiKey)
        );
    }

    #[test]
    fn own_nodes_need_the_offer_and_a_load_balancer() {
        let offered = SystemSettings { private_nodes: true, ..SystemSettings::default() };
        let host = Host::parse("api.example.com").unwrap();
        let lb = PublicAccess::LoadBalancer { host: host.clone() };
        let np = PublicAccess::NodePort { host: None };
        let need_lb = Err(AppError::at(ErrorCode::OwnNodesNeedLoadBalancer, Field::PublicAccessMode));
        let not_offered = Err(AppError::at(ErrorCode::OwnNodesNotOffered, Field::OwnNodes));
        for (own, access, settings, want) in [
            (false, &np, &SystemSettings::default(), Ok(())),
            (false, &PublicAccess::Disabled, &offered, Ok(())),
            (true, &lb, &offered, Ok(())),
            (true, &lb, &SystemSettings::default(), not_offered),
            (true, &np, &offered, need_lb),
            (true, &PublicAccess::Disabled, &offered, need_lb),
        ] {
            assert_eq!(check_create(own, access, settings), want, "{own} {access:?} {}", settings.private_nodes);
        }
        // An edit: the offer may be withdrawn since; the endpoint must stay.
        assert_eq!(check_access(true, &lb), Ok(()));
        assert!(check_access(true, &np).is_err());
        assert_eq!(check_access(false, &np), Ok(()));
    }
}
