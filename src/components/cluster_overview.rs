//! A cluster's overview, rendered on the server: phase and progress, the
//! reason in words, endpoint (with a copy button), port (NodePort only),
//! connection, the kubeconfig download and the request history, with a plain
//! "Test connection" form. The page wraps it in the
//! [`LiveRegion`](crate::components::islands::live_region::LiveRegion)
//! island, which keeps it current while work is in progress. With JavaScript
//! off the same page is complete at each reload.

use leptos::prelude::*;
use leptos_i18n::I18nContext;
use server_fn::ServerFn;
use strum::VariantArray;

use crate::actions::clusters::{ClusterPage, DismissMovedNotice, ProbeCluster};
use crate::components::labels::{
    PhaseBadge, access_text, connection_text, format_time, mode_text, reason_text, shown_phase,
};
use crate::domain::change::{Change, ClusterEvent, Operation, OperationState};
use crate::domain::cluster::{Cluster, ProbeOutcome, Step};
use crate::domain::membership::{CredentialLifetime, MemberRole};
use crate::domain::{AppError, ConnectionStatus, ErrorCode, PublicAccessMode, Resources};
use crate::i18n::*;

pub(crate) fn resources_text(i18n: I18nContext<Locale>, r: &Resources) -> String {
    format!(
        "{} {} · {} {} · {} {}",
        r.cpu_cores(),
        t_string!(i18n, detail.cpu_unit),
        r.memory_gib,
        t_string!(i18n, detail.gib_unit),
        r.storage_gib,
        t_string!(i18n, detail.gib_unit)
    )
}

fn event_text(i18n: I18nContext<Locale>, op: &Operation) -> String {
    let locale = i18n.get_locale_untracked();
    match op {
        Operation::Create { spec } => format!(
            "{} — {}, {}",
            t_string!(i18n, detail.event_create),
            access_text(locale, &spec.public_access),
            resources_text(i18n, &spec.resources)
        ),
        Operation::Delete => t_string!(i18n, detail.event_delete).to_owned(),
        Operation::Update { changes } => {
            let parts: Vec<String> = changes
                .iter()
                .map(|c| match c {
                    Change::PublicAccess { from, to } => format!(
                        "{}: {} → {}",
                        t_string!(i18n, detail.event_public_access),
                        access_text(locale, from),
                        access_text(locale, to)
                    ),
                    Change::Resources { from, to } => format!(
                        "{}: {} → {}",
                        t_string!(i18n, detail.event_resources),
                        resources_text(i18n, from),
                        resources_text(i18n, to)
                    ),
                    Change::Move { id, rollback: false } => {
                        t_string!(i18n, detail.event_move, id = id.to_string()).to_string()
                    }
                    Change::Move { id, rollback: true } => {
                        t_string!(i18n, detail.event_move_rollback, id = id.to_string()).to_string()
                    }
                    Change::OldEndpointClosed { host } => {
                        t_string!(i18n, detail.event_old_endpoint_closed, host = host.as_str()).to_string()
                    }
                })
                .collect();
            format!("{} — {}", t_string!(i18n, detail.event_update), parts.join("; "))
        }
    }
}

fn operation_state_text(i18n: I18nContext<Locale>, state: OperationState) -> &'static str {
    match state {
        OperationState::Running => t_string!(i18n, detail.state_running),
        OperationState::Done => t_string!(i18n, detail.state_done),
        OperationState::Failed => t_string!(i18n, detail.state_failed),
        OperationState::Pending => t_string!(i18n, detail.state_pending),
    }
}

fn step_text(i18n: I18nContext<Locale>, step: Step) -> &'static str {
    match step {
        Step::Stored => t_string!(i18n, detail.step_stored),
        Step::Installing => t_string!(i18n, detail.step_installing),
        Step::Starting => t_string!(i18n, detail.step_starting),
        Step::Ready => t_string!(i18n, detail.step_ready),
    }
}

/// A time as UTC text; [`LiveRegion`] shows it in the viewer's locale and time zone.
#[component]
pub(crate) fn Time(secs: i64) -> impl IntoView {
    view! {
        <time datetime=format_time(secs) data-epoch=secs>
            {format_time(secs)}
        </time>
    }
}

