//! `/clusters/new`.

use leptos::prelude::*;
use leptos_meta::Title;
use server_fn::ServerFn;

use super::problem::problem_view;
use super::{retyped, url_error};
use crate::actions::clusters::{CreateCluster, form_defaults};
use crate::components::cluster_fields::ClusterFields;
use crate::components::islands::cluster_forms::{ClusterFormValues, CreateClusterForm};
use crate::components::layout::Layout;
use crate::components::planned_names::{self, PlannedNames};
use crate::components::quota::QuotaLine;
use crate::i18n::*;

#[component]
pub(crate) fn NewClusterPage() -> impl IntoView {
    let i18n = use_i18n();
    let form = Suspend::new(async move {
        match form_defaults().await {
            Ok(defaults) => {
                let mut values = ClusterFormValues::new_cluster(defaults.mode);
                values.gateway = defaults.gateway.clone();
                if let Some(q) = retyped(CreateCluster::PATH) {
                    values = values.retyped(|k| q.get(k), true);
                }
                let shown = planned_names::shown(&values, defaults.nodeport_host.as_ref(), None);
                let error = url_error(CreateCluster::PATH);
                view! {
                    <QuotaLine quota=defaults.quota />
                    <CreateClusterForm values=values.clone() nodeport_host=defaults.nodeport_host url_error=error>
                        <ClusterFields values url_error=error own_nodes_offered=defaults.own_nodes_offered />
                        <PlannedNames shown />
                    </CreateClusterForm>
                }
                .into_any()
            }
            Err(e) => problem_view(e),
        }
    });
    view! {
        <Layout>
            <Title text=t_string!(i18n, form.create_title) />
            <section class="card max-w-3xl">
                <h1 class="page-title">{t!(i18n, form.create_title)}</h1>
                <Suspense fallback=|| ()>{form}</Suspense>
            </section>
        </Layout>
    }
}
