//! Accounts: usernames, passwords (policy only; hashing lives on the server) and roles.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::{AppError, ErrorCode, Field};

pub(crate) const PASSWORD_MIN: usize = 12;
pub(crate) const PASSWORD_MAX: usize = 1024;

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Username(String);

impl Username {
    /// 3–32 of `a-z 0-9 . _ -`, starting with a letter.
    pub fn parse(raw: &str) -> Result<Self, AppError> {
        let s = raw.trim();
        let ok = (3..=32).contains(&s.len())
            && s.as_bytes()[0].is_ascii_lowercase()
            && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'_' | b'-'));
        if ok { Ok(Self(s.to_owned())) } else { Err(AppError::at(ErrorCode::UsernameInvalid, Field::Username)) }
    }

    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Username {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A new password that meets the policy. Not `Debug`-printable, not serializable.
pub(crate) struct NewPassword(String);

impl NewPassword {
    pub(crate) fn parse(raw: &str) -> Result<Self, AppError> {
        let n = raw.chars().count();
        if (PASSWORD_MIN..=PASSWORD_MAX).contains(&n) {
            Ok(Self(raw.to_owned()))
        } else {
            Err(AppError::at(ErrorCode::PasswordTooShort, Field::Password))
        }
    }

    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for NewPassword {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("NewPassword(…)")
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
#[derive(strum::IntoStaticStr, strum::EnumString)]
#[strum(serialize_all = "lowercase")]
pub enum Role {
    #[default]
    User,
    Admin,
}

impl Role {
    pub(crate) fn as_str(self) -> &'static str {
        self.into()
    }

    pub(crate) fn parse(raw: &str) -> Result<Self, AppError> {
        raw.trim().parse().map_err(|_| AppError::at(ErrorCode::RoleInvalid, Field::Role))
    }
}

/// The signed-in user as pages see it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CurrentUser {
    pub id: i64,
    pub username: String,
    pub role: Role,
}

impl CurrentUser {
    pub fn is_admin(&self) -> bool {
        self.role == Role::Admin
    }

    /// The one admin check every admin-only use case makes (in the service
    /// layer; entry points only pass the user on): `forbidden` otherwise.
    pub(crate) fn require_admin(&self) -> Result<(), AppError> {
        if self.is_admin() { Ok(()) } else { Err(AppError::new(ErrorCode::Forbidden)) }
    }
}

/// A user as the admin pages list them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserSummary {
    pub id: i64,
    pub username: String,
    pub role: Role,
    pub created_at: i64,
    /// The user's own quota limits (unset dimensions: the platform's).
    pub quota: crate::domain::quota::Quota,
    /// Disabled by an admin: signs in no more, bound to nothing.
    pub disabled: bool,
    /// Made at an OpenID Connect sign-in (no password).
    pub organisation: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usernames() {
        for ok in ["admin", "alice", "bob.smith", "ops_team-2"] {
            assert!(Username::parse(ok).is_ok(), "{ok}");
        }
        for bad in ["", "ab", "Alice", "1abc", "a b c", "a@b.c", &"a".repeat(33)] {
            assert!(Username::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn passwords_and_roles() {
        assert!(NewPassword::parse("short").is_err());
        assert!(NewPassword::parse("twelve chars").is_ok());
        assert!(NewPassword::parse(&"x".repeat(PASSWORD_MAX + 1)).is_err());
        assert_eq!(format!("{:?}", NewPassword::parse("secret secret!").unwrap()), "NewPassword(…)");
        assert_eq!(Role::parse("admin"), Ok(Role::Admin));
        assert_eq!(Role::parse("root"), Err(AppError::at(ErrorCode::RoleInvalid, Field::Role)));
    }
}
