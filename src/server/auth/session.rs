//! Session cookies: a random token in an HttpOnly, SameSite=Lax cookie; over
//! https it is Secure and named `__Host-kubebyon_session` (the browser then
//! keeps it for this host alone: a sibling subdomain cannot plant one). The
//! database keeps only the token's SHA-256. A session ends after [`TTL_SECS`],
//! or after [`IDLE_SECS`] unused.

use sha2::{Digest, Sha256};

pub const COOKIE: &str = "kubebyon_session";
/// The cookie's name over https.
pub(crate) const SECURE_COOKIE: &str = "__Host-kubebyon_session";
pub(crate) const TTL_SECS: i64 = 7 * 24 * 3600;
/// A session unused this long ends.
pub(crate) const IDLE_SECS: i64 = 12 * 3600;
/// How stale a session's last use may be before it is written again (one
/// write a minute per active session, not one per request).
pub(crate) const TOUCH_SECS: i64 = 60;

/// The session cookie's name: `__Host-` prefixed over https.
pub(crate) fn cookie_name(secure: bool) -> &'static str {
    if secure { SECURE_COOKIE } else { COOKIE }
}

/// The session token in a `Cookie` header, under this scheme's name only
/// (over https a plain-named cookie is ignored: anyone on a sibling host
/// could have set it).
pub(crate) fn token(cookie_header: &str, secure: bool) -> Option<&str> {
    cookie_value(cookie_header, cookie_name(secure))
}

/// A new random token (256 bits, hex).
pub fn new_token() -> String {
    use rand::RngCore;
    let mut bytes = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    hex::encode(bytes)
}

pub fn token_hash(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

/// The `Set-Cookie` value that stores `token`.
pub(crate) fn set_cookie(token: &str, secure: bool) -> String {
    format!(
        "{}={token}; Path=/; HttpOnly; SameSite=Lax; Max-Age={TTL_SECS}{}",
        cookie_name(secure),
        if secure { "; Secure" } else { "" }
    )
}

/// The `Set-Cookie` value that removes the session cookie.
pub(crate) fn clear_cookie(secure: bool) -> String {
    format!(
        "{}=; Path=/; HttpOnly; SameSite=Lax; Max-Age=0{}",
        cookie_name(secure),
        if secure { "; Secure" } else { "" }
    )
}

/// Finds a cookie's value in a `Cookie` header.
pub(crate) fn cookie_value<'a>(header: &'a str, name: &str) -> Option<&'a str> {
    header.split(';').filter_map(|pair| pair.trim().split_once('=')).find(|(k, _)| *k == name).map(|(_, v)| v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cookie_attributes() {
        let c = set_cookie("abc", false);
        assert!(c.starts_with("kubebyon_session=abc;"));
        for attr in ["HttpOnly", "SameSite=Lax", "Path=/"] {
            assert!(c.contains(attr), "{attr}");
        }
        assert!(!c.contains("Secure"));
        let s = set_cookie("abc", true);
        assert!(s.starts_with("__Host-kubebyon_session=abc;") && s.ends_with("; Secure") && s.contains("Path=/"));
        assert!(!s.contains("Domain"), "__Host- cookies carry no Domain");
        assert!(clear_cookie(true).starts_with("__Host-kubebyon_session=;"));
        // Over https only the prefixed name counts.
        let both = "kubebyon_session=planted; __Host-kubebyon_session=real";
        assert_eq!((token(both, true), token(both, false)), (Some("real"), Some("planted")));
        assert_eq!(token("kubebyon_session=planted", true), None);
        assert!(clear_cookie(false).contains("Max-Age=0"));
    }

    #[test]
    fn cookie_parsing() {
        let h = "a=1; kubebyon_session=tok; i18n_pref_locale=zh-CN";
        assert_eq!(cookie_value(h, COOKIE), Some("tok"));
        assert_eq!(cookie_value(h, "i18n_pref_locale"), Some("zh-CN"));
        assert_eq!(cookie_value(h, "missing"), None);
        assert_eq!(cookie_value("", COOKIE), None);
    }

    #[test]
    fn tokens_are_random_and_hashed() {
        let (a, b) = (new_token(), new_token());
        assert_ne!(a, b);
        assert_eq!(a.len(), 64);
        assert_ne!(token_hash(&a), a);
        assert_eq!(token_hash(&a), token_hash(&a));
    }
}
