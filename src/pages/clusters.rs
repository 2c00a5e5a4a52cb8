//! `/clusters`: the list (admins see every owner's), one page at a time, with
//! search by name and filters in the URL (a plain GET form: the same without
//! JavaScript). The table refreshes itself while a cluster on it is in
//! progress (the detail page's `LiveRegion`).

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;

use super::problem::problem_view;
use crate::actions::auth::whoami;
use crate::actions::clusters::list_clusters;
use crate::components::islands::cluster_live::LiveRegion;
use crate::components::labels::{access_text, mode_text, phase_badge, phase_text, shown_phase};
use crate::components::layout::Layout;
use crate::domain::Phase;
use crate::domain::cluster::Cluster;
use crate::domain::listing::{ListQuery, ModeFilter};
use crate::i18n::*;

/// One row of the table: a plain function of the locale, not a component
/// (50 rows each looking up the i18n context and reading its locale signal
/// were a visible part of the page's server time).
fn cluster_row(locale: Locale, cluster: Cluster, show_owner: bool) -> impl IntoView {
    let href = format!("/clusters/{}", cluster.id);
    let mode = cluster.spec.public_access.mode().map(|m| m.as_str()).unwrap_or("disabled");
    view! {
        <tr data-cluster=cluster.spec.name.to_string()>
            <th scope="row" class="font-medium">
                <a href=href class="link">
                    {cluster.spec.name.to_string()}
                </a>
            </th>
            <td>
                {phase_badge(locale, shown_phase(&cluster))}
                {cluster
                    .unusable_host
                    .is_some()
                    .then(|| {
                        view! {
                            <span class="badge badge-failed ml-1" data-attention="unusable_host">
                                {td_string!(locale, clusters.attention)}
                            </span>
                        }
                    })}
            </td>
            <td data-mode=mode>{access_text(locale, &cluster.spec.public_access)}</td>
            <td class="font-mono text-sm">
                {cluster.status.api_endpoint.clone().unwrap_or_else(|| td_string!(locale, app.none).to_owned())}
            </td>
            {show_owner.then(|| view! { <td>{cluster.owner.clone()}</td> })}
        </tr>
    }
}

/// The search and filter form: a GET to this page.
#[component]
fn Filters(query: ListQuery, is_admin: bool) -> impl IntoView {
    let i18n = use_i18n();
    let locale = i18n.get_locale_untracked();
    let all = t_string!(i18n, clusters.filter_all);
    let mode_label = |m: ModeFilter| mode_text(locale, m.mode());
    view! {
        <form method="get" action="/clusters" class="filters" role="search" data-form="filters">
            <div class="field">
                <label for="q" class="field-label">
                    {t!(i18n, clusters.search)}
                </label>
                <input id="q" name="q" type="search" class="field-input" value=query.q.clone() autocomplete="off" />
            </div>
            <div class="field">
                <label for="mode" class="field-label">
                    {t!(i18n, clusters.col_mode)}
                </label>
                <select id="mode" name="mode" class="field-input">
                    <option value="">{all}</option>
                    {ModeFilter::ALL
                        .into_iter()
                        .map(|m| {
                            view! {
                                <option value=m.as_str() selected=query.mode == Some(m)>
                                    {mode_label(m)}
                                </option>
                            }
                        })
                        .collect_view()}
                </select>
            </div>
            <div class="field">
                <label for="phase" class="field-label">
                    {t!(i18n, clusters.col_phase)}
                </label>
                <select id="phase" name="phase" class="field-input">
                    <option value="">{all}</option>
                    {Phase::ALL
                        .into_iter()
                        .map(|p| {
                            view! {
                                <option value=p.as_str() selected=query.phase == Some(p)>
                                    {phase_text(locale, p)}
                                </option>
                            }
                        })
                        .collect_view()}
                </select>
            </div>
            {is_admin
                .then(|| {
                    view! {
                        <div class="field">
                            <label for="owner" class="field-label">
                                {t!(i18n, clusters.col_owner)}
                            </label>
                            <input
                                id="owner"
                                name="owner"
                                class="field-input"
                                value=query.owner.clone().unwrap_or_default()
                                autocomplete="off"
                            />
                        </div>
                    }
                })}
            <div class="filters-actions">
                <button type="submit" class="btn">
                    {t!(i18n, clusters.filter_submit)}
                </button>
                {query
                    .filtered()
                    .then(|| {
                        view! {
                            <a href="/clusters" class="link">
                                {t!(i18n, clusters.filter_clear)}
                            </a>
                        }
                    })}
            </div>
        </form>
    }
}

