//! `/login`: the organisation's sign-in (when a provider is configured) and
//! the password form (unless switched off).

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;
use server_fn::ServerFn;

use super::url_error;
use crate::actions::auth::{Login, OIDC_ERROR_PATH, sign_in_options};
use crate::components::error_text::FormError;
use crate::components::islands::login_form::LoginForm;
use crate::components::layout::Layout;
use crate::i18n::*;

#[component]
pub(crate) fn LoginPage() -> impl IntoView {
    let i18n = use_i18n();
    let next = use_query_map().get_untracked().get("next");
    let options = sign_in_options();
    let start = format!(
        "/auth/oidc/start?next={}",
        crate::domain::path::encode(crate::domain::path::safe_next(next.as_deref()))
    );
    // A refused organisation sign-in comes back here with its reason.
    let oidc_error = url_error(OIDC_ERROR_PATH);
    view! {
        <Layout>
            <Title text=t_string!(i18n, login.title) />
            <section class="card mx-auto max-w-md">
                <h1 class="page-title">{t!(i18n, login.title)}</h1>
                <p class="mb-6 text-slate-600">{t!(i18n, login.intro)}</p>
                {oidc_error
                    .map(|e| {
                        view! {
                            <div class="mb-4">
                                <FormError error=Signal::stored(Some(e)) />
                            </div>
                        }
                    })}
                {options
                    .organisation
                    .then(|| {
                        view! {
                            <a href=start class="btn btn-primary mb-6 w-full text-center" data-sign-in="organisation">
                                {t!(i18n, login.organisation)}
                            </a>
                        }
                    })}
                {(options.organisation && options.password)
                    .then(|| view! { <p class="mb-4 text-sm text-slate-600">{t!(i18n, login.or_password)}</p> })}
                {if options.password {
                    view! { <LoginForm next url_error=url_error(Login::PATH) /> }.into_any()
                } else {
                    view! { <p class="text-sm text-slate-600">{t!(i18n, login.password_off)}</p> }.into_any()
                }}
            </section>
        </Layout>
    }
}
