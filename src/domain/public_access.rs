//! Public access to a cluster's API server: off, NodePort, LoadBalancer or
//! a shared Gateway. One strong type; a LoadBalancer or gateway cluster
//! without a host cannot be constructed, nor a gateway one with an IP.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::gateway::{self, GatewayRules};
use super::{AppError, ErrorCode, Field, Host};

/// How an enabled cluster is exposed. Stored as `nodeport` / `loadbalancer` / `gateway`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
#[derive(strum::IntoStaticStr, strum::EnumString, strum::VariantArray)]
#[strum(serialize_all = "lowercase")]
pub enum PublicAccessMode {
    #[default]
    NodePort,
    LoadBalancer,
    /// A `TLSRoute` on the admin's Gateway, by SNI (`domain::gateway`).
    Gateway,
}

impl PublicAccessMode {
    pub(crate) fn as_str(self) -> &'static str {
        self.into()
    }

    /// Parses the stored or submitted form; `None` for anything else.
    pub(crate) fn parse(raw: &str) -> Option<Self> {
        raw.trim().parse().ok()
    }
}

impl fmt::Display for PublicAccessMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "lowercase")]
pub enum PublicAccess {
    /// ClusterIP only; no endpoint, no kubeconfig.
    Disabled,
    /// NodePort; the host falls back to the admin's NodePort public host.
    #[serde(rename = "nodeport")]
    NodePort { host: Option<Host> },
    /// LoadBalancer; the host (reserved IP, DNS name or VIP) is required.
    #[serde(rename = "loadbalancer")]
    LoadBalancer { host: Host },
    /// A `TLSRoute` on the admin's shared Gateway; the host is a DNS name
    /// (SNI), reached at port 443; the Service stays ClusterIP.
    #[serde(rename = "gateway")]
    Gateway { host: Host },
}

/// What a form or API request says about public access, before validation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct PublicAccessInput<'a> {
    pub enabled: bool,
    /// `None` or empty: take the fallback mode.
    pub mode: Option<&'a str>,
    pub host: &'a str,
}

/// The owned, wire form of a public access request (forms and JSON).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PublicAccessRequest {
    pub enabled: bool,
    #[serde(default)]
    pub mode: Option<String>,
    #[serde(default)]
    pub control_plane_host: Option<String>,
}

impl PublicAccessRequest {
    pub(crate) fn as_input(&self) -> PublicAccessInput<'_> {
        PublicAccessInput {
            enabled: self.enabled,
            mode: self.mode.as_deref(),
            host: self.control_plane_host.as_deref().unwrap_or_default(),
        }
    }
}

impl PublicAccess {
    /// Validates a request. `fallback` is the admin default on create and the
    /// cluster's current mode on update; `gateway` decides a gateway
    /// cluster's host. A disabled request ignores the host.
    pub(crate) fn from_input(
        input: &PublicAccessInput<'_>,
        fallback: PublicAccessMode,
        gateway: &GatewayRules<'_>,
    ) -> Result<Self, AppError> {
        let mode = match input.mode.map(str::trim).filter(|m| !m.is_empty()) {
            None => fallback,
            Some(raw) => {
                PublicAccessMode::parse(raw).ok_or(AppError::at(ErrorCode::ModeInvalid, Field::PublicAccessMode))?
            }
        };
        if !input.enabled {
            return Ok(Self::Disabled);
        }
        let host = Host::parse_optional(input.host)
            .map_err(|_| AppError::at(ErrorCode::HostInvalid, Field::ControlPlaneHost))?;
        match (mode, host) {
            (PublicAccessMode::NodePort, host) => Ok(Self::NodePort { host }),
            (PublicAccessMode::LoadBalancer, Some(host)) => Ok(Self::LoadBalancer { host }),
            (PublicAccessMode::LoadBalancer, None) => {
                Err(AppError::at(ErrorCode::HostRequiredForLoadBalancer, Field::ControlPlaneHost))
            }
            (PublicAccessMode::Gateway, host) => Ok(Self::Gateway { host: gateway::host(host, gateway)? }),
        }
    }

    /// Reads stored columns. Rows from before the mode column read as NodePort
    /// (the migration backfills `nodeport`); an unknown mode does too.
    /// A LoadBalancer row without a usable host cannot be represented: `None`.
    pub(crate) fn from_columns(enabled: bool, mode: &str, host: Option<&str>) -> Option<Self> {
        if !enabled {
            return Some(Self::Disabled);
        }
        let host = host.and_then(|h| Host::parse_optional(h).ok().flatten());
        match (PublicAccessMode::parse(mode).unwrap_or_default(), host) {
            (PublicAccessMode::NodePort, host) => Some(Self::NodePort { host }),
            (PublicAccessMode::LoadBalancer, Some(host)) => Some(Self::LoadBalancer { host }),
            (PublicAccessMode::LoadBalancer, None) => None,
            (PublicAccessMode::Gateway, Some(host @ Host::Dns(_))) => Some(Self::Gateway { host }),
            (PublicAccessMode::Gateway, _) => None,
        }
    }

    pub(crate) fn is_enabled(&self) -> bool {
        !matches!(self, Self::Disabled)
    }

