//! Sharing: who may do what with a cluster. A cluster has one
//! owner (whose quota it counts against) and members — users, or teams of
//! users — each with a [`MemberRole`]. What a caller may do follows from
//! their [`Access`] alone: [`Access::allows`] is the one table the service
//! layer asks, and the virtual cluster's RBAC follows the same roles
//! ([`MemberRole::cluster_role`]).

use serde::{Deserialize, Serialize};

use super::error::{AppError, ErrorCode, Field};

/// A member's role, lowest first (the order is the one rules compare by).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    strum::IntoStaticStr,
    strum::EnumString,
    strum::VariantArray,
)]
#[serde(rename_all = "lowercase")]
#[strum(serialize_all = "lowercase")]
pub enum MemberRole {
    View,
    Edit,
    Admin,
}

impl MemberRole {
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    pub fn parse(raw: &str) -> Result<Self, AppError> {
        raw.trim().parse().map_err(|_| AppError::at(ErrorCode::MemberRoleInvalid, Field::MemberRole))
    }

    /// The Kubernetes ClusterRole a member with this role is bound to
    /// cluster-wide inside the virtual cluster: the API server's default
    /// roles for admins and viewers; for editors only the namespaces' read
    /// — their writes are the console's own role, namespace by namespace
    /// (`domain::rbac`: upstream's `edit` would let them impersonate any
    /// ServiceAccount and mint its tokens).
    pub fn cluster_role(self) -> &'static str {
        match self {
            Self::Admin => "cluster-admin",
            Self::Edit => "kubebyon:edit-namespaces",
            Self::View => "view",
        }
    }
}

/// How a caller reaches a cluster; no access at all is `None` where it is
/// asked (and the cluster is then "not found": no existence leak).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "by", content = "role", rename_all = "snake_case")]
pub enum Access {
    Owner,
    /// A console admin: every cluster, as its owner would.
    ConsoleAdmin,
    /// A member (the highest of their own and their teams' roles).
    Member(MemberRole),
}

/// What a caller asks to do with a cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Can {
    /// Its page, history, join page, live updates; test its endpoint.
    See,
    /// Change its resources and public access; dismiss its moved notice.
    Edit,
    /// Download a kubeconfig: the user's own, at their role
    /// (`service::credentials`).
    Kubeconfig,
    /// Make and revoke join tokens, remove joined nodes (nodes are
    /// cluster-scoped: Kubernetes' `edit` role cannot touch them either).
    ManageNodes,
    /// Add, change and remove members.
    ManageMembers,
    Delete,
}

impl Access {
    /// The role this access amounts to: owners and console admins are admins.
    pub fn role(self) -> MemberRole {
        match self {
            Self::Owner | Self::ConsoleAdmin => MemberRole::Admin,
            Self::Member(r) => r,
        }
    }

    /// Whether this access allows `can`.
    pub fn allows(self, can: Can) -> bool {
        let needs = match can {
            Can::See | Can::Kubeconfig => MemberRole::View,
            Can::Edit => MemberRole::Edit,
            Can::ManageNodes | Can::ManageMembers | Can::Delete => MemberRole::Admin,
        };
        self.role() >= needs
    }

    /// What a page offers this access (its buttons and forms; the services
    /// check again on every request).
    pub fn allowed(self) -> Allowed {
        let can = |c| self.allows(c);
        Allowed {
            edit: can(Can::Edit),
            kubeconfig: can(Can::Kubeconfig),
            manage_nodes: can(Can::ManageNodes),
            manage_members: can(Can::ManageMembers),
            delete: can(Can::Delete),
        }
    }

    /// Of the roles a user holds through memberships (direct, and each
    /// team's), the highest; `None` without any.
    pub fn of_memberships(roles: impl IntoIterator<Item = MemberRole>) -> Option<Self> {
        roles.into_iter().max().map(Self::Member)
    }
}

/// What a cluster's page offers its viewer ([`Access::allowed`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Allowed {
    pub edit: bool,
    pub kubeconfig: bool,
    pub manage_nodes: bool,
    pub manage_members: bool,
    pub delete: bool,
}

