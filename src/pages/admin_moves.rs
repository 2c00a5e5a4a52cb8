//! `/admin/moves` (admins): choose NodePort clusters and their new hosts,
//! see the dry run, start the move; `/admin/moves/{id}`: its progress,
//! live, with retry and roll back for failed clusters. Plain forms: the dry
//! run is a GET of this page, the start and item actions are posts.

use leptos::prelude::*;
use leptos_i18n::I18nContext;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;
use server_fn::ServerFn;

use super::problem::problem_view;
use super::{route_id, url_error};
use crate::actions::moves::{MoveItem, StartMove, load_move, movable_clusters, move_plan, recent_moves};
use crate::components::error_text::error_text;
use crate::components::islands::live_region::LiveRegion;
use crate::components::labels::format_time;
use crate::components::layout::Layout;
use crate::domain::moves::{
    DEFAULT_CONCURRENCY, DEFAULT_GRACE_DAYS, ItemState, Movable, MoveForm, MoveView, Plan, Problem, SwitchStep,
};
use crate::domain::{AppError, ErrorCode};
use crate::i18n::*;

fn item_state_text(i18n: I18nContext<Locale>, state: ItemState, step: Option<SwitchStep>) -> &'static str {
    match (state, step) {
        (ItemState::Switching, Some(SwitchStep::WaitingForAddress)) => t_string!(i18n, moves.step_address),
        (ItemState::Switching, Some(SwitchStep::Probing)) => t_string!(i18n, moves.step_probing),
        (ItemState::Switching, _) => t_string!(i18n, moves.state_switching),
        (ItemState::Queued, _) => t_string!(i18n, moves.state_queued),
        (ItemState::Done, _) => t_string!(i18n, moves.state_done),
        (ItemState::Failed, _) => t_string!(i18n, moves.state_failed),
        (ItemState::RolledBack, _) => t_string!(i18n, moves.state_rolled_back),
    }
}

/// The page's counted texts.
#[derive(Clone, Copy)]
enum Count {
    Changes,
    Start,
    Blocked,
}

/// A counted text in the singular or plural form `n` takes.
fn count_text(i18n: I18nContext<Locale>, n: usize, which: Count) -> String {
    let one = crate::components::labels::singular(i18n.get_locale_untracked(), i64::try_from(n).unwrap_or(i64::MAX));
    let n = n.to_string();
    match (which, one) {
        (Count::Changes, true) => t_string!(i18n, moves.changes_count_singular, n = n).to_string(),
        (Count::Changes, false) => t_string!(i18n, moves.changes_count, n = n).to_string(),
        (Count::Start, true) => t_string!(i18n, moves.start_singular, n = n).to_string(),
        (Count::Start, false) => t_string!(i18n, moves.start, n = n).to_string(),
        (Count::Blocked, true) => t_string!(i18n, moves.blocked_singular, n = n).to_string(),
        (Count::Blocked, false) => t_string!(i18n, moves.blocked, n = n).to_string(),
    }
}

fn problem_text(i18n: I18nContext<Locale>, p: Problem) -> &'static str {
    match p {
        Problem::HostInvalid => t_string!(i18n, moves.problem_host_invalid),
        Problem::HostInUse => t_string!(i18n, moves.problem_host_in_use),
        Problem::HostTwiceInBatch => t_string!(i18n, moves.problem_host_twice_in_batch),
        Problem::RangeExhausted => t_string!(i18n, moves.problem_range_exhausted),
        Problem::NoAddressRequest => t_string!(i18n, moves.problem_no_address_request),
        Problem::DoesNotResolve => t_string!(i18n, moves.problem_does_not_resolve),
        Problem::NotAGatewayHost => t_string!(i18n, moves.problem_not_a_gateway_host),
        Problem::AlreadyMoving => t_string!(i18n, moves.problem_already_migrating),
    }
}

/// The form as the URL gives it (the dry run's GET, or a refused start).
fn form_from_query() -> Option<MoveForm> {
    let q = use_query_map().get_untracked();
    let hosts = q.get("hosts")?;
    // Typed hosts come as `host.<cluster>` fields (the page) or one `typed` field (a refused start).
    let mut typed: Vec<String> = q.get("typed").into_iter().filter(|t| !t.is_empty()).collect();
    typed.extend((&q).into_iter().filter_map(|(k, v)| {
        let name = k.strip_prefix("host.")?;
        (!v.trim().is_empty()).then(|| format!("{name}={}", v.trim()))
    }));
    Some(MoveForm {
        typed: typed.join(","),
        clusters: q.get_all("clusters").unwrap_or_default().join(","),
        include_disabled: q.get("include_disabled").is_some_and(|v| !v.is_empty()),
        source: q.get("source").unwrap_or_default(),
        hosts,
        concurrency: q.get("concurrency").unwrap_or_default(),
        grace_days: q.get("grace_days").unwrap_or_default(),
        target: q.get("target").unwrap_or_default(),
    })
}

