//! Signing in and out.

use axum::Json;
use axum::extract::Query;
use axum::extract::{Extension, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, get, post};
use http::header;
use serde::{Deserialize, Serialize};

use axum::response::Redirect;

use super::{ApiError, ApiJson};
use crate::domain::{AppError, ErrorCode};
use crate::server::auth::oidc::{SECURE_STATE_COOKIE, STATE_COOKIE};
use crate::server::http::request::RequestFacts;
use crate::server::service::accounts;
use crate::server::state::AppState;

/// The routes of signing in and out.
pub(crate) fn routes() -> Vec<(&'static str, MethodRouter<AppState>)> {
    vec![
        ("/api/auth/login", post(login)),
        ("/api/auth/logout", post(logout)),
        ("/auth/oidc/start", get(oidc_start)),
        ("/auth/oidc/callback", get(oidc_callback)),
    ]
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct LoginBody {
    username: String,
    password: String,
}

#[derive(Serialize)]
pub(crate) struct LoginReply {
    username: String,
    role: crate::domain::user::Role,
}

pub(crate) async fn login(
    State(st): State<AppState>,
    Extension(request): Extension<RequestFacts>,
    headers: http::HeaderMap,
    ApiJson(body): ApiJson<LoginBody>,
) -> Result<Response, ApiError> {
    let (user, cookie) = accounts::sign_in(
        &st.pool,
        &st.limiter,
        (&body.username, &body.password),
        &request.client_key,
        st.config.local_sign_in,
        cookies(&request, &headers),
    )
    .await?;
    let reply = LoginReply { username: user.username, role: user.role };
    Ok(([(header::SET_COOKIE, cookie)], Json(reply)).into_response())
}

pub(crate) async fn logout(
    State(st): State<AppState>,
    Extension(request): Extension<RequestFacts>,
    headers: http::HeaderMap,
) -> Result<Response, ApiError> {
    let cookie = accounts::sign_out(&st.pool, cookies(&request, &headers)).await?;
    Ok(([(header::SET_COOKIE, cookie)], StatusCode::NO_CONTENT).into_response())
}

/// The request's cookies, and whether the session cookie is `Secure`
/// (served over https: [`RequestFacts::https`]).
fn cookies<'a>(request: &RequestFacts, headers: &'a http::HeaderMap) -> accounts::Cookies<'a> {
    accounts::Cookies { header: headers.get(header::COOKIE).and_then(|v| v.to_str().ok()), secure: request.https }
}

#[derive(Deserialize)]
pub(crate) struct StartQuery {
    next: Option<String>,
}

/// `GET /auth/oidc/start?next=`: to the provider, the sign-in sealed in a
/// cookie of this browser (for ten minutes); nothing is written.
pub(crate) async fn oidc_start(
    State(st): State<AppState>,
    Extension(request): Extension<RequestFacts>,
    Query(q): Query<StartQuery>,
) -> Response {
    let Some(provider) = st.oidc.as_deref() else {
        return to_login_with(AppError::new(ErrorCode::OidcUnavailable), request.https);
    };
    let next = crate::domain::path::safe_next(q.next.as_deref());
    match provider.start(&st.pool, next).await {
        Ok(started) => {
            let cookie = state_cookie(&started.cookie, request.https);
            ([(header::SET_COOKIE, cookie)], Redirect::to(&started.url)).into_response()
        }
        Err(e) => to_login_with(e, request.https),
    }
}

#[derive(Deserialize)]
pub(crate) struct CallbackQuery {
    code: Option<String>,
    state: Option<String>,
    error: Option<String>,
}

/// `GET /auth/oidc/callback`: the provider sends the browser back here.
/// Signed in: a session and on to where the sign-in started; refused: the
/// sign-in page with the reason, translated.
pub(crate) async fn oidc_callback(
    State(st): State<AppState>,
    Extension(request): Extension<RequestFacts>,
    headers: http::HeaderMap,
    Query(q): Query<CallbackQuery>,
) -> Response {
    let cookies = cookies(&request, &headers);
    let named = state_cookie_name(request.https);
    let browsers = cookies.header.and_then(|c| crate::server::auth::session::cookie_value(c, named));
    let done = async {
        let provider = st.oidc.as_deref().ok_or(AppError::new(ErrorCode::OidcUnavailable))?;
        // Only the browser that started this sign-in may finish it: its
        // sealed cookie must carry the `state` the provider sent back.
        let sealed = browsers.filter(|c| !c.is_empty()).ok_or(AppError::new(ErrorCode::OidcStateInvalid))?;
        let pending = provider.pending(&st.pool, sealed, q.state.as_deref().unwrap_or_default()).await?;
        if let Some(error) = q.error.as_deref() {
            tracing::warn!(error, "the provider refused the sign-in");
            // Its cookie goes with the answer (`to_login_with`).
            return Err(AppError::new(ErrorCode::OidcDenied));
        }
        let code = q.code.as_deref().filter(|c| !c.is_empty()).ok_or(AppError::new(ErrorCode::OidcDenied))?;
        let (who, next) = provider.finish(&st.pool, code, pending).await?;
        let host = st.host.as_ref();
        let (_, session) = accounts::sign_in_oidc(&st.pool, host, &who, &request.client_key, cookies).await?;
        Ok::<_, AppError>((session, next))
    };
    match done.await {
        Ok((session, next)) => {
            let mut res = Redirect::to(&next).into_response();
            let h = res.headers_mut();
            for cookie in [session, state_cookie("", request.https)] {
                if let Ok(v) = http::HeaderValue::from_str(&cookie) {
                    h.append(header::SET_COOKIE, v);
                }
            }
            res
        }
        Err(e) => {
            // Audited once the browser's state matched (a sign-in this
            // console started came back refused); anonymous noise is not.
            if !matches!(e.code, ErrorCode::OidcStateInvalid | ErrorCode::OidcUnavailable) {
                crate::server::service::audit::oidc_refused(&st.pool, e.code, &request.client_key).await;
            }
            to_login_with(e, request.https)
        }
    }
}

/// The sign-in's state cookie (its sealed value; `""`: removed): over https `__Host-`
/// prefixed (`Path=/`, no `Domain`: a sibling subdomain cannot plant one),
/// as the session cookie is.
fn state_cookie(state: &str, secure: bool) -> String {
    let age = if state.is_empty() { 0 } else { crate::server::auth::oidc::PENDING_SECS };
    format!(
        "{}={state}; Path=/; HttpOnly; SameSite=Lax; Max-Age={age}{}",
        state_cookie_name(secure),
        if secure { "; Secure" } else { "" }
    )
}

fn state_cookie_name(secure: bool) -> &'static str {
    if secure { SECURE_STATE_COOKIE } else { STATE_COOKIE }
}

/// The sign-in page showing `e` (as a refused sign-in form shows its error).
fn to_login_with(e: AppError, secure: bool) -> Response {
    let url = server_fn::error::ServerFnUrlError::new(crate::actions::auth::OIDC_ERROR_PATH, e)
        .to_url("http://console/login")
        .map(|u| format!("{}?{}", u.path(), u.query().unwrap_or_default()))
        .unwrap_or_else(|_| "/login".to_owned());
    ([(header::SET_COOKIE, state_cookie("", secure))], Redirect::to(&url)).into_response()
}
