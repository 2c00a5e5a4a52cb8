//! Error codes users see. Each code is a key under `errors.` in `locales/*.json`;
//! the raw cause goes to the server log only, never to the user.

use serde::{Deserialize, Serialize};
use server_fn::codec::JsonEncoding;
use server_fn::error::{FromServerFnError, ServerFnErrorErr};

/// A fixed, translatable reason a request was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    NameInvalid,
    NameTaken,
    HostInvalid,
    HostRequiredForLoadBalancer,
    HostInUse,
    ModeInvalid,
    CpuInvalid,
    MemoryInvalid,
    StorageInvalid,
    StorageFixed,
    AnnotationsInvalid,
    LoadBalancerClassInvalid,
    AddressRequestInvalid,
    ChartRepoInvalid,
    ChartRepoNotAllowed,
    ChartVersionInvalid,
    UsernameInvalid,
    UsernameTaken,
    PasswordTooShort,
    RoleInvalid,
    LoginFailed,
    LoginRateLimited,
    Unauthenticated,
    Forbidden,
    OriginRejected,
    NotFound,
    BadRequest,
    PayloadTooLarge,
    UnsupportedMediaType,
    ClusterDeleting,
    ChangedConcurrently,
    KubeconfigUnavailable,
    ConfirmationMismatch,
    LastAdmin,
    MigrationHostsInvalid,
    MigrationEmpty,
    MigrationHasProblems,
    MigrationItemState,
    QuotaExceeded,
    QuotaClustersExceeded,
    QuotaInvalid,
    RateLimited,
    /// The console cannot reach its database (503): not "signed out".
    Unavailable,
    Internal,
}

impl ErrorCode {
    /// Every code, for the locale completeness test and the API docs.
    pub const ALL: [ErrorCode; 44] = [
        Self::NameInvalid,
        Self::NameTaken,
        Self::HostInvalid,
        Self::HostRequiredForLoadBalancer,
        Self::HostInUse,
        Self::ModeInvalid,
        Self::CpuInvalid,
        Self::MemoryInvalid,
        Self::StorageInvalid,
        Self::StorageFixed,
        Self::AnnotationsInvalid,
        Self::LoadBalancerClassInvalid,
        Self::AddressRequestInvalid,
        Self::ChartRepoInvalid,
        Self::ChartRepoNotAllowed,
        Self::ChartVersionInvalid,
        Self::UsernameInvalid,
        Self::UsernameTaken,
        Self::PasswordTooShort,
        Self::RoleInvalid,
        Self::LoginFailed,
        Self::LoginRateLimited,
        Self::Unauthenticated,
        Self::Forbidden,
        Self::OriginRejected,
        Self::NotFound,
        Self::BadRequest,
        Self::PayloadTooLarge,
        Self::UnsupportedMediaType,
        Self::ClusterDeleting,
        Self::ChangedConcurrently,
        Self::KubeconfigUnavailable,
        Self::ConfirmationMismatch,
        Self::LastAdmin,
        Self::MigrationHostsInvalid,
        Self::MigrationEmpty,
        Self::MigrationHasProblems,
        Self::MigrationItemState,
        Self::QuotaExceeded,
        Self::QuotaClustersExceeded,
        Self::QuotaInvalid,
        Self::RateLimited,
        Self::Unavailable,
        Self::Internal,
    ];

