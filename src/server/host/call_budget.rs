//! On-demand host and virtual-cluster calls per user: probes, kubeconfig
//! downloads, reads of a cluster's own API server (join tokens, nodes, the
//! pages' joined-node warnings) and the settings page's host facts. Every
//! replica has one pool of host calls for requests (16 at once, 25 s each:
//! `host::Host::for_request`); without a budget per user, one user's
//! parallel probes of an endpoint that never answers held all of it. A user
//! may run [`AT_ONCE`] such calls at once and start them at the rate of a
//! token bucket ([`BURST`], one more every [`INTERVAL_MS`]); past either,
//! `calls_rate_limited` (429, `Retry-After: 1`). In memory, per process; users are accounts, so the
//! table is bounded by them. The anonymous join script has a pool of its own
//! (`host::Calls::Join`), never this budget.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::domain::token_bucket::{Bucket, take};
use crate::domain::{AppError, ErrorCode};

/// Calls one user may have running at once.
pub(crate) const AT_ONCE: u32 = 4;
/// Calls one user may start in a burst.
pub(crate) const BURST: u32 = 60;
/// One more every half second (120 a minute, sustained): pages that keep
/// themselves current read about once every 2 s each.
pub(crate) const INTERVAL_MS: i64 = 500;
/// What `Retry-After` says: a running call usually ends within it.
pub(crate) const RETRY_AFTER_SECS: u64 = 1;

/// Pure rule: the user's bucket after starting one more call while
/// `running` of theirs run, or `None` when refused (a call refused for
/// running too many costs no token).
pub(crate) fn admit(running: u32, bucket: Option<Bucket>, now_ms: i64) -> Option<Bucket> {
    if running >= AT_ONCE {
        return None;
    }
    take(bucket, now_ms, BURST, INTERVAL_MS)
}

#[derive(Debug, Default)]
struct Entry {
    running: u32,
    bucket: Option<Bucket>,
}

/// The budgets of one console process.
#[derive(Debug, Default)]
pub struct UserCalls {
    users: Mutex<HashMap<i64, Entry>>,
}

/// One running call of a user: ends when dropped.
#[derive(Debug)]
pub(crate) struct UserCall<'a> {
    calls: &'a UserCalls,
    user: i64,
}

impl UserCalls {
    /// Starts a call of `user`, or `calls_rate_limited`.
    pub(crate) fn take(&self, user: i64) -> Result<UserCall<'_>, AppError> {
        let now = crate::server::db::now_ms();
        let mut users = self.users.lock().map_err(|_| AppError::new(ErrorCode::Internal))?;
        let entry = users.entry(user).or_default();
        match admit(entry.running, entry.bucket, now) {
            Some(bucket) => {
                entry.bucket = Some(bucket);
                entry.running += 1;
                Ok(UserCall { calls: self, user })
            }
            None => {
                tracing::warn!(user, running = entry.running, "host calls rate-limited");
                Err(AppError::new(ErrorCode::CallsRateLimited))
            }
        }
    }
}

impl Drop for UserCall<'_> {
    fn drop(&mut self) {
        if let Ok(mut users) = self.calls.users.lock()
            && let Some(entry) = users.get_mut(&self.user)
        {
            entry.running = entry.running.saturating_sub(1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admit_table() {
        let full = None;
        let empty = Some(Bucket { tokens: 0, at_ms: 1_000 });
        for (why, running, bucket, now, want) in [
            ("a first call", 0, full, 1_000, Some(Bucket { tokens: BURST - 1, at_ms: 1_000 })),
            ("three running", 3, full, 1_000, Some(Bucket { tokens: BURST - 1, at_ms: 1_000 })),
            ("four running: refused, no token taken", AT_ONCE, full, 1_000, None),
            ("no token left", 0, empty, 1_000, None),
            ("half an interval later: still none", 0, empty, 1_000 + INTERVAL_MS / 2, None),
            (
                "an interval later: one",
                0,
                empty,
                1_000 + INTERVAL_MS,
                Some(Bucket { tokens: 0, at_ms: 1_000 + INTERVAL_MS }),
            ),
        ] {
            assert_eq!(admit(running, bucket, now), want, "{why}");
        }
    }

    #[test]
    fn a_call_ends_when_dropped_and_users_are_apart() {
        let calls = UserCalls::default();
        let held: Vec<_> = (0..AT_ONCE).map(|_| calls.take(1).expect("within the budget")).collect();
        assert_eq!(calls.take(1).unwrap_err().code, ErrorCode::CallsRateLimited);
        assert!(calls.take(2).is_ok(), "another user is not held back");
        drop(held);
        assert!(calls.take(1).is_ok(), "ended calls give their place back");
    }
}
