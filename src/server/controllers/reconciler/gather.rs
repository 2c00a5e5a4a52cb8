//! Reads from the host what [`super::observe`] needs for one cluster: the
//! HelmChart (and which generation it was rendered from), the install Job of the
//! current values and helm's last error from its pod's log, the Service and its
//! newest Warning Event, `vc-<name>`, the chart's StatefulSet and pod (and,
//! while it does not roll out, the namespace's Warning Events, claims and
//! their binding Events), the Ready nodes. Read-only.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Mutex;
use std::time::Instant;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ContainerStatus, Event, Node, PersistentVolumeClaim, Pod, Secret, Service};
use kube::api::{Api, DynamicObject, ListParams, LogParams};
use kube::{Client, ResourceExt};

use super::observe::{JobState, NodeAddresses, Observation};
use super::rollout::{self, HostEvent, PodFacts, Rollout, StatefulSetFacts};
use crate::domain::endpoint::{Ingress, ServiceObservation};
use crate::domain::host_objects;
use crate::server::host::error::{Result, ignore_not_found, kube};
use crate::server::host::objects::{FIELD_MANAGER, GENERATION_ANNOTATION, helm_charts};
use crate::server::host::probe::Credentials;
use crate::server::host::secrets::{complete, credentials, read_secret};

/// What was read, beyond the pure observation.
pub(crate) struct Gathered {
    pub observation: Observation,
    /// The spec generation the HelmChart on the host was rendered from.
    pub chart_generation: Option<i64>,
    /// The HelmChart's spec as the host holds it, as a digest per field ([`spec_digest`]).
    pub chart_spec: Option<BTreeMap<String, u64>>,
    /// The PEM credentials of `vc-<name>`, for the probe.
    pub credentials: Option<Credentials>,
    /// The install Job stopped at a failed release, "waiting for operator
    /// intervention" (`failurePolicy: abort`; `apply::clear_stale_failure`).
    pub abort_stop: Option<AbortStop>,
}

/// See [`Gathered::abort_stop`].
#[derive(Debug, Clone)]
pub(crate) struct AbortStop {
    /// The revision the Job was made for (`EXPECTED_RELEASE_REVISION`).
    pub revision: u64,
    /// The HelmChart's spec now, and its UID (for the Event).
    pub chart_spec: serde_json::Value,
    pub chart_uid: Option<String>,
}

/// A digest of a JSON value (of a rendering, or a chart's spec field).
pub(crate) fn digest(value: &serde_json::Value) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    value.to_string().hash(&mut h);
    h.finish()
}

/// What the watch cache keeps of a HelmChart's spec, under this key: a
/// digest per field, not the values (a rendering is compared field by field).
pub(crate) const SPEC_DIGEST: &str = "specDigest";

/// A HelmChart's spec as digests per field: read from the spec of a chart
/// read whole, or as the watch cache kept it ([`SPEC_DIGEST`]).
pub(crate) fn spec_digest(chart: &DynamicObject) -> Option<BTreeMap<String, u64>> {
    if let Some(kept) = chart.data.get(SPEC_DIGEST) {
        return serde_json::from_value(kept.clone()).ok();
    }
    let spec = chart.data.get("spec")?.as_object()?;
    Some(spec.iter().map(|(k, v)| (k.clone(), digest(v))).collect())
}

/// The Ready nodes' addresses.
pub(crate) fn ready_nodes(nodes: &[Node]) -> Vec<NodeAddresses> {
    nodes
        .iter()
        .filter_map(|n| {
            let st = n.status.as_ref()?;
            let ready = st.conditions.iter().flatten().any(|c| c.type_ == "Ready" && c.status == "True");
            let addr =
                |t: &str| st.addresses.iter().flatten().find(|a| a.type_ == t).and_then(|a| a.address.parse().ok());
            ready.then(|| NodeAddresses {
                name: n.metadata.name.clone().unwrap_or_default(),
                external: addr("ExternalIP"),
                internal: addr("InternalIP"),
            })
        })
        .collect()
}

/// The host objects of one cluster, however they were read.
#[derive(Default, Clone)]
pub(crate) struct Raw {
    pub chart: Option<DynamicObject>,
    pub job: Option<Job>,
    /// The install Job's pods, when already known (watch cache); else listed
    /// when helm's error is needed.
    pub job_pods: Option<Vec<Pod>>,
    pub service: Option<Service>,
    /// The Service's Warning Events, when already known (watch cache); else
    /// listed while its address is pending.
    pub service_events: Option<Vec<Event>>,
    pub secret: Option<Secret>,
    /// The chart's StatefulSet (`<name>`).
    pub stateful_set: Option<StatefulSet>,
    /// The chart's pods (labels `app=vcluster`, `release=<name>`).
    pub control_plane_pods: Vec<Pod>,
    /// The namespace's Warning and `FailedBinding` Events and its pending
    /// claims, when already known (watch cache); else listed while a rollout
    /// is worth explaining ([`rollout::worth_reading`]).
    pub workload: Option<Listed>,
}

/// The chart's current pod (labels `app=vcluster`, `release=<name>`, not
/// being deleted): a running one first.
pub(crate) fn current_pod<'a>(pods: impl Iterator<Item = &'a Pod>, name: &str) -> Option<&'a Pod> {
    let mut ours: Vec<&Pod> = pods
        .filter(|p| p.labels().get("release").map(String::as_str) == Some(name))
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect();
    ours.sort_by_key(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) != Some("Running"));
    ours.into_iter().next()
}

fn condition<'a>(pod: &'a Pod, type_: &str) -> Option<&'a k8s_openapi::api::core::v1::PodCondition> {
    pod.status.as_ref()?.conditions.as_ref()?.iter().find(|c| c.type_ == type_)
}

