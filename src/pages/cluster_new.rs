//! `/clusters/new`.

use leptos::prelude::*;
use leptos_meta::Title;
use server_fn::ServerFn;

use super::problem::problem_view;
use super::url_error;
use crate::actions::clusters::{CreateCluster, default_mode};
use crate::components::islands::cluster_forms::CreateClusterForm;
use crate::components::layout::Layout;
use crate::i18n::*;

#[component]
pub fn NewClusterPage() -> impl IntoView {
    let i18n = use_i18n();
    let form = Suspend::new(async move {
        match default_mode().await {
            Ok(mode) => {
                view! { <CreateClusterForm default_mode=mode url_error=url_error(CreateCluster::PATH) /> }.into_any()
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