/// The Kubernetes user a console user is inside every virtual cluster
/// (the CN of their certificates): by immutable id, so a name reused later
/// inherits nothing.
pub fn kube_user(user_id: i64) -> String {
    format!("kubebyon:u:{user_id}")
}

/// The console's ClusterRoleBinding of a role inside a virtual cluster.
pub fn binding_name(role: MemberRole) -> String {
    format!("kubebyon:{}", role.as_str())
}

/// Who each role's binding names inside a virtual cluster: every user the
/// console lets reach the cluster, at their highest role (a user listed
/// twice keeps the higher).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Bindings(pub std::collections::BTreeMap<MemberRole, std::collections::BTreeSet<i64>>);

impl Bindings {
    pub fn of(users: impl IntoIterator<Item = (i64, MemberRole)>) -> Self {
        let mut best: std::collections::BTreeMap<i64, MemberRole> = std::collections::BTreeMap::new();
        for (user, role) in users {
            let r = best.entry(user).or_insert(role);
            *r = (*r).max(role);
        }
        let mut out = Self::default();
        for role in [MemberRole::View, MemberRole::Edit, MemberRole::Admin] {
            out.0.insert(role, best.iter().filter(|(_, r)| **r == role).map(|(u, _)| *u).collect());
        }
        out
    }

    /// Whether `user` is bound at exactly `role` (their highest).
    pub fn holds(&self, user: i64, role: MemberRole) -> bool {
        self.0.get(&role).is_some_and(|users| users.contains(&user))
    }

    /// The Kubernetes user names `role`'s binding holds, sorted.
    pub fn subjects(&self, role: MemberRole) -> Vec<String> {
        self.0.get(&role).into_iter().flatten().map(|u| kube_user(*u)).collect()
    }
}

/// How long a per-user kubeconfig's certificate lasts (`expirationSeconds`):
/// 10 minutes to 1 year (the CSR API's floor; kube-controller-manager's
/// default cap), 8 hours unless asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct CredentialLifetime(u32);

impl Default for CredentialLifetime {
    fn default() -> Self {
        Self::DEFAULT
    }
}

impl CredentialLifetime {
    pub const MIN_SECS: u32 = 600;
    pub const MAX_SECS: u32 = 365 * 86_400;
    pub const DEFAULT: Self = Self(8 * 3_600);

    /// `90m`, `8h`, `30d` (a number and `m`, `h` or `d`); empty: 8 hours.
    pub fn parse(raw: &str) -> Result<Self, AppError> {
        let bad = || AppError::at(ErrorCode::CredentialLifetimeInvalid, Field::Lifetime);
        match duration_secs(raw, Self::MIN_SECS..=Self::MAX_SECS) {
            Some(None) => Ok(Self::DEFAULT),
            Some(Some(secs)) => Ok(Self(secs)),
            None => Err(bad()),
        }
    }

    pub fn secs(self) -> u32 {
        self.0
    }

    /// A lifetime given in seconds (the JSON API): whole minutes, within
    /// the same range as text.
    pub fn from_secs(secs: u64) -> Result<Self, AppError> {
        let bad = || AppError::at(ErrorCode::CredentialLifetimeInvalid, Field::Lifetime);
        let secs = u32::try_from(secs).map_err(|_| bad())?;
        if secs % 60 == 0 && (Self::MIN_SECS..=Self::MAX_SECS).contains(&secs) { Ok(Self(secs)) } else { Err(bad()) }
    }

    /// As it is written: whole days, else hours, else minutes (`30d`, `8h`, `90m`).
    pub fn text(self) -> String {
        match self.0 {
            s if s % 86_400 == 0 => format!("{}d", s / 86_400),
            s if s % 3_600 == 0 => format!("{}h", s / 3_600),
            s => format!("{}m", s / 60),
        }
    }

