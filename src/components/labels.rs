//! Translated labels for domain values (modes, phases, connection states).

use leptos::prelude::*;

use crate::domain::cluster::Cluster;
use crate::domain::gateway::RouteReason;
use crate::domain::{ConnectionStatus, Phase, PublicAccess, PublicAccessMode, Reason, StopReason};
use crate::i18n::*;

/// Whether a count of `n` takes the singular form in `locale` (CLDR's
/// cardinal plural rules: English `one` is exactly 1 for a whole number;
/// Chinese and Japanese have one form for every count). The `_singular`
/// locale keys hold that form (the same text in zh-CN and ja).
pub(crate) fn singular(locale: Locale, n: i64) -> bool {
    matches!(locale, Locale::en) && n == 1
}

pub(crate) fn mode_text(locale: Locale, mode: Option<PublicAccessMode>) -> &'static str {
    match mode {
        None => td_string!(locale, mode.disabled),
        Some(PublicAccessMode::NodePort) => td_string!(locale, mode.nodeport),
        Some(PublicAccessMode::LoadBalancer) => td_string!(locale, mode.loadbalancer),
        Some(PublicAccessMode::Gateway) => td_string!(locale, mode.gateway),
    }
}

pub(crate) fn access_text(locale: Locale, access: &PublicAccess) -> String {
    match access.host() {
        Some(host) => format!("{} · {host}", mode_text(locale, access.mode())),
        None => mode_text(locale, access.mode()).to_owned(),
    }
}

pub(crate) fn phase_text(locale: Locale, phase: Phase) -> &'static str {
    match phase {
        Phase::Pending => td_string!(locale, phase.pending),
        Phase::Provisioning => td_string!(locale, phase.provisioning),
        Phase::Ready => td_string!(locale, phase.ready),
        Phase::Updating => td_string!(locale, phase.updating),
        Phase::Deleting => td_string!(locale, phase.deleting),
        Phase::Failed => td_string!(locale, phase.failed),
    }
}

pub(crate) fn connection_text(locale: Locale, status: ConnectionStatus) -> &'static str {
    use ConnectionStatus as C;
    match status {
        C::Unknown => td_string!(locale, connection.unknown),
        C::Ok => td_string!(locale, connection.ok),
        C::DnsFailure => td_string!(locale, connection.dns_failure),
        C::Refused => td_string!(locale, connection.refused),
        C::Timeout => td_string!(locale, connection.timeout),
        C::CertificateHostMismatch => td_string!(locale, connection.certificate_host_mismatch),
        C::CertificateUntrusted => td_string!(locale, connection.certificate_untrusted),
        C::Unauthorized => td_string!(locale, connection.unauthorized),
        C::HttpError => td_string!(locale, connection.http_error),
        C::AddressNotAllowed => td_string!(locale, connection.address_not_allowed),
    }
}

/// A cluster's status reason in words: the translated code, then the
/// upstream component's own words (helm's error, the LoadBalancer provider's
/// Event, the scheduler's message) as they are. A reason this build does not
/// know is shown as it was stored.
pub(crate) fn reason_text(locale: Locale, reason: &Reason) -> Option<String> {
    let text = match reason {
        Reason::None => return None,
        Reason::Unknown(raw) => return Some(raw.clone()),
        Reason::Installing => td_string!(locale, reason.installing),
        Reason::Starting => td_string!(locale, reason.starting),
        Reason::NotStarting(_) => td_string!(locale, reason.not_starting),
        Reason::HelmFailed(_) => td_string!(locale, reason.helm_failed),
        Reason::NamespaceTaken(_) => td_string!(locale, reason.namespace_taken),
        Reason::HostRefused(_) => td_string!(locale, reason.host_refused),
        Reason::LbPending(None) => {
            return Some(format!(
                "{} {}",
                td_string!(locale, reason.lb_pending),
                td_string!(locale, reason.lb_pending_hint)
            ));
        }
        Reason::LbPending(Some(_)) => td_string!(locale, reason.lb_pending),
        Reason::ProbeFailed(status) => {
            return Some(format!("{} {}", td_string!(locale, reason.probe_failed), connection_text(locale, *status)));
        }
        Reason::NodeAddress => td_string!(locale, reason.node_address),
        Reason::NoNodeAddress => td_string!(locale, reason.no_node_address),
        Reason::GatewayNotConfigured => td_string!(locale, reason.gateway_not_configured),
        Reason::GatewayApiMissing => td_string!(locale, reason.gateway_api_missing),
        Reason::RouteWaiting => td_string!(locale, reason.route_waiting),
        Reason::RouteShadowed => td_string!(locale, reason.route_shadowed),
        Reason::GatewayPending(_) => td_string!(locale, reason.gateway_pending),
        Reason::RouteNotAccepted(d) | Reason::RouteRefsUnresolved(d) => {
            let head = match reason {
                Reason::RouteNotAccepted(_) => td_string!(locale, reason.route_not_accepted),
                _ => td_string!(locale, reason.route_refs_unresolved),
            };
            return Some(format!("{head} {}", route_reason_words(locale, d)));
        }
    };
    Some(match reason.detail() {
        Some(d) if !d.is_empty() => format!("{text} {d}"),
        _ => text.to_owned(),
    })
}

