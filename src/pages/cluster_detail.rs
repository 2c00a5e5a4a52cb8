//! `/clusters/{id}`: everything about one cluster, its history, and deletion.

use leptos::prelude::*;
use leptos_meta::Title;
use server_fn::ServerFn;

use super::problem::problem_view;
use super::{route_id, url_error};
use crate::actions::clusters::{ClusterPage, DeleteCluster, load_cluster};
use crate::components::islands::delete_form::DeleteClusterForm;
use crate::components::labels::{
    PhaseBadge, access_text, connection_text, format_time, mode_text, reason_text, shown_phase,
};
use crate::components::layout::Layout;
use crate::domain::change::{Change, ClusterEvent, Operation};
use crate::domain::{AppError, ErrorCode, PublicAccessMode, Resources};
use crate::i18n::*;
use leptos_i18n::I18nContext;

fn resources_text(i18n: I18nContext<Locale>, r: &Resources) -> String {
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
                })
                .collect();
            format!("{} — {}", t_string!(i18n, detail.event_update), parts.join("; "))
        }
    }
}

fn state_text(i18n: I18nContext<Locale>, state: &str) -> &'static str {
    match state {
        "running" => t_string!(i18n, detail.state_running),
        "done" => t_string!(i18n, detail.state_done),
        "failed" => t_string!(i18n, detail.state_failed),
        _ => t_string!(i18n, detail.state_pending),
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
                            <tr data-kind=e.operation.kind()>
                                <td class="whitespace-nowrap text-sm">{format_time(e.created_at)}</td>
                                <td>{event_text(i18n, &e.operation)}</td>
                                <td>{e.requested_by.clone().unwrap_or_default()}</td>
                                <td>{state_text(i18n, &e.state)}</td>
                            </tr>
                        }
                    })
                    .collect_view()}
            </tbody>
        </table>
    }
    .into_any()
}

#[component]
fn Overview(page: ClusterPage) -> impl IntoView {
    let i18n = use_i18n();
    let locale = i18n.get_locale_untracked();
    let c = page.cluster;
    let none = || t_string!(i18n, app.none).to_owned();
    let access = &c.spec.public_access;
    let mode = access.mode();
    let id = c.id;
    let banner = if c.deletion_requested {
        Some(t_string!(i18n, detail.deletion_requested))
    } else if c.waiting_for_host() {
        Some(t_string!(i18n, detail.waiting_for_host))
    } else {
        None
    };
    let port_row = (mode == Some(PublicAccessMode::NodePort)).then(|| {
        view! {
            <dt>{t!(i18n, detail.port)}</dt>
            <dd data-field="port">{c.status.public_access_port.map(|p| p.to_string()).unwrap_or_else(none)}</dd>
        }
    });
    let kubeconfig = if c.kubeconfig_downloadable() {
        view! {
            <a href=format!("/clusters/{id}/kubeconfig") class="btn btn-primary" download="">
                {t!(i18n, detail.kubeconfig_download)}
            </a>
        }
        .into_any()
    } else {
        view! {
            <button type="button" class="btn" disabled=true aria-describedby="kubeconfig-hint">
                {t!(i18n, detail.kubeconfig_download)}
            </button>
            <p id="kubeconfig-hint" class="field-hint">
                {t!(i18n, detail.kubeconfig_unavailable)}
            </p>
        }
        .into_any()
    };
    view! {
        <Title text=c.spec.name.to_string() />
        <div class="page-head">
            <div>
                <h1 class="page-title font-mono">{c.spec.name.to_string()}</h1>
                <PhaseBadge phase=shown_phase(&c) />
            </div>
            {(!c.deletion_requested)
                .then(|| {
                    view! {
                        <a href=format!("/clusters/{id}/edit") class="btn btn-primary">
                            {t!(i18n, detail.edit)}
                        </a>
                    }
                })}
        </div>
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
                <dd data-field="endpoint" class="font-mono">
                    {c.status.api_endpoint.clone().unwrap_or_else(none)}
                </dd>
                {port_row}
                <dt>{t!(i18n, detail.connection)}</dt>
                <dd data-field="connection">{connection_text(locale, c.status.connection_status)}</dd>
                {reason_text(locale, &c.status.message)
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
                {page
                    .viewer_is_admin
                    .then(|| {
                        view! {
                            <dt>{t!(i18n, detail.owner)}</dt>
                            <dd>{c.owner.clone()}</dd>
                        }
                    })}
                <dt>{t!(i18n, detail.generation)}</dt>
                <dd>{c.generation}</dd>
                <dt>{t!(i18n, detail.observed_generation)}</dt>
                <dd>{c.status.observed_generation}</dd>
            </dl>
        </section>
        <section class="card">
            <h2 class="section-title">{t!(i18n, detail.kubeconfig)}</h2>
            {kubeconfig}
        </section>
        <section class="card">
            <h2 class="section-title">{t!(i18n, detail.events)}</h2>
            <Events events=page.events />
        </section>
        {(!c.deletion_requested)
            .then(|| {
                view! {
                    <section class="card danger-zone">
                        <h2 class="section-title">{t!(i18n, detail.delete_title)}</h2>
                        <DeleteClusterForm id url_error=url_error(DeleteCluster::PATH) />
                    </section>
                }
            })}
    }
}

#[component]
pub fn ClusterDetailPage() -> impl IntoView {
    let content = Suspend::new(async move {
        let page = match route_id() {
            Some(id) => load_cluster(id).await,
            None => Err(AppError::new(ErrorCode::NotFound)),
        };
        match page {
            Ok(page) => view! { <Overview page /> }.into_any(),
            Err(e) => problem_view(e),
        }
    });
    view! {
        <Layout>
            <Suspense fallback=|| ()>{content}</Suspense>
        </Layout>
    }
}