#[component]
fn PlanView(form: MoveForm, plan: Plan) -> impl IntoView {
    let i18n = use_i18n();
    let blocked = plan.blocked;
    let n = plan.items.len();
    let rows = plan
        .items
        .into_iter()
        .map(|item| {
            let problems = item
                .problems
                .iter()
                .map(|p| {
                    let blocking = p.blocks();
                    view! {
                        <li class=if blocking { "field-error" } else { "field-hint" } data-problem=p.as_str()>
                            {problem_text(i18n, *p)}
                        </li>
                    }
                })
                .collect_view();
            let changes = item
                .changes
                .iter()
                .map(|c| {
                    let line = format!(
                        "{}: {} → {}",
                        c.path,
                        c.old.as_deref().unwrap_or("—"),
                        c.new.as_deref().unwrap_or("—"),
                    );
                    view! { <li class="font-mono text-xs">{line}</li> }
                })
                .collect_view();
            view! {
                <tr data-plan=item.name.clone()>
                    <th scope="row" class="font-mono">
                        {item.name.clone()}
                    </th>
                    <td class="font-mono text-sm">{item.current_endpoint.clone().unwrap_or_else(|| "—".into())}</td>
                    <td class="font-mono text-sm" data-field="new-endpoint">
                        {item.new_endpoint.clone().unwrap_or_else(|| "—".into())}
                    </td>
                    <td class="font-mono text-xs">{item.planned_sans.join(", ")}</td>
                    <td>
                        <details>
                            <summary>{count_text(i18n, item.changes.len(), Count::Changes)}</summary>
                            <ul>{changes}</ul>
                        </details>
                    </td>
                    <td>
                        <ul>{problems}</ul>
                    </td>
                </tr>
            }
        })
        .collect_view();
    let start = (blocked == 0).then(|| {
        view! {
            <form method="post" action=StartMove::PATH class="form mt-4" data-form="start-move">
                <input type="hidden" name="clusters" value=form.clusters.clone() />
                <input type="hidden" name="include_disabled" value=if form.include_disabled { "on" } else { "" } />
                <input type="hidden" name="source" value=form.source.clone() />
                <input type="hidden" name="hosts" value=form.hosts.clone() />
                <input type="hidden" name="typed" value=form.typed.clone() />
                <input type="hidden" name="concurrency" value=form.concurrency.clone() />
                <input type="hidden" name="grace_days" value=form.grace_days.clone() />
                <input type="hidden" name="target" value=form.target.clone() />
                <p class="banner">{t!(i18n, moves.start_warning)}</p>
                <button type="submit" class="btn btn-primary self-start">
                    {count_text(i18n, n, Count::Start)}
                </button>
            </form>
        }
    });
    view! {
        <section class="card" data-testid="plan" data-blocked=blocked.to_string()>
            <h2 class="section-title">{t!(i18n, moves.plan_title)}</h2>
            {(blocked > 0)
                .then(|| {
                    view! {
                        <p class="form-error" role="alert">
                            {count_text(i18n, blocked, Count::Blocked)}
                        </p>
                    }
                })}
            <div class="overflow-x-auto">
                <table class="table">
                    <thead>
                        <tr>
                            <th scope="col">{t!(i18n, moves.col_cluster)}</th>
                            <th scope="col">{t!(i18n, moves.col_now)}</th>
                            <th scope="col">{t!(i18n, moves.col_new)}</th>
                            <th scope="col">{t!(i18n, moves.col_sans)}</th>
                            <th scope="col">{t!(i18n, moves.col_changes)}</th>
                            <th scope="col">{t!(i18n, moves.col_problems)}</th>
                        </tr>
                    </thead>
                    <tbody>{rows}</tbody>
                </table>
            </div>
            {start}
        </section>
    }
}

