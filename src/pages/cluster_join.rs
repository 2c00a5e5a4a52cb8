//! `/clusters/{id}/join`: bring your own nodes — a join token and the one-line
//! command that uses it, the tokens and their countdowns, the nodes that
//! joined. Live like the detail page while something happens (the region
//! refreshes every 2 s: `domain::nodes::join_in_progress`). Both writes
//! are plain forms, so the page works the same with JavaScript off.

use leptos::prelude::*;
use leptos_i18n::I18nContext;
use leptos_meta::Title;
use server_fn::ServerFn;

use super::problem::problem_view;
use super::{route_id, url_error};
use crate::actions::join::{CreateJoinToken, JoinPage, RemoveNode, RevokeJoinToken, load_join};
use crate::components::cluster_overview::Time;
use crate::components::error_text::error_text;
use crate::components::islands::live_region::LiveRegion;
use crate::components::layout::Layout;
use crate::domain::nodes::{
    JoinWarning, RemovalReason, RemovalState, RemovalView, join_command, join_in_progress, remaining, reset_command,
};
use crate::domain::{AppError, ErrorCode};
use crate::i18n::*;

/// The id of the region [`LiveRegion`] keeps current.
const REGION: &str = "join-live";

#[component]
pub(crate) fn ClusterJoinPage() -> impl IntoView {
    let create_error = url_error(CreateJoinToken::PATH);
    let revoke_error = url_error(RevokeJoinToken::PATH).or_else(|| url_error(RemoveNode::PATH));
    let content = Suspend::new(async move {
        let page = match route_id() {
            Some(id) => load_join(id).await,
            None => Err(AppError::new(ErrorCode::NotFound)),
        };
        match page {
            Ok(page) => view! { <Join page create_error revoke_error /> }.into_any(),
            Err(e) => problem_view(e),
        }
    });
    view! {
        <Layout>
            <Suspense fallback=|| ()>{content}</Suspense>
        </Layout>
    }
}

fn warning_text(i18n: I18nContext<Locale>, w: JoinWarning) -> &'static str {
    match w {
        JoinWarning::OwnNodesOff => t_string!(i18n, join.warning_own_nodes_off),
        JoinWarning::PublicAccessOff => t_string!(i18n, join.warning_public_access_off),
        JoinWarning::NotReady => t_string!(i18n, join.warning_not_ready),
        JoinWarning::EndpointUnreachable => t_string!(i18n, join.warning_endpoint_unreachable),
        JoinWarning::ControlPlaneUnavailable => t_string!(i18n, join.warning_control_plane_unavailable),
        JoinWarning::AnswerTooLarge => t_string!(i18n, join.warning_answer_too_large),
    }
}

fn error_banner(i18n: I18nContext<Locale>, e: Option<AppError>) -> impl IntoView {
    e.map(|e| {
        view! {
            <p class="form-error" role="alert" data-error-code=e.code.as_str()>
                {error_text(i18n.get_locale_untracked(), e.code)}
            </p>
        }
    })
}

