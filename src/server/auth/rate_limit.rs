//! Failed-login throttling: after `MAX_FAILURES` failures for one username from
//! one client address within `WINDOW_SECS`, further attempts are refused until
//! the window passes. In memory, per console process. An attempt is counted as
//! a failure when it starts (and forgiven on success), so a burst of parallel
//! guesses cannot all pass the check before any failure is recorded.

use std::collections::HashMap;
use std::sync::Mutex;

pub const MAX_FAILURES: u32 = 5;
pub const WINDOW_SECS: i64 = 15 * 60;
/// Entries kept at most; past it, new pairs are refused until old ones expire.
pub const MAX_ENTRIES: usize = 100_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Attempts {
    pub failures: u32,
    pub window_start: i64,
}

/// Pure rule: may another attempt be made at `now`?
pub fn allowed(a: Attempts, now: i64) -> bool {
    a.failures < MAX_FAILURES || now - a.window_start >= WINDOW_SECS
}

/// Pure rule: the record after a failure at `now`.
pub fn after_failure(a: Attempts, now: i64) -> Attempts {
    if a.failures == 0 || now - a.window_start >= WINDOW_SECS {
        Attempts { failures: 1, window_start: now }
    } else {
        Attempts { failures: a.failures + 1, ..a }
    }
}

#[derive(Default)]
pub struct LoginLimiter {
    attempts: Mutex<HashMap<(String, String), Attempts>>,
}

impl LoginLimiter {
    fn with<T>(&self, f: impl FnOnce(&mut HashMap<(String, String), Attempts>) -> T) -> T {
        // A poisoned lock only means another request panicked mid-update; the map is still usable.
        let mut guard = self.attempts.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut guard)
    }

    /// Starts an attempt: false when the pair is locked out (or the table is
    /// full); otherwise counts it as a failure until `record_success`.
    pub fn begin(&self, username: &str, client: &str, now: i64) -> bool {
        self.with(|m| {
            let key = (username.to_owned(), client.to_owned());
            if !m.contains_key(&key) && m.len() >= MAX_ENTRIES {
                m.retain(|_, a| now - a.window_start < WINDOW_SECS);
                if m.len() >= MAX_ENTRIES {
                    return false;
                }
            }
            let entry = m.entry(key).or_default();
            if !allowed(*entry, now) {
                return false;
            }
            *entry = after_failure(*entry, now);
            true
        })
    }

    pub fn record_success(&self, username: &str, client: &str) {
        self.with(|m| m.remove(&(username.to_owned(), client.to_owned())));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn five_attempts_lock_until_the_window_ends() {
        let l = LoginLimiter::default();
        for i in 0..MAX_FAILURES {
            assert!(l.begin("alice", "1.2.3.4", 100 + i64::from(i)));
        }
        assert!(!l.begin("alice", "1.2.3.4", 200), "sixth attempt refused, even in parallel");
        assert!(l.begin("alice", "5.6.7.8", 200), "other clients are not locked out");
        assert!(l.begin("bob", "1.2.3.4", 200), "other users are not locked out");
        assert!(l.begin("alice", "1.2.3.4", 100 + WINDOW_SECS));
    }

    #[test]
    fn success_forgives() {
        let l = LoginLimiter::default();
        for _ in 0..MAX_FAILURES - 1 {
            assert!(l.begin("a", "c", 10));
        }
        l.record_success("a", "c");
        for _ in 0..MAX_FAILURES {
            assert!(l.begin("a", "c", 11));
        }
    }

    #[test]
    fn failures_after_the_window_start_a_new_one() {
        let a = after_failure(Attempts { failures: 4, window_start: 0 }, WINDOW_SECS + 1);
        assert_eq!(a, Attempts { failures: 1, window_start: WINDOW_SECS + 1 });
    }
}