#[component]
pub(crate) fn MovesPage() -> impl IntoView {
    let i18n = use_i18n();
    let form = form_from_query();
    let start_error = url_error(StartMove::PATH);
    let content = Suspend::new(async move {
        let movable = match movable_clusters().await {
            Ok(m) => m,
            Err(e) => return problem_view(e),
        };
        let f = form.clone().unwrap_or_default();
        let rows = cluster_rows(i18n, movable, &f);
        let plan = match &form {
            Some(f) => match move_plan(f.clone()).await {
                Ok(plan) => view! { <PlanView form=f.clone() plan /> }.into_any(),
                Err(e) => error_view(e).into_any(),
            },
            None => ().into_any(),
        };
        let recent = recent_moves().await.unwrap_or_default();
        let template = !matches!(f.source.as_str(), "range" | "typed");
        view! {
            <section class="card">
                <h1 class="page-title">{t!(i18n, moves.title)}</h1>
                <p class="mb-4 text-slate-600">{t!(i18n, moves.intro)}</p>
                {start_error.map(error_view)}
                <form method="get" action="/admin/moves" class="form" data-form="move-plan">
                    <fieldset class="card-section">
                        <legend class="section-title">{t!(i18n, moves.clusters)}</legend>
                        <p class="field-hint">{t!(i18n, moves.clusters_hint)}</p>
                        <table class="table">
                            <tbody>{rows}</tbody>
                        </table>
                        <div class="check">
                            <input
                                type="checkbox"
                                id="include_disabled"
                                name="include_disabled"
                                value="on"
                                checked=f.include_disabled
                            />
                            <label for="include_disabled">{t!(i18n, moves.include_disabled)}</label>
                        </div>
                    </fieldset>
                    {target_fieldset(i18n, &f)}
                    {hosts_fieldset(i18n, &f, template)}
                    <button type="submit" class="btn btn-primary self-start">
                        {t!(i18n, moves.dry_run)}
                    </button>
                </form>
            </section>
            {plan}
            {recent_list(i18n, recent)}
        }
        .into_any()
    });
    view! {
        <Layout>
            <Title text=t_string!(i18n, moves.title) />
            <Suspense fallback=|| ()>{content}</Suspense>
        </Layout>
    }
}

/// The movable clusters, each a row to pick it with and type its host.
fn cluster_rows(i18n: I18nContext<Locale>, movable: Vec<Movable>, f: &MoveForm) -> impl IntoView + use<> {
    let chosen: Vec<String> = f.clusters.split(',').map(|s| s.trim().to_owned()).collect();
    movable
        .into_iter()
        .map(|m| {
            let id = format!("cluster-{}", m.name);
            let checked = chosen.contains(&m.name);
            let typed_host = f
                .typed
                .split(',')
                .find_map(|p| p.split_once('=').filter(|(n, _)| *n == m.name).map(|(_, h)| h.to_owned()))
                .unwrap_or_default();
            let host_label = t_string!(i18n, moves.typed_host_for, cluster = m.name.as_str()).to_string();
            view! {
                <tr>
                    <td>
                        <input type="checkbox" id=id.clone() name="clusters" value=m.name.clone() checked=checked />
                    </td>
                    <th scope="row" class="font-mono">
                        <label for=id>{m.name.clone()}</label>
                    </th>
                    <td>{m.owner}</td>
                    <td class="font-mono text-sm">
                        {if m.enabled {
                            m.endpoint.unwrap_or_else(|| "—".into())
                        } else {
                            t_string!(i18n, moves.access_off).to_owned()
                        }}
                    </td>
                    <td>
                        <input
                            type="text"
                            name=format!("host.{}", m.name)
                            value=typed_host
                            class="field-input"
                            aria-label=host_label
                            placeholder="api.example.com"
                            autocomplete="off"
                            spellcheck="false"
                        />
                    </td>
                </tr>
            }
        })
        .collect_view()
}

/// Where the clusters move: LoadBalancer or the admin's Gateway.
fn target_fieldset(i18n: I18nContext<Locale>, f: &MoveForm) -> impl IntoView + use<> {
    view! {
        <fieldset class="card-section">
            <legend class="section-title">{t!(i18n, moves.target)}</legend>
            <div class="check">
                <input
                    type="radio"
                    id="target_loadbalancer"
                    name="target"
                    value="loadbalancer"
                    checked=f.target != "gateway"
                />
                <label for="target_loadbalancer">{t!(i18n, mode.loadbalancer)}</label>
            </div>
            <div class="check">
                <input type="radio" id="target_gateway" name="target" value="gateway" checked=f.target == "gateway" />
                <label for="target_gateway">{t!(i18n, mode.gateway)}</label>
            </div>
            <p class="field-hint">{t!(i18n, moves.target_hint)}</p>
        </fieldset>
    }
}

