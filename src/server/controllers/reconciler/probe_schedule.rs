//! When each cluster's endpoint is probed. Probes run as their own tasks, at
//! most [`SLOTS`] at once, never inside an observer pass: a pass reads the
//! latest outcome per cluster and starts a probe when one is due, so
//! endpoints that never answer (a full accept backlog, a DNS server that
//! stalls) cost their probes' slots and nothing else. An endpoint that keeps
//! failing is probed less often ([`backoff`]); a new endpoint (an edit, a
//! mode switch) is probed at once.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{Notify, Semaphore};

use crate::domain::ConnectionStatus;
use crate::server::host::probe::{self, Credentials, Resolver};

/// Probes at once, per process.
pub(crate) const SLOTS: usize = 32;
/// An endpoint that answered is probed again at most this often.
pub(crate) const OK_REFRESH: Duration = Duration::from_secs(1);
/// The longest wait between probes of an endpoint that keeps failing.
pub(crate) const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// The wait after `failures` failures in a row: 1 s, 2 s, 4 s, … up to
/// [`MAX_BACKOFF`]; [`OK_REFRESH`] after none.
pub(crate) fn wait_after(failures: u32) -> Duration {
    match failures {
        0 => OK_REFRESH,
        n => crate::server::controllers::backoff::backoff(Duration::from_secs(1), n, MAX_BACKOFF),
    }
}

/// What is known of one cluster's endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Memo {
    pub endpoint: String,
    /// The last outcome; `None` until the first probe of this endpoint ends.
    pub status: Option<ConnectionStatus>,
    pub failures: u32,
    /// When the last probe ended (or, before any, was started).
    pub at: Instant,
    pub in_flight: bool,
}

/// Pure rule: is a new probe of `endpoint` due at `now`, given the memo?
pub(crate) fn due(memo: Option<&Memo>, endpoint: &str, now: Instant) -> bool {
    match memo {
        None => true,
        Some(m) if m.endpoint != endpoint => true,
        Some(m) if m.in_flight => false,
        Some(m) => now.duration_since(m.at) >= wait_after(m.failures),
    }
}

/// The probes of one console process.
#[derive(Debug)]
pub(crate) struct Probes {
    memo: Mutex<BTreeMap<i64, Memo>>,
    slots: Arc<Semaphore>,
    /// Woken when a probe ends (the observer records its outcome).
    wake: Arc<Notify>,
}

impl Probes {
    pub(crate) fn new(wake: Arc<Notify>) -> Arc<Self> {
        Arc::new(Self { memo: Mutex::default(), slots: Arc::new(Semaphore::new(SLOTS)), wake })
    }

    /// The latest outcome for cluster `id` at `endpoint` (`None` before the
    /// first), reached through `via` when given; starts a probe when one is due.
    pub(crate) fn outcome(
        self: &Arc<Self>,
        id: i64,
        target: (&str, Option<std::net::IpAddr>),
        creds: &Credentials,
        resolver: &Resolver,
    ) -> Option<ConnectionStatus> {
        let (target_endpoint, via) = target;
        // What the memo knows it by: a new Gateway address is a new target.
        let key = match via {
            Some(ip) => format!("{target_endpoint} via {ip}"),
            None => target_endpoint.to_owned(),
        };
        let endpoint = key.as_str();
        let now = Instant::now();
        let Ok(mut memo) = self.memo.lock() else { return None };
        let current = memo.get(&id).filter(|m| m.endpoint == endpoint).and_then(|m| m.status);
        if due(memo.get(&id), endpoint, now) {
            let failures = memo.get(&id).filter(|m| m.endpoint == endpoint).map_or(0, |m| m.failures);
            memo.insert(
                id,
                Memo { endpoint: endpoint.to_owned(), status: current, failures, at: now, in_flight: true },
            );
            let (probes, endpoint, creds, resolver) =
                (self.clone(), endpoint.to_owned(), creds.clone(), resolver.clone());
            let url = target_endpoint.to_owned();
            tokio::spawn(async move {
                let Ok(_slot) = probes.slots.clone().acquire_owned().await else { return };
                let report = probe::probe_via(&url, via, &creds, &resolver).await;
                crate::server::metrics::global().record_probe(report.status.as_str());
                probes.record(id, &endpoint, report.status);
            });
        }
        current
    }

    fn record(&self, id: i64, endpoint: &str, status: ConnectionStatus) {
        if let Ok(mut memo) = self.memo.lock()
            && let Some(m) = memo.get_mut(&id).filter(|m| m.endpoint == endpoint)
        {
            m.failures = if status == ConnectionStatus::Ok { 0 } else { m.failures.saturating_add(1) };
            m.status = Some(status);
            m.at = Instant::now();
            m.in_flight = false;
        }
        self.wake.notify_one();
    }

    /// Forgets clusters not in `keep` (deleted ones).
    pub(crate) fn retain(&self, keep: &std::collections::BTreeSet<i64>) {
        if let Ok(mut memo) = self.memo.lock() {
            memo.retain(|id, _| keep.contains(id));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wait_after_table() {
        let secs = |n| wait_after(n).as_secs();
        assert_eq!([0, 1, 2, 3, 4, 5, 6, 7, 50].map(secs), [1, 1, 2, 4, 8, 16, 30, 30, 30]);
    }

    #[test]
    fn due_table() {
        let t0 = Instant::now();
        let memo = |endpoint: &str, failures, in_flight| Memo {
            endpoint: endpoint.into(),
            status: Some(ConnectionStatus::Timeout),
            failures,
            at: t0,
            in_flight,
        };
        let s = Duration::from_secs;
        for (m, endpoint, at, want) in [
            (None, "https://a:443", t0, true),
            (Some(memo("https://a:443", 3, false)), "https://a:443", t0 + s(3), false),
            (Some(memo("https://a:443", 3, false)), "https://a:443", t0 + s(4), true),
            // A new endpoint is probed at once, whatever the old one did.
            (Some(memo("https://a:443", 9, false)), "https://b:443", t0, true),
            // Never two probes of one endpoint at once.
            (Some(memo("https://a:443", 0, true)), "https://a:443", t0 + s(99), false),
            (Some(memo("https://a:443", 0, false)), "https://a:443", t0 + s(1), true),
        ] {
            assert_eq!(due(m.as_ref(), endpoint, at), want, "{m:?} {endpoint} +{:?}", at - t0);
        }
    }
}