#[component]
fn RequestProgress(cluster: Cluster) -> impl IntoView {
    let i18n = use_i18n();
    let (current, failed) = cluster.progress();
    let at = Step::VARIANTS.iter().position(|s| *s == current).unwrap_or(0);
    view! {
        <ol
            class="progress"
            aria-label=t_string!(i18n, detail.progress_label)
            data-step=current.as_str()
            data-failed=failed.to_string()
        >
            {Step::VARIANTS
                .iter()
                .copied()
                .enumerate()
                .map(|(i, step)| {
                    let state = match i.cmp(&at) {
                        std::cmp::Ordering::Less => "done",
                        std::cmp::Ordering::Equal if failed => "failed",
                        std::cmp::Ordering::Equal if step == Step::Ready => "done",
                        std::cmp::Ordering::Equal => "current",
                        std::cmp::Ordering::Greater => "todo",
                    };
                    let label = if state == "failed" {
                        format!("{} — {}", step_text(i18n, step), t_string!(i18n, detail.step_failed))
                    } else {
                        step_text(i18n, step).to_owned()
                    };
                    view! {
                        <li class=format!("progress-step progress-{state}") aria-current=(i == at).then_some("step")>
                            {label}
                        </li>
                    }
                })
                .collect_view()}
        </ol>
    }
}

#[component]
fn Facts(page: ClusterPage) -> impl IntoView {
    let i18n = use_i18n();
    let locale = i18n.get_locale_untracked();
    let c = page.cluster;
    let none = || t_string!(i18n, app.none).to_owned();
    let access = &c.spec.public_access;
    let mode = access.mode();
    let endpoint = c.status.api_endpoint.clone();
    // Shown (and working) once the page's island has hydrated: it needs JavaScript.
    let copy_button = endpoint.clone().map(|text| {
        view! {
            <button
                type="button"
                class="btn btn-small"
                hidden=true
                data-copy=text
                data-copied=t_string!(i18n, detail.copied)
                aria-label=t_string!(i18n, detail.copy_endpoint)
            >
                {t!(i18n, detail.copy)}
            </button>
        }
    });
    let port_row = (mode == Some(PublicAccessMode::NodePort)).then(|| {
        view! {
            <dt>{t!(i18n, detail.port)}</dt>
            <dd data-field="port">{c.status.public_access_port.map(|p| p.to_string()).unwrap_or_else(none)}</dd>
        }
    });
    view! {
        <dl class="facts">
            <dt>{t!(i18n, detail.mode)}</dt>
            <dd data-field="mode" data-mode=mode.map(|m| m.as_str()).unwrap_or("disabled")>
                {mode_text(locale, mode)}
            </dd>
            <dt>{t!(i18n, detail.host)}</dt>
            <dd data-field="host" class="font-mono">
                {access.host().map(ToString::to_string).unwrap_or_else(none)}
            </dd>
            <dt>{t!(i18n, detail.endpoint)}</dt>
            <dd class="flex items-center gap-2">
                <span data-field="endpoint" class="font-mono">
                    {endpoint.unwrap_or_else(none)}
                </span>
                {copy_button}
            </dd>
            {port_row}
            {(mode == Some(PublicAccessMode::Gateway))
                .then(|| {
                    let host = access.host().map(ToString::to_string).unwrap_or_default();
                    let target = page
                        .gateway_address
                        .clone()
                        .unwrap_or_else(|| t_string!(i18n, detail.gateway_no_address).to_owned());
                    view! {
                        <dt>{t!(i18n, detail.dns)}</dt>
                        <dd data-field="dns" class="font-mono">
                            {format!("{host} → {target}")}
                        </dd>
                    }
                })}
            <dt>{t!(i18n, detail.connection)}</dt>
            <dd data-field="connection" data-status=c.status.connection_status.as_str()>
                {connection_text(locale, c.status.connection_status)}
            </dd>
            {reason_text(locale, &c.status.reason)
                .map(|reason| {
                    view! {
                        <dt>{t!(i18n, detail.reason)}</dt>
                        <dd data-field="reason" class="whitespace-pre-line">
                            {reason}
                        </dd>
                    }
                })}
            <dt>{t!(i18n, detail.resources)}</dt>
            <dd>{resources_text(i18n, &c.spec.resources)}</dd>
            {c
                .spec
                .own_nodes
                .then(|| {
                    view! {
                        <dt>{t!(i18n, detail.nodes)}</dt>
                        <dd data-field="nodes">
                            {t!(i18n, detail.own_nodes)} " · "
                            <a class="link" href=format!("/clusters/{}/join", c.id) data-testid="add-nodes">
                                {t!(i18n, join.add_nodes)}
                            </a>
                        </dd>
                    }
                })}
            {(page.access != crate::domain::membership::Access::Owner)
                .then(|| {
                    view! {
                        <dt>{t!(i18n, detail.owner)}</dt>
                        <dd>{c.owner.clone()}</dd>
                    }
                })}
            <dt>{t!(i18n, detail.generation)}</dt>
            <dd>{c.generation}</dd>
            <dt>{t!(i18n, detail.observed_generation)}</dt>
            <dd data-field="observed_generation">{c.status.observed_generation}</dd>
        </dl>
    }
}

