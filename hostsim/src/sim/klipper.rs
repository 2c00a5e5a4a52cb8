//! The helm Job's pod, as the node's kubelet runs it: the container is
//! klipper-helm's `entry` script (k3s-io/klipper-helm v0.13.3) running helm 4 for
//! the vCluster chart. Its output (bash `set -x` trace lines, klipper's messages,
//! helm's own words) goes to the container log that `kubectl logs` reads through
//! the real API server; the exit code decides the pod's fate. With
//! `restartPolicy: OnFailure` a failed container is restarted in the same pod
//! after CrashLoopBackOff (10 s doubling, ≤ 5 min, scaled like the Job back-off),
//! `restartCount` counting up, until the Job controller gives up and deletes it.
//!
//! What helm does to the host: the chart's Service (server-side apply as `helm`,
//! forced), release records ([`super::release`]), and on uninstall the Service and
//! what the vCluster made (`vc-<name>`, `<name>-certs`).

use std::collections::HashMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, Pod, Secret};
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::json;

use super::release::{self, Record, Status};
use super::vcluster;
use crate::chart;
use crate::kubelet::Logs;
use crate::latency::Latency;

/// What a helm pod needs from the simulator.
#[derive(Clone)]
pub struct Runtime {
    pub client: Client,
    pub logs: Logs,
    pub latency: Latency,
    pub charts: chart::Source,
}

/// The container's environment and arguments, as helm-controller wrote them.
struct Invocation {
    action: String,
    env: HashMap<String, String>,
    args: Vec<String>,
}

impl Invocation {
    fn from_pod(pod: &Pod) -> Option<Self> {
        let c = pod.spec.as_ref()?.containers.first()?;
        let env = c.env.iter().flatten().map(|e| (e.name.clone(), e.value.clone().unwrap_or_default())).collect();
        let args: Vec<String> = c.args.clone().unwrap_or_default();
        Some(Self { action: args.first().cloned().unwrap_or_default(), env, args })
    }

    fn get(&self, k: &str) -> &str {
        self.env.get(k).map(String::as_str).unwrap_or_default()
    }

    fn flag(&self, f: &str) -> bool {
        self.args.iter().any(|a| a == f)
    }
}

/// The log of one container run and how it ended.
#[derive(Default)]
struct Run {
    log: String,
    ok: bool,
}

impl Run {
    fn line(&mut self, l: impl AsRef<str>) {
        self.log.push_str(l.as_ref());
        self.log.push('\n');
    }

    fn fail(mut self, l: impl AsRef<str>) -> Self {
        self.line(l);
        self.ok = false;
        self
    }

    fn done(mut self) -> Self {
        self.ok = true;
        self
    }
}

fn now() -> String {
    k8s_openapi::jiff::Timestamp::now().to_string()
}

/// Runs one pod to its end (or until it is deleted). Never panics.
pub async fn run_pod(rt: Runtime, pod: Pod) {
    let ns = pod.namespace().unwrap_or_default();
    let name = pod.name_any();
    let api: Api<Pod> = Api::namespaced(rt.client.clone(), &ns);
    let on_failure = pod.spec.as_ref().and_then(|s| s.restart_policy.as_deref()) == Some("OnFailure");
    let mut restarts = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|c| c.first())
        .map(|c| c.restart_count)
        .unwrap_or(0);
    let started = now();
    loop {
        let running = json!({"running": {"startedAt": now()}});
        if patch_status(&api, &name, "Running", &started, running, true, restarts, None).await.is_err() {
            return; // deleted
        }
        tokio::time::sleep(rt.latency.helm_job.sample()).await;
        // The Job controller may have given up on this pod meanwhile.
        match api.get_opt(&name).await {
            Ok(Some(p)) if p.metadata.deletion_timestamp.is_none() => {}
            _ => return,
        }
        let Some(inv) = Invocation::from_pod(&pod) else {
            return;
        };
        let outcome = execute(&rt, &ns, &inv).await;
        rt.logs.append(&ns, &name, "helm", &outcome.log);
        rt.logs.end(&ns, &name, "helm");
        let code = if outcome.ok { 0 } else { 1 };
        let terminated = json!({"terminated": {
            "exitCode": code, "reason": if outcome.ok { "Completed" } else { "Error" },
            "startedAt": started, "finishedAt": now(),
        }});
        if outcome.ok || !on_failure {
            let phase = if outcome.ok { "Succeeded" } else { "Failed" };
            let _ = patch_status(&api, &name, phase, &started, terminated, false, restarts, None).await;
            return;
        }
        // CrashLoopBackOff, then the same pod runs the container again.
        restarts += 1;
        let waiting = json!({"waiting": {"reason": "CrashLoopBackOff",
            "message": format!("back-off restarting failed container helm in pod {name}")}});
        if patch_status(&api, &name, "Running", &started, waiting, false, restarts, Some(terminated)).await.is_err() {
            return;
        }
        let backoff = rt.latency.retry_after(restarts as u32).min(Duration::from_secs(300));
        tokio::time::sleep(backoff).await;
        rt.logs.restart(&ns, &name, "helm");
    }
}