    /// The mode when enabled.
    pub(crate) fn mode(&self) -> Option<PublicAccessMode> {
        match self {
            Self::Disabled => None,
            Self::NodePort { .. } => Some(PublicAccessMode::NodePort),
            Self::LoadBalancer { .. } => Some(PublicAccessMode::LoadBalancer),
            Self::Gateway { .. } => Some(PublicAccessMode::Gateway),
        }
    }

    /// The user's `control_plane_host`, when set.
    pub(crate) fn host(&self) -> Option<&Host> {
        match self {
            Self::Disabled | Self::NodePort { host: None } => None,
            Self::NodePort { host: Some(host) } | Self::LoadBalancer { host } | Self::Gateway { host } => Some(host),
        }
    }

    /// The value of the `public_access_mode` column. A disabled cluster keeps
    /// `remembered` (its previous or the default mode), so the column is never empty.
    pub(crate) fn mode_column(&self, remembered: PublicAccessMode) -> PublicAccessMode {
        self.mode().unwrap_or(remembered)
    }

    /// The host kubeconfigs name (and `extraSANs` carries): the cluster's own,
    /// else for NodePort the admin's NodePort public host.
    pub(crate) fn public_host<'a>(&'a self, nodeport_public_host: Option<&'a Host>) -> Option<&'a Host> {
        match self {
            Self::Disabled => None,
            Self::NodePort { host } => host.as_ref().or(nodeport_public_host),
            Self::LoadBalancer { host } | Self::Gateway { host } => Some(host),
        }
    }

