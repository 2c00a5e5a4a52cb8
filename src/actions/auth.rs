//! Sign-in and sign-out, and who is signed in.

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

use crate::domain::AppError;
use crate::domain::user::CurrentUser;

#[server(prefix = "/fn", endpoint = "login")]
pub(crate) async fn login(username: String, password: String, next: Option<String>) -> Result<(), AppError> {
    use crate::domain::path::safe_next;
    use crate::server::context::{header, request, set_response_header, state};
    use crate::server::service::accounts;

    let (st, request) = (state()?, request()?);
    let cookie = header("cookie");
    let cookies = accounts::Cookies { header: cookie.as_deref(), secure: request.https };
    let local = st.config.local_sign_in;
    let (_, set_cookie) =
        accounts::sign_in(&st.pool, &st.limiter, (&username, &password), &request.client_key, local, cookies).await?;
    set_response_header(http::header::SET_COOKIE, &set_cookie);
    leptos_axum::redirect(safe_next(next.as_deref()));
    Ok(())
}

/// Where a refused OpenID Connect sign-in's error is addressed (the sign-in
/// page shows it as a refused form's: `pages::url_error`).
pub(crate) const OIDC_ERROR_PATH: &str = "/auth/oidc";

/// What the sign-in page offers.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub(crate) struct SignInOptions {
    /// "Sign in with your organisation account" (a provider is configured).
    pub organisation: bool,
    /// The password form (`KUBEBYON_LOCAL_SIGN_IN` is not `off`).
    pub password: bool,
}

/// [`SignInOptions`] as the server renders the sign-in page.
pub(crate) fn sign_in_options() -> SignInOptions {
    #[cfg(feature = "ssr")]
    {
        use crate::server::config::LocalSignIn;
        crate::server::context::state().map_or(SignInOptions { organisation: false, password: true }, |st| {
            SignInOptions { organisation: st.oidc.is_some(), password: st.config.local_sign_in != LocalSignIn::Off }
        })
    }
    #[cfg(not(feature = "ssr"))]
    SignInOptions::default()
}

#[server(prefix = "/fn", endpoint = "logout")]
pub(crate) async fn logout() -> Result<(), AppError> {
    use crate::server::context::{header, request, set_response_header, state};
    use crate::server::service::accounts;

    let (st, secure) = (state()?, request()?.https);
    let cookie = header("cookie");
    let set_cookie = accounts::sign_out(&st.pool, accounts::Cookies { header: cookie.as_deref(), secure }).await?;
    set_response_header(http::header::SET_COOKIE, &set_cookie);
    leptos_axum::redirect("/login");
    Ok(())
}

/// What the page frame shows: the signed-in user, and whether the host
/// cluster is the local simulator.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Session {
    pub user: Option<CurrentUser>,
    pub simulated_host: bool,
    /// No host cluster is configured: requests wait.
    pub no_host: bool,
}

#[server(prefix = "/fn", endpoint = "whoami")]
pub(crate) async fn whoami() -> Result<Session, AppError> {
    session_now()
}

/// [`whoami`] without the wait, for what the server renders: the session
/// middleware has already read the user, so the list page reads it without
/// a `Suspense` (each boundary was a visible part of its server time,
/// docs/performance.md). Never called in the browser, where pages are not
/// rendered (only islands hydrate).
pub(crate) fn session_now() -> Result<Session, AppError> {
    #[cfg(feature = "ssr")]
    {
        use crate::server::context::{current_user, state};
        let st = state()?;
        Ok(Session { user: current_user(), simulated_host: st.config.simulated_host, no_host: st.host.is_none() })
    }
    #[cfg(not(feature = "ssr"))]
    Err(AppError::new(crate::domain::ErrorCode::Internal))
}
