//! The whole HTTP surface in one axum `Router`, shared by `main` and the tests.

use axum::Router;
use axum::routing::{MethodRouter, any, get, post};
use http::HeaderValue;
use http::header::CACHE_CONTROL;
use leptos::prelude::provide_context;
use leptos_axum::{LeptosRoutes, generate_route_list};
use tower_http::compression::CompressionLayer;
use tower_http::services::ServeDir;
use tower_http::set_header::SetResponseHeaderLayer;

use super::{api, guard, lang, telemetry};
use crate::app::{App, shell};
use crate::server::state::AppState;

/// Request bodies larger than this are refused with 413.
pub(crate) const BODY_LIMIT: usize = 64 * 1024;

/// The JSON API (`api::routes`, each resource's) and the other plain axum
/// routes, path by path. The router
/// mounts exactly these; the authorization matrix test (tests/authz.rs) reads
/// the same list, so a route added here without a matrix entry fails it.
pub fn api_routes() -> Vec<(&'static str, MethodRouter<AppState>)> {
    let mut routes = api::routes();
    routes.extend([
        // Server-sent events: the versions live pages follow (`server::push`).
        ("/events/clusters", get(super::live::list_stream)),
        ("/events/clusters/{id}", get(super::live::cluster_stream)),
        // Paths from before "migration" was renamed "move": 308 to the new ones.
        ("/api/admin/migrations", get(renamed).post(renamed)),
        ("/api/admin/migrations/{*rest}", get(renamed).post(renamed)),
        ("/admin/migrations", get(renamed)),
        ("/admin/migrations/{*rest}", get(renamed)),
        ("/fn/migrations/{*rest}", post(renamed)),
        ("/api/{*rest}", any(api::not_found)),
        ("/lang/{code}", get(lang::switch)),
        ("/healthz", get(healthz)),
        ("/readyz", get(telemetry::readyz)),
        ("/metrics", get(telemetry::metrics_page)),
    ]);
    routes
}

async fn healthz() -> &'static str {
    "ok"
}

/// The health listener's routes only (`KUBEBYON_HEALTH_ADDR`): liveness and
/// readiness on a port of their own, which the public Service does not
/// expose, so clients filling the public listener's connections cannot fail
/// the kubelet's probes. Everything else is 404.
pub fn health_router(state: AppState) -> Router {
    Router::new().route("/healthz", get(healthz)).route("/readyz", get(telemetry::readyz)).with_state(state)
}

/// Renamed path prefixes: (old, new). Only whole path segments match.
const RENAMED: &[(&str, &str)] = &[
    ("/api/admin/migrations", "/api/admin/moves"),
    ("/admin/migrations", "/admin/moves"),
    ("/fn/migrations", "/fn/moves"),
];

/// Where an old path (with its query) lives now.
fn renamed_target(path_and_query: &str) -> Option<String> {
    RENAMED.iter().find_map(|(old, new)| {
        let rest = path_and_query.strip_prefix(old)?;
        matches!(rest.chars().next(), None | Some('/' | '?')).then(|| format!("{new}{rest}"))
    })
}

/// 308 Permanent Redirect: the method and body are kept (a POST stays a POST).
async fn renamed(uri: http::Uri) -> axum::response::Response {
    use axum::response::IntoResponse;
    let path = uri.path_and_query().map_or(uri.path(), http::uri::PathAndQuery::as_str);
    match renamed_target(path) {
        Some(to) => axum::response::Redirect::permanent(&to).into_response(),
        None => http::StatusCode::NOT_FOUND.into_response(),
    }
}

/// A whole request within [`super::serve::Limits::request`] (`408`), but
/// for the live pages' event streams, which last until their lifetime ends.
async fn within_request_limit(req: axum::extract::Request, next: axum::middleware::Next) -> axum::response::Response {
    use axum::response::IntoResponse;
    if req.uri().path().starts_with("/events/") {
        return next.run(req).await;
    }
    match tokio::time::timeout(super::serve::Limits::default().request, next.run(req)).await {
        Ok(res) => res,
        Err(_) => http::StatusCode::REQUEST_TIMEOUT.into_response(),
    }
}

pub fn router(state: AppState) -> Router {
    let routes = generate_route_list(App);
    let options = state.leptos_options.clone();
    let ctx = state.clone();
    // The hydrate bundle and CSS: brotli/gzip files made at build time
    // (scripts/build-console.sh) when the browser takes them; content-hashed
    // names never change, so they are cached for a year.
    let pkg_dir = std::path::Path::new(options.site_root.as_ref()).join(options.site_pkg_dir.as_ref());
    let cache = if options.hash_files { "public, max-age=31536000, immutable" } else { "no-cache" };
    let pkg = tower::ServiceBuilder::new()
        .layer(SetResponseHeaderLayer::overriding(CACHE_CONTROL, HeaderValue::from_static(cache)))
        .service(ServeDir::new(pkg_dir).precompressed_br().precompressed_gzip());
    Router::new()
        .nest_service(&format!("/{}", options.site_pkg_dir), pkg)
        .merge(api_routes().into_iter().fold(Router::new(), |r, (path, route)| r.route(path, route)))
        // Also mounts every server function at its path (`/fn/...`), with the same context.
        .leptos_routes_with_context(
            &state,
            routes,
            move || provide_context(ctx.clone()),
            move || shell(options.clone()),
        )
        .fallback(leptos_axum::file_and_error_handler::<AppState, _>(shell))
        .layer(axum::middleware::from_fn_with_state(state.clone(), guard::guard))
        // The body read whole within its own deadline and at most BODY_LIMIT,
        // after its announced size is checked.
        .layer(axum::middleware::from_fn_with_state(state.clone(), guard::read_body))
        .layer(axum::middleware::from_fn(guard::announced_size))
        // Pages and JSON compressed on the fly (assets above are already).
        .layer(CompressionLayer::new())
        // A whole request (its body read and its answer) within the limit
        // (src/server/http/serve.rs bounds the headers and idle connections).
        // (Not the event streams: they end by themselves, `server::push`.)
        .layer(axum::middleware::from_fn(within_request_limit))
        // Outermost: request id, span, metrics and the access log see every answer.
        .layer(axum::middleware::from_fn_with_state(state.clone(), telemetry::telemetry))
        .with_state(state)
}

#[cfg(test)]
mod tests {
    use super::renamed_target;

    #[test]
    fn old_paths_lead_to_the_new_ones() {
        for (old, new) in [
            ("/admin/migrations", Some("/admin/moves")),
            ("/admin/migrations?clusters=a&source=range", Some("/admin/moves?clusters=a&source=range")),
            ("/admin/migrations/7", Some("/admin/moves/7")),
            ("/api/admin/migrations/dry-run", Some("/api/admin/moves/dry-run")),
            ("/api/admin/migrations/3/clusters/5/retry", Some("/api/admin/moves/3/clusters/5/retry")),
            ("/fn/migrations/start", Some("/fn/moves/start")),
            ("/admin/migrationsx", None),
            ("/admin/moves", None),
        ] {
            assert_eq!(renamed_target(old).as_deref(), new, "{old}");
        }
    }
}
