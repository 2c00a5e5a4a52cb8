//! The Job controller, for helm-controller's Jobs only (label
//! `helmcharts.helm.cattle.io/chart`): the real one is not run on a test host
//! because no kubelet would run the pods of other Jobs. Mirrors
//! `pkg/controller/job/job_controller.go`: pods named `<job>-<random>` with the
//! controller's labels and owner reference, bound to the simulated node;
//! `status.active/succeeded/failed`, `startTime`; `SuccessCriteriaMet` then
//! `Complete`; `FailureTarget` then `Failed` (reason `BackoffLimitExceeded`) once
//! failures exceed `backoffLimit`; a failed pod is replaced after the back-off
//! (10 s doubling, ≤ 6 min, scaled by [`Latency::job_retry`]). Suspended Jobs get
//! no pods. With `restartPolicy: OnFailure` failures are container restarts inside
//! the pod (counted from `restartCount`), as upstream counts them.

use std::time::{Duration, Instant};

use anyhow::Result;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

use crate::latency::Latency;

pub const CHART_LABEL: &str = "helmcharts.helm.cattle.io/chart";
pub const CONTROLLER_UID: &str = "batch.kubernetes.io/controller-uid";

/// What one pass concluded for one Job: when to look again, if it waits.
pub struct Pass {
    pub wake_at: Option<Instant>,
}

fn now_time() -> Time {
    Time(k8s_openapi::jiff::Timestamp::now())
}

fn cond(job: &Job, type_: &str) -> bool {
    job.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == type_ && c.status == "True"))
}

pub fn finished(job: &Job) -> bool {
    cond(job, "Complete") || cond(job, "Failed")
}

pub fn failed(job: &Job) -> bool {
    cond(job, "Failed")
}

pub fn complete(job: &Job) -> bool {
    cond(job, "Complete")
}

fn phase(p: &Pod) -> &str {
    p.status.as_ref().and_then(|s| s.phase.as_deref()).unwrap_or("Pending")
}

fn restarts(p: &Pod) -> i32 {
    p.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .map(|c| c.iter().map(|c| c.restart_count).sum())
        .unwrap_or(0)
}

fn finished_at(p: &Pod) -> Option<k8s_openapi::jiff::Timestamp> {
    p.status
        .as_ref()?
        .container_statuses
        .as_ref()?
        .iter()
        .filter_map(|c| c.state.as_ref()?.terminated.as_ref()?.finished_at.clone())
        .map(|t| t.0)
        .max()
}

/// The Job's conditions with `type_` set (replaced or added).
fn with_condition(job: &Job, type_: &str, status: &str, reason: &str, message: &str) -> Vec<Value> {
    let now = now_time();
    let mut out: Vec<Value> = job
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .filter(|c| c.type_ != type_)
        .map(|c| serde_json::to_value(c).unwrap_or_default())
        .collect();
    out.push(json!({"type": type_, "status": status, "reason": reason, "message": message,
        "lastProbeTime": now, "lastTransitionTime": now}));
    out
}

