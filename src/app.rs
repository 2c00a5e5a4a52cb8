//! The HTML shell and the routes.

use leptos::prelude::*;
use leptos_meta::{MetaTags, provide_meta_context};
use leptos_router::components::{Route, Router, Routes};
use leptos_router::{SsrMode, path};

use crate::i18n::I18nContextProvider;
use crate::pages::admin_audit::AuditPage;
use crate::pages::admin_moves::{MovePage, MovesPage};
use crate::pages::admin_settings::SettingsPage;
use crate::pages::admin_teams::TeamsPage;
use crate::pages::admin_users::UsersPage;
use crate::pages::cluster_detail::ClusterDetailPage;
use crate::pages::cluster_edit::EditClusterPage;
use crate::pages::cluster_join::ClusterJoinPage;
use crate::pages::cluster_new::NewClusterPage;
use crate::pages::clusters::ClustersPage;
use crate::pages::login::LoginPage;
use crate::pages::problem::NotFoundPage;

pub fn shell(options: LeptosOptions) -> impl IntoView {
    // The page's Content-Security-Policy names this response's nonce, which
    // leptos puts on every inline script it writes (hydration, islands,
    // resolved resources): no other inline script runs.
    #[cfg(feature = "ssr")]
    if let (Some(nonce), Some(res)) = (leptos::nonce::use_nonce(), use_context::<leptos_axum::ResponseOptions>())
        && let Ok(csp) = http::HeaderValue::from_str(&crate::server::http::guard::page_csp(&nonce))
    {
        res.insert_header(http::header::CONTENT_SECURITY_POLICY, csp);
    }
    view! {
        <!DOCTYPE html>
        <html>
            <head>
                <meta charset="utf-8" />
                <meta name="viewport" content="width=device-width, initial-scale=1" />
                <link rel="icon" href="/favicon.ico" />
                <link rel="stylesheet" id="leptos" href=stylesheet_href(&options) />
                <AutoReload options=options.clone() />
                <HydrationScripts options islands=true />
                <MetaTags />
            </head>
            <body>
                <App />
            </body>
        </html>
    }
}

/// `/pkg/kubebyon.<hash>.css` (the hash from `hash.txt` beside the binary
/// when the build hashes file names), found once. leptos_meta's
/// `HashedStylesheet` reads that file on every page it renders.
fn stylesheet_href(options: &LeptosOptions) -> &'static str {
    static HREF: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    HREF.get_or_init(|| {
        let hash = || {
            let path = std::env::current_exe().ok()?.parent()?.join(options.hash_file.as_ref());
            std::fs::read_to_string(path).ok()?.lines().find_map(|line| {
                line.split_once(':').filter(|(file, _)| file.trim() == "css").map(|(_, h)| h.trim().to_owned())
            })
        };
        let name = match options.hash_files.then(hash).flatten() {
            Some(h) => format!("{}.{h}", options.output_name),
            None => options.output_name.to_string(),
        };
        format!("/{}/{name}.css", options.site_pkg_dir)
    })
}

#[component]
pub fn App() -> impl IntoView {
    provide_meta_context();
    // Every page is rendered completely before it is sent (SsrMode::Async), so
    // it reads the same with JavaScript off.
    let ssr = SsrMode::Async;
    view! {
        <I18nContextProvider>
            <Router>
                <Routes fallback=NotFoundPage>
                    <Route path=path!("/") view=ClustersPage ssr=ssr.clone() />
                    <Route path=path!("/login") view=LoginPage ssr=ssr.clone() />
                    <Route path=path!("/clusters") view=ClustersPage ssr=ssr.clone() />
                    <Route path=path!("/clusters/new") view=NewClusterPage ssr=ssr.clone() />
                    <Route path=path!("/clusters/:id") view=ClusterDetailPage ssr=ssr.clone() />
                    <Route path=path!("/clusters/:id/edit") view=EditClusterPage ssr=ssr.clone() />
                    <Route path=path!("/clusters/:id/join") view=ClusterJoinPage ssr=ssr.clone() />
                    <Route path=path!("/admin/settings") view=SettingsPage ssr=ssr.clone() />
                    <Route path=path!("/admin/users") view=UsersPage ssr=ssr.clone() />
                    <Route path=path!("/admin/teams") view=TeamsPage ssr=ssr.clone() />
                    <Route path=path!("/admin/audit") view=AuditPage ssr=ssr.clone() />
                    <Route path=path!("/admin/moves") view=MovesPage ssr=ssr.clone() />
                    <Route path=path!("/admin/moves/:id") view=MovePage ssr=ssr />
                </Routes>
            </Router>
        </I18nContextProvider>
    }
}