    /// The wire and locale-key form, e.g. `host_required_for_load_balancer`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NameInvalid => "name_invalid",
            Self::NameTaken => "name_taken",
            Self::HostInvalid => "host_invalid",
            Self::HostRequiredForLoadBalancer => "host_required_for_load_balancer",
            Self::HostInUse => "host_in_use",
            Self::ModeInvalid => "mode_invalid",
            Self::CpuInvalid => "cpu_invalid",
            Self::MemoryInvalid => "memory_invalid",
            Self::StorageInvalid => "storage_invalid",
            Self::StorageFixed => "storage_fixed",
            Self::AnnotationsInvalid => "annotations_invalid",
            Self::LoadBalancerClassInvalid => "load_balancer_class_invalid",
            Self::AddressRequestInvalid => "address_request_invalid",
            Self::ChartRepoInvalid => "chart_repo_invalid",
            Self::ChartRepoNotAllowed => "chart_repo_not_allowed",
            Self::ChartVersionInvalid => "chart_version_invalid",
            Self::UsernameInvalid => "username_invalid",
            Self::UsernameTaken => "username_taken",
            Self::PasswordTooShort => "password_too_short",
            Self::RoleInvalid => "role_invalid",
            Self::LoginFailed => "login_failed",
            Self::LoginRateLimited => "login_rate_limited",
            Self::Unauthenticated => "unauthenticated",
            Self::Forbidden => "forbidden",
            Self::OriginRejected => "origin_rejected",
            Self::NotFound => "not_found",
            Self::BadRequest => "bad_request",
            Self::PayloadTooLarge => "payload_too_large",
            Self::UnsupportedMediaType => "unsupported_media_type",
            Self::ClusterDeleting => "cluster_deleting",
            Self::ChangedConcurrently => "changed_concurrently",
            Self::KubeconfigUnavailable => "kubeconfig_unavailable",
            Self::ConfirmationMismatch => "confirmation_mismatch",
            Self::LastAdmin => "last_admin",
            Self::MigrationHostsInvalid => "migration_hosts_invalid",
            Self::MigrationEmpty => "migration_empty",
            Self::MigrationHasProblems => "migration_has_problems",
            Self::MigrationItemState => "migration_item_state",
            Self::QuotaExceeded => "quota_exceeded",
            Self::QuotaClustersExceeded => "quota_clusters_exceeded",
            Self::QuotaInvalid => "quota_invalid",
            Self::RateLimited => "rate_limited",
            Self::Unavailable => "unavailable",
            Self::Internal => "internal",
        }
    }

    /// The HTTP status the JSON API answers with.
    pub fn http_status(self) -> u16 {
        match self {
            Self::Unauthenticated | Self::LoginFailed => 401,
            Self::Forbidden | Self::OriginRejected => 403,
            Self::NotFound => 404,
            Self::NameTaken
            | Self::HostInUse
            | Self::UsernameTaken
            | Self::ClusterDeleting
            | Self::ChangedConcurrently
            | Self::KubeconfigUnavailable
            | Self::LastAdmin
            | Self::MigrationHasProblems
            | Self::MigrationItemState => 409,
            Self::BadRequest => 400,
            Self::PayloadTooLarge => 413,
            Self::UnsupportedMediaType => 415,
            Self::LoginRateLimited | Self::RateLimited => 429,
            Self::Internal => 500,
            Self::Unavailable => 503,
            _ => 422,
        }
    }
}

/// The form field an error belongs to, so the page can show it next to that field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Field {
    Name,
    Cpu,
    #[serde(rename = "memory_gib")]
    Memory,
    #[serde(rename = "storage_gib")]
    Storage,
    PublicAccessMode,
    ControlPlaneHost,
    DefaultMode,
    NodeportPublicHost,
    LoadBalancerAnnotations,
    LoadBalancerClass,
    LoadBalancerAddressRequest,
    ChartRepo,
    ChartVersion,
    Username,
    Password,
    Role,
    Confirm,
    /// A migration's host source (template, range or typed hosts).
    Hosts,
    /// A migration's choice of clusters.
    Clusters,
    QuotaClusters,
    QuotaCpu,
    #[serde(rename = "quota_memory_gib")]
    QuotaMemory,
    #[serde(rename = "quota_storage_gib")]
    QuotaStorage,
    PodSecurity,
    NetworkPolicy,
}

