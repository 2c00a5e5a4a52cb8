//! The clusters list's query: search by name, filters (mode, phase, owner) and
//! the page, read leniently from the URL (anything unusable is ignored) so the
//! list works as a plain GET form without JavaScript, and written back into
//! links.

use serde::{Deserialize, Serialize};

use super::{Phase, PublicAccessMode};

/// Rows per page of the list page.
pub(crate) const PAGE_SIZE: u32 = 50;
/// Longest search text kept (a cluster name is at most 63 characters).
const MAX_SEARCH: usize = 63;

/// Which public access state to show.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ModeFilter {
    Disabled,
    Mode(PublicAccessMode),
}

impl ModeFilter {
    /// Off, then every public access mode (the mode's own list, so a new one
    /// is offered without being added here).
    pub(crate) fn all() -> impl Iterator<Item = ModeFilter> {
        use strum::VariantArray;
        std::iter::once(Self::Disabled).chain(PublicAccessMode::VARIANTS.iter().copied().map(Self::Mode))
    }

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Disabled => "disabled",
            Self::Mode(m) => m.as_str(),
        }
    }

    pub(crate) fn parse(s: &str) -> Option<Self> {
        Self::all().find(|m| m.as_str() == s)
    }

    /// The public access mode shown, `None` for off.
    pub(crate) fn mode(self) -> Option<PublicAccessMode> {
        match self {
            Self::Disabled => None,
            Self::Mode(m) => Some(m),
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListQuery {
    /// Part of the name (lowercase, trimmed); empty: every name.
    pub q: String,
    pub mode: Option<ModeFilter>,
    /// `Deleting` means "deletion requested" (and not refused by the host:
    /// that one is `Failed`), as the list shows it.
    pub phase: Option<Phase>,
    /// An owner's username (admins only; ignored for users).
    pub owner: Option<String>,
    /// 1-based.
    pub page: u32,
}

impl ListQuery {
    /// From URL query values; unusable ones are dropped, not refused (a
    /// hand-edited link still shows a list).
    pub(crate) fn from_params(get: impl Fn(&str) -> Option<String>) -> Self {
        let text = |k: &str| get(k).map(|v| v.trim().to_lowercase()).filter(|v| !v.is_empty());
        Self {
            q: text("q").map(|q| q.chars().take(MAX_SEARCH).collect()).unwrap_or_default(),
            mode: text("mode").and_then(|m| ModeFilter::parse(&m)),
            phase: text("phase").and_then(|p| p.parse::<Phase>().ok()),
            owner: text("owner").filter(|o| o.len() <= 64),
            page: get("page").and_then(|p| p.trim().parse().ok()).filter(|p| *p >= 1).unwrap_or(1),
        }
    }

    /// The URL query for this list at `page` (`?…`, or empty for the plain list).
    pub(crate) fn to_query(&self, page: u32) -> String {
        let mut parts = Vec::new();
        let mut push = |k: &str, v: &str| parts.push(format!("{k}={}", super::path::encode(v)));
        if !self.q.is_empty() {
            push("q", &self.q);
        }
        if let Some(m) = self.mode {
            push("mode", m.as_str());
        }
        if let Some(p) = self.phase {
            push("phase", p.as_str());
        }
        if let Some(o) = &self.owner {
            push("owner", o);
        }
        if page > 1 {
            push("page", &page.to_string());
        }
        if parts.is_empty() { String::new() } else { format!("?{}", parts.join("&")) }
    }

    /// Whether any filter narrows the list.
    pub(crate) fn filtered(&self) -> bool {
        !self.q.is_empty() || self.mode.is_some() || self.phase.is_some() || self.owner.is_some()
    }
}

/// One page of clusters and where it is in the whole.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Page<T> {
    pub items: Vec<T>,
    /// Every cluster matching the filters.
    pub total: u64,
    pub page: u32,
    pub page_size: u32,
    /// The version of what the list shows (`server::push`): the newest
    /// revision among the clusters it may show.
    #[serde(default)]
    pub version: i64,
}

impl<T> Page<T> {
    pub(crate) fn pages(&self) -> u32 {
        (self.total.div_ceil(u64::from(self.page_size.max(1))) as u32).max(1)
    }

    /// 1-based index of the first and last row shown.
    pub(crate) fn range(&self) -> (u64, u64) {
        let first = u64::from(self.page - 1) * u64::from(self.page_size);
        (if self.items.is_empty() { 0 } else { first + 1 }, first + self.items.len() as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(pairs: &[(&str, &str)]) -> ListQuery {
        ListQuery::from_params(|k| pairs.iter().find(|(key, _)| *key == k).map(|(_, v)| v.to_string()))
    }

    #[test]
    fn lenient_parse_and_round_trip() {
        let q = query(&[("q", " Web "), ("mode", "loadbalancer"), ("phase", "ready"), ("owner", "Bob"), ("page", "3")]);
        assert_eq!(q.q, "web");
        assert_eq!(q.mode, Some(ModeFilter::Mode(PublicAccessMode::LoadBalancer)));
        assert_eq!(q.phase, Some(Phase::Ready));
        assert_eq!(q.owner.as_deref(), Some("bob"));
        assert_eq!(q.page, 3);
        assert_eq!(q.to_query(3), "?q=web&mode=loadbalancer&phase=ready&owner=bob&page=3");
        assert_eq!(q.to_query(1), "?q=web&mode=loadbalancer&phase=ready&owner=bob");
        let bad = query(&[("mode", "ingress"), ("phase", "nope"), ("page", "0"), ("q", "   ")]);
        assert_eq!(bad, ListQuery { page: 1, ..ListQuery::default() });
        assert_eq!(bad.to_query(1), "");
        assert!(!bad.filtered());
        assert_eq!(query(&[("page", "-2")]).page, 1);
        assert_eq!(query(&[("q", &"x".repeat(500))]).q.len(), 63);
        assert_eq!(query(&[("q", "a b&c")]).to_query(2), "?q=a%20b%26c&page=2");
        assert_eq!(query(&[("mode", "disabled")]).mode, Some(ModeFilter::Disabled));
        assert_eq!(query(&[("mode", "gateway")]).mode, Some(ModeFilter::Mode(PublicAccessMode::Gateway)));
        assert_eq!(ModeFilter::all().count(), 4, "off and the three modes");
    }

    #[test]
    fn pages_and_ranges() {
        let page = |items: usize, total, page| Page { items: vec![(); items], total, page, page_size: 50, version: 0 };
        assert_eq!((page(50, 10_000, 1).pages(), page(50, 10_000, 1).range()), (200, (1, 50)));
        assert_eq!(page(10, 110, 3).range(), (101, 110));
        assert_eq!((page(0, 0, 1).pages(), page(0, 0, 1).range()), (1, (0, 0)));
        assert_eq!(page(1, 51, 2).pages(), 2);
    }
}
