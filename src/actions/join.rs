//! The join page's server functions: load, create a token, revoke one. Both
//! writes are plain forms (with or without JavaScript) that land back on the
//! page. A token just made reaches the page once, in a cookie scoped to the
//! page's path (HttpOnly, two minutes, cleared by the page that shows it):
//! never in a URL, a log or the database.

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

use crate::domain::AppError;
use crate::domain::cluster::Cluster;
use crate::domain::nodes::{CreatedToken, JoinWarning, NodeView, RemovalView, TokenView};

/// The cookie that carries a just-made token to the page, once; over https
/// [`SECURE_CREATED_COOKIE`].
pub(crate) const CREATED_COOKIE: &str = "kubebyon_join_token";
/// Over https the cookie is `__Host-` prefixed (as the session's): the browser
/// takes it only from this origin, Secure, with `Path=/` and no `Domain`, so a
/// sibling subdomain cannot plant a token on the page. It still carries the
/// cluster's id, and only that cluster's page reads (and clears) it.
pub(crate) const SECURE_CREATED_COOKIE: &str = "__Host-kubebyon_join_token";

/// What the join page shows.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct JoinPage {
    pub cluster: Cluster,
    pub warnings: Vec<JoinWarning>,
    pub tokens: Vec<TokenView>,
    pub nodes: Vec<NodeView>,
    /// The latest node removals, newest first (running ones show progress).
    pub removals: Vec<RemovalView>,
    /// The console's address as machines reach it (its public URL, else the
    /// address this page was asked for).
    pub console_url: String,
    /// A token made by the previous post, shown this once.
    pub created: Option<CreatedToken>,
    /// Unix seconds, when the page was rendered (countdowns).
    pub now: i64,
}

#[server(prefix = "/fn", endpoint = "join/get")]
pub(crate) async fn load_join(id: i64) -> Result<JoinPage, AppError> {
    use crate::server::context::{header, request, require_user, set_response_header, state};
    let (st, user, request) = (state()?, require_user()?, request()?);
    let crate::server::service::join::Overview { cluster, read, removals } =
        crate::server::service::join::overview(&st.pool, st.host.as_ref(), &user, id).await?;
    let warnings = crate::domain::nodes::join_warnings(&cluster, read.as_ref().err().copied());
    let (tokens, nodes) = read.unwrap_or_default();
    let (console_url, secure) = (request.console_url, request.https);
    let created = header("cookie").and_then(|c| created_from_cookie(&c, id, secure));
    if created.is_some() {
        set_response_header(http::header::SET_COOKIE, &created_cookie(id, "", 0, secure));
    }
    let now = crate::server::service::join::now();
    Ok(JoinPage { cluster, warnings, tokens, nodes, removals, console_url, created, now })
}

/// `Set-Cookie` for the token just made (`value` empty and `max_age` 0 clears it).
#[cfg(feature = "ssr")]
fn created_cookie(id: i64, value: &str, max_age: u32, secure: bool) -> String {
    let attrs = format!("Max-Age={max_age}; HttpOnly; SameSite=Strict");
    if secure {
        format!("{SECURE_CREATED_COOKIE}={value}; Path=/; {attrs}; Secure")
    } else {
        format!("{CREATED_COOKIE}={value}; Path=/clusters/{id}/join; {attrs}")
    }
}

/// The token in the cookie, when it is one made for cluster `id`
/// (`<id>:<token>:<created>:<expires>`).
#[cfg(feature = "ssr")]
fn created_from_cookie(cookies: &str, id: i64, secure: bool) -> Option<CreatedToken> {
    let name = if secure { SECURE_CREATED_COOKIE } else { CREATED_COOKIE };
    let value = cookies.split(';').find_map(|c| c.trim().strip_prefix(name)?.strip_prefix('='))?;
    let mut parts = value.split(':');
    let (cluster, token) = (parts.next()?.parse::<i64>().ok()?, parts.next()?);
    let (created, expires) = (parts.next()?.parse().ok(), parts.next()?.parse().ok());
    let token = crate::domain::join::JoinToken::parse(token).filter(|_| cluster == id)?;
    let view = TokenView { id: token.id().to_owned(), created_at: created, expires_at: expires, nodes: Vec::new() };
    Some(CreatedToken { token: token.to_string(), view })
}