#[component]
fn Join(page: JoinPage, create_error: Option<AppError>, revoke_error: Option<AppError>) -> impl IntoView {
    let i18n = use_i18n();
    let c = &page.cluster;
    let id = c.id;
    let name = c.spec.name.to_string();
    let offers_command = page.warnings.iter().all(|w| w.allows_command());
    let created = page.created.clone().filter(|_| offers_command).map(|t| {
        let command = join_command(&page.console_url, id, &t.token);
        view! {
            <section class="card" data-testid="created-token">
                <h2 class="section-title">{t!(i18n, join.command)}</h2>
                <p class="banner banner-ok" role="status">
                    {t!(i18n, join.created)}
                </p>
                <pre class="code-block" data-testid="join-command">
                    {command.clone()}
                </pre>
                <button
                    type="button"
                    class="btn btn-small mt-2"
                    hidden=true
                    data-copy=command
                    data-copied=t_string!(i18n, detail.copied)
                >
                    {t!(i18n, join.copy_command)}
                </button>
            </section>
        }
    });
    let create_form = offers_command.then(|| {
        let options = [
            ("10m", t_string!(i18n, join.lifetime_10m)),
            ("1h", t_string!(i18n, join.lifetime_1h)),
            ("12h", t_string!(i18n, join.lifetime_12h)),
            ("1d", t_string!(i18n, join.lifetime_1d)),
            ("7d", t_string!(i18n, join.lifetime_7d)),
        ];
        view! {
            <section class="card">
                <h2 class="section-title">{t!(i18n, join.new_token)}</h2>
                {error_banner(i18n, create_error)}
                // A plain form: the server makes the token and lands back here with it.
                <form method="post" action=CreateJoinToken::PATH class="form" data-form="create-token">
                    <input type="hidden" name="id" value=id />
                    <label class="field-label" for="lifetime">
                        {t!(i18n, join.lifetime)}
                    </label>
                    <select id="lifetime" name="lifetime" class="field-input max-w-xs">
                        {options
                            .into_iter()
                            .map(|(value, label)| {
                                view! {
                                    <option value=value selected=value == "1h">
                                        {label}
                                    </option>
                                }
                            })
                            .collect_view()}
                    </select>
                    <button type="submit" class="btn btn-primary self-start">
                        {t!(i18n, join.create)}
                    </button>
                </form>
            </section>
        }
    });
    view! {
        <Title text=format!("{} · {name}", t_string!(i18n, join.title)) />
        <LiveRegion region=REGION.to_owned()>
            <div class="page-head">
                <div>
                    <h1 class="page-title">{t!(i18n, join.title)}</h1>
                    <p class="font-mono text-sm text-slate-600">{name.clone()}</p>
                </div>
                <a href=format!("/clusters/{id}") class="btn">
                    {t!(i18n, join.back)}
                </a>
            </div>
            <p class="text-sm text-slate-700 mb-4">{t!(i18n, join.intro)}</p>
            {created}
            {create_form}
            <Live page=page.clone() revoke_error />
        </LiveRegion>
    }
}

/// What changes while the page is open: warnings, endpoint, tokens, nodes.
#[component]
fn Live(page: JoinPage, revoke_error: Option<AppError>) -> impl IntoView {
    let i18n = use_i18n();
    let id = page.cluster.id;
    let endpoint = page.cluster.status.api_endpoint.clone().map(|e| e.trim_start_matches("https://").to_owned());
    let readable = !page.warnings.iter().any(|w| {
        matches!(w, JoinWarning::ControlPlaneUnavailable | JoinWarning::AnswerTooLarge | JoinWarning::OwnNodesOff)
    });
    let warnings = page
        .warnings
        .iter()
        .map(|w| {
            let key: &'static str = (*w).into();
            view! {
                <p class="banner" role="alert" data-warning=key>
                    {warning_text(i18n, *w)}
                </p>
            }
        })
        .collect_view();
    let tokens = token_rows(i18n, &page);
    let nodes = node_rows(i18n, &page);
    let removals = (!page.removals.is_empty()).then(|| view! { <Removals removals=page.removals.clone() /> });
    let (no_tokens, no_nodes) = (page.tokens.is_empty(), page.nodes.is_empty());
    let in_progress = join_in_progress(page.cluster.in_progress(), &page.tokens, &page.nodes, &page.removals, page.now);
    view! {
        // Live while something happens (`join_in_progress`); still otherwise.
        <div id=REGION data-in-progress=in_progress.to_string()>
            {warnings}
            {error_banner(i18n, revoke_error)}
            <section class="card">
                <dl class="facts">
                    <dt>{t!(i18n, join.endpoint)}</dt>
                    <dd class="font-mono" data-field="join-endpoint">
                        {endpoint.unwrap_or_else(|| t_string!(i18n, join.endpoint_none).to_owned())}
                    </dd>
                </dl>
            </section>
            {readable
                .then(|| {
                    view! {
                        <section class="card">
                            <h2 class="section-title">{t!(i18n, join.tokens)}</h2>
                            {if no_tokens {
                                view! { <p class="text-sm text-slate-600">{t!(i18n, join.tokens_empty)}</p> }.into_any()
                            } else {
                                view! {
                                    <table class="table" data-testid="tokens">
                                        <thead>
                                            <tr>
                                                <th scope="col">{t!(i18n, join.token_id)}</th>
                                                <th scope="col">{t!(i18n, join.token_created)}</th>
                                                <th scope="col">{t!(i18n, join.token_expires)}</th>
                                                <th scope="col">{t!(i18n, join.token_nodes)}</th>
                                                <th scope="col"></th>
                                            </tr>
                                        </thead>
                                        <tbody>{tokens}</tbody>
                                    </table>
                                }
                                    .into_any()
                            }}
                        </section>
                        <section class="card">
                            <h2 class="section-title">{t!(i18n, join.nodes)}</h2>
                            {if no_nodes {
                                view! { <p class="text-sm text-slate-600">{t!(i18n, join.nodes_empty)}</p> }.into_any()
                            } else {
                                view! {
                                    <table class="table" data-testid="nodes">
                                        <thead>
                                            <tr>
                                                <th scope="col">{t!(i18n, join.node_name)}</th>
                                                <th scope="col">{t!(i18n, join.node_ready)}</th>
                                                <th scope="col">{t!(i18n, join.node_version)}</th>
                                                <th scope="col">{t!(i18n, join.node_ip)}</th>
                                                <th scope="col">{t!(i18n, join.node_since)}</th>
                                                <th scope="col"></th>
                                            </tr>
                                        </thead>
                                        <tbody>{nodes}</tbody>
                                    </table>
                                    <p class="field-hint mt-3">{t!(i18n, join.remove_hint)}</p>
                                    <pre class="code-block mt-1">{reset_command(&page.console_url, id)}</pre>
                                }
                                    .into_any()
                            }}
                        </section>
                    }
                })}
            {removals}
        </div>
    }
}

