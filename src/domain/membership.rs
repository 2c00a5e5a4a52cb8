//! Sharing (issue 42): who may do what with a cluster. A cluster has one
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

    /// The Kubernetes ClusterRole a member with this role is bound to inside
    /// the virtual cluster (the API server's default roles).
    pub fn cluster_role(self) -> &'static str {
        match self {
            Self::Admin => "cluster-admin",
            Self::Edit => "edit",
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
    /// Download a kubeconfig (its role's, per user, where the host signs
    /// them; else the cluster's admin credential, so admins only).
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

    /// Whether this access allows `can`. `per_user_credentials`: the host
    /// signs each user's own certificate (else the only kubeconfig is the
    /// cluster's admin credential, which only admins may have).
    pub fn allows(self, can: Can, per_user_credentials: bool) -> bool {
        let needs = match can {
            Can::See => MemberRole::View,
            Can::Kubeconfig if per_user_credentials => MemberRole::View,
            Can::Edit => MemberRole::Edit,
            Can::Kubeconfig | Can::ManageNodes | Can::ManageMembers | Can::Delete => MemberRole::Admin,
        };
        self.role() >= needs
    }

    /// What a page offers this access (its buttons and forms; the services
    /// check again on every request).
    pub fn allowed(self, per_user_credentials: bool) -> Allowed {
        let can = |c| self.allows(c, per_user_credentials);
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

    /// Every access × every action, with and without per-user credentials.
    #[test]
    fn what_each_access_allows() {
        let accesses =
            [Access::Owner, Access::ConsoleAdmin, Access::Member(Admin), Access::Member(Edit), Access::Member(View)];
        // (can, per-user credentials, allowed for: owner, console admin, admin, edit, view)
        let table: [(Can, bool, [bool; 5]); 12] = [
            (Can::See, false, [true, true, true, true, true]),
            (Can::See, true, [true, true, true, true, true]),
            (Can::Edit, false, [true, true, true, true, false]),
            (Can::Edit, true, [true, true, true, true, false]),
            (Can::Kubeconfig, false, [true, true, true, false, false]),
            (Can::Kubeconfig, true, [true, true, true, true, true]),
            (Can::ManageNodes, false, [true, true, true, false, false]),
            (Can::ManageNodes, true, [true, true, true, false, false]),
            (Can::ManageMembers, false, [true, true, true, false, false]),
            (Can::ManageMembers, true, [true, true, true, false, false]),
            (Can::Delete, false, [true, true, true, false, false]),
            (Can::Delete, true, [true, true, true, false, false]),
        ];
        for (can, per_user, want) in table {
            for (access, want) in accesses.iter().zip(want) {
                assert_eq!(access.allows(can, per_user), want, "{access:?} {can:?} per-user={per_user}");
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
        assert_eq!(Edit.cluster_role(), "edit");
        assert_eq!(View.cluster_role(), "view");
        assert!(View < Edit && Edit < Admin);
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