/// What the rollout rule needs of the pod.
pub(crate) fn pod_facts(pod: &Pod) -> PodFacts {
    let scheduled = pod.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some();
    let unschedulable = condition(pod, "PodScheduled").filter(|c| c.status == "False").and_then(|c| c.message.clone());
    PodFacts {
        uid: pod.uid().unwrap_or_default(),
        scheduled,
        ready: condition(pod, "Ready").is_some_and(|c| c.status == "True"),
        restarts: pod.status.as_ref().map_or(0, |s| {
            let all = s.init_container_statuses.iter().chain(s.container_statuses.iter()).flatten();
            all.map(|c| c.restart_count).sum()
        }),
        unschedulable,
        container: container_trouble(pod),
    }
}

/// The first container in trouble, init containers first (they run
/// first; while one fails the others wait in `PodInitializing`): why it
/// waits (an image it cannot pull), else, while it restarts, how it last ended.
pub(crate) fn container_trouble(pod: &Pod) -> Option<rollout::ContainerTrouble> {
    let status = pod.status.as_ref()?;
    let trouble = |statuses: Option<&Vec<ContainerStatus>>, init: bool| {
        let statuses = statuses.map(Vec::as_slice).unwrap_or_default();
        let image = |c: &ContainerStatus| Some(c.image.clone()).filter(|i| !i.is_empty());
        let waiting = statuses.iter().find_map(|c| {
            let w = c.state.as_ref()?.waiting.as_ref()?;
            let reason = w.reason.clone()?;
            (!rollout::ContainerTrouble::QUIET.contains(&reason.as_str())).then(|| rollout::ContainerTrouble {
                container: c.name.clone(),
                reason,
                exit_code: None,
                message: w.message.clone(),
                image: image(c),
                init,
            })
        });
        let terminated = || {
            statuses.iter().filter(|c| c.restart_count > 0).find_map(|c| {
                let t = c.last_state.as_ref()?.terminated.as_ref()?;
                Some(rollout::ContainerTrouble {
                    container: c.name.clone(),
                    reason: t.reason.clone().unwrap_or_else(|| "Error".into()),
                    exit_code: Some(t.exit_code),
                    message: t.message.clone().filter(|m| !m.trim().is_empty()),
                    image: image(c),
                    init,
                })
            })
        };
        waiting.or_else(terminated)
    };
    trouble(status.init_container_statuses.as_ref(), true)
        .or_else(|| trouble(status.container_statuses.as_ref(), false))
}

/// What the rollout rule needs of the StatefulSet.
pub(crate) fn stateful_set_facts(sts: &StatefulSet) -> StatefulSetFacts {
    let st = sts.status.clone().unwrap_or_default();
    StatefulSetFacts {
        generation: sts.metadata.generation,
        observed_generation: st.observed_generation,
        replicas: sts.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1),
        ready_replicas: st.ready_replicas.unwrap_or(0),
        updated_replicas: st.updated_replicas.unwrap_or(0),
        current_revision: st.current_revision,
        update_revision: st.update_revision,
    }
}

/// An Event as the rule reads it: when last seen is the series' last
/// observation, else `lastTimestamp`, else `eventTime` (the events.k8s.io
/// recorders, e.g. the scheduler's, leave `lastTimestamp` empty).
pub(crate) fn host_event(e: &Event) -> HostEvent {
    let at = e
        .series
        .as_ref()
        .and_then(|s| s.last_observed_time.as_ref().map(|t| t.0))
        .or(e.last_timestamp.as_ref().map(|t| t.0))
        .or(e.event_time.as_ref().map(|t| t.0))
        .or(e.first_timestamp.as_ref().map(|t| t.0))
        .map(|t| t.as_second())
        .unwrap_or_default();
    HostEvent {
        uid: e.involved_object.uid.clone().unwrap_or_default(),
        warning: e.type_.as_deref() == Some("Warning"),
        reason: e.reason.clone().unwrap_or_default(),
        message: e.message.clone().unwrap_or_default(),
        at,
    }
}

/// How long a namespace's Events and claims, listed to say why a rollout is
/// not done, are reused. Only a cluster read without the watch caches (the
/// on-demand paths, or before the caches are up) lists them: each pass over
/// a rolling cluster would list them again (`make bench` once counted ~11
/// pairs of LISTs per cluster switching).
pub(crate) const WORKLOAD_EVERY: std::time::Duration = std::time::Duration::from_secs(10);

/// Per namespace whose rollout is not done: since when, and its Events and
/// pending claims as last listed.
#[derive(Default)]
pub(crate) struct Workloads(Mutex<HashMap<String, Rolling>>);

struct Rolling {
    since: Instant,
    listed: Option<(Instant, Listed)>,
    /// The tail of a restarting container's log, per (pod UID, restarts):
    /// read once per restart.
    log_tail: Option<((String, i32), Option<String>)>,
}

impl Rolling {
    fn new() -> Self {
        Self { since: Instant::now(), listed: None, log_tail: None }
    }
}

/// How many of the log's last lines say why a container exited.
const LOG_TAIL_LINES: usize = 3;

/// The last non-empty lines of a log (at most [`LOG_TAIL_LINES`]).
pub(crate) fn log_tail(log: &str) -> Option<String> {
    let lines: Vec<&str> = log.lines().map(str::trim_end).filter(|l| !l.trim().is_empty()).collect();
    let tail = &lines[lines.len().saturating_sub(LOG_TAIL_LINES)..];
    (!tail.is_empty()).then(|| tail.join("\n"))
}

/// What [`rollout::blocker`] needs of a namespace's Events and claims.
#[derive(Clone, Default, Debug, PartialEq, Eq)]
pub(crate) struct Listed {
    events: Vec<HostEvent>,
    pending_claims: Vec<String>,
}