    /// The host claimed across clusters (unique, `clusters.lb_host`): a
    /// LoadBalancer's or a gateway cluster's.
    pub(crate) fn claimed_host(&self) -> Option<&Host> {
        match self {
            Self::LoadBalancer { host } | Self::Gateway { host } => Some(host),
            Self::Disabled | Self::NodePort { .. } => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use PublicAccessMode::{LoadBalancer as Lb, NodePort as Np};

    fn input(enabled: bool, mode: Option<&'static str>, host: &'static str) -> PublicAccessInput<'static> {
        PublicAccessInput { enabled, mode, host }
    }

    fn dns(s: &str) -> Host {
        Host::Dns(s.into())
    }

    /// Seed 5.13 "create": enabled + nodeport, enabled + loadbalancer, disabled;
    /// plus the admin default and every invalid combination.
    #[test]
    fn from_input_table() {
        let err = |code, field| Err(AppError::at(code, field));
        let cases: Vec<(PublicAccessInput<'static>, PublicAccessMode, Result<PublicAccess, AppError>)> = vec![
            (input(true, Some("nodeport"), ""), Lb, Ok(PublicAccess::NodePort { host: None })),
            (
                input(true, Some("nodeport"), "10.0.0.9"),
                Lb,
                Ok(PublicAccess::NodePort { host: Some(Host::Ipv4([10, 0, 0, 9].into())) }),
            ),
            (
                input(true, Some("loadbalancer"), "api.example.com"),
                Np,
                Ok(PublicAccess::LoadBalancer { host: dns("api.example.com") }),
            ),
            (
                input(true, Some("loadbalancer"), ""),
                Np,
                err(ErrorCode::HostRequiredForLoadBalancer, Field::ControlPlaneHost),
            ),
            (
                input(true, Some("loadbalancer"), "   "),
                Np,
                err(ErrorCode::HostRequiredForLoadBalancer, Field::ControlPlaneHost),
            ),
            (
                input(true, Some("loadbalancer"), "https://x.example"),
                Np,
                err(ErrorCode::HostInvalid, Field::ControlPlaneHost),
            ),
            (input(true, Some("nodeport"), "x.example:6443"), Np, err(ErrorCode::HostInvalid, Field::ControlPlaneHost)),
            (input(false, Some("loadbalancer"), ""), Np, Ok(PublicAccess::Disabled)),
            (input(false, None, "not a host"), Np, Ok(PublicAccess::Disabled)),
            // no mode: the fallback (admin default on create) decides
            (input(true, None, ""), Np, Ok(PublicAccess::NodePort { host: None })),
            (input(true, Some(""), "vip.example"), Lb, Ok(PublicAccess::LoadBalancer { host: dns("vip.example") })),
            (input(true, None, ""), Lb, err(ErrorCode::HostRequiredForLoadBalancer, Field::ControlPlaneHost)),
            (input(true, Some("ingress"), ""), Np, err(ErrorCode::ModeInvalid, Field::PublicAccessMode)),
            (input(false, Some("LoadBalancer"), ""), Np, err(ErrorCode::ModeInvalid, Field::PublicAccessMode)),
        ];
        for (i, (inp, fallback, want)) in cases.into_iter().enumerate() {
            assert_eq!(PublicAccess::from_input(&inp, fallback, &GatewayRules::default()), want, "case {i}: {inp:?}");
        }
    }

    /// Seed 5.13 "update": every state can move to every other state,
    /// the gateway mode included.
    #[test]
    fn every_state_reaches_every_state() {
        let gw = crate::domain::gateway::GatewayRef { namespace: "gw".into(), name: "shared".into(), listener: None };
        let rules = GatewayRules { gateway: Some(&gw), suffix: None, policy: None, cluster_name: "demo" };
        let states = [
            (input(false, None, ""), PublicAccess::Disabled),
            (input(true, Some("nodeport"), ""), PublicAccess::NodePort { host: None }),
            (input(true, Some("nodeport"), "n.example"), PublicAccess::NodePort { host: Some(dns("n.example")) }),
            (input(true, Some("loadbalancer"), "lb.example"), PublicAccess::LoadBalancer { host: dns("lb.example") }),
            (input(true, Some("gateway"), "gw.example"), PublicAccess::Gateway { host: dns("gw.example") }),
        ];
        for (_, from) in &states {
            let current = from.mode().unwrap_or_default();
            for (inp, to) in &states {
                assert_eq!(PublicAccess::from_input(inp, current, &rules).as_ref(), Ok(to), "{from:?} -> {to:?}");
            }
            // Turned on without naming a mode: the state it comes from decides.
            let on = PublicAccess::from_input(&input(true, None, ""), current, &rules);
            let want = match from {
                PublicAccess::LoadBalancer { .. } => {
                    Err(AppError::at(ErrorCode::HostRequiredForLoadBalancer, Field::ControlPlaneHost))
                }
                PublicAccess::Gateway { .. } => {
                    Err(AppError::at(ErrorCode::HostRequiredForGateway, Field::ControlPlaneHost))
                }
                _ => Ok(PublicAccess::NodePort { host: None }),
            };
            assert_eq!(on, want, "{from:?} -> on");
            let on_with_host = PublicAccess::from_input(&input(true, None, "x.example"), current, &rules).unwrap();
            assert_eq!(
                on_with_host.mode(),
                from.mode().or(Some(PublicAccessMode::NodePort)),
                "{from:?} -> on with host"
            );
        }
        // Without the admin's Gateway the mode is refused; an IP never carries SNI.
        let no_gateway = PublicAccess::from_input(
            &input(true, Some("gateway"), "gw.example"),
            current_np(),
            &GatewayRules::default(),
        );
        assert_eq!(no_gateway, Err(AppError::at(ErrorCode::GatewayNotConfigured, Field::PublicAccessMode)));
        let ip = PublicAccess::from_input(&input(true, Some("gateway"), "198.51.100.1"), current_np(), &rules);
        assert_eq!(ip, Err(AppError::at(ErrorCode::GatewayHostNotDns, Field::ControlPlaneHost)));
    }

    fn current_np() -> PublicAccessMode {
        PublicAccessMode::NodePort
    }

    /// Seed 5.13 "old data": rows from before the mode column read as NodePort.
    #[test]
    fn from_columns_table() {
        let cases = [
            (false, "nodeport", None, Some(PublicAccess::Disabled)),
            (false, "loadbalancer", Some("x.example"), Some(PublicAccess::Disabled)),
            (true, "nodeport", None, Some(PublicAccess::NodePort { host: None })),
            (true, "nodeport", Some(""), Some(PublicAccess::NodePort { host: None })),
            (
                true,
                "nodeport",
                Some("1.2.3.4"),
                Some(PublicAccess::NodePort { host: Some(Host::Ipv4([1, 2, 3, 4].into())) }),
            ),
            (true, "", None, Some(PublicAccess::NodePort { host: None })),
            (true, "something-else", None, Some(PublicAccess::NodePort { host: None })),
            (true, "loadbalancer", Some("lb.example"), Some(PublicAccess::LoadBalancer { host: dns("lb.example") })),
            (true, "loadbalancer", None, None),
            (true, "gateway", Some("gw.example"), Some(PublicAccess::Gateway { host: dns("gw.example") })),
            (true, "gateway", Some("198.51.100.1"), None),
            (true, "gateway", None, None),
        ];
        for (enabled, mode, host, want) in cases {
            assert_eq!(PublicAccess::from_columns(enabled, mode, host), want, "{enabled} {mode} {host:?}");
        }
    }

    #[test]
    fn public_host_follows_the_mode_and_host() {
        let np = dns("np.example");
        assert_eq!(PublicAccess::Disabled.public_host(Some(&np)), None);
        assert_eq!(PublicAccess::NodePort { host: None }.public_host(None), None);
        assert_eq!(PublicAccess::NodePort { host: None }.public_host(Some(&np)), Some(&np));
        assert_eq!(
            PublicAccess::NodePort { host: Some(dns("n.example")) }.public_host(Some(&np)),
            Some(&dns("n.example"))
        );
        assert_eq!(
            PublicAccess::LoadBalancer { host: dns("lb.example") }.public_host(Some(&np)),
            Some(&dns("lb.example"))
        );
    }

    #[test]
    fn mode_column_never_empty() {
        assert_eq!(PublicAccess::Disabled.mode_column(Lb), Lb);
        assert_eq!(PublicAccess::NodePort { host: None }.mode_column(Lb), Np);
        assert_eq!(PublicAccess::LoadBalancer { host: dns("a.b") }.mode_column(Np), Lb);
    }
}
