//! Error codes users see. Each code is a key under `errors.` in `locales/*.json`;
//! the raw cause goes to the server log only, never to the user.

use serde::{Deserialize, Serialize};
use server_fn::codec::JsonEncoding;
use server_fn::error::{FromServerFnError, ServerFnErrorErr};

/// A fixed, translatable reason a request was refused. Its name (`as_str`,
/// serde, the locale key) is its variant's in snake_case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, strum::IntoStaticStr, strum::VariantArray)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
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
    // The move's codes keep their wire names from before the rename
    // ("migration" now means only schema migrations): API clients match on them.
    #[serde(rename = "migration_hosts_invalid")]
    #[strum(serialize = "migration_hosts_invalid")]
    MoveHostsInvalid,
    #[serde(rename = "migration_empty")]
    #[strum(serialize = "migration_empty")]
    MoveEmpty,
    #[serde(rename = "migration_has_problems")]
    #[strum(serialize = "migration_has_problems")]
    MoveHasProblems,
    #[serde(rename = "migration_item_state")]
    #[strum(serialize = "migration_item_state")]
    MoveItemState,
    QuotaExceeded,
    QuotaClustersExceeded,
    QuotaInvalid,
    /// Own nodes on a server whose admin does not offer them.
    OwnNodesNotOffered,
    /// Own nodes without a LoadBalancer endpoint (`domain::nodes`).
    OwnNodesNeedLoadBalancer,
    /// A move asked for a cluster with its own nodes: a new endpoint would cut
    /// them off (`MoveTarget::takes`).
    OwnNodesNotMovable,
    PlatformApiKeyInvalid,
    /// A platform key outside the operator's namespace (`KUBEBYON_PLATFORM_KEY_NAMESPACE`).
    PlatformApiKeyNamespace,
    /// `pod_security: privileged` while the operator does not allow it
    /// (`KUBEBYON_ALLOW_PRIVILEGED_PODS`).
    PodSecurityNotAllowed,
    /// A join token lifetime outside 10 minutes – 7 days.
    TokenLifetimeInvalid,
    /// Join tokens for a cluster made without own nodes.
    OwnNodesOff,
    /// The virtual cluster's own API server cannot be reached (yet).
    ControlPlaneUnavailable,
    /// What the console would read from a virtual cluster is over its caps
    /// (`server::tenant::read`): the tenant's own objects.
    VirtualAnswerTooLarge,
    /// Gateway mode without a host and without the admin's domain suffix.
    HostRequiredForGateway,
    /// A gateway host that is an IP address (SNI carries names only).
    GatewayHostNotDns,
    /// A gateway host outside the admin's domain suffix.
    GatewayHostOutsideSuffix,
    /// Gateway mode while the admin set no domain suffix and the operator
    /// did not allow any name (`KUBEBYON_GATEWAY_ANY_HOST`).
    GatewaySuffixRequired,
    /// A gateway host no cluster may claim: the console's own, `localhost`,
    /// the host cluster's own DNS names.
    GatewayHostReserved,
    /// Gateway mode while the admin has not named a Gateway.
    GatewayNotConfigured,
    /// The Gateway reference or listener name is not a Kubernetes name.
    GatewayInvalid,
    /// The gateway domain suffix is not a DNS name.
    GatewaySuffixInvalid,
    /// Spread control planes: not off / preferred / required, or a bad topology key.
    SpreadInvalid,
    /// A StorageClass name that is not a Kubernetes name.
    StorageClassInvalid,
    /// Too many wrong join-script requests from one client.
    JoinRateLimited,
    /// The control plane did not give a join script (an error, too large, too slow).
    JoinScriptUnavailable,
    /// A member role other than admin / edit / view.
    MemberRoleInvalid,
    /// No user (or team) of that name to share a cluster with.
    MemberUnknown,
    /// The owner is not also a member: they hold every right already.
    MemberIsOwner,
    /// A team name that is not written like a username.
    TeamNameInvalid,
    TeamNameTaken,
    /// A per-user kubeconfig's lifetime outside 10 minutes – 1 year.
    CredentialLifetimeInvalid,
    /// An extra egress line that is not `PORT [NAMESPACE | KEY=VALUE]`, or too many.
    EgressInvalid,
    /// A per-user kubeconfig's lifetime past the longest the admin allows.
    CredentialLifetimeOverLimit,
    /// The cluster's endpoint is served by the host's own API server (a
    /// relaying test host): no credential of its own can be issued there.
    PerUserCredentialsUnavailable,
    /// The cluster's control plane did not sign the user's certificate in time.
    CredentialNotSigned,
    /// A break-glass download without a reason (3–500 characters).
    ReasonRequired,
    /// The account is disabled (said only after the right password).
    AccountDisabled,
    /// An admin tried to disable their own account.
    CannotDisableSelf,
    /// Password sign-in is switched off here (for this account).
    LocalSignInOff,
    /// No OpenID Connect provider is configured, or it cannot be reached.
    OidcUnavailable,
    /// The sign-in's `state` is unknown, used already, expired or not this browser's.
    OidcStateInvalid,
    /// The provider refused the sign-in (the user cancelled, or is not allowed).
    OidcDenied,
    /// The ID token was issued for another client.
    OidcTokenAudience,
    /// The ID token has expired.
    OidcTokenExpired,
    /// The ID token's nonce is not this sign-in's.
    OidcTokenNonce,
    /// The ID token's signature does not verify against the provider's keys.
    OidcTokenSignature,
    /// The ID token is otherwise unacceptable (issuer, missing claims).
    OidcTokenInvalid,
    /// No usable console username in the provider's claims, or it is another account's.
    OidcUsernameUnusable,
    /// The name the provider asks for is another account's (local, or another
    /// organisation account with the same e-mail local part).
    OidcUsernameTaken,
    /// A password for an account that signs in with the organisation's provider.
    OrganisationAccount,
    /// A cluster moved to a disabled account.
    OwnerDisabled,
    /// A cluster moved to an account whose quota does not hold it.
    OwnerQuotaExceeded,
    RateLimited,
    /// The host's helm-controller accepts no `failurePolicy` that keeps a
    /// control plane (`domain::helm`): nothing is written until k3s is upgraded.
    HelmControllerUnsupported,
    /// Too many on-demand calls to clusters by one user (`host::call_budget`).
    CallsRateLimited,
    /// The console cannot reach its database (503): not "signed out".
    Unavailable,
    Internal,
}

