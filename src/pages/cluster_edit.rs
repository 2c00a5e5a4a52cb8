//! `/clusters/{id}/edit`: resources and public access (off / NodePort / LoadBalancer).

use leptos::prelude::*;
use leptos_meta::Title;
use server_fn::ServerFn;

use super::cluster_detail::JoinedNodesWarning;
use super::problem::problem_view;
use super::{retyped, route_id, url_error};
use crate::actions::clusters::{UpdateCluster, load_cluster};
use crate::components::cluster_fields::ClusterFields;
use crate::components::islands::cluster_forms::{ClusterFormValues, EditClusterForm};
use crate::components::layout::Layout;
use crate::components::planned_names::{self, PlannedNames};
use crate::domain::{AppError, ErrorCode};
use crate::i18n::*;

#[component]
pub(crate) fn EditClusterPage() -> impl IntoView {
    let i18n = use_i18n();
    let content = Suspend::new(async move {
        let page = match route_id() {
            Some(id) => load_cluster(id, None).await,
            None => Err(AppError::new(ErrorCode::NotFound)),
        };
        match page {
            Err(e) => problem_view(e),
            Ok(p) if p.cluster.deletion_requested => problem_view(AppError::new(ErrorCode::ClusterDeleting)),
            // A viewer may see the cluster, not change it.
            Ok(p) if !p.allowed.edit => problem_view(AppError::new(ErrorCode::Forbidden)),
            Ok(p) => {
                let mut values = ClusterFormValues::of(
                    &p.cluster,
                    p.remembered_mode,
                    p.remembered_host.clone().or(p.cluster.unusable_host.clone()),
                );
                values.gateway = p.gateway.clone();
                if let Some(q) = retyped(UpdateCluster::PATH) {
                    values = values.retyped(|k| q.get(k), false);
                }
                let endpoint = p.cluster.clone().shown().status.api_endpoint;
                let current = &p.cluster.spec.public_access;
                let shown = planned_names::shown(&values, p.nodeport_host.as_ref(), Some(current));
                let error = url_error(UpdateCluster::PATH);
                view! {
                    <section class="card max-w-3xl">
                        <h1 class="page-title">
                            {t!(i18n, form.edit_title)} ": "
                            <span class="font-mono">{p.cluster.spec.name.to_string()}</span>
                        </h1>
                        <JoinedNodesWarning names=p.joined_nodes.clone() on_delete=false />
                        <EditClusterForm
                            id=p.cluster.id
                            values=values.clone()
                            nodeport_host=p.nodeport_host
                            current=p.cluster.spec.public_access.clone()
                            url_error=error
                        >
                            <ClusterFields values url_error=error editing=true />
                            <PlannedNames shown handed_out=endpoint />
                        </EditClusterForm>
                    </section>
                }
                .into_any()
            }
        }
    });
    view! {
        <Layout>
            <Title text=t_string!(i18n, form.edit_title) />
            <Suspense fallback=|| ()>{content}</Suspense>
        </Layout>
    }
}
