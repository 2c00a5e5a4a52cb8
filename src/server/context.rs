//! What a server function or page needs from the current request: the app
//! state, the signed-in user (put into request extensions by the session
//! middleware) and a way to set response headers.

use http::request::Parts;
use leptos::prelude::*;

use super::state::AppState;
use crate::domain::user::CurrentUser;
use crate::domain::{AppError, ErrorCode};

pub fn state() -> Result<AppState, AppError> {
    use_context::<AppState>().ok_or(AppError::new(ErrorCode::Internal))
}

/// The signed-in user, if any.
pub fn current_user() -> Option<CurrentUser> {
    use_context::<Parts>().and_then(|p| p.extensions.get::<CurrentUser>().cloned())
}

pub fn require_user() -> Result<CurrentUser, AppError> {
    current_user().ok_or(AppError::new(ErrorCode::Unauthenticated))
}

pub fn require_admin() -> Result<CurrentUser, AppError> {
    let user = require_user()?;
    if user.is_admin() { Ok(user) } else { Err(AppError::new(ErrorCode::Forbidden)) }
}

/// A request header, as text.
pub fn header(name: &str) -> Option<String> {
    use_context::<Parts>().and_then(|p| p.headers.get(name).and_then(|v| v.to_str().ok()).map(str::to_owned))
}

/// The client's address for throttling (the socket address, put into
/// extensions by axum's `ConnectInfo`).
pub fn client_addr() -> String {
    use_context::<Parts>()
        .and_then(|p| {
            p.extensions.get::<axum::extract::ConnectInfo<std::net::SocketAddr>>().map(|c| c.0.ip().to_string())
        })
        .unwrap_or_default()
}

pub fn set_response_header(name: http::HeaderName, value: &str) {
    if let (Some(res), Ok(value)) = (use_context::<leptos_axum::ResponseOptions>(), http::HeaderValue::from_str(value))
    {
        res.append_header(name, value);
    }
}

pub fn set_status(status: http::StatusCode) {
    if let Some(res) = use_context::<leptos_axum::ResponseOptions>() {
        res.set_status(status);
    }
}
