//! The JSON HTTP API (`docs/http-api.md`): the same services as the pages.
//! Every failure is `{"code": …, "field": …}` with a 4xx status; only a
//! storage failure is a 500, and its detail stays in the log.

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{FromRequest, FromRequestParts};
use axum::http::StatusCode;
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use crate::domain::user::CurrentUser;
use crate::domain::{AppError, ErrorCode};
use crate::server::state::AppState;

pub(crate) mod audit;
pub(crate) mod auth;
pub(crate) mod clusters;
pub(crate) mod join;
pub(crate) mod members;
pub(crate) mod moves;
pub(crate) mod settings;

/// Every resource's routes.
pub(crate) fn routes() -> Vec<(&'static str, axum::routing::MethodRouter<AppState>)> {
    [
        clusters::routes(),
        join::routes(),
        members::routes(),
        settings::routes(),
        audit::routes(),
        moves::routes(),
        auth::routes(),
    ]
    .concat()
}

pub(crate) struct ApiError(pub AppError);

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.0.code.http_status()).unwrap_or(StatusCode::BAD_REQUEST);
        let mut res = (status, Json(self.0)).into_response();
        let after = match self.0.code {
            ErrorCode::RateLimited => Some(crate::server::service::write_limit::RETRY_AFTER_SECS),
            ErrorCode::CallsRateLimited => Some(crate::server::host::call_budget::RETRY_AFTER_SECS),
            ErrorCode::JoinRateLimited => Some(crate::server::auth::rate_limit::WINDOW_SECS.unsigned_abs()),
            _ => None,
        };
        if let Some(after) = after {
            res.headers_mut().insert(http::header::RETRY_AFTER, http::HeaderValue::from(after));
        }
        res
    }
}

impl From<AppError> for ApiError {
    fn from(e: AppError) -> Self {
        Self(e)
    }
}

impl From<JsonRejection> for ApiError {
    fn from(rejection: JsonRejection) -> Self {
        let code = match &rejection {
            JsonRejection::MissingJsonContentType(_) => ErrorCode::UnsupportedMediaType,
            JsonRejection::BytesRejection(_) => ErrorCode::PayloadTooLarge,
            _ => ErrorCode::BadRequest,
        };
        tracing::debug!(error = %rejection.body_text(), "json body refused");
        Self(AppError::new(code))
    }
}

/// A JSON body whose every rejection is an `ApiError`.
#[derive(FromRequest)]
#[from_request(via(Json), rejection(ApiError))]
pub(crate) struct ApiJson<T>(pub T);

/// The signed-in user, or 401.
pub(crate) struct ApiUser(pub CurrentUser);

impl<S: Send + Sync> FromRequestParts<S> for ApiUser {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        parts
            .extensions
            .get::<CurrentUser>()
            .cloned()
            .map(ApiUser)
            .ok_or(ApiError(AppError::new(ErrorCode::Unauthenticated)))
    }
}

/// Cluster ids in paths; anything else is simply not found.
pub(crate) fn cluster_id(raw: &str) -> Result<i64, ApiError> {
    raw.parse().map_err(|_| ApiError(AppError::new(ErrorCode::NotFound)))
}

pub(crate) type ApiResult<T> = Result<Json<T>, ApiError>;

/// Any other `/api/...` path: a JSON 404, not the HTML page.
pub(crate) async fn not_found() -> ApiError {
    ApiError(AppError::new(ErrorCode::NotFound))
}

/// `?before=ID`: the page of a newest-first list older than entry ID.
#[derive(Deserialize)]
pub(crate) struct BeforeQuery {
    pub(super) before: Option<i64>,
}