#[allow(clippy::too_many_arguments)]
async fn patch_status(
    api: &Api<Pod>,
    name: &str,
    phase: &str,
    started: &str,
    state: serde_json::Value,
    ready: bool,
    restarts: i32,
    last: Option<serde_json::Value>,
) -> Result<(), kube::Error> {
    let ready_s = if ready { "True" } else { "False" };
    let mut container = json!({
        "name": "helm", "image": super::helm::JOB_IMAGE, "imageID": "",
        "ready": ready, "started": ready, "restartCount": restarts, "state": state,
    });
    if let Some(last) = last {
        container["lastState"] = last;
    }
    let now = now();
    let patch = json!({"status": {
        "phase": phase,
        "startTime": started,
        "conditions": [
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": now},
            {"type": "Initialized", "status": "True", "lastTransitionTime": now},
            {"type": "ContainersReady", "status": ready_s, "lastTransitionTime": now},
            {"type": "Ready", "status": ready_s, "lastTransitionTime": now},
        ],
        "containerStatuses": [container],
    }});
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(patch)).await.map(|_| ())
}

/// klipper-helm's `entry` for one container run.
async fn execute(rt: &Runtime, job_ns: &str, inv: &Invocation) -> Run {
    let mut run = Run::default();
    let name = inv.get("NAME").to_owned();
    let target = inv.get("TARGET_NAMESPACE").to_owned();
    let history = match release::history(&rt.client, &target, &name).await {
        Ok(h) => h,
        Err(e) => return run.fail(format!("Error: {e}")),
    };
    let mut last = history.last().cloned();
    run.line(format!("+ helm status --namespace {target} {name} --output json"));
    if last.is_none() {
        run.line("Error: release: not found");
    }
    if inv.action == "delete" {
        let Some(_) = last else {
            return run.done(); // "No helm chart installed; nothing to delete"
        };
        run.line(format!("+ helm uninstall {name} --namespace {target} --wait"));
        return match uninstall(rt, &target, &name).await {
            Ok(()) => {
                run.line(format!("release \"{name}\" uninstalled"));
                run.done()
            }
            Err(e) => run.fail(format!("Error: uninstallation completed with 1 error(s): {e}")),
        };
    }
    // check_revision: a Job made for another revision does nothing.
    let expected = inv.get("EXPECTED_RELEASE_REVISION");
    let current = last.as_ref().map(|r| r.revision).unwrap_or(0);
    if !expected.is_empty() && expected != current.to_string() {
        run.line(format!("Current release revision {current} does not match expected revision {expected}"));
        return run.done();
    }
    let mut upgrade = false;
    match last.as_ref().map(|r| r.status) {
        Some(Status::Deployed) => {
            run.line(format!("Already installed {name}"));
            run.line(format!("Upgrading {name}"));
            upgrade = true;
        }
        Some(Status::Failed) | Some(Status::Superseded) => {
            let status = "failed";
            match inv.get("FAILURE_POLICY") {
                "" | "reinstall" => {
                    run.line(format!("+ helm uninstall {name} --namespace {target} --wait"));
                    if let Err(e) = uninstall(rt, &target, &name).await {
                        return run.fail(format!("Error: {e}"));
                    }
                    run.line(format!("release \"{name}\" uninstalled"));
                    run.line("Deleted");
                    last = None;
                }
                "abort" => {
                    return run.fail(format!(
                        "Release status is '{status}' and failure policy is 'abort'; waiting for operator intervention"
                    ));
                }
                "retry" => upgrade = true,
                other => return run.fail(format!("Unknown failure policy '{other}'")),
            }
        }
        None => {}
    }
    let verb = if upgrade { "upgrade" } else { "install" };
    let failed_prefix = if upgrade { "UPGRADE FAILED" } else { "INSTALLATION FAILED" };
    // The repository and version (helm repo add + the chart index).
    let repo = inv.get("REPO");
    if !repo.is_empty() {
        run.line(format!("+ helm repo add {name} {repo}"));
        if !rt.charts.knows_repo(repo) {
            return run.fail(format!(
                "Error: looks like \"{repo}\" is not a valid chart repository or cannot be reached: failed to fetch {}/index.yaml : 404 Not Found",
                repo.trim_end_matches('/')
            ));
        }
        run.line(format!("\"{name}\" has been added to your repositories"));
        run.line("+ helm repo update");
    }
    let version = match rt.charts.resolve(inv.get("VERSION")) {
        Some(v) => v,
        None => {
            let msg = format!(
                "chart \"vcluster\" matching {} not found in {name} index. (try 'helm repo update'): no chart version found for vcluster-{}",
                inv.get("VERSION"),
                inv.get("VERSION")
            );
            return run.fail(if upgrade { format!("Error: {msg}") } else { format!("Error: {failed_prefix}: {msg}") });
        }
    };
    let hash = inv.get("CONFIG_HASH");
    run.line(format!(
        "+ helm {verb} --namespace {target}{} --version {version} {name} {} --labels helmcharts.helm.cattle.io/configHash={hash} --values /config/{}",
        if inv.flag("--create-namespace") { " --create-namespace" } else { "" },
        inv.get("CHART"),
        super::helm::VALUES_FILE,
    ));
    let values_text = match values_content(rt, job_ns, &name).await {
        Ok(v) => v,
        Err(e) => return run.fail(format!("Error: {e}")),
    };
    let values = match chart::parse_values(&values_text) {
        Ok(v) => v,
        Err(e @ chart::ValuesError::Parse(_)) => return run.fail(format!("Error: {e}")),
        Err(e) => return run.fail(format!("Error: {failed_prefix}: {e}")),
    };
    if !upgrade && let Err(e) = ensure_namespace(&rt.client, &target, inv.flag("--create-namespace")).await {
        return run.fail(format!("Error: {failed_prefix}: {e}"));
    }
    let revision = last.as_ref().map(|r| r.revision).unwrap_or(0) + 1;
    let mut record = Record {
        name: name.clone(),
        namespace: target.clone(),
        revision,
        status: Status::Deployed,
        chart_version: version.clone(),
        values: values_text,
        description: if upgrade { "Upgrade complete".into() } else { "Install complete".into() },
        config_hash: hash.to_owned(),
        uid: String::new(),
    };
    if let Err(e) = apply_service(&rt.client, &name, &target, &version, &values).await {
        record.status = Status::Failed;
        let msg = if upgrade {
            format!("cannot patch \"{name}\" with kind Service: {e}")
        } else {
            format!("failed to create resource: {e}")
        };
        record.description = format!("{} failed: {msg}", if upgrade { "Upgrade" } else { "Release" });
        if let Err(e) = release::record(&rt.client, &record).await {
            tracing::warn!(error = %e, "recording the failed release");
        }
        return run.fail(format!("Error: {failed_prefix}: {msg}"));
    }
    if let Err(e) = release::record(&rt.client, &record).await {
        return run.fail(format!("Error: {failed_prefix}: {e}"));
    }
    if upgrade {
        run.line(format!("Release \"{name}\" has been upgraded. Happy Helming!"));
    }
    let deployed = time::OffsetDateTime::now_utc()
        .format(&time::macros::format_description!(
            "[weekday repr:short] [month repr:short] [day padding:space] [hour]:[minute]:[second] [year]"
        ))
        .unwrap_or_default();
    for l in [
        format!("NAME: {name}"),
        format!("LAST DEPLOYED: {deployed}"),
        format!("NAMESPACE: {target}"),
        "STATUS: deployed".into(),
        format!("REVISION: {revision}"),
        format!("DESCRIPTION: {}", record.description),
        "TEST SUITE: None".into(),
    ] {
        run.line(l);
    }
    run.done()
}