/// A route condition's reason and message, with the reasons the Gateway API
/// defines (`apis/v1/shared_types.go`) in words; others as they came.
pub(crate) fn route_reason_words(locale: Locale, route: &RouteReason) -> String {
    use crate::domain::gateway::RouteCode as C;
    let words = match &route.code {
        C::NotAllowedByListeners => td_string!(locale, reason.route.not_allowed_by_listeners),
        C::NoMatchingListenerHostname => td_string!(locale, reason.route.no_matching_listener_hostname),
        C::NoMatchingParent => td_string!(locale, reason.route.no_matching_parent),
        C::UnsupportedValue => td_string!(locale, reason.route.unsupported_value),
        C::Pending => td_string!(locale, reason.route.pending),
        C::BackendNotFound => td_string!(locale, reason.route.backend_not_found),
        C::RefNotPermitted => td_string!(locale, reason.route.ref_not_permitted),
        C::InvalidKind => td_string!(locale, reason.route.invalid_kind),
        C::UnsupportedProtocol => td_string!(locale, reason.route.unsupported_protocol),
        C::Other(_) => return route.to_string(),
    };
    format!("{words} ({route})")
}

/// Why a move stopped a cluster, in words: the move's own reason, or the
/// cluster's status reason when it stopped.
pub(crate) fn stop_reason_text(locale: Locale, reason: &StopReason) -> Option<String> {
    Some(
        match reason {
            StopReason::None => return None,
            StopReason::Cluster(r) => return reason_text(locale, r),
            StopReason::TimedOut => td_string!(locale, reason.timed_out),
            StopReason::ChangedMeanwhile => td_string!(locale, reason.changed_meanwhile),
            StopReason::ClusterDeleted => td_string!(locale, reason.cluster_deleted),
            StopReason::HostInUse => td_string!(locale, errors.host_in_use),
            StopReason::HostInvalid => td_string!(locale, errors.host_invalid),
        }
        .to_owned(),
    )
}

/// The phase a user should see: a requested deletion shows as deleting
/// before the host cluster reports anything, and as failed when the host
/// refused it (the page then offers to delete again).
pub(crate) fn shown_phase(c: &Cluster) -> Phase {
    if c.deleting() { Phase::Deleting } else { c.status.phase }
}

#[component]
pub(crate) fn PhaseBadge(phase: Phase) -> impl IntoView {
    phase_badge(use_i18n().get_locale(), phase)
}

/// [`PhaseBadge`] for a known locale.
pub(crate) fn phase_badge(locale: Locale, phase: Phase) -> impl IntoView {
    view! {
        <span class=format!("badge badge-{}", phase.as_str()) data-phase=phase.as_str()>
            {phase_text(locale, phase)}
        </span>
    }
}

/// Text escaped as leptos' renderer escapes a text node (`&`, `<`, `>`), for
/// maud templates whose output must be the bytes a view renders. Anything a
/// template writes without it is escaped by maud (quotes too).
pub(crate) struct Text<'a>(pub &'a str);

impl maud::Render for Text<'_> {
    fn render_to(&self, out: &mut String) {
        out.push_str(&html_escape::encode_text(self.0));
    }
}

/// [`phase_badge`]'s markup as text, for the list's rows (`pages::clusters`);
/// a test holds the two to the same bytes.
pub(crate) fn phase_badge_markup(locale: Locale, phase: Phase) -> maud::Markup {
    maud::html! { span data-phase=(phase.as_str()) class={ "badge badge-" (phase.as_str()) } { (Text(phase_text(locale, phase))) } }
}

/// Seconds since the epoch as `YYYY-MM-DD HH:MM UTC`.
pub(crate) fn format_time(secs: i64) -> String {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Civil-from-days (Howard Hinnant), valid for the proleptic Gregorian calendar.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02} {:02}:{:02} UTC", rem / 3600, rem % 3600 / 60)
}

#[cfg(test)]
mod tests {
    use leptos::prelude::*;
    use strum::VariantArray;

    use super::{format_time, phase_badge, phase_badge_markup};
    use crate::domain::Phase;
    use crate::i18n::Locale;
    use leptos_i18n::Locale as _;

    #[test]
    fn the_badge_as_text_is_the_badge_leptos_renders() {
        for &locale in Locale::get_all() {
            for &phase in Phase::VARIANTS {
                let text = phase_badge_markup(locale, phase).into_string();
                assert_eq!(text, phase_badge(locale, phase).to_html(), "{locale:?} {phase:?}");
            }
        }
    }

    #[test]
    fn times() {
        assert_eq!(format_time(0), "1970-01-01 00:00 UTC");
        assert_eq!(format_time(951_782_400), "2000-02-29 00:00 UTC");
        assert_eq!(format_time(1_795_998_720), "2026-11-30 00:32 UTC");
    }
}