/// Where the hosts come from, and how many clusters move at once.
fn hosts_fieldset(i18n: I18nContext<Locale>, f: &MoveForm, template: bool) -> impl IntoView + use<> {
    view! {
        <fieldset class="card-section">
            <legend class="section-title">{t!(i18n, moves.hosts)}</legend>
            <div class="check">
                <input type="radio" id="source_template" name="source" value="template" checked=template />
                <label for="source_template">{t!(i18n, moves.source_template)}</label>
            </div>
            <div class="check">
                <input type="radio" id="source_range" name="source" value="range" checked=f.source == "range" />
                <label for="source_range">{t!(i18n, moves.source_range)}</label>
            </div>
            <div class="check">
                <input type="radio" id="source_typed" name="source" value="typed" checked=f.source == "typed" />
                <label for="source_typed">{t!(i18n, moves.source_typed)}</label>
            </div>
            <div class="field">
                <label for="hosts" class="field-label">
                    {t!(i18n, moves.hosts_value)}
                </label>
                <input
                    id="hosts"
                    name="hosts"
                    type="text"
                    class="field-input"
                    value=f.hosts.clone()
                    autocomplete="off"
                    spellcheck="false"
                    aria-describedby="hosts-hint"
                />
                <p id="hosts-hint" class="field-hint">
                    {t!(i18n, moves.hosts_hint)}
                </p>
            </div>
            <div class="grid gap-4 sm:grid-cols-2">
                {number_field(
                    "concurrency",
                    t_string!(i18n, moves.concurrency),
                    &f.concurrency,
                    DEFAULT_CONCURRENCY,
                    None,
                )}
                {number_field(
                    "grace_days",
                    t_string!(i18n, moves.grace_days),
                    &f.grace_days,
                    DEFAULT_GRACE_DAYS,
                    Some(t_string!(i18n, moves.grace_hint)),
                )}
            </div>
        </fieldset>
    }
}

/// A whole-number field showing `default` until the admin typed something,
/// with its hint when it has one.
fn number_field(
    id: &'static str,
    label: &'static str,
    typed: &str,
    default: i64,
    hint: Option<&'static str>,
) -> impl IntoView + use<> {
    let value = if typed.is_empty() { default.to_string() } else { typed.to_owned() };
    let hint_id = format!("{id}-hint");
    view! {
        <div class="field">
            <label for=id class="field-label">
                {label}
            </label>
            <input
                id=id
                name=id
                type="text"
                inputmode="numeric"
                class="field-input"
                value=value
                aria-describedby=hint.map(|_| hint_id.clone())
            />
            {hint
                .map(|h| {
                    view! {
                        <p id=hint_id class="field-hint">
                            {h}
                        </p>
                    }
                })}
        </div>
    }
}

/// The latest moves, newest first.
fn recent_list(i18n: I18nContext<Locale>, recent: Vec<MoveView>) -> impl IntoView + use<> {
    view! {
        <section class="card">
            <h2 class="section-title">{t!(i18n, moves.recent)}</h2>
            <ul>
                {recent
                    .into_iter()
                    .map(|m| {
                        let done = m.counts.get(&ItemState::Done).copied().unwrap_or(0);
                        let failed = m.counts.get(&ItemState::Failed).copied().unwrap_or(0);
                        view! {
                            <li>
                                <a href=format!("/admin/moves/{}", m.id)>{format!("#{}", m.id)}</a>
                                " — "
                                {format_time(m.created_at)}
                                " — "
                                {t!(
                                    i18n, moves.summary, done = done.to_string(), failed = failed.to_string(), total = m.items.len().to_string()
                                )}
                            </li>
                        }
                    })
                    .collect_view()}
            </ul>
        </section>
    }
}

fn error_view(e: AppError) -> impl IntoView {
    let i18n = use_i18n();
    view! {
        <p class="form-error" role="alert" data-error-code=e.code.as_str()>
            {error_text(i18n.get_locale_untracked(), e.code)}
        </p>
    }
}

/// The id of the progress region the live island refreshes.
const PROGRESS_ID: &str = "move-live";

