//! Every request gets an id (`x-request-id`, taken from a trusted proxy
//! when it sends one, else made here) and a tracing span carrying it, its
//! route pattern and, where the route names one, the cluster id: every log
//! line written while serving it says which request and which cluster it
//! belongs to. The request is counted in `/metrics` by route and status.
//! `/metrics` and `/readyz` live here too.

use std::time::Instant;

use axum::body::Body;
use axum::extract::{MatchedPath, Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::{HeaderValue, StatusCode, header};
use tracing::Instrument;

use crate::server::metrics::{self, HttpLabels, RouteLabel};
use crate::server::state::AppState;

pub(crate) const REQUEST_ID: &str = "x-request-id";

/// A request id from the client is kept only when it is short and plain.
fn usable_id(v: &str) -> bool {
    (1..=64).contains(&v.len()) && v.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

fn new_id() -> String {
    format!("{:016x}", rand::random::<u64>())
}

/// The cluster a route is about: the `{id}` after `clusters`, or `{cluster}`.
pub(crate) fn cluster_id(route: &str, path: &str) -> Option<i64> {
    let pattern: Vec<&str> = route.split('/').collect();
    let actual: Vec<&str> = path.split('/').collect();
    (pattern.len() == actual.len())
        .then(|| {
            pattern.iter().enumerate().find_map(|(i, seg)| {
                let named = *seg == "{cluster}" || (*seg == "{id}" && i > 0 && pattern[i - 1] == "clusters");
                named.then(|| actual[i].parse().ok()).flatten()
            })
        })
        .flatten()
}

/// Requests not worth a log line each (probes, scrapes, assets).
fn quiet(route: &str) -> bool {
    matches!(route, "/healthz" | "/readyz" | "/metrics") || route.starts_with("/pkg")
}

pub(crate) async fn telemetry(State(state): State<AppState>, mut req: Request<Body>, next: Next) -> Response {
    let started = Instant::now();
    let route =
        req.extensions().get::<MatchedPath>().map(|m| m.as_str().to_owned()).unwrap_or_else(|| "unmatched".into());
    let method = metrics::method_label(req.method());
    // A client's own id is kept only when the socket peer is a trusted proxy.
    let peer = req.extensions().get::<axum::extract::ConnectInfo<std::net::SocketAddr>>().map(|c| c.0.ip());
    let from_proxy = peer.is_some_and(|ip| state.config.trusted_proxies.iter().any(|c| c.contains(ip)));
    let forwarded = req.headers().get(REQUEST_ID).and_then(|v| v.to_str().ok()).filter(|v| usable_id(v));
    let id = match forwarded {
        Some(v) if from_proxy => v.to_owned(),
        _ => new_id(),
    };
    if let Ok(v) = HeaderValue::from_str(&id) {
        req.headers_mut().insert(REQUEST_ID, v);
    }
    let cluster = cluster_id(&route, req.uri().path());
    let span = tracing::info_span!("request", request_id = %id, method = %method, route = %route, cluster = cluster);
    let mut res = next.run(req).instrument(span.clone()).await;
    let status = res.status().as_u16();
    let took = started.elapsed();
    let m = metrics::global();
    m.http_requests.get_or_create(&HttpLabels { route: route.clone(), method, status }).inc();
    m.http_duration.get_or_create(&RouteLabel { route: route.clone() }).observe(took.as_secs_f64());
    span.in_scope(|| {
        let ms = took.as_secs_f64() * 1000.0;
        if quiet(&route) {
            tracing::debug!(status, ms, "served");
        } else {
            tracing::info!(status, ms, "served");
        }
    });
    if let Ok(v) = HeaderValue::from_str(&id) {
        res.headers_mut().insert(REQUEST_ID, v);
    }
    res
}

/// `GET /metrics`: the Prometheus text format. With `KUBEBYON_METRICS_TOKEN`
/// set, only with `Authorization: Bearer <token>`.
pub(crate) async fn metrics_page(State(state): State<AppState>, headers: http::HeaderMap) -> Response {
    if let Some(token) = &state.config.metrics_token {
        let given =
            headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).and_then(|v| v.strip_prefix("Bearer "));
        let matches = given.is_some_and(|g| {
            use sha2::{Digest, Sha256};
            // Compared as digests: equal length, so no early exit on length.
            Sha256::digest(g.as_bytes()) == Sha256::digest(token.as_bytes())
        });
        if !matches {
            return (
                StatusCode::UNAUTHORIZED,
                [(header::WWW_AUTHENTICATE, "Bearer")],
                "metrics need the bearer token\n",
            )
                .into_response();
        }
    }
    let m = metrics::global();
    match crate::server::service::queue_stats(&state.pool).await {
        Ok((depth, oldest_age)) => {
            m.queue_depth.set(depth);
            m.queue_oldest_age.set(oldest_age);
        }
        Err(e) => tracing::warn!(error = %e, "reading the queue for /metrics failed"),
    }
    for (watch, objects, bytes) in state.host.as_ref().map(|h| h.cache_sizes()).unwrap_or_default() {
        let l = metrics::WatchLabel { watch };
        m.cache_objects.get_or_create(&l).set(i64::try_from(objects).unwrap_or(i64::MAX));
        m.cache_bytes.get_or_create(&l).set(i64::try_from(bytes).unwrap_or(i64::MAX));
    }
    ([(header::CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")], m.encode()).into_response()
}

/// `GET /readyz`: 200 when this replica can serve and reach its database
/// (a `SELECT 1` within two seconds), else 503. `/healthz` only says the
/// process answers (liveness must not restart replicas for a database outage).
pub(crate) async fn readyz(State(state): State<AppState>) -> Response {
    let check = crate::server::service::database_answers(&state.pool);
    let down = crate::server::metrics::global().workers_down();
    if !down.is_empty() {
        tracing::warn!(?down, "not ready: background workers restarting");
        return (StatusCode::SERVICE_UNAVAILABLE, format!("restarting: {}\n", down.join(", "))).into_response();
    }
    match tokio::time::timeout(std::time::Duration::from_secs(2), check).await {
        Ok(Ok(_)) => (StatusCode::OK, "ready\n").into_response(),
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "not ready: database query failed");
            (StatusCode::SERVICE_UNAVAILABLE, "database unreachable\n").into_response()
        }
        Err(_) => {
            tracing::warn!("not ready: database did not answer within 2 s");
            (StatusCode::SERVICE_UNAVAILABLE, "database unreachable\n").into_response()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_ids_from_routes() {
        for (route, path, want) in [
            ("/api/console/clusters/{id}", "/api/console/clusters/42", Some(42)),
            ("/api/console/clusters/{id}/kubeconfig", "/api/console/clusters/7/kubeconfig", Some(7)),
            ("/clusters/{id}", "/clusters/3", Some(3)),
            ("/clusters/{id}", "/clusters/x", None),
            ("/api/admin/moves/{id}", "/api/admin/moves/9", None),
            ("/api/admin/moves/{id}/clusters/{cluster}/{action}", "/api/admin/moves/9/clusters/5/retry", Some(5)),
            ("unmatched", "/clusters/3", None),
        ] {
            assert_eq!(cluster_id(route, path), want, "{route} {path}");
        }
    }

    #[test]
    fn request_ids() {
        assert!(usable_id("abc-123_X"));
        assert!(!usable_id(""));
        assert!(!usable_id("a b"));
        assert!(!usable_id(&"a".repeat(65)));
        assert_ne!(new_id(), new_id());
    }
}
