//! Failed-login throttling, bounded and fair. In memory, per console process.
//!
//! - **Per account and client**: after `MAX_FAILURES` failures for one username
//!   from one client within `WINDOW_SECS`, that pair is refused until the
//!   window passes. Other clients can still sign in to the same account, so one
//!   client cannot lock out `admin` (behind a reverse proxy the client is the
//!   forwarded address: `KUBEBYON_TRUSTED_PROXIES`, `auth::client`).
//! - **Per client**: after `MAX_CLIENT_FAILURES` failures from one client
//!   (IPv4 address or IPv6 /64) within the window, whatever the usernames —
//!   invalid ones too — that client is refused. Spraying names costs the
//!   attacker its address, and one client can hold at most that many table
//!   entries.
//! - **Bounded**: each table holds at most `capacity` entries; when full, the
//!   entries nearest to expiry make room. A new pair is never refused because
//!   the table is full.
//! - **Password checks** (argon2, ~19 MiB and tens of ms each) run at most
//!   [`check_slots`] at once, sized from a memory budget
//!   (`KUBEBYON_PASSWORD_MEMORY_MIB`, default two checks' worth) and not from
//!   the node's CPU count (a pod on a 16-core node under a 256 Mi limit would
//!   otherwise be OOM-killed by ~30 parallel anonymous sign-ins); at most
//!   `QUEUED_PER_CHECK` times that many sign-ins wait for one; past that a
//!   sign-in is refused at once (`login_rate_limited`) instead of queueing
//!   without bound.
//!
//! An attempt counts as a failure when it starts (and is forgiven on success),
//! so a burst of parallel guesses cannot all pass before any failure is recorded.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::{Semaphore, SemaphorePermit};

pub use crate::domain::sign_in::{MAX_CLIENT_FAILURES, MAX_FAILURES, WINDOW_SECS};
/// Entries kept at most in each table.
pub(crate) const MAX_ENTRIES: usize = 100_000;
/// Sign-ins that may wait for each password check slot.
pub(crate) const QUEUED_PER_CHECK: usize = 16;
/// What one argon2 check holds: its memory cost (argon2's default, which
/// `password.rs` uses), rounded up to MiB.
pub(crate) const MIB_PER_CHECK: u64 = (argon2::Params::DEFAULT_M_COST as u64).div_ceil(1024);
/// The default budget: two checks at once.
pub(crate) const DEFAULT_PASSWORD_MEMORY_MIB: u64 = 2 * MIB_PER_CHECK;

/// How many password checks may run at once within `budget_mib` (at least one).
pub(crate) fn check_slots(budget_mib: u64) -> usize {
    usize::try_from(budget_mib / MIB_PER_CHECK).unwrap_or(usize::MAX).max(1)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Attempts {
    pub failures: u32,
    pub window_start: i64,
}

/// Pure rule: may another attempt be made at `now`, with `max` failures allowed?
pub(crate) fn allowed(a: Attempts, now: i64, max: u32) -> bool {
    a.failures < max || expired(a, now)
}

fn expired(a: Attempts, now: i64) -> bool {
    now - a.window_start >= WINDOW_SECS
}

/// Pure rule: the record after a failure at `now`.
pub(crate) fn after_failure(a: Attempts, now: i64) -> Attempts {
    if a.failures == 0 || expired(a, now) {
        Attempts { failures: 1, window_start: now }
    } else {
        Attempts { failures: a.failures + 1, ..a }
    }
}

/// A bounded map of attempt records.
struct Table<K> {
    map: HashMap<K, Attempts>,
    capacity: usize,
}

impl<K: Hash + Eq + Clone> Table<K> {
    fn new(capacity: usize) -> Self {
        Self { map: HashMap::new(), capacity }
    }

    fn get(&self, key: &K) -> Attempts {
        self.map.get(key).copied().unwrap_or_default()
    }

    fn fail(&mut self, key: K, now: i64) {
        if !self.map.contains_key(&key) && self.map.len() >= self.capacity {
            self.map.retain(|_, a| !expired(*a, now));
            if self.map.len() >= self.capacity {
                // The record closest to expiry goes; never refuse a newcomer.
                let oldest = self.map.iter().min_by_key(|(_, a)| a.window_start).map(|(k, _)| k.clone());
                if let Some(k) = oldest {
                    self.map.remove(&k);
                }
            }
        }
        let entry = self.map.entry(key).or_default();
        *entry = after_failure(*entry, now);
    }

    fn forgive_one(&mut self, key: &K) {
        if let Some(a) = self.map.get_mut(key) {
            a.failures = a.failures.saturating_sub(1);
        }
    }
}

struct Tables {
    pairs: Table<(String, String)>,
    clients: Table<String>,
}

pub struct LoginLimiter {
    tables: Mutex<Tables>,
    checks: Semaphore,
    in_flight: AtomicUsize,
    max_in_flight: usize,
}

impl Default for LoginLimiter {
    fn default() -> Self {
        Self::with_budget(DEFAULT_PASSWORD_MEMORY_MIB)
    }
}

/// A password check slot; frees it when dropped.
pub(crate) struct CheckSlot<'a> {
    _permit: SemaphorePermit<'a>,
    _counted: InFlight<'a>,
}

