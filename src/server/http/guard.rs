//! The request guard every request passes: it loads the signed-in user from
//! the session cookie, refuses cross-origin writes, and sends anonymous page
//! visits to the sign-in page.

use axum::body::Body;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use http::{HeaderMap, StatusCode, header};
use server_fn::error::SERVER_FN_ERROR_HEADER;

use crate::domain::{AppError, ErrorCode};
use crate::server::auth::{origin, session};
use crate::server::service::accounts;
use crate::server::state::AppState;

use super::api::ApiError;
use super::router::BODY_LIMIT;
use crate::domain::path::encode;

/// Pages that need a signed-in user. Everything else (sign-in page, assets,
/// API and server functions, which check for themselves) is open.
pub(crate) fn needs_sign_in(path: &str) -> bool {
    path == "/" || ["/clusters", "/admin"].iter().any(|p| path == *p || path.starts_with(&format!("{p}/")))
}

fn header_str(headers: &HeaderMap, name: header::HeaderName) -> Option<&str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// The caching of every page and JSON answer.
pub(crate) const NOT_STORED: &str = "private, no-store";

fn not_stored(h: &mut HeaderMap) {
    h.insert(header::CACHE_CONTROL, http::HeaderValue::from_static(NOT_STORED));
}

/// Static assets need no user: their requests skip the session lookup.
fn is_asset(path: &str) -> bool {
    path.starts_with("/pkg/") || path == "/favicon.ico"
}

/// A body announced (`Content-Length`) beyond [`BODY_LIMIT`] is
/// refused at once with the documented JSON `payload_too_large` (tower-http's
/// limit layer behind it would answer a plain-text 413).
pub(crate) async fn announced_size(req: Request<Body>, next: Next) -> Response {
    let announced = header_str(req.headers(), header::CONTENT_LENGTH).and_then(|v| v.trim().parse::<u64>().ok());
    if announced.is_some_and(|n| n > BODY_LIMIT as u64) {
        return ApiError(AppError::new(ErrorCode::PayloadTooLarge)).into_response();
    }
    next.run(req).await
}

/// The body is read whole within `KUBEBYON_BODY_TIMEOUT_SECS` of its headers
/// (bodies are at most [`BODY_LIMIT`]), so a client trickling one byte at a
/// time cannot hold a connection for the whole request's 60 s; past it `408`
/// and the connection closes (its body unread). A body over the limit is
/// `payload_too_large` as an announced one is; a broken one `bad_request`.
pub(crate) async fn read_body(State(state): State<AppState>, req: Request<Body>, next: Next) -> Response {
    use hyper::body::Body as _;
    // No body (GET, HEAD, an empty POST): nothing to wait for or copy.
    if req.body().is_end_stream() {
        return Box::pin(next.run(req)).await;
    }
    let deadline = std::time::Duration::from_secs(state.config.body_timeout_secs);
    let (parts, body) = req.into_parts();
    // Both futures boxed: this layer adds a pointer to every request's future,
    // not the router's whole future (a debug build's test threads have 2 MiB).
    match tokio::time::timeout(deadline, Box::pin(axum::body::to_bytes(body, BODY_LIMIT + 1))).await {
        Ok(Ok(bytes)) if bytes.len() <= BODY_LIMIT => {
            Box::pin(next.run(Request::from_parts(parts, Body::from(bytes)))).await
        }
        Ok(Ok(_)) => ApiError(AppError::new(ErrorCode::PayloadTooLarge)).into_response(),
        Ok(Err(e)) if is_length_limit(&e) => ApiError(AppError::new(ErrorCode::PayloadTooLarge)).into_response(),
        Ok(Err(_)) => ApiError(AppError::new(ErrorCode::BadRequest)).into_response(),
        Err(_) => {
            let mut res = http::StatusCode::REQUEST_TIMEOUT.into_response();
            res.headers_mut().insert(header::CONNECTION, http::HeaderValue::from_static("close"));
            res
        }
    }
}

/// Whether reading a body failed on its size (axum's `to_bytes` limit).
fn is_length_limit(e: &axum::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = source {
        if err.is::<http_body_util::LengthLimitError>() {
            return true;
        }
        source = err.source();
    }
    false
}