impl ErrorCode {
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// The code a URL names (`as_str`'s inverse); anything else is none.
    pub(crate) fn parse(raw: &str) -> Option<Self> {
        <Self as strum::VariantArray>::VARIANTS.iter().copied().find(|c| c.as_str() == raw)
    }

    /// The HTTP status the JSON API answers with.
    pub(crate) fn http_status(self) -> u16 {
        match self {
            Self::Unauthenticated | Self::LoginFailed => 401,
            Self::Forbidden | Self::OriginRejected | Self::AccountDisabled | Self::LocalSignInOff => 403,
            Self::OidcStateInvalid
            | Self::OidcDenied
            | Self::OidcTokenAudience
            | Self::OidcTokenExpired
            | Self::OidcTokenNonce
            | Self::OidcTokenSignature
            | Self::OidcTokenInvalid => 401,
            Self::NotFound => 404,
            Self::NameTaken
            | Self::HostInUse
            | Self::UsernameTaken
            | Self::TeamNameTaken
            | Self::ClusterDeleting
            | Self::ChangedConcurrently
            | Self::KubeconfigUnavailable
            | Self::PerUserCredentialsUnavailable
            | Self::CredentialNotSigned
            | Self::LastAdmin
            | Self::CannotDisableSelf
            | Self::OidcUsernameUnusable
            | Self::OidcUsernameTaken
            | Self::OrganisationAccount
            | Self::OwnerDisabled
            | Self::MoveHasProblems
            | Self::MoveItemState
            | Self::OwnNodesOff
            | Self::HelmControllerUnsupported
            | Self::ControlPlaneUnavailable => 409,
            Self::BadRequest => 400,
            Self::PayloadTooLarge => 413,
            Self::UnsupportedMediaType => 415,
            Self::LoginRateLimited | Self::RateLimited | Self::CallsRateLimited | Self::JoinRateLimited => 429,
            Self::JoinScriptUnavailable | Self::VirtualAnswerTooLarge | Self::OidcUnavailable => 502,
            Self::Internal => 500,
            Self::Unavailable => 503,
            _ => 422,
        }
    }
}

