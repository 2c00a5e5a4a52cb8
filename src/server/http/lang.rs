//! `GET /lang/{code}?next=/path`: remembers the language in the cookie that
//! leptos_i18n reads, then goes back. A plain link, so it works without JavaScript.

use axum::extract::{Path, Query};
use axum::response::{IntoResponse, Redirect, Response};
use http::{StatusCode, header};
use serde::Deserialize;

use leptos_i18n::Locale as _;

use crate::domain::path::safe_next;
use crate::i18n::Locale;

pub(crate) const COOKIE: &str = "i18n_pref_locale";

#[derive(Deserialize)]
pub(crate) struct Next {
    next: Option<String>,
}

pub(crate) async fn switch(Path(code): Path<String>, Query(q): Query<Next>) -> Response {
    // The languages the console ships (`locales/*.json`, leptos_i18n's list).
    let Some(code) = Locale::get_all().iter().map(|l| l.as_str()).find(|l| *l == code) else {
        return StatusCode::NOT_FOUND.into_response();
    };
    let cookie = format!("{COOKIE}={code}; Path=/; Max-Age=31536000; SameSite=Lax");
    ([(header::SET_COOKIE, cookie)], Redirect::to(safe_next(q.next.as_deref()))).into_response()
}
