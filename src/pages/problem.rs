//! Pages for what went wrong: not found, not allowed, and other failures.
//! They set the HTTP status so the browser and tests see it too.

use leptos::prelude::*;
use leptos_meta::Title;

use crate::components::error_text::error_text;
use crate::components::layout::Layout;
use crate::domain::{AppError, ErrorCode};
use crate::i18n::*;

#[cfg(feature = "ssr")]
fn set_status(code: u16) {
    if let Ok(status) = http::StatusCode::from_u16(code) {
        crate::server::context::set_status(status);
    }
}

#[cfg(not(feature = "ssr"))]
fn set_status(_: u16) {}

/// The content shown when loading a page failed with `err`.
pub(crate) fn problem_view(err: AppError) -> AnyView {
    let i18n = use_i18n();
    set_status(err.code.http_status());
    let (title, body) = match err.code {
        ErrorCode::NotFound => (t_string!(i18n, app.not_found_title), t_string!(i18n, app.not_found_body)),
        ErrorCode::Forbidden => (t_string!(i18n, app.forbidden_title), t_string!(i18n, app.forbidden_body)),
        ErrorCode::Unauthenticated => {
            (t_string!(i18n, app.unauthenticated_title), error_text(i18n.get_locale_untracked(), err.code))
        }
        code if code.http_status() >= 500 => {
            (t_string!(i18n, app.error_title), error_text(i18n.get_locale_untracked(), code))
        }
        code => (t_string!(i18n, app.conflict_title), error_text(i18n.get_locale_untracked(), code)),
    };
    view! {
        <Title text=title />
        <section class="card max-w-xl" data-problem=err.code.as_str()>
            <h1 class="page-title">{title}</h1>
            <p class="mt-2 text-slate-700">{body}</p>
            <p class="mt-4">
                <a href="/clusters" class="link">
                    {t!(i18n, app.back_to_clusters)}
                </a>
            </p>
        </section>
    }
    .into_any()
}

#[component]
pub(crate) fn NotFoundPage() -> impl IntoView {
    view! { <Layout>{problem_view(AppError::new(ErrorCode::NotFound))}</Layout> }
}