/// The join tokens, each with its countdown, the nodes that joined with it
/// and its revoke form.
fn token_rows(i18n: I18nContext<Locale>, page: &JoinPage) -> impl IntoView + use<> {
    let id = page.cluster.id;
    let now = page.now;
    page.tokens
        .iter()
        .map(|t| {
            let expires = match t.expires_at {
                None => t_string!(i18n, join.never).to_owned(),
                Some(at) => match remaining(at, now) {
                    None => t_string!(i18n, join.expired).to_owned(),
                    Some((h, m, s)) => {
                        t_string!(i18n, join.expires_in, h = h.to_string(), m = m.to_string(), s = s.to_string())
                            .to_string()
                    }
                },
            };
            let token_id = t.id.clone();
            view! {
                <tr data-token=t.id.clone()>
                    <td class="font-mono">{t.id.clone()}</td>
                    <td>{t.created_at.map(|s| view! { <Time secs=s /> })}</td>
                    // The countdown as rendered, and the moment itself: a
                    // still page (nothing in progress) does not tick.
                    <td data-field="expires">
                        {expires}
                        {t
                            .expires_at
                            .map(|at| {
                                view! {
                                    " · "
                                    <Time secs=at />
                                }
                            })}
                    </td>
                    <td class="font-mono" data-field="token-nodes">
                        {t.nodes.join(", ")}
                    </td>
                    <td>
                        <form method="post" action=RevokeJoinToken::PATH data-form="revoke-token">
                            <input type="hidden" name="id" value=id />
                            <input type="hidden" name="token_id" value=token_id.clone() />
                            <button
                                type="submit"
                                class="btn btn-small btn-danger"
                                aria-label=t_string!(i18n, join.revoke_label, id = token_id)
                            >
                                {t!(i18n, join.revoke)}
                            </button>
                        </form>
                    </td>
                </tr>
            }
        })
        .collect_view()
}

/// The joined nodes, each with its removal forms (or that it is being removed).
fn node_rows(i18n: I18nContext<Locale>, page: &JoinPage) -> impl IntoView + use<> {
    let id = page.cluster.id;
    let removing = |name: &str| page.removals.iter().any(|r| r.node == name && r.state == RemovalState::Draining);
    page.nodes
        .iter()
        .map(|n| {
            let actions = if removing(&n.name) {
                view! {
                    <span class="badge badge-updating" data-field="removing">
                        {t!(i18n, join.removing)}
                    </span>
                }
                .into_any()
            } else {
                view! {
                    <RemoveForm id name=n.name.clone() drain=true />
                    // A machine that is gone never confirms its pods stopped:
                    // offered once the node is not Ready.
                    {(!n.ready).then(|| view! { <RemoveForm id name=n.name.clone() drain=false /> })}
                }
                .into_any()
            };
            view! {
                <tr data-node=n.name.clone()>
                    <td class="font-mono">{n.name.clone()}</td>
                    <td data-field="ready">
                        {if n.ready { t_string!(i18n, join.yes) } else { t_string!(i18n, join.no) }}
                    </td>
                    <td class="font-mono">{n.kubelet_version.clone()}</td>
                    <td class="font-mono">{n.internal_ip.clone()}</td>
                    <td>{n.since.map(|s| view! { <Time secs=s /> })}</td>
                    <td class="flex gap-2">{actions}</td>
                </tr>
            }
        })
        .collect_view()
}

