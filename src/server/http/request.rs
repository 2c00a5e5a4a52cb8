//! What the console knows of a request before any handler runs, worked out
//! once by the guard ([`super::guard::guard`]) and kept in the request's
//! extensions: whether the browser reached the console over https, whom the
//! rate limits count the request against, and the console's address as the
//! browser sees it. Handlers take it as `Extension<RequestFacts>`, server
//! functions by [`crate::server::context::request`]; none reads those
//! headers again (`X-Forwarded-Proto` is read here only).

use std::net::IpAddr;

use http::HeaderMap;

use crate::server::config::Config;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RequestFacts {
    /// Served over https ([`https`]): cookies are `Secure` and `__Host-`
    /// prefixed, answers carry HSTS.
    pub https: bool,
    /// The client's throttling key (`auth::client`: the socket's address, or
    /// behind a trusted proxy the forwarded one); empty without a socket.
    pub client_key: String,
    /// The console's address as machines and browsers reach it: its public
    /// URL, else this request's scheme and `Host`.
    pub console_url: String,
}

impl RequestFacts {
    pub(crate) fn of(config: &Config, peer: Option<IpAddr>, headers: &HeaderMap) -> Self {
        let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
        let https = https(config.public_url_is_https(), text("x-forwarded-proto"));
        let console_url = match &config.public_url {
            Some(url) => url.trim_end_matches('/').to_owned(),
            None => format!("{}://{}", if https { "https" } else { "http" }, text("host").unwrap_or_default()),
        };
        let client_key = peer.map(|ip| config.client_key(ip, headers)).unwrap_or_default();
        Self { https, client_key, console_url }
    }
}

/// Served over https: the public URL says so, or the proxy in front of the
/// console does (`X-Forwarded-Proto`, any case).
pub(crate) fn https(public_url_is_https: bool, forwarded_proto: Option<&str>) -> bool {
    public_url_is_https || forwarded_proto.is_some_and(|p| p.eq_ignore_ascii_case("https"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn https_is_the_public_urls_or_the_proxys_word() {
        for (public_https, forwarded, want) in [
            (false, None, false),
            (true, None, true),
            (true, Some("http"), true),
            (false, Some("HTTPS"), true),
            (false, Some("https"), true),
            (false, Some("http"), false),
            (false, Some(""), false),
        ] {
            assert_eq!(https(public_https, forwarded), want, "{public_https} {forwarded:?}");
        }
    }

    #[test]
    fn the_console_url_is_the_public_one_else_the_requests() {
        let headers = |pairs: &[(&'static str, &'static str)]| {
            pairs.iter().map(|(k, v)| (http::HeaderName::from_static(k), http::HeaderValue::from_static(v))).collect()
        };
        let peer = Some(IpAddr::from([192, 0, 2, 7]));
        let mut config = Config::default();
        let facts = RequestFacts::of(&config, peer, &headers(&[("host", "console.example:3000")]));
        assert_eq!(
            facts,
            RequestFacts {
                https: false,
                client_key: "192.0.2.7".to_owned(),
                console_url: "http://console.example:3000".to_owned()
            }
        );
        let behind_tls = headers(&[("host", "console.example"), ("x-forwarded-proto", "https")]);
        let facts = RequestFacts::of(&config, None, &behind_tls);
        assert_eq!(
            (facts.https, facts.client_key.as_str(), facts.console_url.as_str()),
            (true, "", "https://console.example")
        );
        config.public_url = Some("https://kubebyon.example.com/".to_owned());
        let facts = RequestFacts::of(&config, peer, &headers(&[("host", "10.0.0.5:3000")]));
        assert_eq!((facts.https, facts.console_url.as_str()), (true, "https://kubebyon.example.com"));
    }
}
