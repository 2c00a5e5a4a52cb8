//! `/admin/settings` (admins only).

use leptos::prelude::*;
use leptos_meta::Title;
use server_fn::ServerFn;

use super::problem::problem_view;
use super::{SavedBanner, url_error};
use crate::actions::settings::{SaveSettings, load_settings};
use crate::components::islands::settings_form::SettingsForm;
use crate::components::layout::Layout;
use crate::domain::settings::SettingsView;
use crate::i18n::*;

#[component]
pub(crate) fn SettingsPage() -> impl IntoView {
    let i18n = use_i18n();
    // How many clusters the last save re-renders (`?rerendered=N` after saving).
    let query = leptos_router::hooks::use_query_map().get_untracked();
    let rerendered =
        query.get("rerendered").and_then(|n| n.parse::<u32>().ok()).filter(|_| query.get("__err").is_none());
    let content = Suspend::new(async move {
        match load_settings().await {
            Err(e) => problem_view(e),
            Ok(SettingsView { settings, detected, servicelb }) => view! {
                <section class="card max-w-3xl">
                    <h1 class="page-title">{t!(i18n, settings.title)}</h1>
                    <p class="mb-4 text-slate-600">{t!(i18n, settings.intro)}</p>
                    {match rerendered {
                        Some(n) => {
                            view! {
                                <p class="banner banner-ok" role="status">
                                    {t!(i18n, settings.rerendered, n = n)}
                                </p>
                            }
                                .into_any()
                        }
                        None => view! { <SavedBanner /> }.into_any(),
                    }}
                    <SettingsForm settings detected servicelb url_error=url_error(SaveSettings::PATH) />
                </section>
            }
            .into_any(),
        }
    });
    view! {
        <Layout>
            <Title text=t_string!(i18n, settings.title) />
            <Suspense fallback=|| ()>{content}</Suspense>
        </Layout>
    }
}