impl Listed {
    /// From the namespace's Events and claims (listed, or as the watches keep them).
    pub(crate) fn of<'a>(
        events: impl IntoIterator<Item = &'a Event>,
        claims: impl IntoIterator<Item = &'a PersistentVolumeClaim>,
    ) -> Self {
        let pending_claims = claims
            .into_iter()
            .filter(|c| c.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Pending"))
            .filter_map(|c| c.uid())
            .collect();
        Self { events: events.into_iter().map(host_event).collect(), pending_claims }
    }

    /// The UIDs of the claims still `Pending`.
    #[cfg(test)]
    pub(crate) fn pending_claims(&self) -> &[String] {
        &self.pending_claims
    }
}

impl Workloads {
    /// How long the namespace's rollout has been going (from the first time
    /// it was asked about since it was last done).
    fn rolling_for(&self, ns: &str) -> std::time::Duration {
        let Ok(mut m) = self.0.lock() else { return std::time::Duration::ZERO };
        m.entry(ns.to_owned()).or_insert_with(Rolling::new).since.elapsed()
    }

    /// The namespace's lists, listed now unless read less than
    /// [`WORKLOAD_EVERY`] ago.
    async fn read(&self, client: &Client, ns: &str) -> Option<Listed> {
        let fresh = |m: &HashMap<String, Rolling>| {
            m.get(ns)
                .and_then(|r| r.listed.as_ref())
                .filter(|(at, _)| at.elapsed() < WORKLOAD_EVERY)
                .map(|(_, l)| l.clone())
        };
        if let Some(listed) = self.0.lock().ok().and_then(|m| fresh(&m)) {
            return Some(listed);
        }
        let events = Api::<Event>::namespaced(client.clone(), ns).list(&ListParams::default()).await.ok()?;
        let claims =
            Api::<PersistentVolumeClaim>::namespaced(client.clone(), ns).list(&ListParams::default()).await.ok()?;
        let listed = Listed::of(&events.items, &claims.items);
        if let Ok(mut m) = self.0.lock() {
            let r = m.entry(ns.to_owned()).or_insert_with(Rolling::new);
            r.listed = Some((Instant::now(), listed.clone()));
        }
        Some(listed)
    }

    /// A container that exited with an error and no termination message
    /// (its `terminationMessagePolicy` is `File` and it wrote none, as
    /// vCluster's syncer): the tail of its previous run's log stands for it,
    /// read once per restart (`kubectl logs --previous --tail`).
    async fn words_from_log(&self, client: &Client, ns: &str, pod: &Pod, facts: &mut PodFacts) {
        let Some(trouble) = facts.container.as_mut() else { return };
        if trouble.exit_code.is_none() || trouble.message.is_some() || trouble.reason == "OOMKilled" {
            return;
        }
        let key = (facts.uid.clone(), facts.restarts);
        let known = self.0.lock().ok().and_then(|m| {
            m.get(ns).and_then(|r| r.log_tail.as_ref()).filter(|(k, _)| *k == key).map(|(_, t)| t.clone())
        });
        let tail = match known {
            Some(tail) => tail,
            None => {
                let params = LogParams {
                    container: Some(trouble.container.clone()),
                    previous: true,
                    tail_lines: Some(20),
                    limit_bytes: Some(16 * 1024),
                    ..LogParams::default()
                };
                let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
                let tail = pods.logs(&pod.name_any(), &params).await.ok().as_deref().and_then(log_tail);
                if let Ok(mut m) = self.0.lock() {
                    m.entry(ns.to_owned()).or_insert_with(Rolling::new).log_tail = Some((key, tail.clone()));
                }
                tail
            }
        };
        trouble.message = tail;
    }

    /// The rollout is done (or the cluster gone): nothing to keep.
    fn forget(&self, ns: &str) {
        if let Ok(mut m) = self.0.lock() {
            m.remove(ns);
        }
    }
}

/// Why the chart's pod does not come up, from the namespace's Events and
/// claims (`known` from the watches, else listed; only while the rollout is
/// not done and worth explaining) and the pod as watched now.
async fn blocked(
    client: &Client,
    workloads: &Workloads,
    ns: &str,
    sts: Option<&StatefulSet>,
    pod: Option<&PodFacts>,
    known: Option<Listed>,
) -> Option<String> {
    if !rollout::worth_reading(pod, workloads.rolling_for(ns)) {
        return None;
    }
    let listed = match known {
        Some(listed) => listed,
        None => workloads.read(client, ns).await?,
    };
    let sts_uid = sts.and_then(|s| s.metadata.uid.clone());
    rollout::blocker(&rollout::Workload {
        stateful_set_uid: sts_uid.as_deref(),
        pod,
        pending_claims: &listed.pending_claims,
        events: &listed.events,
    })
}

/// Reads one cluster's objects with GETs (on-demand paths: download, probe API).
pub(crate) async fn fetch(client: &Client, name: &str) -> Result<Raw> {
    let ns = host_objects::namespace(name);
    let chart = ignore_not_found(helm_charts(client, &ns).get(name).await).map_err(kube("read HelmChart"))?;
    let jobs: Api<Job> = Api::namespaced(client.clone(), &ns);
    let job = ignore_not_found(jobs.get(&host_objects::helm_job(name)).await).map_err(kube("read Job"))?;
    let services: Api<Service> = Api::namespaced(client.clone(), &ns);
    let service = ignore_not_found(services.get(name).await).map_err(kube("read Service"))?;
    let secret = read_secret(client, name).await?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let lp = ListParams::default().labels(&format!("app=vcluster,release={name}"));
    let control_plane_pods = pods.list(&lp).await.map_err(kube("list vCluster pods"))?.items;
    let sets: Api<StatefulSet> = Api::namespaced(client.clone(), &ns);
    let stateful_set = ignore_not_found(sets.get(name).await).map_err(kube("read StatefulSet"))?;
    Ok(Raw {
        chart,
        job,
        job_pods: None,
        service,
        service_events: None,
        secret,
        stateful_set,
        control_plane_pods,
        workload: None,
    })
}