struct InFlight<'a>(&'a AtomicUsize);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl LoginLimiter {
    /// `capacity` entries per table; `checks` password checks at once.
    pub(crate) fn new(capacity: usize, checks: usize) -> Self {
        let checks = checks.max(1);
        Self {
            tables: Mutex::new(Tables { pairs: Table::new(capacity), clients: Table::new(capacity) }),
            checks: Semaphore::new(checks),
            in_flight: AtomicUsize::new(0),
            max_in_flight: checks * (1 + QUEUED_PER_CHECK),
        }
    }

    /// Password checks sized by a memory budget in MiB ([`check_slots`]).
    pub fn with_budget(budget_mib: u64) -> Self {
        Self::new(MAX_ENTRIES, check_slots(budget_mib))
    }

    fn with<T>(&self, f: impl FnOnce(&mut Tables) -> T) -> T {
        // A poisoned lock only means another request panicked mid-update; the tables are still usable.
        let mut guard = self.tables.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut guard)
    }

    /// Starts an attempt by `client` for `account` (`None`: a name that cannot
    /// exist, counted against the client only): false when refused; otherwise
    /// counted as a failure until `record_success`.
    pub(crate) fn begin(&self, account: Option<&str>, client: &str, now: i64) -> bool {
        self.with(|t| {
            let client_key = client.to_owned();
            if !allowed(t.clients.get(&client_key), now, MAX_CLIENT_FAILURES) {
                return false;
            }
            let pair = account.map(|a| (a.to_owned(), client_key.clone()));
            if let Some(pair) = &pair
                && !allowed(t.pairs.get(pair), now, MAX_FAILURES)
            {
                return false;
            }
            t.clients.fail(client_key, now);
            if let Some(pair) = pair {
                t.pairs.fail(pair, now);
            }
            true
        })
    }

    pub(crate) fn record_success(&self, account: &str, client: &str) {
        self.with(|t| {
            t.pairs.map.remove(&(account.to_owned(), client.to_owned()));
            t.clients.forgive_one(&client.to_owned());
        });
    }

    /// Waits for a password check slot; `None` when too many sign-ins already wait.
    pub(crate) async fn check_slot(&self) -> Option<CheckSlot<'_>> {
        if self.in_flight.fetch_add(1, Ordering::SeqCst) >= self.max_in_flight {
            self.in_flight.fetch_sub(1, Ordering::SeqCst);
            return None;
        }
        let counted = InFlight(&self.in_flight);
        let permit = self.checks.acquire().await.ok()?;
        Some(CheckSlot { _permit: permit, _counted: counted })
    }

    /// Entries held (pairs, clients).
    #[cfg(test)]
    fn len(&self) -> (usize, usize) {
        self.with(|t| (t.pairs.map.len(), t.clients.map.len()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_slots_follow_the_memory_budget_not_the_cpus() {
        assert_eq!(MIB_PER_CHECK, 19);
        for (budget, slots) in [(1, 1), (18, 1), (19, 1), (37, 1), (38, 2), (DEFAULT_PASSWORD_MEMORY_MIB, 2), (190, 10)]
        {
            assert_eq!(check_slots(budget), slots, "{budget} MiB");
        }
        let l = LoginLimiter::default();
        assert_eq!(l.checks.available_permits(), 2);
        assert_eq!(l.max_in_flight, 2 * (1 + QUEUED_PER_CHECK));
    }

    #[test]
    fn five_attempts_lock_the_pair_until_the_window_ends() {
        let l = LoginLimiter::default();
        for i in 0..MAX_FAILURES {
            assert!(l.begin(Some("alice"), "1.2.3.4", 100 + i64::from(i)));
        }
        assert!(!l.begin(Some("alice"), "1.2.3.4", 200), "sixth attempt refused, even in parallel");
        assert!(l.begin(Some("alice"), "5.6.7.8", 200), "other clients are not locked out");
        assert!(l.begin(Some("bob"), "1.2.3.4", 200), "other users are not locked out");
        assert!(l.begin(Some("alice"), "1.2.3.4", 100 + WINDOW_SECS));
    }

    #[test]
    fn success_forgives() {
        let l = LoginLimiter::default();
        for _ in 0..MAX_FAILURES - 1 {
            assert!(l.begin(Some("a"), "c", 10));
        }
        l.record_success("a", "c");
        for _ in 0..MAX_FAILURES {
            assert!(l.begin(Some("a"), "c", 11));
        }
    }

    #[test]
    fn one_client_spraying_names_is_stopped_whatever_the_names() {
        let l = LoginLimiter::default();
        for i in 0..MAX_CLIENT_FAILURES {
            let name = format!("user{i}");
            let account = (i % 2 == 0).then_some(name.as_str()); // invalid names count too
            assert!(l.begin(account, "6.6.6.6", 10), "attempt {i}");
        }
        assert!(!l.begin(Some("fresh"), "6.6.6.6", 11));
        assert!(!l.begin(None, "6.6.6.6", 11));
        assert!(l.begin(Some("fresh"), "7.7.7.7", 11), "others unaffected");
        assert!(l.begin(Some("fresh"), "6.6.6.6", 10 + WINDOW_SECS), "until the window ends");
        // A client holds at most MAX_CLIENT_FAILURES pair entries.
        assert!(l.len().0 <= MAX_CLIENT_FAILURES as usize + 2);
    }

    #[test]
    fn a_full_table_makes_room_instead_of_refusing() {
        let l = LoginLimiter::new(3, 1);
        for (i, c) in ["a", "b", "c"].into_iter().enumerate() {
            assert!(l.begin(Some("admin"), c, i as i64));
        }
        assert_eq!(l.len(), (3, 3));
        assert!(l.begin(Some("admin"), "d", 5), "a newcomer gets in when the table is full");
        assert_eq!(l.len(), (3, 3), "still bounded");
        // The oldest record ("a", started at 0) made room; the newest are kept.
        for _ in 0..MAX_FAILURES - 1 {
            assert!(l.begin(Some("admin"), "d", 6));
        }
        assert!(!l.begin(Some("admin"), "d", 7), "the newcomer's own record still counts");
    }

    #[test]
    fn failures_after_the_window_start_a_new_one() {
        let a = after_failure(Attempts { failures: 4, window_start: 0 }, WINDOW_SECS + 1);
        assert_eq!(a, Attempts { failures: 1, window_start: WINDOW_SECS + 1 });
    }

    #[tokio::test]
    async fn password_checks_are_bounded() {
        let l = LoginLimiter::new(10, 1);
        let first = l.check_slot().await.expect("a free slot");
        // QUEUED_PER_CHECK more may wait; they are pending futures here.
        let mut waiting = Vec::new();
        for _ in 0..QUEUED_PER_CHECK {
            let fut = Box::pin(l.check_slot());
            waiting.push(fut);
        }
        // Poll each once so they count as in flight.
        for w in &mut waiting {
            assert!(futures_poll_once(w.as_mut()).await.is_none(), "waits while the slot is taken");
        }
        assert!(l.check_slot().await.is_none(), "one more is refused at once");
        drop(waiting);
        drop(first);
        assert!(l.check_slot().await.is_some(), "cancelled waiters and finished checks free their places");
    }

    /// Polls a future once; `Some` if it finished.
    async fn futures_poll_once<F: std::future::Future + Unpin>(f: F) -> Option<F::Output> {
        tokio::time::timeout(std::time::Duration::from_millis(1), f).await.ok()
    }
}
