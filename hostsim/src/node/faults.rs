//! Pods that fail as a kubelet fails them, chosen per test: a namespace
//! annotated [`ANNOTATION`] has every pod the node starts there (but
//! klipper-helm's) fail that way, with the container statuses and Events the
//! kubelet writes (kubernetes v1.36 `pkg/kubelet/images/image_manager.go`:
//! `Failed`/`BackOff` on pulls; `pkg/kubelet/kuberuntime/kuberuntime_container.go`
//! and `pod_workers.go`: `lastState.terminated` with the termination message,
//! `CrashLoopBackOff` and the `BackOff` Event; `pkg/kubelet/prober`: `Unhealthy`).
//! The test host has no images to pull nor memory to run out of: the failure
//! is what a kubelet would report, not its cause.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, Pod};
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::latency::Latency;

/// The namespace annotation that picks a [`Fault`].
pub const ANNOTATION: &str = "hostsim.kubebyon.io/kubelet-fault";

/// How the kubelet fails a pod.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fault {
    /// `image-pull`: the image cannot be pulled (`ErrImagePull`, then `ImagePullBackOff`).
    ImagePull,
    /// `exit:<code>:<message>`: the container exits with that code and
    /// termination message, and restarts with back-off; `exit-log:…` writes
    /// the message to its log only, as a container whose
    /// `terminationMessagePolicy` is `File` and that writes no termination
    /// log does (vCluster's syncer: the chart sets no policy).
    Exit { code: i32, message: String, termination_log: bool },
    /// `oom`: killed at its memory limit (`OOMKilled`, exit code 137), restarts.
    OomKilled,
    /// `unready`: runs, but its readiness probe fails (`Unhealthy`).
    Unready,
    /// `init:<fault>` (`init:image-pull`, `init:exit:…`, `init:oom`): the
    /// pod's first init container fails so; the containers wait in
    /// `PodInitializing`, `Initialized` is `False` (`kubectl get pod`:
    /// `Init:ImagePullBackOff`, `Init:CrashLoopBackOff`).
    Init(Box<Fault>),
}

impl Fault {
    pub fn parse(value: &str) -> Option<Self> {
        if let Some(inner) = value.trim().strip_prefix("init:") {
            return match Self::parse(inner)? {
                Self::Unready | Self::Init(_) => None,
                inner => Some(Self::Init(Box::new(inner))),
            };
        }
        match value.trim() {
            "image-pull" => Some(Self::ImagePull),
            "oom" => Some(Self::OomKilled),
            "unready" => Some(Self::Unready),
            other => {
                let (rest, termination_log) = match other.strip_prefix("exit-log:") {
                    Some(rest) => (rest, false),
                    None => (other.strip_prefix("exit:")?, true),
                };
                let (code, message) = rest.split_once(':')?;
                let code = code.parse().ok().filter(|c| *c != 0)?;
                Some(Self::Exit { code, message: message.to_owned(), termination_log })
            }
        }
    }
}

fn now() -> String {
    k8s_openapi::jiff::Timestamp::now().to_string()
}

/// The container a fault plays on: the pod's first container, or its first
/// init container.
struct Target {
    name: String,
    image: String,
    init: bool,
}

fn target(pod: &Pod, init: bool) -> Target {
    let spec = pod.spec.as_ref();
    let c = if init {
        spec.and_then(|s| s.init_containers.as_ref()).and_then(|c| c.first())
    } else {
        spec.and_then(|s| s.containers.first())
    };
    let (name, image) =
        (c.map(|c| c.name.clone()).unwrap_or_default(), c.and_then(|c| c.image.clone()).unwrap_or_default());
    Target { name, image, init }
}

/// A kubelet Event about the pod's (init) container.
async fn event(events: &Api<Event>, pod: &Pod, on: &Target, node: &str, warning: bool, reason: &str, message: &str) {
    let field = if on.init { "spec.initContainers" } else { "spec.containers" };
    let name = &on.name;
    let t = now();
    let body: Result<Event, _> = serde_json::from_value(json!({
        "metadata": {"generateName": format!("{}.", pod.name_any()), "namespace": pod.namespace()},
        "involvedObject": {"kind": "Pod", "apiVersion": "v1", "namespace": pod.namespace(), "name": pod.name_any(),
            "uid": pod.uid(), "fieldPath": format!("{field}{{{name}}}")},
        "reason": reason, "message": message, "type": if warning { "Warning" } else { "Normal" },
        "source": {"component": "kubelet", "host": node}, "reportingComponent": "kubelet", "reportingInstance": node,
        "firstTimestamp": t, "lastTimestamp": t, "count": 1,
    }));
    if let Ok(body) = body
        && let Err(e) = events.create(&PostParams::default(), &body).await
    {
        tracing::debug!(error = %e, "kubelet event");
    }
}

