//! Error codes to translated text, and the components that show them.

use leptos::prelude::*;

use crate::domain::{AppError, ErrorCode, Field};
use crate::i18n::*;

pub(crate) fn error_text(locale: Locale, code: ErrorCode) -> &'static str {
    use ErrorCode as E;
    match code {
        E::NameInvalid => td_string!(locale, errors.name_invalid),
        E::NameTaken => td_string!(locale, errors.name_taken),
        E::HostInvalid => td_string!(locale, errors.host_invalid),
        E::HostRequiredForLoadBalancer => td_string!(locale, errors.host_required_for_load_balancer),
        E::HostInUse => td_string!(locale, errors.host_in_use),
        E::ModeInvalid => td_string!(locale, errors.mode_invalid),
        E::CpuInvalid => td_string!(locale, errors.cpu_invalid),
        E::MemoryInvalid => td_string!(locale, errors.memory_invalid),
        E::StorageInvalid => td_string!(locale, errors.storage_invalid),
        E::StorageFixed => td_string!(locale, errors.storage_fixed),
        E::AnnotationsInvalid => td_string!(locale, errors.annotations_invalid),
        E::LoadBalancerClassInvalid => td_string!(locale, errors.load_balancer_class_invalid),
        E::AddressRequestInvalid => td_string!(locale, errors.address_request_invalid),
        E::ChartRepoInvalid => td_string!(locale, errors.chart_repo_invalid),
        E::ChartRepoNotAllowed => td_string!(locale, errors.chart_repo_not_allowed),
        E::ChartVersionInvalid => td_string!(locale, errors.chart_version_invalid),
        E::UsernameInvalid => td_string!(locale, errors.username_invalid),
        E::UsernameTaken => td_string!(locale, errors.username_taken),
        E::PasswordTooShort => td_string!(locale, errors.password_too_short),
        E::RoleInvalid => td_string!(locale, errors.role_invalid),
        E::LoginFailed => td_string!(locale, errors.login_failed),
        E::LoginRateLimited => td_string!(locale, errors.login_rate_limited),
        E::Unauthenticated => td_string!(locale, errors.unauthenticated),
        E::Forbidden => td_string!(locale, errors.forbidden),
        E::OriginRejected => td_string!(locale, errors.origin_rejected),
        E::NotFound => td_string!(locale, errors.not_found),
        E::BadRequest => td_string!(locale, errors.bad_request),
        E::PayloadTooLarge => td_string!(locale, errors.payload_too_large),
        E::UnsupportedMediaType => td_string!(locale, errors.unsupported_media_type),
        E::ClusterDeleting => td_string!(locale, errors.cluster_deleting),
        E::ChangedConcurrently => td_string!(locale, errors.changed_concurrently),
        E::KubeconfigUnavailable => td_string!(locale, errors.kubeconfig_unavailable),
        E::ConfirmationMismatch => td_string!(locale, errors.confirmation_mismatch),
        E::LastAdmin => td_string!(locale, errors.last_admin),
        E::MoveHostsInvalid => td_string!(locale, errors.migration_hosts_invalid),
        E::MoveEmpty => td_string!(locale, errors.migration_empty),
        E::MoveHasProblems => td_string!(locale, errors.migration_has_problems),
        E::MoveItemState => td_string!(locale, errors.migration_item_state),
        E::QuotaExceeded => td_string!(locale, errors.quota_exceeded),
        E::QuotaClustersExceeded => td_string!(locale, errors.quota_clusters_exceeded),
        E::QuotaInvalid => td_string!(locale, errors.quota_invalid),
        E::OwnNodesNotOffered => td_string!(locale, errors.own_nodes_not_offered),
        E::OwnNodesNeedLoadBalancer => td_string!(locale, errors.own_nodes_need_load_balancer),
        E::OwnNodesNotMovable => td_string!(locale, errors.own_nodes_not_movable),
        E::PlatformApiKeyInvalid => td_string!(locale, errors.platform_api_key_invalid),
        E::PlatformApiKeyNamespace => td_string!(locale, errors.platform_api_key_namespace),
        E::PodSecurityNotAllowed => td_string!(locale, errors.pod_security_not_allowed),
        E::HostRequiredForGateway => td_string!(locale, errors.host_required_for_gateway),
        E::GatewayHostNotDns => td_string!(locale, errors.gateway_host_not_dns),
        E::GatewayHostOutsideSuffix => td_string!(locale, errors.gateway_host_outside_suffix),
        E::GatewaySuffixRequired => td_string!(locale, errors.gateway_suffix_required),
        E::GatewayHostReserved => td_string!(locale, errors.gateway_host_reserved),
        E::GatewayNotConfigured => td_string!(locale, errors.gateway_not_configured),
        E::GatewayInvalid => td_string!(locale, errors.gateway_invalid),
        E::GatewaySuffixInvalid => td_string!(locale, errors.gateway_suffix_invalid),
        E::SpreadInvalid => td_string!(locale, errors.spread_invalid),
        E::StorageClassInvalid => td_string!(locale, errors.storage_class_invalid),
        E::TokenLifetimeInvalid => td_string!(locale, errors.token_lifetime_invalid),
        E::OwnNodesOff => td_string!(locale, errors.own_nodes_off),
        E::ControlPlaneUnavailable => td_string!(locale, errors.control_plane_unavailable),
        E::VirtualAnswerTooLarge => td_string!(locale, errors.virtual_answer_too_large),
        E::JoinRateLimited => td_string!(locale, errors.join_rate_limited),
        E::JoinScriptUnavailable => td_string!(locale, errors.join_script_unavailable),
        E::MemberRoleInvalid => td_string!(locale, errors.member_role_invalid),
        E::MemberUnknown => td_string!(locale, errors.member_unknown),
        E::MemberIsOwner => td_string!(locale, errors.member_is_owner),
        E::TeamNameInvalid => td_string!(locale, errors.team_name_invalid),
        E::TeamNameTaken => td_string!(locale, errors.team_name_taken),
        E::OidcUsernameTaken => td_string!(locale, errors.oidc_username_taken),
        E::CredentialLifetimeInvalid => td_string!(locale, errors.credential_lifetime_invalid),
        E::EgressInvalid => td_string!(locale, errors.egress_invalid),
        E::CredentialLifetimeOverLimit => td_string!(locale, errors.credential_lifetime_over_limit),
        E::PerUserCredentialsUnavailable => td_string!(locale, errors.per_user_credentials_unavailable),
        E::CredentialNotSigned => td_string!(locale, errors.credential_not_signed),
        E::ReasonRequired => td_string!(locale, errors.reason_required),
        E::AccountDisabled => td_string!(locale, errors.account_disabled),
        E::CannotDisableSelf => td_string!(locale, errors.cannot_disable_self),
        E::LocalSignInOff => td_string!(locale, errors.local_sign_in_off),
        E::OidcUnavailable => td_string!(locale, errors.oidc_unavailable),
        E::OidcStateInvalid => td_string!(locale, errors.oidc_state_invalid),
        E::OidcDenied => td_string!(locale, errors.oidc_denied),
        E::OidcTokenAudience => td_string!(locale, errors.oidc_token_audience),
        E::OidcTokenExpired => td_string!(locale, errors.oidc_token_expired),
        E::OidcTokenNonce => td_string!(locale, errors.oidc_token_nonce),
        E::OidcTokenSignature => td_string!(locale, errors.oidc_token_signature),
        E::OidcTokenInvalid => td_string!(locale, errors.oidc_token_invalid),
        E::OidcUsernameUnusable => td_string!(locale, errors.oidc_username_unusable),
        E::OrganisationAccount => td_string!(locale, errors.organisation_account),
        E::OwnerDisabled => td_string!(locale, errors.owner_disabled),
        E::OwnerQuotaExceeded => td_string!(locale, errors.owner_quota_exceeded),
        E::RateLimited => td_string!(locale, errors.rate_limited),
        E::HelmControllerUnsupported => td_string!(locale, errors.helm_controller_unsupported),
        E::CallsRateLimited => td_string!(locale, errors.calls_rate_limited),
        E::Unavailable => td_string!(locale, errors.unavailable),
        E::Internal => td_string!(locale, errors.internal),
    }
}

