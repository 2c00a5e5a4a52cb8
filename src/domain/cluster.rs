//! A cluster as two halves with one writer each: the spec (what the user asked,
//! written by the console's request handlers) and the status (what the host
//! cluster reports, written only by the reconciler).

use serde::{Deserialize, Serialize};

use super::{ClusterName, PublicAccess, Resources};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterSpec {
    pub name: ClusterName,
    pub resources: Resources,
    pub public_access: PublicAccess,
}

/// Where a cluster is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// Stored; the host cluster has not acted on it yet.
    #[default]
    Pending,
    Provisioning,
    Ready,
    Updating,
    Deleting,
    Failed,
}

impl Phase {
    pub const ALL: [Phase; 6] =
        [Self::Pending, Self::Provisioning, Self::Ready, Self::Updating, Self::Deleting, Self::Failed];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Provisioning => "provisioning",
            Self::Ready => "ready",
            Self::Updating => "updating",
            Self::Deleting => "deleting",
            Self::Failed => "failed",
        }
    }

    pub fn parse(raw: &str) -> Self {
        Self::ALL.into_iter().find(|p| p.as_str() == raw).unwrap_or_default()
    }
}

/// The outcome of the last connection probe (filled by the host-cluster side).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum ConnectionStatus {
    #[default]
    Unknown,
    Ok,
    DnsFailure,
    Refused,
    Timeout,
    CertificateHostMismatch,
    CertificateUntrusted,
    Unauthorized,
    HttpError,
}

impl ConnectionStatus {
    pub const ALL: [ConnectionStatus; 9] = [
        Self::Unknown,
        Self::Ok,
        Self::DnsFailure,
        Self::Refused,
        Self::Timeout,
        Self::CertificateHostMismatch,
        Self::CertificateUntrusted,
        Self::Unauthorized,
        Self::HttpError,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Unknown => "unknown",
            Self::Ok => "ok",
            Self::DnsFailure => "dns_failure",
            Self::Refused => "refused",
            Self::Timeout => "timeout",
            Self::CertificateHostMismatch => "certificate_host_mismatch",
            Self::CertificateUntrusted => "certificate_untrusted",
            Self::Unauthorized => "unauthorized",
            Self::HttpError => "http_error",
        }
    }

    pub fn parse(raw: &str) -> Self {
        Self::ALL.into_iter().find(|s| s.as_str() == raw).unwrap_or_default()
    }
}

/// Observed state, recomputed as a whole from what the host reports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct ClusterStatus {
    pub phase: Phase,
    pub message: String,
    /// The allocated https nodePort; only ever set in NodePort mode.
    pub public_access_port: Option<u16>,
    pub api_endpoint: Option<String>,
    pub kubeconfig_available: bool,
    pub connection_status: ConnectionStatus,
    pub observed_generation: i64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enums_round_trip_and_unknown_reads_as_default() {
        for p in Phase::ALL {
            assert_eq!(Phase::parse(p.as_str()), p);
        }
        for s in ConnectionStatus::ALL {
            assert_eq!(ConnectionStatus::parse(s.as_str()), s);
        }
        assert_eq!(Phase::parse("??"), Phase::Pending);
        assert_eq!(ConnectionStatus::parse("??"), ConnectionStatus::Unknown);
    }
}

/// A stored cluster: who owns it, what they asked, what the host reports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cluster {
    pub id: i64,
    pub owner_id: i64,
    pub owner: String,
    pub spec: ClusterSpec,
    pub status: ClusterStatus,
    /// Bumped by every spec change; the reconciler reports `observed_generation`.
    pub generation: i64,
    pub deletion_requested: bool,
    pub created_at: i64,
    pub updated_at: i64,
}

impl Cluster {
    /// The host cluster has not yet caught up with the latest request.
    pub fn waiting_for_host(&self) -> bool {
        self.deletion_requested || self.status.observed_generation < self.generation
    }

    /// The kubeconfig can be downloaded only when the host says it exists and
    /// public access is on (it points at the public endpoint).
    pub fn kubeconfig_downloadable(&self) -> bool {
        self.status.kubeconfig_available && self.spec.public_access.is_enabled() && !self.deletion_requested
    }
}