async fn status(
    pods: &Api<Pod>,
    pod: &Pod,
    on: &Target,
    phase: &str,
    state: serde_json::Value,
    last: serde_json::Value,
    restarts: i32,
) {
    let t = now();
    let failing = json!({"name": on.name, "image": on.image, "imageID": "", "ready": false,
        "started": state.get("running").is_some(), "restartCount": restarts, "state": state, "lastState": last});
    let main = target(pod, false);
    let (initialized, containers, inits) = if on.init {
        // The kubelet starts no container before every init container completed.
        let waiting = json!({"name": main.name, "image": main.image, "imageID": "", "ready": false, "started": false,
            "restartCount": 0, "state": {"waiting": {"reason": "PodInitializing"}}});
        let initialized = json!({"type": "Initialized", "status": "False", "reason": "ContainersNotInitialized",
            "message": format!("containers with incomplete status: [{}]", on.name), "lastTransitionTime": t});
        (initialized, json!([waiting]), json!([failing]))
    } else {
        (
            json!({"type": "Initialized", "status": "True", "lastTransitionTime": t}),
            json!([failing]),
            super::init_statuses(pod),
        )
    };
    let unready = if on.init { "ContainersNotInitialized" } else { "ContainersNotReady" };
    let patch = json!({"status": {
        "phase": phase,
        "conditions": [
            {"type": "PodReadyToStartContainers", "status": "True", "lastTransitionTime": t},
            initialized,
            {"type": "ContainersReady", "status": "False", "reason": "ContainersNotReady", "lastTransitionTime": t,
             "message": format!("containers with unready status: [{}]", main.name)},
            {"type": "Ready", "status": "False", "reason": unready, "lastTransitionTime": t,
             "message": format!("containers with unready status: [{}]", main.name)},
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": t},
        ],
        "containerStatuses": containers,
        "initContainerStatuses": inits,
    }});
    if let Err(e) = pods.patch_status(&pod.name_any(), &PatchParams::default(), &Patch::Merge(patch)).await {
        tracing::debug!(error = %e, "kubelet status");
    }
}