pub(crate) async fn guard(State(state): State<AppState>, mut req: Request<Body>, next: Next) -> Response {
    let peer = req.extensions().get::<axum::extract::ConnectInfo<std::net::SocketAddr>>().map(|c| c.0.ip());
    let facts = super::request::RequestFacts::of(&state.config, peer, req.headers());
    let https = facts.https;
    let headers = req.headers();
    let token = header_str(headers, header::COOKIE)
        .and_then(|c| session::token(c, https))
        .filter(|_| !is_asset(req.uri().path()));
    let user = match token {
        // A database that does not answer is not "signed out": 503, so the
        // browser keeps its session and nothing is sent to the sign-in page.
        Some(t) => match accounts::user_for_token(&state.pool, t).await {
            Ok(user) => user,
            Err(e) => {
                tracing::warn!(code = e.code.as_str(), "session lookup failed");
                let mut res = ApiError(AppError::new(ErrorCode::Unavailable)).into_response();
                not_stored(res.headers_mut());
                res.headers_mut().insert(header::RETRY_AFTER, http::HeaderValue::from_static("5"));
                return res;
            }
        },
        None => None,
    };

    if !req.method().is_safe() {
        let is_json = header_str(headers, header::CONTENT_TYPE).is_some_and(|c| c.starts_with("application/json"));
        let public = state.config.public_url.as_deref().and_then(origin::authority);
        let allowed = origin::write_allowed(
            header_str(headers, header::HOST),
            public,
            header_str(headers, header::ORIGIN),
            header_str(headers, header::REFERER),
            is_json,
        );
        if !allowed {
            tracing::warn!(path = %req.uri().path(), "cross-origin write refused");
            return ApiError(AppError::new(ErrorCode::OriginRejected)).into_response();
        }
    }

    if user.is_none() && req.method() == http::Method::GET && needs_sign_in(req.uri().path()) {
        let target = req.uri().path_and_query().map(|p| p.as_str()).unwrap_or("/");
        let mut res = Redirect::to(&format!("/login?next={}", encode(target))).into_response();
        not_stored(res.headers_mut());
        return res;
    }

    if let Some(user) = user {
        req.extensions_mut().insert(user);
    }
    req.extensions_mut().insert(facts);
    let asset = is_asset(req.uri().path());
    let mut res = server_fn_status(next.run(req).await).await;
    let h = res.headers_mut();
    // Pages and JSON are one user's: no shared cache may keep them (assets
    // and answers that chose their own caching keep it).
    if !asset && !h.contains_key(header::CACHE_CONTROL) {
        not_stored(h);
    }
    for (name, value) in security_headers(https) {
        if name != header::CONTENT_SECURITY_POLICY || !h.contains_key(&name) {
            h.insert(name, http::HeaderValue::from_static(value));
        }
    }
    res
}

/// The policy of an HTML page: scripts only from this origin or inline with
/// this response's nonce, WebAssembly compiled, styles and everything else
/// from this origin, no plugins, no framing, forms post only here.
pub(crate) fn page_csp(nonce: &str) -> String {
    format!(
        "default-src 'self'; script-src 'self' 'nonce-{nonce}' 'wasm-unsafe-eval'; style-src 'self'; \
         img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; \
         frame-ancestors 'none'"
    )
}

/// The headers every answer carries. Pages replace the fallback policy (for
/// JSON, files and redirects: nothing may load, nothing may frame) with
/// [`page_csp`]. HSTS only when the console is served over https.
pub(crate) fn security_headers(https: bool) -> Vec<(header::HeaderName, &'static str)> {
    let mut h = vec![
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::X_FRAME_OPTIONS, "DENY"),
        // Same-origin referers let no-JS form posts return to their page.
        (header::REFERRER_POLICY, "same-origin"),
        (header::CONTENT_SECURITY_POLICY, "default-src 'none'; frame-ancestors 'none'; base-uri 'none'"),
        (header::HeaderName::from_static("cross-origin-opener-policy"), "same-origin"),
        (header::HeaderName::from_static("permissions-policy"), "camera=(), microphone=(), geolocation=()"),
    ];
    if https {
        h.push((header::STRICT_TRANSPORT_SECURITY, "max-age=31536000; includeSubDomains"));
    }
    h
}

/// server_fn answers every refused server function call with 500. A refusal
/// is an `AppError`, so give it that code's status (the server_fn client reads
/// any 4xx/5xx as an error). JavaScript-free posts are redirects and stay so.
async fn server_fn_status(res: Response) -> Response {
    if res.status() != StatusCode::INTERNAL_SERVER_ERROR || !res.headers().contains_key(SERVER_FN_ERROR_HEADER) {
        return res;
    }
    let (mut parts, body) = res.into_parts();
    let bytes = axum::body::to_bytes(body, BODY_LIMIT).await.unwrap_or_default();
    if let Ok(err) = serde_json::from_slice::<AppError>(&bytes) {
        parts.status = StatusCode::from_u16(err.code.http_status()).unwrap_or(parts.status);
    }
    Response::from_parts(parts, Body::from(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protected_pages() {
        for p in ["/", "/clusters", "/clusters/new", "/clusters/3/edit", "/admin/settings", "/admin"] {
            assert!(needs_sign_in(p), "{p}");
        }
        for p in
            ["/login", "/lang/en", "/pkg/kubebyon.js", "/favicon.ico", "/api/console/clusters", "/fn/x", "/clustersx"]
        {
            assert!(!needs_sign_in(p), "{p}");
        }
    }
}