#[server(prefix = "/fn", endpoint = "join/create")]
pub(crate) async fn create_join_token(id: i64, lifetime: String) -> Result<(), AppError> {
    use crate::server::context::{keep_input_on_error, request, require_user, set_response_header, state};
    use server_fn::ServerFn as _;
    let (st, user, secure) = (state()?, require_user()?, request()?.https);
    let page = format!("/clusters/{id}/join");
    let created =
        crate::server::service::join::create_token(&st.pool, st.host.as_ref(), &st.spec_writes, &user, id, &lifetime)
            .await
            .inspect_err(|e| keep_input_on_error(CreateJoinToken::PATH, &page, &[("lifetime", &lifetime)], e))?;
    let value = format!(
        "{id}:{}:{}:{}",
        created.token,
        created.view.created_at.unwrap_or_default(),
        created.view.expires_at.unwrap_or_default()
    );
    set_response_header(http::header::SET_COOKIE, &created_cookie(id, &value, 120, secure));
    leptos_axum::redirect(&page);
    Ok(())
}

#[server(prefix = "/fn", endpoint = "join/revoke")]
pub(crate) async fn revoke_join_token(id: i64, token_id: String) -> Result<(), AppError> {
    use crate::server::context::{keep_input_on_error, require_user, state};
    use server_fn::ServerFn as _;
    let (st, user) = (state()?, require_user()?);
    let page = format!("/clusters/{id}/join");
    crate::server::service::join::revoke_token(&st.pool, st.host.as_ref(), &st.spec_writes, &user, id, &token_id)
        .await
        .inspect_err(|e| keep_input_on_error(RevokeJoinToken::PATH, &page, &[], e))?;
    leptos_axum::redirect(&page);
    Ok(())
}

/// Starts removing a node; `drain` `false` deletes it without draining (a
/// machine that is gone). The page then shows the removal's progress.
#[server(prefix = "/fn", endpoint = "join/remove-node")]
pub(crate) async fn remove_node(id: i64, node: String, drain: Option<String>) -> Result<(), AppError> {
    use crate::server::context::{keep_input_on_error, require_user, state};
    use server_fn::ServerFn as _;
    let (st, user) = (state()?, require_user()?);
    let page = format!("/clusters/{id}/join");
    let drain = drain.as_deref() != Some("false");
    crate::server::service::join::remove_node(&st.pool, st.host.as_ref(), &st.spec_writes, &user, id, &node, drain)
        .await
        .inspect_err(|e| keep_input_on_error(RemoveNode::PATH, &page, &[], e))
        .map(|_| ())?;
    leptos_axum::redirect(&page);
    Ok(())
}

#[cfg(all(test, feature = "ssr"))]
mod tests {
    use super::*;

    #[test]
    fn the_created_token_cookie_is_read_only_for_its_cluster() {
        let value = "7:abcdef.0123456789abcdef:100:3700";
        for (secure, name) in [(false, CREATED_COOKIE), (true, SECURE_CREATED_COOKIE)] {
            let cookies = format!("session=x; {name}={value}; lang=en");
            let got = created_from_cookie(&cookies, 7, secure).expect("read");
            assert_eq!(got.token, "abcdef.0123456789abcdef");
            let view = (got.view.id.as_str(), got.view.created_at, got.view.expires_at);
            assert_eq!(view, ("abcdef", Some(100), Some(3700)));
            assert_eq!(created_from_cookie(&cookies, 8, secure), None, "another cluster's page");
            assert_eq!(created_from_cookie(&format!("{name}=7:<script>:1:2"), 7, secure), None, "not a token");
            assert_eq!(created_from_cookie("session=x", 7, secure), None);
        }
        // Over https only the __Host- cookie counts: a plain one (which any
        // subdomain could set) is not read.
        let plain = format!("{CREATED_COOKIE}={value}");
        assert_eq!(created_from_cookie(&plain, 7, true), None, "a plain cookie over https");
        let set = created_cookie(7, value, 120, true);
        assert!(set.starts_with("__Host-kubebyon_join_token=7:"), "{set}");
        for attr in ["Path=/;", "HttpOnly", "SameSite=Strict", "; Secure"] {
            assert!(set.contains(attr), "{attr} in {set}");
        }
        assert!(!set.contains("Domain"), "__Host- cookies carry no Domain: {set}");
        let set = created_cookie(7, value, 120, false);
        assert!(set.contains("Path=/clusters/7/join") && set.contains("HttpOnly") && !set.contains("Secure"), "{set}");
        assert!(created_cookie(7, "", 0, false).contains("Max-Age=0"));
        assert!(created_cookie(7, "", 0, true).starts_with("__Host-kubebyon_join_token=;"));
    }
}