/// The error under one field, when the error belongs to it.
#[component]
pub(crate) fn FieldError(field: Field, #[prop(into)] error: Signal<Option<AppError>>) -> impl IntoView {
    let i18n = use_i18n();
    move || {
        error.get().filter(|e| e.field == Some(field)).map(|e| {
            view! {
                <p id=format!("{}-error", field.as_str()) class="field-error" data-error-code=e.code.as_str()>
                    {error_text(i18n.get_locale(), e.code)}
                </p>
            }
        })
    }
}

/// An error that belongs to no field, at the top of a form.
#[component]
pub(crate) fn FormError(#[prop(into)] error: Signal<Option<AppError>>) -> impl IntoView {
    let i18n = use_i18n();
    move || {
        error.get().filter(|e| e.field.is_none()).map(|e| {
            view! {
                <div role="alert" class="form-error" data-error-code=e.code.as_str()>
                    {error_text(i18n.get_locale(), e.code)}
                </div>
            }
        })
    }
}

/// The error a submitted form shows: the latest result of an action
/// dispatched on this page, else the one the page passes from the URL after a
/// JavaScript-free post. (A `ServerAction` also starts from the URL's error
/// when the path matches; that would show one row's error in every row of the
/// same form, so it is ignored until the action runs here: `version` 0.)
pub(crate) fn action_error<T: Clone + Send + Sync + 'static>(
    value: impl Get<Value = Option<Result<T, AppError>>> + Send + Sync + 'static,
    version: impl Get<Value = usize> + Send + Sync + 'static,
    from_url: Option<AppError>,
) -> Signal<Option<AppError>> {
    Signal::derive(move || {
        if version.get() == 0 {
            return from_url;
        }
        match value.get() {
            Some(Err(e)) => Some(e),
            Some(Ok(_)) | None => None,
        }
    })
}
