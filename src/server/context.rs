//! What a server function or page needs from the current request: the app
//! state, the signed-in user (put into request extensions by the session
//! middleware) and a way to set response headers.

use http::request::Parts;
use leptos::prelude::*;

use super::http::request::RequestFacts;
use super::state::AppState;
use crate::domain::user::CurrentUser;
use crate::domain::{AppError, ErrorCode};

pub(crate) fn state() -> Result<AppState, AppError> {
    use_context::<AppState>().ok_or(AppError::new(ErrorCode::Internal))
}

/// The signed-in user, if any.
pub(crate) fn current_user() -> Option<CurrentUser> {
    use_context::<Parts>().and_then(|p| p.extensions.get::<CurrentUser>().cloned())
}

pub(crate) fn require_user() -> Result<CurrentUser, AppError> {
    current_user().ok_or(AppError::new(ErrorCode::Unauthenticated))
}

pub(crate) fn require_admin() -> Result<CurrentUser, AppError> {
    let user = require_user()?;
    user.require_admin()?;
    Ok(user)
}

/// A request header, as text.
pub(crate) fn header(name: &str) -> Option<String> {
    use_context::<Parts>().and_then(|p| p.headers.get(name).and_then(|v| v.to_str().ok()).map(str::to_owned))
}

/// What the guard worked out of this request (https, the client's
/// throttling key, the console's address): `server::http::request`.
pub(crate) fn request() -> Result<RequestFacts, AppError> {
    use_context::<Parts>()
        .and_then(|p| p.extensions.get::<RequestFacts>().cloned())
        .ok_or(AppError::new(ErrorCode::Internal))
}

pub(crate) fn set_response_header(name: http::HeaderName, value: &str) {
    if let (Some(res), Ok(value)) = (use_context::<leptos_axum::ResponseOptions>(), http::HeaderValue::from_str(value))
    {
        res.append_header(name, value);
    }
}

pub(crate) fn set_status(status: http::StatusCode) {
    if let Some(res) = use_context::<leptos_axum::ResponseOptions>() {
        res.set_status(status);
    }
}

/// A plain HTML form post (JavaScript off): the browser asked for a page.
pub(crate) fn is_plain_form_post() -> bool {
    header("accept").is_some_and(|a| a.contains("text/html"))
}

/// After a refused plain form post, sends the browser back to `page` with what
/// was typed (`fields`, never a secret) and the error (`__path`/`__err`, as
/// server_fn encodes it) in the URL instead of to the bare referer, so the form
/// comes back filled in with the error beside the field. No-op with JavaScript.
pub(crate) fn keep_input_on_error(fn_path: &str, page: &str, fields: &[(&str, &str)], err: &AppError) {
    if !is_plain_form_post() {
        return;
    }
    let mut query = form_urlencoded::Serializer::new(String::new());
    for (key, value) in fields {
        query.append_pair(key, value);
    }
    let base = format!("http://console{page}?{}", query.finish());
    let Ok(url) = server_fn::error::ServerFnUrlError::new(fn_path, *err).to_url(&base) else {
        return;
    };
    if let (Some(res), Ok(location)) = (
        use_context::<leptos_axum::ResponseOptions>(),
        http::HeaderValue::from_str(&format!("{}?{}", url.path(), url.query().unwrap_or_default())),
    ) {
        res.insert_header(http::header::LOCATION, location);
        res.set_status(http::StatusCode::FOUND);
    }
}