#[component]
fn Progress(m: MoveView) -> impl IntoView {
    let i18n = use_i18n();
    let id = m.id;
    let count = |s: ItemState| m.counts.get(&s).copied().unwrap_or(0);
    let (done, failed, total) = (count(ItemState::Done), count(ItemState::Failed), m.items.len());
    let rows = m
        .items
        .into_iter()
        .map(|item| {
            let actions = (item.state == ItemState::Failed).then(|| {
                let form = move |action: &'static str, label: &'static str| {
                    view! {
                        <form method="post" action=MoveItem::PATH class="inline">
                            <input type="hidden" name="id" value=id />
                            <input type="hidden" name="cluster_id" value=item.cluster_id />
                            <input type="hidden" name="action" value=action />
                            <button type="submit" class="btn">
                                {label}
                            </button>
                        </form>
                    }
                };
                view! {
                    {form("retry", t_string!(i18n, moves.retry))}
                    " "
                    {form("rollback", t_string!(i18n, moves.rollback))}
                }
            });
            let grace = match (item.old_endpoint_until, item.old_endpoint_closed) {
                (_, true) => t_string!(i18n, moves.old_closed).to_owned(),
                (Some(until), false) => format_time(until),
                (None, false) => "—".to_owned(),
            };
            view! {
                <tr data-item=item.name.clone() data-state=item.state.as_str()>
                    <th scope="row" class="font-mono">
                        <a href=format!("/clusters/{}", item.cluster_id)>{item.name.clone()}</a>
                    </th>
                    <td class="font-mono text-sm">{item.old_endpoint.clone().unwrap_or_else(|| "—".into())}</td>
                    <td class="font-mono text-sm">{item.new_endpoint()}</td>
                    <td>
                        {item_state_text(i18n, item.state, item.step)}
                        {crate::components::labels::stop_reason_text(i18n.get_locale_untracked(), &item.reason)
                            .map(|r| {
                                view! {
                                    <span class="block text-xs" data-reason=item.reason.to_string()>
                                        {r}
                                    </span>
                                }
                            })}
                    </td>
                    <td class="text-sm">{grace}</td>
                    <td>{actions}</td>
                </tr>
            }
        })
        .collect_view();
    view! {
        <div id=PROGRESS_ID data-in-progress=(!m.finished).to_string()>
            <p data-testid="move-counts" data-done=done data-failed=failed data-total=total>
                {t!(
                    i18n, moves.summary, done = done.to_string(), failed = failed.to_string(), total = total.to_string()
                )}
                " · "
                {t!(i18n, moves.elapsed, secs = m.elapsed_secs.to_string())}
            </p>
            <div class="overflow-x-auto">
                <table class="table">
                    <thead>
                        <tr>
                            <th scope="col">{t!(i18n, moves.col_cluster)}</th>
                            <th scope="col">{t!(i18n, moves.col_now)}</th>
                            <th scope="col">{t!(i18n, moves.col_new)}</th>
                            <th scope="col">{t!(i18n, moves.col_state)}</th>
                            <th scope="col">{t!(i18n, moves.col_grace)}</th>
                            <th scope="col">
                                <span class="sr-only">{t!(i18n, moves.col_actions)}</span>
                            </th>
                        </tr>
                    </thead>
                    <tbody>{rows}</tbody>
                </table>
            </div>
        </div>
    }
}

#[component]
pub(crate) fn MovePage() -> impl IntoView {
    let i18n = use_i18n();
    let item_error = url_error(MoveItem::PATH);
    let content = Suspend::new(async move {
        let view = match route_id() {
            Some(id) => load_move(id).await,
            None => Err(AppError::new(ErrorCode::NotFound)),
        };
        match view {
            Ok(m) => view! {
                <section class="card">
                    <h1 class="page-title">{t!(i18n, moves.progress_title, id = m.id.to_string())}</h1>
                    {item_error.map(error_view)}
                    <LiveRegion region=PROGRESS_ID.to_owned()>
                        <Progress m />
                    </LiveRegion>
                    <p class="mt-4">
                        <a href="/admin/moves">{t!(i18n, moves.back)}</a>
                    </p>
                </section>
            }
            .into_any(),
            Err(e) => problem_view(e),
        }
    });
    view! {
        <Layout>
            <Title text=t_string!(i18n, moves.title) />
            <Suspense fallback=|| ()>{content}</Suspense>
        </Layout>
    }
}