/// The form field an error belongs to, so the page can show it next to that field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, strum::IntoStaticStr, strum::VariantArray)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum Field {
    Name,
    Cpu,
    #[serde(rename = "memory_gib")]
    #[strum(serialize = "memory_gib")]
    Memory,
    #[serde(rename = "storage_gib")]
    #[strum(serialize = "storage_gib")]
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
    /// A move's host source (template, range or typed hosts).
    Hosts,
    /// A move's choice of clusters.
    Clusters,
    QuotaClusters,
    QuotaCpu,
    #[serde(rename = "quota_memory_gib")]
    #[strum(serialize = "quota_memory_gib")]
    QuotaMemory,
    #[serde(rename = "quota_storage_gib")]
    #[strum(serialize = "quota_storage_gib")]
    QuotaStorage,
    PodSecurity,
    NetworkPolicy,
    OwnNodes,
    PrivateNodes,
    PlatformApiKey,
    /// A join token's lifetime.
    Lifetime,
    Gateway,
    GatewayListener,
    GatewayDomainSuffix,
    Spread,
    SpreadTopologyKey,
    StorageClass,
    /// The user or team a cluster is shared with.
    Member,
    MemberRole,
    TeamName,
    /// Why an admin takes a cluster's admin credential (break-glass).
    Reason,
    /// The longest a per-user kubeconfig may last (system settings).
    KubeconfigMaxLifetime,
    /// Extra egress for control planes (system settings).
    ExtraEgress,
    /// The account a cluster is moved to.
    Owner,
}

impl Field {
    pub(crate) fn as_str(self) -> &'static str {
        self.into()
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

    use strum::VariantArray;

    #[test]
    fn codes_are_unique_and_match_serde() {
        let mut seen = std::collections::HashSet::new();
        for &code in ErrorCode::VARIANTS {
            assert!(seen.insert(code.as_str()), "duplicate {}", code.as_str());
            let json = serde_json::to_string(&code).unwrap();
            assert_eq!(json, format!("\"{}\"", code.as_str()));
        }
    }

    /// The form input names and error ids come from `as_str`, the JSON API's
    /// `field` from serde: they must agree.
    #[test]
    fn field_names_match_serde() {
        for &f in Field::VARIANTS {
            assert_eq!(serde_json::to_string(&f).unwrap(), format!("\"{}\"", f.as_str()));
        }
    }

    #[test]
    fn only_internal_outages_and_upstreams_are_server_errors() {
        for &code in ErrorCode::VARIANTS {
            let status = code.http_status();
            // 503: the database did not answer (an outage, retried), not a fault;
            // 502: a cluster's control plane gave no join script, or more than
            // the console reads, or the OpenID provider did not answer (their
            // fault, not ours).
            let server = matches!(
                code,
                ErrorCode::Internal
                    | ErrorCode::Unavailable
                    | ErrorCode::JoinScriptUnavailable
                    | ErrorCode::VirtualAnswerTooLarge
                    | ErrorCode::OidcUnavailable
            );
            assert_eq!(status >= 500, server, "{code:?}");
            assert_eq!(status == 500, code == ErrorCode::Internal, "{code:?}");
            assert!(status >= 400);
        }
    }
}
