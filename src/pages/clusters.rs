//! `/clusters`: the list (admins see every owner's), one page at a time, with
//! search by name and filters in the URL (a plain GET form: the same without
//! JavaScript). The table refreshes itself while a cluster on it is in
//! progress (the detail page's `LiveRegion`).

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;
use strum::VariantArray;

use super::problem::problem_view;
use crate::actions::auth::session_now;
use crate::actions::clusters::list_clusters;
use crate::components::field::options;
use crate::components::islands::live_region::{LiveBound, LiveRegion};
use crate::components::labels::{Text, access_text, mode_text, phase_badge_markup, phase_text, shown_phase};
use crate::components::layout::Layout;
use crate::domain::Phase;
use crate::domain::cluster::Cluster;
use crate::domain::listing::{ListQuery, ModeFilter};
use crate::i18n::*;

/// The table's rows as HTML text, from a compile-time template that
/// escapes every value unless told otherwise (maud). Rendered as Leptos
/// views, 50 rows were the largest part of the page's server time after the
/// query (~13 % of it, `perf`, docs/performance.md); as a template they cost
/// a tenth of that. The markup is what the row views rendered
/// (`tests::rows_are_escaped_markup`).
fn rows_html(locale: Locale, clusters: &[Cluster], show_owner: bool) -> String {
    let none = td_string!(locale, app.none);
    maud::html! {
        @for c in clusters {
            @let name = c.spec.name.as_str();
            tr data-cluster=(name) {
                th scope="row" class="font-medium" { a href={ "/clusters/" (c.id) } class="link" { (Text(name)) } }
                td {
                    (phase_badge_markup(locale, shown_phase(c)))
                    @if c.unusable_host.is_some() {
                        span class="badge badge-failed ml-1" data-attention="unusable_host" { (Text(td_string!(locale, clusters.attention))) }
                    }
                }
                td data-mode=(c.spec.public_access.mode().map(|m| m.as_str()).unwrap_or("disabled")) {
                    (Text(&access_text(locale, &c.spec.public_access)))
                }
                td class="font-mono text-sm" { (Text(c.status.api_endpoint.as_deref().unwrap_or(none))) }
                @if show_owner { td { (Text(&c.owner)) } }
            }
        }
    }
    .into_string()
}

/// The search and filter form: a GET to this page.
#[component]
fn Filters(query: ListQuery, is_admin: bool) -> impl IntoView {
    let i18n = use_i18n();
    let locale = i18n.get_locale_untracked();
    let all = t_string!(i18n, clusters.filter_all);
    let mode_label = move |m: ModeFilter| mode_text(locale, m.mode());
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
                    {options(ModeFilter::all(), query.mode, ModeFilter::as_str, mode_label)}
                </select>
            </div>
            <div class="field">
                <label for="phase" class="field-label">
                    {t!(i18n, clusters.col_phase)}
                </label>
                <select id="phase" name="phase" class="field-input">
                    <option value="">{all}</option>
                    {options(
                        Phase::VARIANTS.iter().copied(),
                        query.phase,
                        Phase::as_str,
                        move |p| phase_text(locale, p),
                    )}
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
pub(crate) fn ClustersPage() -> impl IntoView {
    let i18n = use_i18n();
    let locale = i18n.get_locale_untracked();
    let params = use_query_map().get_untracked();
    let query = ListQuery::from_params(|k| params.get(k));
    let content = Suspend::new(async move {
        let is_admin = session_now().ok().and_then(|s| s.user).is_some_and(|u| u.is_admin());
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
                        <LiveBound />
                        <div
                            id="clusters-live"
                            data-in-progress=busy.to_string()
                            data-stream="/events/clusters"
                            data-version=list.version.to_string()
                        >
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
                                            <tbody inner_html=rows_html(locale, &list.items, is_admin) />
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
            // No `Suspense` around it: every page is rendered whole before it
            // is sent (`SsrMode::Async`), so a boundary would only add its cost.
            {content}
        </Layout>
    }
}

#[cfg(test)]
mod tests {
    use super::rows_html;
    use crate::domain::cluster::{Cluster, ClusterStatus, test_cluster as cluster};
    use crate::domain::{Host, Phase, PublicAccess};
    use crate::i18n::Locale;

    #[test]
    fn rows_are_escaped_markup() {
        let ready = ClusterStatus {
            phase: Phase::Ready,
            api_endpoint: Some("https://a.example:6443/?x=<1>&y=\"2\"".into()),
            observed_generation: 1,
            ..ClusterStatus::default()
        };
        let lb = PublicAccess::LoadBalancer { host: Host::parse("a.example").unwrap() };
        let mut odd = cluster(7, "web", "<b>eve</b> & \"co\"", PublicAccess::Disabled, ClusterStatus::default());
        odd.unusable_host = Some("not a host".into());
        let cases: [(Locale, Vec<Cluster>, bool, &str); 4] = [
            (Locale::en, vec![], true, ""),
            (
                Locale::en,
                vec![cluster(3, "db", "alice", lb.clone(), ready.clone())],
                true,
                "<tr data-cluster=\"db\"><th scope=\"row\" class=\"font-medium\"><a href=\"/clusters/3\" class=\"link\">db</a></th>\
                 <td><span data-phase=\"ready\" class=\"badge badge-ready\">Ready</span></td>\
                 <td data-mode=\"loadbalancer\">LoadBalancer · a.example</td>\
                 <td class=\"font-mono text-sm\">https://a.example:6443/?x=&lt;1&gt;&amp;y=\"2\"</td><td>alice</td></tr>",
            ),
            (
                Locale::en,
                vec![odd.clone()],
                true,
                "<tr data-cluster=\"web\"><th scope=\"row\" class=\"font-medium\"><a href=\"/clusters/7\" class=\"link\">web</a></th>\
                 <td><span data-phase=\"pending\" class=\"badge badge-pending\">Pending</span>\
                 <span class=\"badge badge-failed ml-1\" data-attention=\"unusable_host\">Needs attention</span></td>\
                 <td data-mode=\"disabled\">Off</td><td class=\"font-mono text-sm\">—</td>\
                 <td>&lt;b&gt;eve&lt;/b&gt; &amp; \"co\"</td></tr>",
            ),
            (
                Locale::zh_CN,
                vec![odd],
                false,
                "<tr data-cluster=\"web\"><th scope=\"row\" class=\"font-medium\"><a href=\"/clusters/7\" class=\"link\">web</a></th>\
                 <td><span data-phase=\"pending\" class=\"badge badge-pending\">等待中</span>\
                 <span class=\"badge badge-failed ml-1\" data-attention=\"unusable_host\">需要处理</span></td>\
                 <td data-mode=\"disabled\">关闭</td><td class=\"font-mono text-sm\">—</td></tr>",
            ),
        ];
        for (locale, clusters, show_owner, want) in cases {
            assert_eq!(rows_html(locale, &clusters, show_owner), want, "{locale:?}");
        }
    }
}
