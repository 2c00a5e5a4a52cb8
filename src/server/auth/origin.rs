//! CSRF defence for cookie-authenticated writes (OWASP "verify origin with
//! standard headers"), on top of SameSite=Lax cookies: a state-changing request
//! must come from our own origin. Requests with neither `Origin` nor `Referer`
//! are non-browser clients and only pass when they send JSON, which a
//! cross-site HTML form cannot.

/// `host` is the request's `Host` header, `public` the authority of the
/// configured public URL (a proxy may rewrite `Host`); `origin`/`referer` as sent.
pub(crate) fn write_allowed(
    host: Option<&str>,
    public: Option<&str>,
    origin: Option<&str>,
    referer: Option<&str>,
    is_json: bool,
) -> bool {
    let ours: Vec<&str> = host.into_iter().chain(public).collect();
    if ours.is_empty() {
        return false;
    }
    let same = |url: &str| authority(url).is_some_and(|a| ours.iter().any(|o| a.eq_ignore_ascii_case(o)));
    match (origin, referer) {
        (Some(o), _) if o != "null" => same(o),
        (_, Some(r)) => same(r),
        (Some(_), None) => false,
        (None, None) => is_json,
    }
}

/// `http://host:port/path` → `host:port`.
pub(crate) fn authority(url: &str) -> Option<&str> {
    let rest = url.strip_prefix("http://").or_else(|| url.strip_prefix("https://"))?;
    Some(rest.split(['/', '?', '#']).next().unwrap_or(rest))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table() {
        let h = Some("127.0.0.1:3000");
        let cases = [
            (h, Some("http://127.0.0.1:3000"), None, false, true),
            (h, Some("https://127.0.0.1:3000"), None, false, true),
            (h, Some("http://evil.example"), None, false, false),
            (h, Some("http://127.0.0.1:3000.evil.example"), None, false, false),
            (h, Some("null"), None, false, false),
            (h, Some("null"), Some("http://127.0.0.1:3000/x"), false, true),
            (h, None, Some("http://127.0.0.1:3000/clusters/new"), false, true),
            (h, None, Some("http://evil.example/127.0.0.1:3000"), false, false),
            (h, None, None, true, true),
            (h, None, None, false, false),
            (None, Some("http://127.0.0.1:3000"), None, false, false),
        ];
        for (host, origin, referer, json, want) in cases {
            assert_eq!(write_allowed(host, None, origin, referer, json), want, "{origin:?} {referer:?} {json}");
        }
        // Behind a proxy that rewrites Host, the public URL's authority counts.
        let public = Some("console.example.com");
        assert!(write_allowed(Some("10.0.0.2:3000"), public, Some("https://console.example.com"), None, false));
        assert!(!write_allowed(Some("10.0.0.2:3000"), public, Some("https://evil.example"), None, false));
    }
}