/// From the raw objects to what the status needs (`stale_jobs`: install Jobs
/// known to predate the last values change); reads the Job pod's log only
/// while helm fails, and the Service's Events only while its address is pending.
pub(crate) async fn assemble(
    client: &Client,
    workloads: &Workloads,
    helm_runs: &HelmRuns,
    name: &str,
    raw: Raw,
    stale_jobs: &BTreeSet<String>,
) -> Gathered {
    let ns = host_objects::namespace(name);
    let hc = raw.chart;
    let chart_generation =
        hc.as_ref().and_then(|h| h.annotations().get(GENERATION_ANNOTATION).and_then(|g| g.parse().ok()));
    // When the console last changed the chart: a Job created before is stale.
    let applied_at = hc.as_ref().and_then(|h| {
        h.metadata
            .managed_fields
            .iter()
            .flatten()
            .filter(|m| m.manager.as_deref() == Some(FIELD_MANAGER))
            .filter_map(|m| m.time.as_ref().map(|t| t.0))
            .max()
    });
    let job = raw.job.filter(|j| {
        let uid = j.uid().unwrap_or_default();
        let created = j.metadata.creation_timestamp.as_ref().map(|t| t.0);
        !stale_jobs.contains(&uid) && created.zip(applied_at).is_none_or(|(c, a)| c >= a)
    });
    let condition = |j: &Job, t: &str| {
        j.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == t && c.status == "True"))
    };
    let job_state = match &job {
        None => JobState::NotStarted,
        Some(j) if condition(j, "Complete") => JobState::Complete,
        Some(j) if condition(j, "Failed") => JobState::Failed,
        Some(_) => JobState::Running,
    };
    let mut abort_stop = None;
    let (job_state, helm_error) = match (&job, job_state) {
        (Some(j), state @ (JobState::Running | JobState::Failed)) => {
            let words = helm_error(client, &ns, j, raw.job_pods).await;
            let words = match words {
                Some(w) if w.contains(ABORT_WORDS) => {
                    abort_stop = expected(j).filter(|e| e.revision > 0).zip(hc.as_ref()).map(|(e, hc)| AbortStop {
                        revision: e.revision,
                        chart_spec: hc.data["spec"].clone(),
                        chart_uid: hc.uid(),
                    });
                    let helms = failed_description(client, &ns, name, j).await;
                    let helms = helms.or_else(|| helm_runs.last_failure(&ns));
                    Some(helms.map_or(w.clone(), |h| format!("{h}\n{w}")))
                }
                Some(w) => {
                    helm_runs.remember(&ns, &w);
                    Some(w)
                }
                None => None,
            };
            (state, words.or_else(|| helm_runs.last_failure(&ns)))
        }
        // A Job can complete with its change not deployed ([`HelmRuns`]).
        (Some(j), JobState::Complete) => match helm_runs.undone(client, &ns, name, j, raw.job_pods).await {
            Some(words) => (JobState::Running, Some(words)),
            None => (JobState::Complete, None),
        },
        (_, state) => (state, helm_runs.last_failure(&ns)),
    };
    let is_lb = raw.service.as_ref().and_then(|s| s.spec.as_ref()?.type_.as_deref()) == Some("LoadBalancer");
    let service = raw.service.map(|s| observe_service(&s));
    let pending = is_lb && service.as_ref().is_some_and(|s| s.ingress.is_empty());
    let service_warning = match pending {
        true => newest_warning(client, &ns, name, raw.service_events).await,
        false => None,
    };
    let secret = raw.secret;
    let credentials = secret.as_ref().and_then(credentials);
    let pod = current_pod(raw.control_plane_pods.iter(), name);
    let rollout = raw.stateful_set.as_ref().map_or(Rollout::Missing, |s| stateful_set_facts(s).rollout());
    let mut facts = pod.map(pod_facts);
    let blocked = match (&job_state, rollout) {
        (JobState::Complete, Rollout::Missing | Rollout::InProgress) => {
            if let (Some(pod), Some(f)) = (pod, facts.as_mut()) {
                workloads.words_from_log(client, &ns, pod, f).await;
            }
            blocked(client, workloads, &ns, raw.stateful_set.as_ref(), facts.as_ref(), raw.workload).await
        }
        _ => {
            workloads.forget(&ns);
            None
        }
    };
    Gathered {
        observation: Observation {
            job: job_state,
            helm_error,
            service,
            service_warning,
            kubeconfig_secret: secret.as_ref().is_some_and(complete),
            ready_nodes: Vec::new(),
            pod_node: pod.and_then(|p| p.spec.as_ref()?.node_name.clone()),
            probe: None,
            rollout,
            blocked,
            gateway: None,
        },
        chart_generation,
        chart_spec: hc.as_ref().and_then(spec_digest),
        credentials,
        abort_stop,
    }
}

/// The finalizer k3s's ServiceLB puts on each LoadBalancer Service it serves
/// (its `svclb-*` DaemonSet answers on every node's address).
pub const SERVICELB_FINALIZER: &str = "svccontroller.k3s.cattle.io/daemonset";

/// Whether k3s's ServiceLB serves this Service.
pub(crate) fn served_by_servicelb(s: &Service) -> bool {
    s.metadata.finalizers.as_ref().is_some_and(|f| f.iter().any(|x| x == SERVICELB_FINALIZER))
}

