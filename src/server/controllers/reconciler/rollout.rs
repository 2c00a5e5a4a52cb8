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
    /// What a container's status says of why it does not run: the last
    /// termination (reason, exit code, termination message) while it
    /// restarts, or why it waits (`ErrImagePull`, with the kubelet's words).
    pub container: Option<ContainerTrouble>,
}

/// A container's own account of its trouble (kubelet's container status).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct ContainerTrouble {
    /// The container's name (its log is read by it).
    pub container: String,
    /// `lastState.terminated.reason` (`Error`, `OOMKilled`) or `state.waiting.reason`.
    pub reason: String,
    pub exit_code: Option<i32>,
    /// The termination message (the container's `/dev/termination-log`, or
    /// its log's tail with `FallbackToLogsOnError`) or the waiting message.
    pub message: Option<String>,
    /// The container's image, as its status names it.
    pub image: Option<String>,
    /// An init container (`kubectl get pod` shows `Init:<reason>`).
    pub init: bool,
}

impl ContainerTrouble {
    /// Waiting reasons that say nothing by themselves (the last termination does).
    pub(crate) const QUIET: [&'static str; 3] = ["CrashLoopBackOff", "ContainerCreating", "PodInitializing"];
    /// How much of a message is shown.
    const MESSAGE_CHARS: usize = 1024;

    /// Reasons about the image itself: the page names it.
    const IMAGE_REASONS: [&'static str; 4] =
        ["ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull"];

    /// In words: `OOMKilled (exit code 137)`, `Error (exit code 1): <message>`,
    /// `ImagePullBackOff (container syncer, image ghcr.io/…): <message>`, and
    /// for an init container as `kubectl get pod` shows it,
    /// `Init:CrashLoopBackOff … (init container kubernetes, image …)`.
    pub(crate) fn words(&self) -> String {
        let reason = if self.init { format!("Init:{}", self.reason) } else { self.reason.clone() };
        let mut head = match self.exit_code {
            Some(code) => format!("{reason} (exit code {code})"),
            None => reason,
        };
        if self.init || Self::IMAGE_REASONS.contains(&self.reason.as_str()) {
            let kind = if self.init { "init container" } else { "container" };
            head += &match self.image.as_deref().filter(|i| !i.is_empty()) {
                Some(image) => format!(" ({kind} {}, image {image})", self.container),
                None => format!(" ({kind} {})", self.container),
            };
        }
        match self.message.as_deref().map(str::trim).filter(|m| !m.is_empty()) {
            // A termination message is at most 4 KiB (the kubelet's cap); a line or two says why.
            Some(m) => format!("{head}: {}", m.chars().take(Self::MESSAGE_CHARS).collect::<String>()),
            None if self.reason == "OOMKilled" => format!("{head}: the container went over its memory limit"),
            None => head,
        }
    }
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
        Some(p) if !p.ready => p.restarts > 0 || p.container.is_some() || since >= QUIET_STARTING,
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
        Some(pod) if !pod.ready => {
            // The container's own words first (its termination message, the
            // image it cannot pull), then the kubelet's Events about the pod
            // (`Unhealthy`: the readiness probe's answer); the kubelet's
            // `BackOff` says only that it restarts.
            let own = pod.container.as_ref().filter(|c| !ContainerTrouble::QUIET.contains(&c.reason.as_str()));
            let event = newest(w.events, |e| {
                // Once bound, the scheduler's old words no longer apply.
                e.uid == pod.uid
                    && e.warning
                    && e.reason != "FailedScheduling"
                    && (own.is_none() || e.reason != "BackOff")
            });
            own.map(ContainerTrouble::words).or_else(|| event.map(str::to_owned))
        }
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

    /// A scheduled pod that is not ready: the container's own words (its
    /// termination while it restarts, the image it cannot pull) before the
    /// kubelet's `BackOff`; the readiness probe's `Unhealthy` when it runs.
    #[test]
    fn a_started_pod_that_is_not_ready_says_why_in_the_containers_words() {
        let pod = |container: Option<ContainerTrouble>| PodFacts {
            uid: "p".into(),
            scheduled: true,
            restarts: 3,
            container,
            ..PodFacts::default()
        };
        let trouble = |reason: &str, exit_code: Option<i32>, message: Option<&str>| {
            Some(ContainerTrouble {
                container: "syncer".into(),
                reason: reason.into(),
                exit_code,
                message: message.map(Into::into),
                image: Some("ghcr.io/loft-sh/vcluster-oss:0.30.0".into()),
                init: false,
            })
        };
        let init = |reason: &str, exit_code: Option<i32>, message: Option<&str>| {
            Some(ContainerTrouble {
                container: "kubernetes".into(),
                image: Some("ghcr.io/loft-sh/kubernetes:v1.34.99".into()),
                init: true,
                ..trouble(reason, exit_code, message).unwrap()
            })
        };
        let backoff = ev("p", true, "BackOff", "Back-off restarting failed container syncer in pod demo-0_ns(p)", 9);
        let unhealthy = ev("p", true, "Unhealthy", "Readiness probe failed: HTTP probe failed with statuscode: 500", 8);
        for (container, events, want) in [
            (
                trouble("Error", Some(1), Some("fatal: license: no access key in secret licences/vcluster-key")),
                vec![backoff.clone()],
                Some("Error (exit code 1): fatal: license: no access key in secret licences/vcluster-key"),
            ),
            (
                trouble("OOMKilled", Some(137), None),
                vec![backoff.clone()],
                Some("OOMKilled (exit code 137): the container went over its memory limit"),
            ),
            (
                trouble("ErrImagePull", None, Some("rpc error: not found")),
                vec![],
                Some(
                    "ErrImagePull (container syncer, image ghcr.io/loft-sh/vcluster-oss:0.30.0): rpc error: not found",
                ),
            ),
            (
                init("ImagePullBackOff", None, Some("Back-off pulling image \"ghcr.io/loft-sh/kubernetes:v1.34.99\"")),
                vec![backoff.clone()],
                Some(
                    "Init:ImagePullBackOff (init container kubernetes, image ghcr.io/loft-sh/kubernetes:v1.34.99): \
                     Back-off pulling image \"ghcr.io/loft-sh/kubernetes:v1.34.99\"",
                ),
            ),
            (
                init("Error", Some(1), Some("cp: can't create '/binaries/kube-apiserver': No space left on device")),
                vec![backoff.clone()],
                Some(
                    "Init:Error (exit code 1) (init container kubernetes, image ghcr.io/loft-sh/kubernetes:v1.34.99): \
                     cp: can't create '/binaries/kube-apiserver': No space left on device",
                ),
            ),
            (
                trouble("CrashLoopBackOff", None, Some("back-off 40s")),
                vec![backoff.clone()],
                Some(backoff.message.as_str()),
            ),
            (None, vec![unhealthy.clone()], Some(unhealthy.message.as_str())),
            (None, vec![], None),
        ] {
            let p = pod(container.clone());
            let w = Workload { pod: Some(&p), events: &events, ..Workload::default() };
            assert_eq!(blocker(&w).as_deref(), want, "{container:?}");
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
            container: None,
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
