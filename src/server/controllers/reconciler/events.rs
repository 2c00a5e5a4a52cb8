//! Kubernetes Events the console records on the objects it owns (kube's
//! `Recorder`, as controller-rs does), so `kubectl describe helmchart <name>
//! -n kubebyon-<name>` on the host tells an operator what the console did.
//! Best effort: an Event that cannot be recorded never fails the work, and
//! the console's Events share one budget ([`Budget`]: a burst of 50, then one
//! every 10 s), so a mass change (a thousand clusters switched at once) does
//! not double the console's calls to the host — the kind of flood
//! kube-apiserver's `EventRateLimit` admission and client-go's spam filter
//! (a burst of 25 per object, then one per 5 min) exist for. Events are a
//! sample for whoever runs `kubectl describe`; the record is the console's
//! own: what an omitted Event would have said stays on the HelmChart
//! (`kubebyon.io/generation`, the console's apply time in `managedFields`),
//! in the cluster's history and in the audit log, and the next Event recorded
//! says how many were left out. People's edits (a few a minute) are all
//! recorded; a mass change costs at most 50 Events plus one per 10 s it lasts
//! (one per 1 s let 200 clusters switching on the full test host, 280 s,
//! record an Event each: 1.0 of the 2.0 calls per cluster).

use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Client;
use kube::runtime::events::{Event, EventType, Recorder as KubeRecorder, Reporter};

use crate::domain::host_objects;

/// The Events' `reportingController`.
pub(crate) const CONTROLLER: &str = "kubebyon.io/console";

/// Why the console applied a cluster's HelmChart (its Event's reason).
pub(crate) const APPLIED: &str = "Applied";

/// Why the console cleared a failed helm release record (`failurePolicy: abort`).
pub(crate) const CLEARED_FAILURE: &str = "ClearedFailedRelease";

/// A token bucket over every Event the console records: `burst` at once,
/// then one per `refill`. Pure (the caller passes the time).
#[derive(Debug)]
pub(crate) struct Budget {
    burst: u32,
    refill: Duration,
    tokens: u32,
    last: Instant,
    omitted: u32,
}

impl Budget {
    pub(crate) const BURST: u32 = 50;
    pub(crate) const REFILL: Duration = Duration::from_secs(10);

    pub(crate) fn new(burst: u32, refill: Duration, now: Instant) -> Self {
        Self { burst, refill, tokens: burst, last: now, omitted: 0 }
    }

    /// `Some(omitted)` when an Event may be recorded now (with how many were
    /// left out since the last one recorded), `None` when it is left out.
    pub(crate) fn take(&mut self, now: Instant) -> Option<u32> {
        let earned = now.saturating_duration_since(self.last).as_nanos() / self.refill.as_nanos().max(1);
        let earned = u32::try_from(earned.min(u128::from(self.burst))).unwrap_or(self.burst);
        if earned > 0 {
            self.tokens = self.tokens.saturating_add(earned).min(self.burst);
            self.last = if self.tokens == self.burst { now } else { self.last + self.refill * earned };
        }
        if self.tokens == 0 {
            self.omitted += 1;
            return None;
        }
        self.tokens -= 1;
        Some(std::mem::take(&mut self.omitted))
    }
}

pub(crate) struct Recorder(KubeRecorder, Mutex<Budget>);

impl Recorder {
    /// `instance`: this process's reconciler (`reportingInstance`).
    pub(crate) fn new(client: Client, instance: &str) -> Self {
        let reporter = Reporter { controller: CONTROLLER.into(), instance: Some(instance.into()) };
        Self(
            KubeRecorder::new(client, reporter),
            Mutex::new(Budget::new(Budget::BURST, Budget::REFILL, Instant::now())),
        )
    }

    /// A Normal Event on cluster `name`'s HelmChart.
    pub(crate) async fn on_helm_chart(&self, name: &str, uid: Option<String>, reason: &str, note: String) {
        let Some(omitted) = self.1.lock().ok().and_then(|mut b| b.take(Instant::now())) else {
            tracing::debug!(cluster = name, reason, "event left out: the console's Event budget is spent");
            return;
        };
        let note = match omitted {
            0 => note,
            n => format!(
                "{note} ({n} earlier Events of the console were left out: at most {} at once, then one every {} s)",
                Budget::BURST,
                Budget::REFILL.as_secs()
            ),
        };
        let chart = crate::server::host::objects::charts_resource();
        let regarding = ObjectReference {
            api_version: Some(chart.api_version),
            kind: Some(chart.kind),
            name: Some(name.into()),
            namespace: Some(host_objects::namespace(name)),
            uid,
            ..ObjectReference::default()
        };
        let event = Event {
            type_: EventType::Normal,
            reason: reason.into(),
            note: Some(note),
            action: reason.into(),
            secondary: None,
        };
        if let Err(e) = self.0.publish(&event, &regarding).await {
            tracing::debug!(cluster = name, reason, error = %e, "event not recorded");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_allows_a_burst_then_one_per_refill_and_counts_what_it_left_out() {
        let t0 = Instant::now();
        let s = Duration::from_secs(1);
        let mut b = Budget::new(3, s, t0);
        // (seconds after t0, expected)
        let table: [(u64, Option<u32>); 9] = [
            (0, Some(0)),
            (0, Some(0)),
            (0, Some(0)),
            (0, None),
            (0, None),
            (1, Some(2)), // one earned; two were left out
            (1, None),
            (3, Some(1)),
            (3, Some(0)), // two earned at 3 s
        ];
        for (i, (at, want)) in table.into_iter().enumerate() {
            assert_eq!(b.take(t0 + s * at as u32), want, "step {i} at {at} s");
        }
        // A long quiet refills to the burst, never beyond.
        let later = t0 + s * 1000;
        let taken = (0..10).filter(|_| b.take(later).is_some()).count();
        assert_eq!(taken, 3);
    }
}