    /// What a user asks for, within the longest the admin allows (`max`);
    /// empty: 8 hours, or `max` when that is shorter.
    pub fn parse_within(raw: &str, max: Self) -> Result<Self, AppError> {
        let asked = Self::parse(raw)?;
        if raw.trim().is_empty() {
            return Ok(asked.min(max));
        }
        if asked > max {
            return Err(AppError::at(ErrorCode::CredentialLifetimeOverLimit, Field::Lifetime));
        }
        Ok(asked)
    }
}

/// Seconds written as a number and `m`, `h` or `d` (`90m`, `8h`, `7d`),
/// within `range`: `Some(None)` for an empty text (the caller's default),
/// `None` for anything else (join tokens' and kubeconfigs' lifetimes).
pub fn duration_secs(raw: &str, range: std::ops::RangeInclusive<u32>) -> Option<Option<u32>> {
    let raw = raw.trim();
    if raw.is_empty() {
        return Some(None);
    }
    // The unit is the last character, whatever its width (`1é` is no
    // lifetime, and must not split a character in two).
    let unit_at = raw.char_indices().next_back()?.0;
    let (n, unit) = raw.split_at(unit_at);
    let n: u32 = n.parse().ok()?;
    let secs = match unit {
        "m" => n.checked_mul(60),
        "h" => n.checked_mul(3_600),
        "d" => n.checked_mul(86_400),
        _ => None,
    }?;
    range.contains(&secs).then_some(Some(secs))
}

/// Who a membership names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, strum::IntoStaticStr, strum::EnumString)]
#[serde(rename_all = "lowercase")]
#[strum(serialize_all = "lowercase")]
pub enum MemberKind {
    User,
    Team,
}

impl MemberKind {
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    pub fn parse(raw: &str) -> Result<Self, AppError> {
        raw.trim().parse().map_err(|_| AppError::at(ErrorCode::MemberUnknown, Field::Member))
    }
}

/// One member as a cluster's page lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Member {
    pub kind: MemberKind,
    /// The user's or team's id.
    pub id: i64,
    pub name: String,
    pub role: MemberRole,
}

/// A team's name: as a username is written (lowercase letters, digits, `.`,
/// `_`, `-`; 3–32 characters, a letter first), so a team reads like a
/// Kubernetes group and cannot smuggle anything into one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TeamName(String);

impl TeamName {
    pub fn parse(raw: &str) -> Result<Self, AppError> {
        let s = raw.trim();
        let ok = (3..=32).contains(&s.len())
            && s.starts_with(|c: char| c.is_ascii_lowercase())
            && s.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '_' | '-'));
        if ok { Ok(Self(s.to_owned())) } else { Err(AppError::at(ErrorCode::TeamNameInvalid, Field::TeamName)) }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The admins' teams page: the teams, and the prefix of the provider's
/// groups that stand for them (`KUBEBYON_OIDC_TEAM_PREFIX`), if any.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TeamsView {
    pub teams: Vec<Team>,
    pub provider_prefix: Option<String>,
}

