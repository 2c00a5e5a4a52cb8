//! Signing in and out.

use axum::Json;
use axum::extract::{Extension, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, post};
use http::header;
use serde::{Deserialize, Serialize};

use super::{ApiError, ApiJson};
use crate::server::http::request::RequestFacts;
use crate::server::service::accounts;
use crate::server::state::AppState;

/// The routes of signing in and out.
pub(crate) fn routes() -> Vec<(&'static str, MethodRouter<AppState>)> {
    vec![("/api/auth/login", post(login)), ("/api/auth/logout", post(logout))]
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
        &body.username,
        &body.password,
        &request.client_key,
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