fn observe_service(s: &Service) -> ServiceObservation {
    let https_node_port = s
        .spec
        .as_ref()
        .and_then(|sp| sp.ports.as_ref())
        .and_then(|ports| ports.iter().find(|p| p.name.as_deref() == Some("https")))
        .and_then(|p| p.node_port)
        .and_then(|p| u16::try_from(p).ok());
    let ingress = s
        .status
        .as_ref()
        .and_then(|st| st.load_balancer.as_ref())
        .and_then(|lb| lb.ingress.as_ref())
        .map(|list| {
            list.iter()
                .filter_map(|i| match (&i.ip, &i.hostname) {
                    (Some(ip), _) => ip.parse().ok().map(Ingress::Ip),
                    (None, Some(h)) => Some(Ingress::Hostname(h.clone())),
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default();
    ServiceObservation { https_node_port, ingress }
}

/// The newest Warning Event about the Service (e.g. MetalLB's allocation failure).
async fn newest_warning(client: &Client, ns: &str, name: &str, known: Option<Vec<Event>>) -> Option<String> {
    let events = match known {
        Some(events) => events,
        None => {
            let lp = ListParams::default()
                .fields(&format!("involvedObject.name={name},involvedObject.kind=Service,type=Warning"));
            Api::<Event>::namespaced(client.clone(), ns).list(&lp).await.ok()?.items
        }
    };
    events.into_iter().max_by_key(|e| e.last_timestamp.as_ref().map(|t| t.0)).and_then(|e| e.message)
}

/// The label the Job controller puts on its pods: the Job's UID.
const JOB_UID_LABEL: &str = "batch.kubernetes.io/controller-uid";

/// The Job's pod among `pods`.
fn job_pod<'a>(pods: impl IntoIterator<Item = &'a Pod>, job_uid: &str) -> Option<&'a Pod> {
    pods.into_iter().find(|p| p.labels().get(JOB_UID_LABEL).map(String::as_str) == Some(job_uid))
}

/// How often the pod's containers restarted (the most of any).
fn restarts(pod: &Pod) -> i32 {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .into_iter()
        .flatten()
        .map(|c| c.restart_count)
        .max()
        .unwrap_or(0)
}

/// The pod's log (its first 64 KiB), or its previous container's.
async fn pod_log(pods: &Api<Pod>, pod: &Pod, previous: bool) -> Option<String> {
    let params = LogParams { previous, limit_bytes: Some(64 * 1024), ..LogParams::default() };
    pods.logs(&pod.name_any(), &params).await.ok()
}

/// helm's error from the Job's pod log (the failed run: `--previous` while the
/// container waits to restart shows the same run as the current log does).
async fn helm_error(client: &Client, ns: &str, job: &Job, known: Option<Vec<Pod>>) -> Option<String> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let uid = job.uid().unwrap_or_default();
    let pod = match known {
        Some(list) => job_pod(&list, &uid)?.clone(),
        None => {
            let lp = ListParams::default().labels(&format!("{JOB_UID_LABEL}={uid}"));
            pods.list(&lp).await.ok()?.items.into_iter().next()?
        }
    };
    let restarted = restarts(&pod) > 0;
    let failed = pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Failed");
    if !restarted && !failed {
        return None;
    }
    let mut log = pod_log(&pods, &pod, false).await?;
    if !log.contains("Error:") && restarted {
        log = pod_log(&pods, &pod, true).await?;
    }
    last_error(&log)
}

/// helm's words for the failed release a Job stopped at (`failurePolicy:
/// abort`): the record at the Job's `EXPECTED_RELEASE_REVISION` (1 without
/// one) when it is `failed` (its log's words are gone after a restart or
/// two, its runs since say only that they wait for an operator).
async fn failed_description(client: &Client, ns: &str, release: &str, job: &Job) -> Option<String> {
    let revision = expected(job).map_or(1, |e| e.revision.max(1));
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
    let record = secrets.get_opt(&release_record(release, revision)).await.ok().flatten()?;
    (record.labels().get("status").map(String::as_str) == Some("failed")).then(|| record_description(&record))?
}

/// What klipper-helm prints when a Job finds the release at another revision
/// than the one it was made for, and does nothing (klipper-helm `entry`).
const REVISION_MISMATCH: &str = "does not match expected revision";

/// The label helm-controller has klipper-helm put on each release record it
/// writes (`--labels`), and reads back (helm-controller v0.17.9
/// `pkg/controllers/chart/chart.go` `KeyConfigHash`).
pub(crate) const CONFIG_HASH_LABEL: &str = "helmcharts.helm.cattle.io/configHash";

/// What helm-controller wrote into the install Job it made (chart.go, the env
/// after the hash: `EXPECTED_RELEASE_REVISION`, `CONFIG_HASH`): the release's
/// newest revision then (0: none) and the chart's config hash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Expected {
    pub revision: u64,
    /// `CONFIG_HASH` (helm-controller v0.17.2 on; klipper-helm v0.13.0 on
    /// labels the record with it). `None` on v0.17.1: a record is then
    /// judged by its status alone.
    pub hash: Option<String>,
}

/// The names of the env that [`Expected`] is read from.
pub(crate) const EXPECTED_ENV: [&str; 2] = ["EXPECTED_RELEASE_REVISION", "CONFIG_HASH"];

/// [`Expected`] from the Job's first container; `None` for a Job that does
/// not carry a revision (helm-controller before v0.17.0, or v0.17.1 with no
/// release yet: it writes the variable only for a revision other than 0).
pub(crate) fn expected(job: &Job) -> Option<Expected> {
    let var = |n: &str| job_env(job).find(|(name, _)| *name == n).map(|(_, v)| v.to_owned());
    Some(Expected { revision: var(EXPECTED_ENV[0])?.parse().ok()?, hash: var(EXPECTED_ENV[1]) })
}