#[component]
fn Events(events: Vec<ClusterEvent>) -> impl IntoView {
    let i18n = use_i18n();
    if events.is_empty() {
        return view! { <p class="text-slate-600">{t!(i18n, detail.events_empty)}</p> }.into_any();
    }
    view! {
        <table class="table" data-testid="events">
            <thead>
                <tr>
                    <th scope="col">{t!(i18n, detail.event_when)}</th>
                    <th scope="col">{t!(i18n, detail.event_what)}</th>
                    <th scope="col">{t!(i18n, detail.event_who)}</th>
                    <th scope="col">{t!(i18n, detail.event_state)}</th>
                </tr>
            </thead>
            <tbody>
                {events
                    .into_iter()
                    .map(|e| {
                        view! {
                            <tr data-kind=e.operation.kind() data-state=e.state.as_str()>
                                <td class="whitespace-nowrap text-sm">
                                    <Time secs=e.created_at />
                                </td>
                                <td>{event_text(i18n, &e.operation)}</td>
                                <td>{e.requested_by.clone().unwrap_or_default()}</td>
                                <td>{operation_state_text(i18n, e.state)}</td>
                            </tr>
                        }
                    })
                    .collect_view()}
            </tbody>
        </table>
    }
    .into_any()
}

/// What "Test connection" saw: the status, and the names the certificate
/// covers on a mismatch, else the server's version or the HTTP status.
fn probe_outcome(i18n: I18nContext<Locale>, o: ProbeOutcome) -> impl IntoView + use<> {
    let locale = i18n.get_locale_untracked();
    let detail = o.detail.clone().map(|d| {
        let label = if o.status == ConnectionStatus::CertificateHostMismatch {
            format!(" {} ", t_string!(i18n, detail.probe_sans))
        } else {
            " — ".to_owned()
        };
        view! {
            {label}
            <span class="font-mono">{d}</span>
        }
    });
    view! {
        <p class="note" role="status" data-testid="probe-outcome" data-status=o.status.as_str()>
            {t!(i18n, detail.probe_result)}
            ": "
            {connection_text(locale, o.status)}
            {detail}
        </p>
    }
}

/// After a move: the endpoint moved; old kubeconfigs work until the grace
/// period ends. Shown until the owner dismisses it.
fn moved_notice(i18n: I18nContext<Locale>, c: &Cluster) -> Option<impl IntoView + use<>> {
    let locale = i18n.get_locale_untracked();
    let id = c.id;
    c.old_endpoint.clone().filter(|o| !o.dismissed).map(|o| {
        // Where it moved to: the mode it has now (LoadBalancer, or the gateway).
        let mode = crate::components::labels::mode_text(locale, c.spec.public_access.mode());
        let text = if o.closed {
            t_string!(i18n, detail.moved_closed, host = o.host.as_str(), mode = mode).to_string()
        } else {
            t_string!(i18n, detail.moved_open, host = o.host.as_str(), mode = mode).to_string()
        };
        let until = (!o.closed).then(|| {
            view! {
                <p>
                    {t!(i18n, detail.moved_until)} " "
                    <time data-epoch=o.until>{crate::components::labels::format_time(o.until)}</time>
                </p>
            }
        });
        view! {
            <div class="banner" role="status" data-testid="moved-notice" data-closed=o.closed.to_string()>
                <p>{text}</p>
                {until}
                <form method="post" action=DismissMovedNotice::PATH class="mt-2">
                    <input type="hidden" name="id" value=id />
                    <button type="submit" class="btn">
                        {t!(i18n, detail.moved_dismiss)}
                    </button>
                </form>
            </div>
        }
    })
}