/// The values file helm-controller mounted: its values Secret's content.
async fn values_content(rt: &Runtime, ns: &str, name: &str) -> anyhow::Result<String> {
    let api: Api<Secret> = Api::namespaced(rt.client.clone(), ns);
    let s = api.get(&format!("chart-values-{name}")).await?;
    let bytes = s.data.as_ref().and_then(|d| d.get("HelmChartValuesContent")).map(|b| b.0.clone()).unwrap_or_default();
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// helm uninstall: the chart's objects, what the vCluster made, the records.
async fn uninstall(rt: &Runtime, ns: &str, name: &str) -> anyhow::Result<()> {
    vcluster::delete_release(&rt.client, ns, name).await?;
    release::forget(&rt.client, ns, name).await
}

fn service_resource() -> ApiResource {
    ApiResource {
        group: String::new(),
        version: "v1".into(),
        api_version: "v1".into(),
        kind: "Service".into(),
        plural: "services".into(),
    }
}

/// The chart's Service, applied as helm does (server-side, forced), or removed
/// when `controlPlane.service.enabled` is false.
async fn apply_service(
    client: &Client,
    name: &str,
    ns: &str,
    version: &str,
    values: &chart::Values,
) -> Result<(), String> {
    let services: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &service_resource());
    let r = match chart::service(name, ns, version, values) {
        Some(body) => services.patch(name, &PatchParams::apply("helm").force(), &Patch::Apply(&body)).await.map(|_| ()),
        None => match services.delete(name, &Default::default()).await {
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            other => other.map(|_| ()),
        },
    };
    r.map_err(|e| super::helm::api_message(&e))
}

async fn ensure_namespace(client: &Client, ns: &str, create: bool) -> Result<(), String> {
    let api: Api<Namespace> = Api::all(client.clone());
    match api.get_opt(ns).await {
        Ok(Some(_)) => Ok(()),
        Ok(None) if create => {
            let body: Namespace =
                serde_json::from_value(json!({"metadata": {"name": ns}})).map_err(|e| e.to_string())?;
            api.create(&PostParams::default(), &body).await.map(|_| ()).map_err(|e| super::helm::api_message(&e))
        }
        Ok(None) => Err(format!("create: failed to create: namespaces \"{ns}\" not found")),
        Err(e) => Err(super::helm::api_message(&e)),
    }
}
