//! The page frame: skip link, top bar with navigation, language switcher and
//! the signed-in user, then the page's content.

use leptos::form::ActionForm;
use leptos::prelude::*;
use leptos_router::hooks::use_location;

use crate::actions::auth::{Logout, session_now};
use crate::i18n::*;
use leptos_i18n::I18nContext;
use leptos_i18n::Locale as _;

/// A shipped language's name, in the page's language. The languages are
/// `locales/*.json` (leptos_i18n's `Locale::get_all`); a new one fails to
/// compile here until it has its name.
fn language_name(i18n: I18nContext<Locale>, locale: Locale) -> &'static str {
    match locale {
        Locale::en => t_string!(i18n, languages.en),
        Locale::zh_CN => t_string!(i18n, languages.zh_CN),
        Locale::ja => t_string!(i18n, languages.ja),
    }
}

#[component]
fn LanguageSwitcher() -> impl IntoView {
    let i18n = use_i18n();
    let location = use_location();
    let here = format!("{}{}", location.pathname.get_untracked(), {
        let q = location.search.get_untracked();
        if q.is_empty() { String::new() } else { format!("?{q}") }
    });
    let next = crate::domain::path::encode(&here);
    let current = i18n.get_locale_untracked();
    view! {
        <nav aria-label=t_string!(i18n, app.language) class="lang-switch">
            {Locale::get_all()
                .iter()
                .map(|&locale| {
                    let (code, label) = (locale.as_str(), language_name(i18n, locale));
                    view! {
                        <a
                            href=format!("/lang/{code}?next={next}")
                            hreflang=code
                            lang=code
                            aria-current=(locale == current).then_some("true")
                        >
                            {label}
                        </a>
                    }
                })
                .collect_view()}
        </nav>
    }
}

#[component]
pub(crate) fn Layout(children: Children) -> impl IntoView {
    let i18n = use_i18n();
    let logout = ServerAction::<Logout>::new();
    let user_area = Suspend::new(async move {
        let session = session_now().ok();
        let simulated = session.as_ref().is_some_and(|s| s.simulated_host);
        let no_host = session.as_ref().is_some_and(|s| s.no_host);
        let banner = simulated.then(|| {
            view! {
                <p class="sim-banner" role="note">
                    {t!(i18n, app.simulated_host)}
                </p>
            }
        });
        let host_banner = no_host.then(|| {
            view! {
                <p class="sim-banner" role="note" data-testid="no-host">
                    {t!(i18n, app.no_host)}
                </p>
            }
        });
        let user = session.and_then(|s| s.user).map(|u| {
            let admin_links = u.is_admin().then(|| {
                view! {
                    <a href="/admin/settings">{t!(i18n, app.nav_settings)}</a>
                    <a href="/admin/users">{t!(i18n, app.nav_users)}</a>
                    <a href="/admin/teams">{t!(i18n, app.nav_teams)}</a>
                    <a href="/admin/moves">{t!(i18n, app.nav_moves)}</a>
                    <a href="/admin/audit">{t!(i18n, app.nav_audit)}</a>
                }
            });
            let role = if u.is_admin() { t_string!(i18n, app.role_admin) } else { t_string!(i18n, app.role_user) };
            view! {
                <nav aria-label=t_string!(i18n, app.nav_label) class="main-nav">
                    <a href="/clusters">{t!(i18n, app.nav_clusters)}</a>
                    <a href="/clusters/new">{t!(i18n, app.nav_new_cluster)}</a>
                    {admin_links}
                </nav>
                <div class="user-box">
                    <span class="text-sm text-slate-600">
                        {t!(i18n, app.signed_in_as)} " "
                        <strong data-testid="current-user">{u.username.clone()}</strong> " (" {role} ")"
                    </span>
                    <ActionForm action=logout>
                        <button type="submit" class="btn btn-small">
                            {t!(i18n, app.sign_out)}
                        </button>
                    </ActionForm>
                </div>
            }
        });
        (user, banner, host_banner)
    });
    view! {
        <a href="#main" class="skip-link">
            {t!(i18n, app.skip_to_content)}
        </a>
        <header class="topbar">
            <div class="wrap topbar-inner">
                <a href="/clusters" class="brand">
                    {t!(i18n, app.name)}
                </a>
                // In a Suspense, though nothing waits: without it the server's
                // RSS jumped by ~50 MB in most runs of 2,000 `/login` loads
                // (docs/performance.md).
                <Suspense fallback=|| ()>{user_area}</Suspense>
                <LanguageSwitcher />
            </div>
        </header>
        <main id="main" class="wrap page">
            {children()}
        </main>
    }
}
