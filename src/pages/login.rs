//! `/login`.

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;
use server_fn::ServerFn;

use super::url_error;
use crate::actions::auth::Login;
use crate::components::islands::login_form::LoginForm;
use crate::components::layout::Layout;
use crate::i18n::*;

#[component]
pub(crate) fn LoginPage() -> impl IntoView {
    let i18n = use_i18n();
    let next = use_query_map().get_untracked().get("next");
    view! {
        <Layout>
            <Title text=t_string!(i18n, login.title) />
            <section class="card mx-auto max-w-md">
                <h1 class="page-title">{t!(i18n, login.title)}</h1>
                <p class="mb-6 text-slate-600">{t!(i18n, login.intro)}</p>
                <LoginForm next url_error=url_error(Login::PATH) />
            </section>
        </Layout>
    }
}
