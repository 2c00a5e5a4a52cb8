//! Whether the chart's control plane is up, and if not, why — in the host's own
//! words. Pure: [`super::gather`] reads the StatefulSet, its pod, its claims and
//! the namespace's Events; this decides.
//!
//! "Up" is the StatefulSet's rollout status as `kubectl rollout status` reads
//! it (kubernetes `staging/src/k8s.io/kubectl/pkg/polymorphichelpers/rollout_status.go`,
//! `StatefulSetStatusViewer`): the controller observed the current generation,
//! every replica is ready and updated, and the current revision is the update
//! revision. Why not: the scheduler's `FailedScheduling` on the pod, a claim's
//! `FailedBinding`/`ProvisioningFailed` (the persistentvolume-controller's
//! `FailedBinding` is a **Normal** Event), the StatefulSet controller's
//! `FailedCreate` (Pod Security, quota), a Warning on a scheduled pod that is
//! not ready.

use std::time::Duration;

/// The chart's StatefulSet, as its rollout status reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub(crate) enum Rollout {
    /// There is no StatefulSet (not installed yet, or deleted).
    #[default]
    Missing,
    InProgress,
    Done,
}

/// What a StatefulSet's status says of its rollout (all counts as the API
/// reports them; `None` where a field is absent).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct StatefulSetFacts {
    pub generation: Option<i64>,
    pub observed_generation: Option<i64>,
    pub replicas: i32,
    pub ready_replicas: i32,
    pub updated_replicas: i32,
    pub current_revision: Option<String>,
    pub update_revision: Option<String>,
}

impl StatefulSetFacts {
    /// `StatefulSetStatusViewer.Status`, for the RollingUpdate strategy
    /// without a partition (what the chart renders).
    pub(crate) fn rollout(&self) -> Rollout {
        let observed = match (self.observed_generation, self.generation) {
            (Some(o), Some(g)) => o >= g,
            (None, Some(_)) => false,
            (_, None) => true,
        };
        let done = observed
            && self.ready_replicas >= self.replicas
            && self.updated_replicas >= self.replicas
            && self.current_revision == self.update_revision;
        if done { Rollout::Done } else { Rollout::InProgress }
    }
}

/// The chart's current pod (`<name>-0`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct PodFacts {
    pub uid: String,
    /// Bound to a node.
    pub scheduled: bool,
    pub ready: bool,
    /// Its containers' restarts, summed.
    pub restarts: i32,
    /// The `PodScheduled=False` condition's message (the scheduler writes the
    /// same words as its Event).
    pub unschedulable: Option<String>,
}

/// One Event of the cluster's namespace, as much as the rule needs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct HostEvent {
    /// `involvedObject.uid` (`regarding` in events.k8s.io).
    pub uid: String,
    pub warning: bool,
    pub reason: String,
    pub message: String,
    /// When last seen, seconds since the epoch.
    pub at: i64,
}

/// What the rule reads.
#[derive(Clone, Debug, Default)]
pub(crate) struct Workload<'a> {
    pub stateful_set_uid: Option<&'a str>,
    pub pod: Option<&'a PodFacts>,
    /// The UIDs of the claims still `Pending`.
    pub pending_claims: &'a [String],
    pub events: &'a [HostEvent],
}

/// How long a rollout may go without a sign of trouble before the
/// namespace's Events and claims are read to say why: the StatefulSet
/// recreates a missing pod at once and the scheduler answers in seconds; a
/// vCluster pod on a k3s host takes 30–90 s to become Ready.
pub(crate) const QUIET_MISSING: Duration = Duration::from_secs(15);
pub(crate) const QUIET_STARTING: Duration = Duration::from_secs(120);

/// Whether the namespace's Events and claims can say more than the pod
/// already shows, `since` the rollout began: at once when the scheduler
/// refused the pod (a claim may be why) or its containers restart; after a
/// quiet while when there is no pod (the StatefulSet may fail to create it)
/// or it is still starting. A rollout going as it should reads nothing: a
/// switch of 200 clusters on the full test host listed them ~6.6 times per
/// cluster before this rule.
pub(crate) fn worth_reading(pod: Option<&PodFacts>, since: Duration) -> bool {
    match pod {
        None => since >= QUIET_MISSING,
        Some(p) if !p.scheduled => p.unschedulable.is_some() || since >= QUIET_MISSING,
        Some(p) if !p.ready => p.restarts > 0 || since >= QUIET_STARTING,
        Some(_) => false,
    }
}