/// Remove (drain first) or remove without draining: a plain form.
#[component]
fn RemoveForm(id: i64, name: String, drain: bool) -> impl IntoView {
    let i18n = use_i18n();
    let (label, text) = if drain {
        (t_string!(i18n, join.remove_label, name = name.clone()).to_string(), t_string!(i18n, join.remove))
    } else {
        (t_string!(i18n, join.remove_force_label, name = name.clone()).to_string(), t_string!(i18n, join.remove_force))
    };
    view! {
        <form method="post" action=RemoveNode::PATH data-form=if drain { "remove-node" } else { "remove-node-force" }>
            <input type="hidden" name="id" value=id />
            <input type="hidden" name="node" value=name />
            {(!drain).then(|| view! { <input type="hidden" name="drain" value="false" /> })}
            <button type="submit" class="btn btn-small btn-danger" aria-label=label>
                {text}
            </button>
        </form>
    }
}

/// What a removal is doing, or how it ended, in words.
fn removal_text(i18n: I18nContext<Locale>, r: &RemovalView) -> String {
    let count = r.pods_left.unwrap_or_default().to_string();
    match (r.state, r.reason) {
        (RemovalState::Draining, Some(RemovalReason::DisruptionBudget)) => {
            let pod = r.pod.clone().unwrap_or_default();
            t_string!(i18n, join.removal_waiting_budget, pod = pod, count = count).to_string()
        }
        (RemovalState::Draining, Some(RemovalReason::ControlPlaneUnavailable)) => {
            t_string!(i18n, join.removal_waiting_control_plane).to_owned()
        }
        (RemovalState::Draining, _) => match r.pods_left {
            None => t_string!(i18n, join.removal_starting).to_owned(),
            Some(0) => t_string!(i18n, join.removal_deleting).to_owned(),
            Some(_) => t_string!(i18n, join.removal_draining, count = count).to_string(),
        },
        (RemovalState::Done, _) if !r.drain => t_string!(i18n, join.removal_done_no_drain).to_owned(),
        (RemovalState::Done, _) => t_string!(i18n, join.removal_done).to_owned(),
        (RemovalState::Failed, Some(RemovalReason::NodeUnreachable)) => {
            t_string!(i18n, join.removal_failed_node_unreachable).to_owned()
        }
        (RemovalState::Failed, Some(RemovalReason::DisruptionBudget)) => {
            t_string!(i18n, join.removal_failed_budget).to_owned()
        }
        (RemovalState::Failed, Some(RemovalReason::ControlPlaneUnavailable)) => {
            t_string!(i18n, join.removal_failed_control_plane).to_owned()
        }
        (RemovalState::Failed, Some(RemovalReason::DrainTimeout) | None) => {
            t_string!(i18n, join.removal_failed_drain_timeout).to_owned()
        }
    }
}

/// The cluster's latest removals, running ones first in time order as stored.
#[component]
fn Removals(removals: Vec<RemovalView>) -> impl IntoView {
    let i18n = use_i18n();
    let rows = removals
        .iter()
        .map(|r| {
            let state: &'static str = r.state.into();
            view! {
                <tr data-removal=r.node.clone() data-state=state>
                    <td class="font-mono">{r.node.clone()}</td>
                    <td data-field="removal-progress">{removal_text(i18n, r)}</td>
                    <td>{r.requested_by.clone()}</td>
                    <td>
                        <Time secs=r.created_at />
                    </td>
                    <td>{r.finished_at.map(|s| view! { <Time secs=s /> })}</td>
                </tr>
            }
        })
        .collect_view();
    view! {
        <section class="card">
            <h2 class="section-title">{t!(i18n, join.removals)}</h2>
            <table class="table" data-testid="removals">
                <thead>
                    <tr>
                        <th scope="col">{t!(i18n, join.removal_node)}</th>
                        <th scope="col">{t!(i18n, join.removal_progress)}</th>
                        <th scope="col">{t!(i18n, join.removal_by)}</th>
                        <th scope="col">{t!(i18n, join.removal_started)}</th>
                        <th scope="col">{t!(i18n, join.removal_finished)}</th>
                    </tr>
                </thead>
                <tbody>{rows}</tbody>
            </table>
        </section>
    }
}
