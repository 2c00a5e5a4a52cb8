//! The whole HTTP surface in one axum `Router`, shared by `main` and the tests.

use axum::Router;
use axum::routing::{any, get, post};
use leptos::prelude::provide_context;
use leptos_axum::{LeptosRoutes, generate_route_list};
use tower_http::limit::RequestBodyLimitLayer;

use super::{api, guard, lang};
use crate::app::{App, shell};
use crate::server::state::AppState;

/// Request bodies larger than this are refused with 413.
pub const BODY_LIMIT: usize = 64 * 1024;

pub fn router(state: AppState) -> Router {
    let routes = generate_route_list(App);
    let options = state.leptos_options.clone();
    let ctx = state.clone();
    Router::new()
        .route("/api/console/clusters", get(api::list_clusters).post(api::create_cluster))
        .route(
            "/api/console/clusters/{id}",
            get(api::get_cluster).patch(api::update_cluster).delete(api::delete_cluster),
        )
        .route("/api/console/clusters/{id}/events", get(api::cluster_events))
        .route("/api/console/clusters/{id}/kubeconfig", get(api::cluster_kubeconfig))
        .route("/api/console/clusters/{id}/probe", post(api::probe_cluster))
        .route("/clusters/{id}/kubeconfig", get(api::cluster_kubeconfig))
        .route("/api/admin/system-settings", get(api::get_settings).put(api::update_settings))
        .route("/api/auth/login", post(api::login))
        .route("/api/auth/logout", post(api::logout))
        .route("/api/{*rest}", any(api::not_found))
        .route("/lang/{code}", get(lang::switch))
        .route("/healthz", get(|| async { "ok" }))
        // Also mounts every server function at its path (`/fn/...`), with the same context.
        .leptos_routes_with_context(
            &state,
            routes,
            move || provide_context(ctx.clone()),
            move || shell(options.clone()),
        )
        .fallback(leptos_axum::file_and_error_handler::<AppState, _>(shell))
        .layer(axum::middleware::from_fn_with_state(state.clone(), guard::guard))
        .layer(RequestBodyLimitLayer::new(BODY_LIMIT))
        .with_state(state)
}