#[component]
pub fn ClustersPage() -> impl IntoView {
    let i18n = use_i18n();
    let locale = i18n.get_locale_untracked();
    let params = use_query_map().get_untracked();
    let query = ListQuery::from_params(|k| params.get(k));
    let content = Suspend::new(async move {
        let is_admin = whoami().await.ok().and_then(|s| s.user).is_some_and(|u| u.is_admin());
        match list_clusters(query.clone()).await {
            Err(e) => problem_view(e),
            Ok(list) if list.total == 0 && !query.filtered() => view! {
                <div class="card text-center">
                    <p class="text-slate-600">{t!(i18n, clusters.empty)}</p>
                    <a href="/clusters/new" class="btn btn-primary mt-4">
                        {t!(i18n, clusters.create_first)}
                    </a>
                </div>
            }
            .into_any(),
            Ok(list) => {
                let (first, last) = list.range();
                let pages = list.pages();
                let page = list.page;
                let busy = list.items.iter().any(Cluster::in_progress);
                let link = |p: u32| format!("/clusters{}", query.to_query(p));
                let prev = (page > 1).then(|| link(page - 1));
                let next = (page < pages).then(|| link(page + 1));
                view! {
                    <Filters query=query.clone() is_admin />
                    <LiveRegion region="clusters-live".to_owned()>
                        <div id="clusters-live" data-in-progress=busy.to_string()>
                            <p class="mb-2 text-sm text-slate-600" data-testid="list-range">
                                {t!(
                                    i18n, clusters.showing, first = first.to_string(), last = last.to_string(), total = list.total.to_string()
                                )}
                            </p>
                            {if list.items.is_empty() {
                                view! { <p class="card text-slate-600">{t!(i18n, clusters.no_match)}</p> }.into_any()
                            } else {
                                view! {
                                    <div class="card overflow-x-auto p-0">
                                        <table class="table">
                                            <caption class="sr-only">{t!(i18n, clusters.table_caption)}</caption>
                                            <thead>
                                                <tr>
                                                    <th scope="col">{t!(i18n, clusters.col_name)}</th>
                                                    <th scope="col">{t!(i18n, clusters.col_phase)}</th>
                                                    <th scope="col">{t!(i18n, clusters.col_mode)}</th>
                                                    <th scope="col">{t!(i18n, clusters.col_endpoint)}</th>
                                                    {is_admin
                                                        .then(|| {
                                                            view! {
                                                                <th scope="col">{t!(i18n, clusters.col_owner)}</th>
                                                            }
                                                        })}
                                                </tr>
                                            </thead>
                                            <tbody>
                                                {list
                                                    .items
                                                    .into_iter()
                                                    .map(|c| cluster_row(locale, c, is_admin))
                                                    .collect_view()}
                                            </tbody>
                                        </table>
                                    </div>
                                }
                                    .into_any()
                            }}
                        </div>
                    </LiveRegion>
                    {(pages > 1)
                        .then(|| {
                            view! {
                                <nav class="pager" aria-label=t_string!(i18n, clusters.pagination_label)>
                                    {prev
                                        .map(|href| {
                                            view! {
                                                <a href=href class="btn" rel="prev">
                                                    {t!(i18n, clusters.prev)}
                                                </a>
                                            }
                                        })}
                                    <span data-testid="page-of">
                                        {t!(i18n, clusters.page_of, page = page.to_string(), pages = pages.to_string())}
                                    </span>
                                    {next
                                        .map(|href| {
                                            view! {
                                                <a href=href class="btn" rel="next">
                                                    {t!(i18n, clusters.next)}
                                                </a>
                                            }
                                        })}
                                </nav>
                            }
                        })}
                }
                .into_any()
            }
        }
    });
    view! {
        <Layout>
            <Title text=t_string!(i18n, clusters.title) />
            <div class="page-head">
                <div>
                    <h1 class="page-title">{t!(i18n, clusters.title)}</h1>
                    <p class="text-slate-600">{t!(i18n, clusters.intro)}</p>
                </div>
                <a href="/clusters/new" class="btn btn-primary">
                    {t!(i18n, clusters.new)}
                </a>
            </div>
            <Suspense fallback=move || view! { <p>{t!(i18n, app.loading)}</p> }>{content}</Suspense>
        </Layout>
    }
}