/// How long a downloaded certificate may last, as the form offers it
/// (`CredentialLifetime` takes 10 minutes to 365 days; 8 hours preselected).
const LIFETIMES: [&str; 6] = ["1h", "8h", "1d", "7d", "30d", "365d"];

/// The kubeconfig download — the viewer's own certificate, at their role,
/// for the lifetime they pick (a plain form post: the answer is the file) —
/// or why there is none yet.
fn kubeconfig_action(i18n: I18nContext<Locale>, c: &Cluster, role: MemberRole, max: CredentialLifetime) -> AnyView {
    let id = c.id;
    if c.kubeconfig_downloadable() {
        let label = |l: &str| match l {
            "1h" => t_string!(i18n, detail.lifetime_1h).to_owned(),
            "8h" => t_string!(i18n, detail.lifetime_8h).to_owned(),
            "1d" => t_string!(i18n, detail.lifetime_1d).to_owned(),
            "7d" => t_string!(i18n, detail.lifetime_7d).to_owned(),
            "30d" => t_string!(i18n, detail.lifetime_30d).to_owned(),
            "365d" => t_string!(i18n, detail.lifetime_365d).to_owned(),
            other => other.to_owned(),
        };
        // What the admin allows: the usual choices up to it, and it.
        let mut choices: Vec<String> = LIFETIMES
            .iter()
            .filter(|l| CredentialLifetime::parse(l).is_ok_and(|l| l <= max))
            .map(|l| (*l).to_owned())
            .collect();
        if !choices.contains(&max.text()) {
            choices.push(max.text());
        }
        let preselected = CredentialLifetime::DEFAULT.min(max).text();
        let role = crate::components::members::role_label(i18n, role);
        view! {
            <form method="post" action=format!("/clusters/{id}/kubeconfig") class="form" data-form="kubeconfig">
                <div class="field">
                    <label for="lifetime" class="field-label">
                        {t!(i18n, detail.lifetime)}
                    </label>
                    <select id="lifetime" name="lifetime" class="field-input" aria-describedby="kubeconfig-own">
                        {choices
                            .iter()
                            .map(|l| {
                                view! {
                                    <option value=l.clone() selected=*l == preselected>
                                        {label(l)}
                                    </option>
                                }
                            })
                            .collect_view()}
                    </select>
                </div>
                <button type="submit" class="btn btn-primary self-start" data-testid="kubeconfig">
                    {t!(i18n, detail.kubeconfig_download)}
                </button>
                <p id="kubeconfig-own" class="field-hint">
                    {t!(i18n, detail.kubeconfig_own, role = role)}
                </p>
            </form>
        }
        .into_any()
    } else {
        view! {
            <button type="button" class="btn" disabled=true aria-describedby="kubeconfig-hint" data-testid="kubeconfig">
                {t!(i18n, detail.kubeconfig_download)}
            </button>
            <p id="kubeconfig-hint" class="field-hint">
                {t!(i18n, detail.kubeconfig_unavailable)}
            </p>
        }
        .into_any()
    }
}

/// Break-glass, for console admins: the cluster's own admin credential, with
/// a reason that goes to the audit log (a plain POST; the answer is the file).
fn break_glass_form(i18n: I18nContext<Locale>, c: &Cluster) -> impl IntoView + use<> {
    let id = c.id;
    view! {
        <details class="mt-4" data-testid="break-glass">
            <summary class="cursor-pointer text-sm">{t!(i18n, detail.break_glass)}</summary>
            <form
                method="post"
                action=format!("/clusters/{id}/admin-kubeconfig")
                class="form mt-2"
                data-form="break-glass"
            >
                <p class="field-hint">{t!(i18n, detail.break_glass_hint)}</p>
                <div class="field">
                    <label for="reason" class="field-label">
                        {t!(i18n, detail.break_glass_reason)}
                    </label>
                    <input id="reason" name="reason" class="field-input" required=true minlength="3" maxlength="500" />
                </div>
                <button type="submit" class="btn btn-danger self-start">
                    {t!(i18n, detail.break_glass_submit)}
                </button>
            </form>
        </details>
    }
}