impl Field {
    pub const ALL: [Field; 25] = [
        Self::Name,
        Self::Cpu,
        Self::Memory,
        Self::Storage,
        Self::PublicAccessMode,
        Self::ControlPlaneHost,
        Self::DefaultMode,
        Self::NodeportPublicHost,
        Self::LoadBalancerAnnotations,
        Self::LoadBalancerClass,
        Self::LoadBalancerAddressRequest,
        Self::ChartRepo,
        Self::ChartVersion,
        Self::Username,
        Self::Password,
        Self::Role,
        Self::Confirm,
        Self::Hosts,
        Self::Clusters,
        Self::QuotaClusters,
        Self::QuotaCpu,
        Self::QuotaMemory,
        Self::QuotaStorage,
        Self::PodSecurity,
        Self::NetworkPolicy,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Name => "name",
            Self::Cpu => "cpu",
            Self::Memory => "memory_gib",
            Self::Storage => "storage_gib",
            Self::PublicAccessMode => "public_access_mode",
            Self::ControlPlaneHost => "control_plane_host",
            Self::DefaultMode => "default_mode",
            Self::NodeportPublicHost => "nodeport_public_host",
            Self::LoadBalancerAnnotations => "load_balancer_annotations",
            Self::LoadBalancerClass => "load_balancer_class",
            Self::LoadBalancerAddressRequest => "load_balancer_address_request",
            Self::ChartRepo => "chart_repo",
            Self::ChartVersion => "chart_version",
            Self::Username => "username",
            Self::Password => "password",
            Self::Role => "role",
            Self::Confirm => "confirm",
            Self::Hosts => "hosts",
            Self::Clusters => "clusters",
            Self::QuotaClusters => "quota_clusters",
            Self::QuotaCpu => "quota_cpu",
            Self::QuotaMemory => "quota_memory_gib",
            Self::QuotaStorage => "quota_storage_gib",
            Self::PodSecurity => "pod_security",
            Self::NetworkPolicy => "network_policy",
        }
    }
}

/// What a user or API client gets back when a request is refused:
/// a code (translated by the page) and, for validation errors, the field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{}", code.as_str())]
pub struct AppError {
    pub code: ErrorCode,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field: Option<Field>,
}

impl AppError {
    pub const fn new(code: ErrorCode) -> Self {
        Self { code, field: None }
    }

    pub const fn at(code: ErrorCode, field: Field) -> Self {
        Self { code, field: Some(field) }
    }
}

impl From<ErrorCode> for AppError {
    fn from(code: ErrorCode) -> Self {
        Self::new(code)
    }
}

impl FromServerFnError for AppError {
    type Encoder = JsonEncoding;

    /// Framework failures (bad arguments, transport) reach the user as a fixed
    /// code; the detail stays out of the response.
    fn from_server_fn_error(value: ServerFnErrorErr) -> Self {
        match value {
            // What the caller sent could not be read (fuzzing found bodies
            // that are not UTF-8 reaching `Deserialization`): their fault, a 400.
            ServerFnErrorErr::Args(_)
            | ServerFnErrorErr::MissingArg(_)
            | ServerFnErrorErr::Deserialization(_)
            | ServerFnErrorErr::UnsupportedRequestMethod(_) => Self::new(ErrorCode::BadRequest),
            _ => Self::new(ErrorCode::Internal),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_unique_and_match_serde() {
        let mut seen = std::collections::HashSet::new();
        for code in ErrorCode::ALL {
            assert!(seen.insert(code.as_str()), "duplicate {}", code.as_str());
            let json = serde_json::to_string(&code).unwrap();
            assert_eq!(json, format!("\"{}\"", code.as_str()));
        }
    }

    /// The form input names and error ids come from `as_str`, the JSON API's
    /// `field` from serde: they must agree.
    #[test]
    fn field_names_match_serde() {
        for f in Field::ALL {
            assert_eq!(serde_json::to_string(&f).unwrap(), format!("\"{}\"", f.as_str()));
        }
    }

    #[test]
    fn only_internal_is_a_server_error() {
        for code in ErrorCode::ALL {
            let status = code.http_status();
            // 503: the database did not answer (an outage, retried), not a fault.
            let server = matches!(code, ErrorCode::Internal | ErrorCode::Unavailable);
            assert_eq!(status >= 500, server, "{code:?}");
            assert_eq!(status == 500, code == ErrorCode::Internal, "{code:?}");
            assert!(status >= 400);
        }
    }
}
