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

/// The cookie that carries a just-made token to the page, once.
pub(crate) const CREATED_COOKIE: &str = "kubebyon_join_token";

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
    use crate::server::context::{header, require_user, set_response_header, state};
    let (st, user) = (state()?, require_user()?);
    let crate::server::service::join::Overview { cluster, read, removals } =
        crate::server::service::join::overview(&st.pool, st.host.as_ref(), &user, id).await?;
    let warnings = crate::domain::nodes::join_warnings(&cluster, read.is_some() || !cluster.spec.own_nodes);
    let (tokens, nodes) = read.unwrap_or_default();
    let console_url = match &st.config.public_url {
        Some(url) => url.trim_end_matches('/').to_owned(),
        None => {
            let https = st.config.public_url_is_https() || header("x-forwarded-proto").as_deref() == Some("https");
            format!("{}://{}", if https { "https" } else { "http" }, header("host").unwrap_or_default())
        }
    };
    let created = header("cookie").and_then(|c| created_from_cookie(&c, id));
    if created.is_some() {
        set_response_header(http::header::SET_COOKIE, &created_cookie(id, "", 0, st.config.public_url_is_https()));
    }
    let now = crate::server::service::join::now();
    Ok(JoinPage { cluster, warnings, tokens, nodes, removals, console_url, created, now })
}

/// `Set-Cookie` for the token just made (`value` empty and `max_age` 0 clears it).
#[cfg(feature = "ssr")]
fn created_cookie(id: i64, value: &str, max_age: u32, secure: bool) -> String {
    let secure = if secure { "; Secure" } else { "" };
    format!("{CREATED_COOKIE}={value}; Path=/clusters/{id}/join; Max-Age={max_age}; HttpOnly; SameSite=Strict{secure}")
}

/// The token in the cookie, when it is one made for cluster `id`
/// (`<id>:<token>:<created>:<expires>`).
#[cfg(feature = "ssr")]
fn created_from_cookie(cookies: &str, id: i64) -> Option<CreatedToken> {
    let value = cookies.split(';').find_map(|c| c.trim().strip_prefix(&format!("{CREATED_COOKIE}=")))?;
    let mut parts = value.split(':');
    let (cluster, token) = (parts.next()?.parse::<i64>().ok()?, parts.next()?);
    let (created, expires) = (parts.next()?.parse().ok(), parts.next()?.parse().ok());
    let token = crate::domain::join::JoinToken::parse(token).filter(|_| cluster == id)?;
    let view = TokenView { id: token.id().to_owned(), created_at: created, expires_at: expires, nodes: Vec::new() };
    Some(CreatedToken { token: token.to_string(), view })
}

#[server(prefix = "/fn", endpoint = "join/create")]
pub(crate) async fn create_join_token(id: i64, lifetime: String) -> Result<(), AppError> {
    use crate::server::context::{keep_input_on_error, require_user, set_response_header, state};
    use server_fn::ServerFn as _;
    let (st, user) = (state()?, require_user()?);
    let page = format!("/clusters/{id}/join");
    let created = crate::server::service::join::create_token(&st.pool, st.host.as_ref(), &user, id, &lifetime)
        .await
        .inspect_err(|e| keep_input_on_error(CreateJoinToken::PATH, &page, &[("lifetime", &lifetime)], e))?;
    let value = format!(
        "{id}:{}:{}:{}",
        created.token,
        created.view.created_at.unwrap_or_default(),
        created.view.expires_at.unwrap_or_default()
    );
    set_response_header(http::header::SET_COOKIE, &created_cookie(id, &value, 120, st.config.public_url_is_https()));
    leptos_axum::redirect(&page);
    Ok(())
}

#[server(prefix = "/fn", endpoint = "join/revoke")]
pub(crate) async fn revoke_join_token(id: i64, token_id: String) -> Result<(), AppError> {
    use crate::server::context::{keep_input_on_error, require_user, state};
    use server_fn::ServerFn as _;
    let (st, user) = (state()?, require_user()?);
    let page = format!("/clusters/{id}/join");
    crate::server::service::join::revoke_token(&st.pool, st.host.as_ref(), &user, id, &token_id)
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
    crate::server::service::join::remove_node(&st.pool, st.host.as_ref(), &user, id, &node, drain)
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
        let cookies = format!("session=x; {CREATED_COOKIE}={value}; lang=en");
        let got = created_from_cookie(&cookies, 7).expect("read");
        assert_eq!(got.token, "abcdef.0123456789abcdef");
        assert_eq!((got.view.id.as_str(), got.view.created_at, got.view.expires_at), ("abcdef", Some(100), Some(3700)));
        assert_eq!(created_from_cookie(&cookies, 8), None, "another cluster's page");
        assert_eq!(created_from_cookie(&format!("{CREATED_COOKIE}=7:<script>:1:2"), 7), None, "not a token");
        assert_eq!(created_from_cookie("session=x", 7), None);
        let set = created_cookie(7, value, 120, true);
        assert!(set.contains("Path=/clusters/7/join") && set.contains("HttpOnly") && set.contains("Secure"), "{set}");
        assert!(created_cookie(7, "", 0, false).contains("Max-Age=0"));
    }
}