/// Everything about the cluster that changes as the host reports: the part of
/// the page [`LiveRegion`] replaces while work is in progress.
#[component]
pub(crate) fn Overview(
    page: ClusterPage,
    /// The outcome of the connection test just run (from the URL).
    probed: Option<ProbeOutcome>,
    /// Why the connection test could not run (from the URL).
    probe_error: Option<AppError>,
    /// Why the kubeconfig (or break-glass) download just asked for was refused (from the URL).
    download_error: Option<ErrorCode>,
) -> impl IntoView {
    let i18n = use_i18n();
    let locale = i18n.get_locale_untracked();
    let c = page.cluster.clone();
    let id = c.id;
    let testable = c.status.api_endpoint.is_some();
    let outcome = probed.map(|o| probe_outcome(i18n, o));
    let probe_error = probe_error.map(|e| {
        view! {
            <p class="field-error" role="alert" data-error-code=e.code.as_str()>
                {crate::components::error_text::error_text(locale, e.code)}
            </p>
        }
    });
    let download_error = download_error.map(|code| {
        view! {
            <p class="field-error" role="alert" data-testid="download-error" data-error-code=code.as_str()>
                {crate::components::error_text::error_text(locale, code)}
            </p>
        }
    });
    let attention = c.unusable_host.clone().map(|raw| {
        view! {
            <p class="banner" role="alert" data-testid="unusable-host">
                {t!(i18n, detail.unusable_host, host = raw)}
            </p>
        }
    });
    let moved = moved_notice(i18n, &c);
    let banner = if c.deletion_failed() {
        Some(t_string!(i18n, detail.deletion_failed))
    } else if c.deletion_requested {
        Some(t_string!(i18n, detail.deletion_requested))
    } else if c.waiting_for_host() {
        Some(t_string!(i18n, detail.waiting_for_host))
    } else {
        None
    };
    let kubeconfig = kubeconfig_action(i18n, &c, page.access.role(), page.max_lifetime);
    let break_glass = (page.break_glass && c.kubeconfig_downloadable()).then(|| break_glass_form(i18n, &c));
    view! {
        <div
            id=crate::components::islands::live_region::REGION_ID
            data-in-progress=c.in_progress().to_string()
            data-stream=format!("/events/clusters/{}", c.id)
            data-version=c.revision.to_string()
        >
            <div class="page-head">
                <div>
                    <h1 class="page-title font-mono">{c.spec.name.to_string()}</h1>
                    <PhaseBadge phase=shown_phase(&c) />
                </div>
                {(!c.deletion_requested && page.allowed.edit)
                    .then(|| {
                        view! {
                            <a href=format!("/clusters/{id}/edit") class="btn btn-primary">
                                {t!(i18n, detail.edit)}
                            </a>
                        }
                    })}
            </div>
            {attention}
            {moved}
            {banner
                .map(|b| {
                    view! {
                        <p class="banner" role="status" data-testid="waiting">
                            {b}
                        </p>
                    }
                })}
            <section class="card">
                <h2 class="section-title">{t!(i18n, detail.overview)}</h2>
                // The steps are a create's or an update's; a deletion (under
                // way or refused) is told by the banner above.
                {(!c.deletion_requested).then(|| view! { <RequestProgress cluster=c.clone() /> })}
                <Facts page=page.clone() />
            </section>
            <section class="card">
                <h2 class="section-title">{t!(i18n, detail.kubeconfig)}</h2>
                {kubeconfig}
                {download_error}
                {break_glass}
                // A plain form: the server tests the endpoint and redirects back here with the outcome.
                <form method="post" action=ProbeCluster::PATH class="form mt-4" data-form="probe">
                    <input type="hidden" name="id" value=id />
                    <button type="submit" class="btn self-start" disabled=!testable>
                        {t!(i18n, detail.test_connection)}
                    </button>
                    {(!testable).then(|| view! { <p class="field-hint">{t!(i18n, detail.probe_unavailable)}</p> })}
                    {probe_error}
                    {outcome}
                </form>
            </section>
            <section class="card">
                <h2 class="section-title">{t!(i18n, detail.events)}</h2>
                <Events events=page.events />
                <nav class="mt-2 flex gap-4 text-sm" aria-label=t_string!(i18n, detail.events_pages)>
                    {page
                        .history
                        .paged
                        .then(|| {
                            view! {
                                <a href=format!("/clusters/{id}") data-testid="events-newest">
                                    {t!(i18n, detail.events_newest)}
                                </a>
                            }
                        })}
                    {page
                        .history
                        .older
                        .map(|before| {
                            view! {
                                <a href=format!("/clusters/{id}?before={before}") data-testid="events-older">
                                    {t!(i18n, detail.events_older)}
                                </a>
                            }
                        })}
                </nav>
            </section>
        </div>
    }
}
