//! Site paths in URLs: a path percent-encoded as a `next=` query value, and a
//! `next=` target checked on the way back. Shared by pages and the server.

/// Percent-encodes a path for a query value.
pub(crate) fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.~/".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// A `next=` target that stays on this site: a path starting with one `/`,
/// only visible ASCII (browsers drop tabs and newlines, so `/\t/evil` would
/// become `//evil`), no backslash.
pub(crate) fn safe_next(next: Option<&str>) -> &str {
    match next {
        Some(n)
            if n.starts_with('/')
                && !n.starts_with("//")
                && n.bytes().all(|b| (0x21..=0x7e).contains(&b) && b != b'\\') =>
        {
            n
        }
        _ => "/clusters",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_targets() {
        assert_eq!(safe_next(Some("/clusters/3")), "/clusters/3");
        for bad in [
            None,
            Some(""),
            Some("//evil.example"),
            Some("https://evil.example"),
            Some("/\\evil"),
            Some("/\t/evil.example"),
            Some("/\n/evil.example"),
            Some("/ /evil.example"),
            Some("/集群"),
        ] {
            assert_eq!(safe_next(bad), "/clusters", "{bad:?}");
        }
        assert_eq!(encode("/clusters?a=b c"), "/clusters%3Fa%3Db%20c");
    }
}