/// The env values of the Job's first container (helm-controller's one), by name.
fn job_env(job: &Job) -> impl Iterator<Item = (&str, &str)> {
    let container = job.spec.as_ref().and_then(|s| s.template.spec.as_ref()).and_then(|s| s.containers.first());
    container
        .and_then(|c| c.env.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|e| Some((e.name.as_str(), e.value.as_deref()?)))
}

/// The proxy env helm-controller copies from its own into every Job it makes
/// (chart.go `setProxyEnv`; `NO_PROXY` names no port).
pub(crate) const PROXY_ENV: [&str; 6] =
    ["all_proxy", "ALL_PROXY", "http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY"];

/// The port of a proxy URL as Go's `http.ProxyFromEnvironment` reads it (a
/// value without a scheme is taken as `http://`; no port: the scheme's).
pub(crate) fn proxy_port(value: &str) -> Option<u16> {
    let value = value.trim();
    if value.is_empty() {
        return None;
    }
    let (scheme, rest) = value.split_once("://").unwrap_or(("http", value));
    let authority = rest.split(['/', '?', '#']).next()?.rsplit('@').next()?;
    let port = match authority.rsplit_once(':') {
        // `[v6]` alone has colons but no port after the bracket
        Some((host, port)) if !host.is_empty() && !port.contains(']') => Some(port.parse().ok()?),
        _ => None,
    };
    port.or(match scheme {
        "http" => Some(80),
        "https" => Some(443),
        "socks5" | "socks5h" => Some(1080),
        _ => None,
    })
}

/// The ports of the proxies the Job's container is told to use.
pub(crate) fn proxy_ports(job: &Job) -> Vec<u16> {
    job_env(job).filter(|(name, _)| PROXY_ENV.contains(name)).filter_map(|(_, v)| proxy_port(v)).collect()
}

/// helm's release record of `release` at `revision` (helm's secrets driver).
pub(crate) fn release_record(release: &str, revision: u64) -> String {
    format!("sh.helm.release.v1.{release}.v{revision}")
}

/// helm-controller's own test that a chart is installed (chart.go: the newest
/// release's `status` label is `deployed` and its config hash label is the
/// chart's); a Job without `CONFIG_HASH` (v0.17.1) by the status alone.
pub(crate) fn deploys(labels: &BTreeMap<String, String>, hash: Option<&str>) -> bool {
    labels.get("status").map(String::as_str) == Some("deployed")
        && hash.is_none_or(|hash| labels.get(CONFIG_HASH_LABEL).map(String::as_str) == Some(hash))
}

/// The newest release record's revision and labels, read by name (the
/// console may `get` Secrets, never list them). An install Job writes at most
/// one record, `expected + 1` (a failed run's restart finds the release at
/// another revision and does nothing); later ones come from later Jobs, so
/// the next are looked for only when that one does not deploy. None written:
/// the release is where the Job found it.
async fn newest_record(
    secrets: &Api<Secret>,
    release: &str,
    exp: &Expected,
) -> kube::Result<Option<(u64, BTreeMap<String, String>)>> {
    let labels = |revision: u64| record_labels(secrets, release, revision);
    let mut revision = exp.revision + 1;
    let Some(mut newest) = labels(revision).await? else {
        return Ok(match exp.revision {
            0 => None,
            r => labels(r).await?.map(|l| (r, l)),
        });
    };
    if !deploys(&newest, exp.hash.as_deref()) {
        // Bounded: helm-controller makes one Job at a time.
        for _ in 0..16 {
            match labels(revision + 1).await? {
                Some(l) => {
                    revision += 1;
                    newest = l;
                }
                None => break,
            }
        }
    }
    Ok(Some((revision, newest)))
}

/// The labels of the release record at `revision` (metadata only); `None` when there is none.
async fn record_labels(
    secrets: &Api<Secret>,
    release: &str,
    revision: u64,
) -> kube::Result<Option<BTreeMap<String, String>>> {
    let meta = secrets.get_metadata_opt(&release_record(release, revision)).await?;
    Ok(meta.map(|m| m.metadata.labels.unwrap_or_default()))
}

/// The largest release record the console decodes (its JSON holds the
/// rendered manifests; the vCluster chart's is well under this).
const RELEASE_RECORD_LIMIT: u64 = 8 << 20;

/// A release record's release (`release`: base64 of gzipped JSON, helm's
/// secrets driver).
pub(crate) fn record_release(s: &Secret) -> Option<serde_json::Value> {
    use base64::Engine;
    use std::io::Read;
    let raw = s.data.as_ref()?.get("release")?;
    let gz = base64::engine::general_purpose::STANDARD.decode(&raw.0).ok()?;
    let mut json = Vec::new();
    flate2::read::GzDecoder::new(&gz[..]).take(RELEASE_RECORD_LIMIT).read_to_end(&mut json).ok()?;
    serde_json::from_slice(&json).ok()
}

/// `release` as helm's secrets driver stores it: gzipped JSON, base64.
pub(crate) fn encode_release(release: &serde_json::Value) -> Option<k8s_openapi::ByteString> {
    use base64::Engine;
    use std::io::Write;
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&serde_json::to_vec(release).ok()?).ok()?;
    let text = base64::engine::general_purpose::STANDARD.encode(gz.finish().ok()?);
    Some(k8s_openapi::ByteString(text.into_bytes()))
}

/// `info.description` of a release record: helm's words for a failed run.
pub(crate) fn record_description(s: &Secret) -> Option<String> {
    let release = record_release(s)?;
    release["info"]["description"].as_str().filter(|d| !d.is_empty()).map(str::to_owned)
}