fn newest(events: &[HostEvent], keep: impl Fn(&HostEvent) -> bool) -> Option<&str> {
    events.iter().filter(|e| keep(e)).max_by_key(|e| e.at).map(|e| e.message.trim()).filter(|m| !m.is_empty())
}

/// Why the control plane is not up, in the host's words; `None` when nothing
/// says (it is simply still starting).
pub(crate) fn blocker(w: &Workload<'_>) -> Option<String> {
    match w.pod {
        Some(pod) if !pod.scheduled => {
            let claim = newest(w.events, |e| {
                w.pending_claims.contains(&e.uid) && matches!(e.reason.as_str(), "FailedBinding" | "ProvisioningFailed")
            });
            let scheduler = newest(w.events, |e| e.uid == pod.uid && e.reason == "FailedScheduling")
                .or(pod.unschedulable.as_deref());
            let parts: Vec<&str> = [scheduler, claim].into_iter().flatten().collect();
            (!parts.is_empty()).then(|| parts.join("; "))
        }
        Some(pod) if !pod.ready => newest(w.events, |e| {
            // Once bound, the scheduler's old words no longer apply.
            e.uid == pod.uid && e.warning && e.reason != "FailedScheduling"
        })
        .map(str::to_owned),
        Some(_) => None,
        None => {
            let sts = w.stateful_set_uid?;
            newest(w.events, |e| e.uid == sts && e.warning && e.reason == "FailedCreate").map(str::to_owned)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(uid: &str, warning: bool, reason: &str, message: &str, at: i64) -> HostEvent {
        HostEvent { uid: uid.into(), warning, reason: reason.into(), message: message.into(), at }
    }

    #[test]
    fn events_are_read_only_when_they_can_say_more() {
        let s = Duration::from_secs;
        let pending = PodFacts { uid: "p".into(), ..PodFacts::default() };
        let refused = PodFacts { unschedulable: Some("0/2 nodes are available".into()), ..pending.clone() };
        let starting = PodFacts { scheduled: true, ..pending.clone() };
        let restarting = PodFacts { restarts: 1, ..starting.clone() };
        let ready = PodFacts { ready: true, ..starting.clone() };
        for (i, (pod, since, want)) in [
            (None, s(0), false),
            (None, s(15), true),
            (Some(&pending), s(1), false),
            (Some(&pending), s(15), true),
            (Some(&refused), s(0), true),
            (Some(&starting), s(60), false),
            (Some(&starting), s(120), true),
            (Some(&restarting), s(0), true),
            (Some(&ready), s(600), false),
        ]
        .into_iter()
        .enumerate()
        {
            assert_eq!(worth_reading(pod, since), want, "row {i}");
        }
    }

    #[test]
    fn rollout_status_as_kubectl_reads_it() {
        let done = StatefulSetFacts {
            generation: Some(2),
            observed_generation: Some(2),
            replicas: 1,
            ready_replicas: 1,
            updated_replicas: 1,
            current_revision: Some("demo-1".into()),
            update_revision: Some("demo-1".into()),
        };
        let cases = [
            (done.clone(), Rollout::Done),
            // helm's upgrade changed the template; the controller has not seen it yet.
            (StatefulSetFacts { generation: Some(3), ..done.clone() }, Rollout::InProgress),
            (StatefulSetFacts { observed_generation: None, ..done.clone() }, Rollout::InProgress),
            (StatefulSetFacts { ready_replicas: 0, ..done.clone() }, Rollout::InProgress),
            (StatefulSetFacts { updated_replicas: 0, ..done.clone() }, Rollout::InProgress),
            // The old pod still answers: the new revision is not rolled out.
            (StatefulSetFacts { update_revision: Some("demo-2".into()), ..done.clone() }, Rollout::InProgress),
            (StatefulSetFacts::default(), Rollout::Done), // zero replicas asked for
        ];
        for (i, (facts, want)) in cases.into_iter().enumerate() {
            assert_eq!(facts.rollout(), want, "row {i}");
        }
    }

    #[test]
    fn why_not_up_in_the_hosts_words() {
        let unscheduled = PodFacts {
            uid: "pod".into(),
            scheduled: false,
            ready: false,
            restarts: 0,
            unschedulable: Some("0/2 nodes are available: 2 Insufficient cpu.".into()),
        };
        let starting = PodFacts { scheduled: true, unschedulable: None, ..unscheduled.clone() };
        let running = PodFacts { ready: true, ..starting.clone() };
        let cpu = "0/2 nodes are available: 2 Insufficient cpu. preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod.";
        let unbound = "0/2 nodes are available: pod has unbound immediate PersistentVolumeClaims.";
        let no_class = "no persistent volumes available for this claim and no storage class is set";
        let psa = "create Pod demo-0 in StatefulSet demo failed error: pods \"demo-0\" is forbidden: violates PodSecurity \"restricted:latest\": runAsNonRoot != true";
        let events = vec![
            ev("pod", true, "FailedScheduling", "old words", 10),
            ev("pod", true, "FailedScheduling", cpu, 20),
            ev("pvc", false, "FailedBinding", no_class, 15),
            ev("pvc", false, "WaitForFirstConsumer", "waiting for first consumer to be created before binding", 30),
            ev("sts", true, "FailedCreate", psa, 12),
            ev("sts", false, "SuccessfulCreate", "create Pod demo-0 in StatefulSet demo successful", 40),
            ev("pod", true, "BackOff", "Back-off restarting failed container syncer", 50),
        ];
        let claims = vec!["pvc".to_owned()];
        let no_event = PodFacts { unschedulable: None, ..unscheduled.clone() };
        // (sts, pod, pending claims, events, the words)
        type Row<'a> = (Option<&'a str>, Option<&'a PodFacts>, &'a [String], Vec<HostEvent>, Option<String>);
        let table: Vec<Row> = vec![
            // Unschedulable: the scheduler's newest words, then the claim's.
            (Some("sts"), Some(&unscheduled), &claims, events.clone(), Some(format!("{cpu}; {no_class}"))),
            // A claim that is bound no longer speaks.
            (Some("sts"), Some(&unscheduled), &[], events.clone(), Some(cpu.to_owned())),
            // No Event yet: the pod's condition.
            (Some("sts"), Some(&unscheduled), &[], vec![], Some("0/2 nodes are available: 2 Insufficient cpu.".into())),
            (
                Some("sts"),
                Some(&no_event),
                &claims,
                vec![ev("pod", true, "FailedScheduling", unbound, 5), ev("pvc", false, "FailedBinding", no_class, 6)],
                Some(format!("{unbound}; {no_class}")),
            ),
            // Waiting for the first consumer is not a problem.
            (Some("sts"), Some(&no_event), &claims, vec![ev("pvc", false, "WaitForFirstConsumer", "waiting", 5)], None),
            // No pod: the StatefulSet controller's FailedCreate (Pod Security).
            (Some("sts"), None, &[], events.clone(), Some(psa.to_owned())),
            (Some("sts"), None, &[], vec![ev("sts", false, "SuccessfulCreate", "ok", 1)], None),
            (None, None, &[], events.clone(), None),
            // Scheduled, not ready: its newest Warning, never the scheduler's old words.
            (
                Some("sts"),
                Some(&starting),
                &[],
                events.clone(),
                Some("Back-off restarting failed container syncer".into()),
            ),
            (Some("sts"), Some(&starting), &[], vec![ev("pod", true, "FailedScheduling", cpu, 9)], None),
            (Some("sts"), Some(&running), &claims, events.clone(), None),
        ];
        for (i, (sts, pod, pending_claims, events, want)) in table.into_iter().enumerate() {
            let w = Workload { stateful_set_uid: sts, pod, pending_claims, events: &events };
            assert_eq!(blocker(&w), want, "row {i}");
        }
    }
}