/// A team as the admin pages list it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Team {
    pub id: i64,
    pub name: String,
    /// Its users' names, by name.
    pub members: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    use MemberRole::{Admin, Edit, View};

    /// Every access × every action.
    #[test]
    fn what_each_access_allows() {
        let accesses =
            [Access::Owner, Access::ConsoleAdmin, Access::Member(Admin), Access::Member(Edit), Access::Member(View)];
        // (can, allowed for: owner, console admin, admin, edit, view)
        let table: [(Can, [bool; 5]); 6] = [
            (Can::See, [true, true, true, true, true]),
            (Can::Edit, [true, true, true, true, false]),
            (Can::Kubeconfig, [true, true, true, true, true]),
            (Can::ManageNodes, [true, true, true, false, false]),
            (Can::ManageMembers, [true, true, true, false, false]),
            (Can::Delete, [true, true, true, false, false]),
        ];
        for (can, want) in table {
            for (access, want) in accesses.iter().zip(want) {
                assert_eq!(access.allows(can), want, "{access:?} {can:?}");
            }
        }
    }

    #[test]
    fn the_highest_membership_counts() {
        assert_eq!(Access::of_memberships([]), None);
        assert_eq!(Access::of_memberships([View]), Some(Access::Member(View)));
        assert_eq!(Access::of_memberships([View, Admin, Edit]), Some(Access::Member(Admin)));
        assert_eq!(Access::of_memberships([Edit, View]), Some(Access::Member(Edit)));
    }

    #[test]
    fn roles_parse_and_bind() {
        for (raw, want) in [
            ("admin", Some(Admin)),
            (" edit ", Some(Edit)),
            ("view", Some(View)),
            ("owner", None),
            ("", None),
            ("Admin", None),
        ] {
            assert_eq!(MemberRole::parse(raw).ok(), want, "{raw}");
        }
        assert_eq!(Admin.cluster_role(), "cluster-admin");
        assert_eq!(Edit.cluster_role(), "kubebyon:edit-namespaces");
        assert_eq!(View.cluster_role(), "view");
        assert!(View < Edit && Edit < Admin);
    }

    #[test]
    fn bindings_hold_each_user_once_at_the_highest_role() {
        let b = Bindings::of([(7, View), (3, Admin), (7, Edit), (9, View), (3, View)]);
        assert_eq!(b.subjects(Admin), ["kubebyon:u:3"]);
        assert_eq!(b.subjects(Edit), ["kubebyon:u:7"]);
        assert_eq!(b.subjects(View), ["kubebyon:u:9"]);
        let none = Bindings::of([]);
        for role in [Admin, Edit, View] {
            assert!(none.subjects(role).is_empty());
        }
        assert_eq!(binding_name(Edit), "kubebyon:edit");
    }

    #[test]
    fn credential_lifetimes_are_ten_minutes_to_a_year() {
        let bad = Err(AppError::at(ErrorCode::CredentialLifetimeInvalid, Field::Lifetime));
        for (raw, want) in [
            ("", Ok(8 * 3_600)),
            ("10m", Ok(600)),
            ("8h", Ok(28_800)),
            ("365d", Ok(31_536_000)),
            ("9m", bad),
            ("366d", bad),
            ("1y", bad),
            ("h", bad),
            ("-1h", bad),
            // Non-ASCII: refused, never a panic on a byte index.
            ("1é", bad),
            ("é", bad),
            ("8ｈ", bad),
            ("１h", bad),
            ("10m🦀", bad),
            ("99999999999d", bad),
        ] {
            assert_eq!(CredentialLifetime::parse(raw).map(CredentialLifetime::secs), want, "{raw:?}");
        }
    }

    #[test]
    fn the_admins_longest_lifetime_bounds_what_users_ask() {
        let max = CredentialLifetime::parse("1d").unwrap();
        let short = CredentialLifetime::parse("1h").unwrap();
        let over = Err(AppError::at(ErrorCode::CredentialLifetimeOverLimit, Field::Lifetime));
        assert_eq!(CredentialLifetime::parse_within("", max).map(CredentialLifetime::secs), Ok(28_800));
        assert_eq!(CredentialLifetime::parse_within("", short).map(CredentialLifetime::secs), Ok(3_600));
        assert_eq!(CredentialLifetime::parse_within("1d", max).map(CredentialLifetime::secs), Ok(86_400));
        assert_eq!(CredentialLifetime::parse_within("25h", max), over);
        assert!(CredentialLifetime::parse_within("5m", max).is_err());
        for (secs, text) in [(600, "10m"), (5_400, "90m"), (28_800, "8h"), (86_400, "1d"), (31_536_000, "365d")] {
            assert_eq!(CredentialLifetime(secs).text(), text);
            assert_eq!(CredentialLifetime::parse(text).unwrap().secs(), secs);
        }
    }

    #[test]
    fn team_names() {
        for ok in ["ops", "platform-team", "sre_2", "a.b"] {
            assert!(TeamName::parse(ok).is_ok(), "{ok}");
        }
        for bad in ["", "ab", "Ops", "1ops", "system:masters", "a b", "x/y", &"a".repeat(33)] {
            assert!(TeamName::parse(bad).is_err(), "{bad}");
        }
    }
}