/// Whether a completed install Job deployed its change, as helm-controller
/// decides it (k3s-io/helm-controller v0.17.9 `pkg/controllers/chart/chart.go`:
/// the newest release record `deployed` with the chart's config hash, or a new
/// Job). A Job's completion says nothing: klipper-helm's `retry` branch exits 0
/// whatever the upgrade returned, and after a failed run the restarted
/// container finds another revision than `EXPECTED_RELEASE_REVISION` and
/// exits 0 (klipper-helm `entry` at v0.13.3-build20260727), so helm-controller
/// replaces a Job that completed, again and again. Per namespace: the Job the
/// verdict is for and helm's words if it did not deploy, kept until a Job
/// deploys or the chart is applied again, so the words stay while
/// helm-controller retries. One metadata GET per completed Job when it
/// deployed; logs (or the record) only when it did not.
#[derive(Default)]
pub(crate) struct HelmRuns(Mutex<HashMap<String, HelmRun>>);

#[derive(Default)]
struct HelmRun {
    /// The completed Job judged (none: words from a running Job).
    job_uid: Option<String>,
    failure: Option<String>,
}

impl HelmRuns {
    /// helm's words when the completed `job` did not deploy its change.
    async fn undone(
        &self,
        client: &Client,
        ns: &str,
        release: &str,
        job: &Job,
        known: Option<Vec<Pod>>,
    ) -> Option<String> {
        let job_uid = job.uid()?;
        if let Some(run) = self.0.lock().ok()?.get(ns).filter(|r| r.job_uid.as_deref() == Some(job_uid.as_str())) {
            return run.failure.clone();
        }
        // A Job helm-controller did not make (none of its env): its completion is all there is.
        let exp = expected(job)?;
        let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
        let newest = match newest_record(&secrets, release, &exp).await {
            Ok(newest) => newest,
            // Not known: not taken for deployed, and judged again on the next pass.
            Err(e) => return Some(self.last_failure(ns).unwrap_or_else(|| format!("read helm's release record: {e}"))),
        };
        let failure = match &newest {
            Some((_, labels)) if deploys(labels, exp.hash.as_deref()) => None,
            _ => Some(self.words(client, ns, release, job, known, newest).await),
        };
        if let Ok(mut m) = self.0.lock() {
            m.insert(ns.to_owned(), HelmRun { job_uid: Some(job_uid), failure: failure.clone() });
        }
        failure
    }

    /// helm's words for a Job that did not deploy: the failed run's log (this
    /// container's, else the one before a restart), else the last words seen
    /// (a container stopped mid-run leaves none), else the release record's
    /// description, else what klipper-helm or the record says.
    async fn words(
        &self,
        client: &Client,
        ns: &str,
        release: &str,
        job: &Job,
        known: Option<Vec<Pod>>,
        newest: Option<(u64, BTreeMap<String, String>)>,
    ) -> String {
        let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
        let pod = match (known, job.uid()) {
            (Some(list), Some(uid)) => job_pod(&list, &uid).cloned(),
            (None, Some(uid)) => {
                let lp = ListParams::default().labels(&format!("{JOB_UID_LABEL}={uid}"));
                pods.list(&lp).await.ok().and_then(|l| l.items.into_iter().next())
            }
            _ => None,
        };
        let mut mismatch = None;
        if let Some(pod) = &pod {
            let log = pod_log(&pods, pod, false).await.unwrap_or_default();
            if let Some(words) = last_error(&log) {
                return words;
            }
            mismatch = log.lines().find(|l| l.contains(REVISION_MISMATCH)).map(str::to_owned);
            if restarts(pod) > 0
                && let Some(words) = pod_log(&pods, pod, true).await.as_deref().and_then(last_error)
            {
                return words;
            }
        }
        if let Some(words) = self.last_failure(ns) {
            return words;
        }
        let Some((revision, labels)) = newest else {
            return mismatch.unwrap_or_else(|| format!("no release record of {release}"));
        };
        let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
        if let Some(d) = secrets
            .get_opt(&release_record(release, revision))
            .await
            .ok()
            .flatten()
            .as_ref()
            .and_then(record_description)
        {
            return d;
        }
        let status = labels.get("status").map_or("unknown", String::as_str);
        mismatch.unwrap_or_else(|| format!("release {release} revision {revision} is {status}"))
    }

    /// helm's words from a running Job's pod: kept for the Jobs that follow.
    fn remember(&self, ns: &str, words: &str) {
        if let Ok(mut m) = self.0.lock() {
            m.entry(ns.to_owned()).or_default().failure = Some(words.to_owned());
        }
    }

    /// helm's words from the namespace's last Job that did not deploy.
    fn last_failure(&self, ns: &str) -> Option<String> {
        self.0.lock().ok()?.get(ns).and_then(|r| r.failure.clone())
    }

    /// New values applied: the old words no longer hold.
    pub(crate) fn forget(&self, ns: &str) {
        if let Ok(mut m) = self.0.lock() {
            m.remove(ns);
        }
    }
}

/// The words of klipper-helm's `abort` branch (`entry`: v0.9.18 line 79,
/// v0.13.3 line 72).
pub(crate) const ABORT_WORDS: &str = "waiting for operator intervention";