/// One reconcile of one Job, given its pods.
pub async fn reconcile(client: &Client, job: &Job, pods: &[&Pod], node: &str, latency: &Latency) -> Result<Pass> {
    let mut pass = Pass { wake_at: None };
    if finished(job) {
        return Ok(pass);
    }
    let ns = job.namespace().unwrap_or_default();
    let spec = job.spec.clone().unwrap_or_default();
    let api: Api<Job> = Api::namespaced(client.clone(), &ns);
    let name = job.name_any();
    let suspended_now = cond(job, "Suspended");
    if spec.suspend == Some(true) {
        // Suspending terminates the Job's pods and says so in a condition.
        for p in pods.iter().filter(|p| matches!(phase(p), "Pending" | "Running")) {
            let _ = Api::<Pod>::namespaced(client.clone(), &ns).delete(&p.name_any(), &DeleteParams::default()).await;
        }
        if !suspended_now {
            let conditions = with_condition(job, "Suspended", "True", "JobSuspended", "Job suspended");
            let patch = json!({"status": {"conditions": conditions, "active": 0}});
            api.patch_status(&name, &PatchParams::default(), &Patch::Merge(patch)).await?;
        }
        return Ok(pass);
    }
    if suspended_now {
        // Resumed: the clock starts now.
        let conditions = with_condition(job, "Suspended", "False", "JobResumed", "Job resumed");
        let patch = json!({"status": {"conditions": conditions, "startTime": now_time()}});
        api.patch_status(&name, &PatchParams::default(), &Patch::Merge(patch)).await?;
        return Ok(pass);
    }
    let on_failure = spec.template.spec.as_ref().and_then(|s| s.restart_policy.as_deref()) == Some("OnFailure");
    let live: Vec<&&Pod> = pods.iter().filter(|p| p.metadata.deletion_timestamp.is_none()).collect();
    let active: Vec<&&Pod> = live.iter().copied().filter(|p| matches!(phase(p), "Pending" | "Running")).collect();
    let succeeded = live.iter().filter(|p| phase(p) == "Succeeded").count() as i32;
    let failed_pods = live.iter().filter(|p| phase(p) == "Failed").count() as i32;
    let restarts: i32 = if on_failure { active.iter().map(|p| restarts(p)).sum() } else { 0 };
    // Counters only grow: pods deleted after being counted stay counted.
    let failures = failed_pods.max(job.status.as_ref().and_then(|s| s.failed).unwrap_or(0));
    let backoff_limit = spec.backoff_limit.unwrap_or(6);
    // `pastBackoffLimitOnFailure` (restarts >= limit) and `exceedsBackoffLimit`.
    let past_limit = if on_failure { restarts > 0 && restarts >= backoff_limit } else { failures > backoff_limit };
    let status = job.status.clone().unwrap_or_default();
    let start = status.start_time.clone().unwrap_or_else(now_time);
    let mut conditions: Vec<Value> =
        status.conditions.iter().flatten().map(|c| serde_json::to_value(c).unwrap_or_default()).collect();
    let mut add = |type_: &str, reason: &str, message: &str| {
        let now = now_time();
        conditions.push(json!({"type": type_, "status": "True", "reason": reason,
            "message": message, "lastProbeTime": now, "lastTransitionTime": now}));
    };
    let mut new_status = json!({
        "startTime": start,
        "active": active.len(),
        "succeeded": succeeded,
        "failed": failures,
        "ready": 0,
        "terminating": 0,
    });
    if succeeded > 0 {
        add("SuccessCriteriaMet", "CompletionsReached", "Reached expected number of succeeded pods");
        add("Complete", "CompletionsReached", "Reached expected number of succeeded pods");
        new_status["completionTime"] = json!(now_time());
        new_status["active"] = json!(0);
    } else if past_limit {
        // Upstream deletes the pods still running, then records the failure.
        for p in &active {
            let _ = Api::<Pod>::namespaced(client.clone(), &ns).delete(&p.name_any(), &DeleteParams::default()).await;
        }
        add("FailureTarget", "BackoffLimitExceeded", "Job has reached the specified backoff limit");
        add("Failed", "BackoffLimitExceeded", "Job has reached the specified backoff limit");
        new_status["active"] = json!(0);
        new_status["failed"] = json!(failures + active.len() as i32);
    } else if active.is_empty() {
        // Replace the failed pod after the back-off.
        let last_failure = live.iter().filter_map(|p| finished_at(p)).max();
        let wait = if failures > 0 { latency.retry_after(failures as u32) } else { Duration::ZERO };
        let elapsed = last_failure
            .map(|t| {
                let d = k8s_openapi::jiff::Timestamp::now().duration_since(t);
                Duration::try_from(d).unwrap_or(Duration::ZERO)
            })
            .unwrap_or(Duration::MAX);
        if elapsed >= wait {
            create_pod(client, job, node).await?;
            new_status["active"] = json!(1);
        } else {
            pass.wake_at = Some(Instant::now() + (wait - elapsed));
        }
    }
    if !conditions.is_empty() {
        new_status["conditions"] = Value::Array(conditions);
    }
    let old = serde_json::to_value(&status).unwrap_or_default();
    let changed = ["startTime", "active", "succeeded", "failed", "conditions", "completionTime"]
        .iter()
        .any(|k| old.get(k).cloned().unwrap_or(Value::Null) != normalise(&new_status, k));
    if changed {
        api.patch_status(&name, &PatchParams::default(), &Patch::Merge(json!({"status": new_status}))).await?;
    }
    Ok(pass)
}

/// Zero counts are omitted by the API server; compare like with like.
fn normalise(status: &Value, key: &str) -> Value {
    match status.get(key) {
        Some(Value::Number(n)) if n.as_i64() == Some(0) => Value::Null,
        Some(v) => v.clone(),
        None => Value::Null,
    }
}

async fn create_pod(client: &Client, job: &Job, node: &str) -> Result<()> {
    let ns = job.namespace().unwrap_or_default();
    let name = job.name_any();
    let uid = job.uid().unwrap_or_default();
    let template = job.spec.as_ref().map(|s| s.template.clone()).unwrap_or_default();
    let mut meta = template.metadata.unwrap_or_default();
    let labels = meta.labels.get_or_insert_with(Default::default);
    for (k, v) in [
        (CONTROLLER_UID, uid.as_str()),
        ("batch.kubernetes.io/job-name", name.as_str()),
        ("controller-uid", uid.as_str()),
        ("job-name", name.as_str()),
    ] {
        labels.insert(k.into(), v.into());
    }
    meta.generate_name = Some(format!("{name}-"));
    meta.name = None;
    meta.namespace = Some(ns.clone());
    meta.finalizers = Some(vec!["batch.kubernetes.io/job-tracking".into()]);
    meta.owner_references = Some(vec![serde_json::from_value(json!({
        "apiVersion": "batch/v1", "kind": "Job", "name": name, "uid": uid,
        "controller": true, "blockOwnerDeletion": true,
    }))?]);
    let mut spec = template.spec.unwrap_or_default();
    spec.node_name = Some(node.into());
    let pod = Pod { metadata: meta, spec: Some(spec), status: None };
    Api::<Pod>::namespaced(client.clone(), &ns).create(&PostParams::default(), &pod).await?;
    Ok(())
}

/// Removes the job-tracking finalizer from finished pods, as the Job controller
/// does once it has counted them (so they can be deleted with their Job).
pub async fn release_finished(client: &Client, pods: &[&Pod]) {
    for p in pods {
        let done = matches!(phase(p), "Succeeded" | "Failed") || p.metadata.deletion_timestamp.is_some();
        let tracked = p.finalizers().iter().any(|f| f == "batch.kubernetes.io/job-tracking");
        if done && tracked {
            let api: Api<Pod> = Api::namespaced(client.clone(), &p.namespace().unwrap_or_default());
            let finalizers: Vec<&String> =
                p.finalizers().iter().filter(|f| *f != "batch.kubernetes.io/job-tracking").collect();
            let patch = json!({"metadata": {"finalizers": finalizers,
                "resourceVersion": p.resource_version()}});
            if let Err(e) = api.patch(&p.name_any(), &PatchParams::default(), &Patch::Merge(patch)).await {
                tracing::debug!(error = %e, "removing job-tracking finalizer");
            }
        }
    }
}
