//! `/clusters`: the list (admins see every owner's).

use leptos::prelude::*;
use leptos_meta::Title;

use super::problem::problem_view;
use crate::actions::auth::whoami;
use crate::actions::clusters::list_clusters;
use crate::components::labels::{PhaseBadge, access_text, shown_phase};
use crate::components::layout::Layout;
use crate::domain::cluster::Cluster;
use crate::i18n::*;

#[component]
fn ClusterRow(cluster: Cluster, show_owner: bool) -> impl IntoView {
    let i18n = use_i18n();
    let locale = i18n.get_locale_untracked();
    let href = format!("/clusters/{}", cluster.id);
    view! {
        <tr data-cluster=cluster.spec.name.to_string()>
            <th scope="row" class="font-medium">
                <a href=href class="link">
                    {cluster.spec.name.to_string()}
                </a>
            </th>
            <td>
                <PhaseBadge phase=shown_phase(&cluster) />
            </td>
            <td data-mode=cluster
                .spec
                .public_access
                .mode()
                .map(|m| m.as_str())
                .unwrap_or("disabled")>{access_text(locale, &cluster.spec.public_access)}</td>
            <td class="font-mono text-sm">
                {cluster.status.api_endpoint.clone().unwrap_or_else(|| t_string!(i18n, app.none).to_owned())}
            </td>
            {show_owner.then(|| view! { <td>{cluster.owner.clone()}</td> })}
        </tr>
    }
}

#[component]
pub fn ClustersPage() -> impl IntoView {
    let i18n = use_i18n();
    let content = Suspend::new(async move {
        let is_admin = whoami().await.ok().and_then(|s| s.user).is_some_and(|u| u.is_admin());
        match list_clusters().await {
            Err(e) => problem_view(e),
            Ok(list) if list.is_empty() => view! {
                <div class="card text-center">
                    <p class="text-slate-600">{t!(i18n, clusters.empty)}</p>
                    <a href="/clusters/new" class="btn btn-primary mt-4">
                        {t!(i18n, clusters.create_first)}
                    </a>
                </div>
            }
            .into_any(),
            Ok(list) => view! {
                <div class="card overflow-x-auto p-0">
                    <table class="table">
                        <caption class="sr-only">{t!(i18n, clusters.table_caption)}</caption>
                        <thead>
                            <tr>
                                <th scope="col">{t!(i18n, clusters.col_name)}</th>
                                <th scope="col">{t!(i18n, clusters.col_phase)}</th>
                                <th scope="col">{t!(i18n, clusters.col_mode)}</th>
                                <th scope="col">{t!(i18n, clusters.col_endpoint)}</th>
                                {is_admin.then(|| view! { <th scope="col">{t!(i18n, clusters.col_owner)}</th> })}
                            </tr>
                        </thead>
                        <tbody>
                            {list
                                .into_iter()
                                .map(|c| view! { <ClusterRow cluster=c show_owner=is_admin /> })
                                .collect_view()}
                        </tbody>
                    </table>
                </div>
            }
            .into_any(),
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