/// helm's last error: from the last line starting `Error:` (or klipper-helm's
/// policy message) to the end of the log.
pub(crate) fn last_error(log: &str) -> Option<String> {
    let lines: Vec<&str> = log.lines().collect();
    let start = lines.iter().rposition(|l| l.starts_with("Error:") || l.contains(ABORT_WORDS))?;
    Some(lines[start..].iter().filter(|l| !l.starts_with("+ ")).copied().collect::<Vec<_>>().join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_logs_last_lines_stand_for_a_missing_termination_message() {
        assert_eq!(log_tail("a\nb\n\nc\nfatal: no licence\n\n").as_deref(), Some("b\nc\nfatal: no licence"));
        assert_eq!(log_tail("only\n").as_deref(), Some("only"));
        assert_eq!(log_tail("\n  \n"), None);
    }

    #[test]
    fn helm_errors_are_cut_from_the_log() {
        let log = "+ helm status\nError: release: not found\n+ helm install x\nError: INSTALLATION FAILED: values don't meet\nvcluster:\n- at '': bad\n";
        assert_eq!(
            last_error(log).as_deref(),
            Some("Error: INSTALLATION FAILED: values don't meet\nvcluster:\n- at '': bad")
        );
        assert_eq!(last_error("NAME: x\nSTATUS: deployed\n"), None);
        let abort = "Release status is 'failed' and failure policy is 'abort'; waiting for operator intervention\n";
        assert!(last_error(abort).unwrap().contains("abort"));
    }

    /// helm-controller's test, row by row (chart.go: `release.status ==
    /// "deployed" && release.hash == configHash`).
    #[test]
    fn only_a_deployed_record_with_the_charts_hash_deploys() {
        let labels = |status: &str, hash: Option<&str>| {
            let mut l = BTreeMap::from([("status".to_owned(), status.to_owned())]);
            if let Some(h) = hash {
                l.insert(CONFIG_HASH_LABEL.to_owned(), h.to_owned());
            }
            l
        };
        for (status, hash, deployed) in [
            ("deployed", Some("abc"), true),
            ("deployed", Some("old"), false),
            ("deployed", None, false),
            ("failed", Some("abc"), false),
            ("superseded", Some("abc"), false),
            ("pending-upgrade", Some("abc"), false),
        ] {
            assert_eq!(deploys(&labels(status, hash), Some("abc")), deployed, "{status} {hash:?}");
        }
        // helm-controller v0.17.1 passes no hash (klipper-helm v0.9 writes no label): the status alone.
        assert!(deploys(&labels("deployed", None), None));
        assert!(!deploys(&labels("failed", None), None));
        assert_eq!(release_record("demo", 7), "sh.helm.release.v1.demo.v7");
    }

    /// A Job whose one container has this env, as helm-controller makes it.
    fn job_with_env(env: &[(&str, &str)]) -> Job {
        let env: Vec<_> = env.iter().map(|(name, value)| serde_json::json!({"name": name, "value": value})).collect();
        let job = serde_json::json!({"spec": {"template": {"spec": {"containers": [{"name": "helm", "env": env}]}}}});
        serde_json::from_value(job).unwrap()
    }

    #[test]
    fn the_jobs_expectation_is_read_from_its_env() {
        let job = job_with_env(&[("NAME", "demo"), ("EXPECTED_RELEASE_REVISION", "3"), ("CONFIG_HASH", "abc")]);
        assert_eq!(expected(&job), Some(Expected { revision: 3, hash: Some("abc".into()) }));
        // the watch cache keeps exactly these
        let slim = super::super::cache::slim::job(job);
        assert_eq!(expected(&slim), Some(Expected { revision: 3, hash: Some("abc".into()) }));
        let env = &slim.spec.unwrap().template.spec.unwrap().containers[0].env;
        assert_eq!(env.as_ref().map(Vec::len), Some(2));
        assert_eq!(expected(&Job::default()), None);
        // helm-controller v0.17.1: the revision only (none at all for revision 0).
        let v0171 = job_with_env(&[("EXPECTED_RELEASE_REVISION", "3")]);
        assert_eq!(expected(&v0171), Some(Expected { revision: 3, hash: None }));
        assert_eq!(expected(&job_with_env(&[("CONFIG_HASH", "abc")])), None);
    }

    #[test]
    fn proxy_ports_are_read_as_go_reads_proxy_urls() {
        for (value, port) in [
            ("http://proxy.internal:3128", Some(3128)),
            ("https://proxy.internal", Some(443)),
            ("http://proxy.internal/", Some(80)),
            ("proxy.internal:8080", Some(8080)),
            ("http://user:secret@proxy.internal:3129", Some(3129)),
            ("socks5://10.0.0.1:1081", Some(1081)),
            ("http://[fd00::1]:3128", Some(3128)),
            ("http://[fd00::1]", Some(80)),
            ("http://proxy:notaport", None),
            ("", None),
        ] {
            assert_eq!(proxy_port(value), port, "{value}");
        }
        let job = job_with_env(&[
            ("HTTPS_PROXY", "http://proxy:3128"),
            ("NO_PROXY", "10.0.0.0/8"),
            ("http_proxy", "http://proxy:3129"),
        ]);
        assert_eq!(proxy_ports(&job), [3128, 3129]);
        // the watch cache keeps them
        assert_eq!(proxy_ports(&super::super::cache::slim::job(job)), [3128, 3129]);
    }

    #[test]
    fn a_release_records_description_is_helms_words() {
        use base64::Engine;
        use std::io::Write;
        let record = |json: &str| {
            let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
            gz.write_all(json.as_bytes()).unwrap();
            let text = base64::engine::general_purpose::STANDARD.encode(gz.finish().unwrap());
            Secret {
                data: Some(BTreeMap::from([("release".to_owned(), k8s_openapi::ByteString(text.into_bytes()))])),
                ..Secret::default()
            }
        };
        let failed =
            r#"{"info":{"status":"failed","description":"Upgrade \"demo\" failed: namespaces \"x\" not found"}}"#;
        assert_eq!(
            record_description(&record(failed)).as_deref(),
            Some("Upgrade \"demo\" failed: namespaces \"x\" not found")
        );
        assert_eq!(record_description(&record(r#"{"info":{}}"#)), None);
        assert_eq!(record_description(&Secret::default()), None);
    }
}