/// Plays `fault` on the pod until the task is aborted (the pod stopped).
pub async fn run(
    pods: Api<Pod>,
    events: Api<Event>,
    logs: crate::kubelet::Logs,
    pod: Pod,
    node: String,
    fault: Fault,
    latency: Latency,
) {
    let (fault, on) = match fault {
        Fault::Init(inner) => (*inner, target(&pod, true)),
        fault => (fault, target(&pod, false)),
    };
    let (name, image) = (on.name.clone(), on.image.clone());
    // A failing init container keeps the pod Pending (phase stays until every init container completed).
    let started_phase = if on.init { "Pending" } else { "Running" };
    let (ns, pod_name) = (pod.namespace().unwrap_or_default(), pod.name_any());
    let none = json!({});
    let mut n: i32 = 0;
    loop {
        n += 1;
        let wait = latency.retry_after(u32::try_from(n).unwrap_or(1));
        match &fault {
            Fault::ImagePull => {
                let why = format!(
                    "rpc error: code = NotFound desc = failed to pull and unpack image \"{image}\": failed to resolve reference \"{image}\": {image}: not found"
                );
                let (reason, message) = if n == 1 {
                    ("ErrImagePull", why.clone())
                } else {
                    ("ImagePullBackOff", format!("Back-off pulling image \"{image}\": ErrImagePull: {why}"))
                };
                let waiting = json!({"waiting": {"reason": reason, "message": message}});
                status(&pods, &pod, &on, "Pending", waiting, none.clone(), 0).await;
                if n == 1 {
                    let failed = format!("Failed to pull image \"{image}\": {why}");
                    event(&events, &pod, &on, &node, true, "Failed", &failed).await;
                    event(&events, &pod, &on, &node, true, "Failed", "Error: ErrImagePull").await;
                } else {
                    let backoff = format!("Back-off pulling image \"{image}\"");
                    event(&events, &pod, &on, &node, false, "BackOff", &backoff).await;
                    event(&events, &pod, &on, &node, true, "Failed", "Error: ImagePullBackOff").await;
                }
            }
            Fault::Exit { .. } | Fault::OomKilled => {
                let (code, reason, message) = match &fault {
                    Fault::Exit { code, message, termination_log } => {
                        (*code, "Error", Some(message.clone()).filter(|_| *termination_log))
                    }
                    _ => (137, "OOMKilled", None),
                };
                let started = now();
                if n > 1 {
                    // The next run: the one before is `--previous`.
                    logs.restart(&ns, &pod_name, &name);
                } else {
                    logs.fresh(&ns, &pod_name, &name);
                }
                let running = json!({"running": {"startedAt": started}});
                status(&pods, &pod, &on, started_phase, running, none.clone(), n - 1).await;
                if let Fault::Exit { message, .. } = &fault {
                    logs.append(&ns, &pod_name, &name, &format!("starting the control plane\n{message}\n"));
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
                // Exited: this run is what a plain and a `--previous` read give until the next start.
                logs.crashed(&ns, &pod_name, &name);
                let mut terminated =
                    json!({"exitCode": code, "reason": reason, "startedAt": started, "finishedAt": now()});
                if let Some(m) = message {
                    terminated["message"] = m.into();
                }
                let waiting = json!({"waiting": {"reason": "CrashLoopBackOff",
                    "message": format!("back-off {}s restarting failed container={name} pod={}_{}({})",
                        wait.as_secs().max(10), pod.name_any(), pod.namespace().unwrap_or_default(), pod.uid().unwrap_or_default())}});
                status(&pods, &pod, &on, started_phase, waiting, json!({"terminated": terminated}), n).await;
                let msg = format!(
                    "Back-off restarting failed container {name} in pod {}_{}({})",
                    pod.name_any(),
                    pod.namespace().unwrap_or_default(),
                    pod.uid().unwrap_or_default()
                );
                event(&events, &pod, &on, &node, true, "BackOff", &msg).await;
            }
            Fault::Unready | Fault::Init(_) => {
                if n == 1 {
                    let running = json!({"running": {"startedAt": now()}});
                    status(&pods, &pod, &on, "Running", running, none.clone(), 0).await;
                }
                let ip = pod.status.as_ref().and_then(|s| s.pod_ip.clone()).unwrap_or_default();
                let msg = format!(
                    "Readiness probe failed: Get \"https://{ip}:8443/readyz\": dial tcp {ip}:8443: connect: connection refused"
                );
                event(&events, &pod, &on, &node, true, "Unhealthy", &msg).await;
                tokio::time::sleep(Duration::from_secs(2)).await;
                continue;
            }
        }
        tokio::time::sleep(wait).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn faults_are_named_as_tests_name_them() {
        for (value, fault) in [
            ("image-pull", Some(Fault::ImagePull)),
            ("oom", Some(Fault::OomKilled)),
            ("unready", Some(Fault::Unready)),
            (
                "exit:1:fatal: no licence",
                Some(Fault::Exit { code: 1, message: "fatal: no licence".into(), termination_log: true }),
            ),
            ("exit:2:", Some(Fault::Exit { code: 2, message: String::new(), termination_log: true })),
            ("exit-log:1:a:b", Some(Fault::Exit { code: 1, message: "a:b".into(), termination_log: false })),
            ("init:image-pull", Some(Fault::Init(Box::new(Fault::ImagePull)))),
            (
                "init:exit:1:cp: no space",
                Some(Fault::Init(Box::new(Fault::Exit {
                    code: 1,
                    message: "cp: no space".into(),
                    termination_log: true,
                }))),
            ),
            ("init:oom", Some(Fault::Init(Box::new(Fault::OomKilled)))),
            ("init:unready", None),
            ("init:init:oom", None),
            ("exit:0:fine", None),
            ("exit:x:y", None),
            ("crash", None),
        ] {
            assert_eq!(Fault::parse(value), fault, "{value}");
        }
    }
}
