//! helm-controller (k3s-io/helm-controller v0.17.7 `pkg/controllers/chart/chart.go`)
//! for HelmCharts of chart `vcluster`: per chart a values Secret
//! `chart-values-<name>`, a ServiceAccount `helm-<name>` and a Job
//! `helm-install-<name>` in the HelmChart's namespace, created suspended and
//! resumed once the Job controller reports `Suspended=True`; its pod template
//! carries `helmcharts.helm.cattle.io/configHash` (`SHA256=<HEX>` over the
//! backoff limit, the pod template and the values Secret's data). A changed spec
//! suspends the Job, waits for its pods to go, deletes and recreates it. Status is
//! only `jobName` and `JobCreated`/`Failed`; `Failed=True` only when the Job failed.
//! Deleting the HelmChart runs `helm-delete-<name>` and then drops the finalizer
//! (at once when the namespace is terminating). Helm itself runs in the Job's pod
//! ([`super::klipper`]).

use anyhow::Result;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Secret, ServiceAccount};
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams, PropagationPolicy};
use kube::{Client, ResourceExt};
use serde::Deserialize;
use serde_json::{Value, json};

use super::events::{Dynamic, Recorder};
use super::jobs;

/// The finalizer helm-controller puts on every HelmChart.
pub const FINALIZER: &str = "wrangler.cattle.io/on-helm-chart-remove";
pub const CONFIG_HASH: &str = "helmcharts.helm.cattle.io/configHash";
/// What k3s runs as the helm Job's image (klipper-helm; helm v4.1.4 inside).
pub const JOB_IMAGE: &str = "rancher/klipper-helm:v0.13.3-build20260727";
/// The values file name klipper-helm reads the HelmChart's valuesContent from.
pub const VALUES_FILE: &str = "values-0-000-HelmChart-ValuesContent.yaml";
const DEFAULT_BACKOFF_LIMIT: i32 = 1000;

pub fn resource() -> ApiResource {
    ApiResource {
        group: "helm.cattle.io".into(),
        version: "v1".into(),
        api_version: "helm.cattle.io/v1".into(),
        kind: "HelmChart".into(),
        plural: "helmcharts".into(),
    }
}

#[derive(Deserialize, Default, Debug, Clone)]
#[serde(rename_all = "camelCase", default)]
pub struct Spec {
    pub chart: String,
    pub repo: String,
    pub version: String,
    pub target_namespace: String,
    pub create_namespace: bool,
    pub values_content: String,
    pub values: Option<Value>,
    pub set: Option<Value>,
    pub failure_policy: Option<String>,
    pub back_off_limit: Option<i32>,
}

pub fn spec_of(hc: &DynamicObject) -> Result<Spec, String> {
    let spec = hc.data.get("spec").cloned().unwrap_or(json!({}));
    serde_json::from_value(spec).map_err(|e| format!("invalid HelmChart spec: {e}"))
}

/// `vcluster`, `loft/vcluster` or an `oci://…/vcluster` reference.
fn is_vcluster(chart: &str) -> bool {
    chart.rsplit('/').next() == Some("vcluster")
}

pub fn api_message(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => s.message.clone(),
        other => other.to_string(),
    }
}

fn job_ready(job: &Job) -> bool {
    let suspended_cond = job
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Suspended" && c.status == "True"));
    job.metadata.generation == Some(1) && job.spec.as_ref().and_then(|s| s.suspend) == Some(true) && suspended_cond
}

/// The Job helm-controller builds for a chart (`job()`), without its hash.
pub fn job_body(hc: &DynamicObject, spec: &Spec, delete: bool) -> Value {
    let name = hc.name_any();
    let ns = hc.namespace().unwrap_or_default();
    let action = if delete { "delete" } else { "install" };
    let target = if spec.target_namespace.is_empty() { ns.clone() } else { spec.target_namespace.clone() };
    let mut args = vec![json!(action)];
    if !delete {
        if !spec.target_namespace.is_empty() {
            args.extend([json!("--namespace"), json!(target)]);
        }
        if spec.create_namespace {
            args.push(json!("--create-namespace"));
        }
        args.push(json!("--take-ownership"));
        if !spec.version.is_empty() {
            args.extend([json!("--version"), json!(spec.version)]);
        }
    }
    let chart = if spec.repo.is_empty() { spec.chart.clone() } else { format!("{name}/{}", spec.chart) };
    let env = json!([
        {"name": "NAME", "value": name},
        {"name": "VERSION", "value": spec.version},
        {"name": "REPO", "value": spec.repo},
        {"name": "HELM_DRIVER", "value": "secret"},
        {"name": "CHART_NAMESPACE", "value": ns},
        {"name": "CHART", "value": chart},
        {"name": "HELM_VERSION", "value": ""},
        {"name": "TARGET_NAMESPACE", "value": target},
        {"name": "AUTH_PASS_CREDENTIALS", "value": "false"},
        {"name": "INSECURE_SKIP_TLS_VERIFY", "value": "false"},
        {"name": "PLAIN_HTTP", "value": "false"},
        {"name": "FAILURE_POLICY", "value": spec.failure_policy.clone().unwrap_or_else(|| "reinstall".into())},
        {"name": "SERVER_SIDE", "value": "auto"},
        {"name": "FORCE_CONFLICTS", "value": "false"},
    ]);
    let mut volumes = vec![
        json!({"name": "klipper-helm", "emptyDir": {"medium": "Memory"}}),
        json!({"name": "tmp", "emptyDir": {"medium": "Memory"}}),
    ];
    let mut mounts = vec![
        json!({"name": "klipper-helm", "mountPath": "/home/klipper-helm/.helm"}),
        json!({"name": "tmp", "mountPath": "/tmp"}),
    ];
    if !delete {
        volumes.push(json!({"name": "values", "projected": {"sources": [{"secret": {
            "name": format!("chart-values-{name}"),
            "items": [{"key": "HelmChartValuesContent", "path": VALUES_FILE}],
        }}]}}));
        mounts.push(json!({"name": "values", "mountPath": "/config"}));
    }
    json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": format!("helm-{action}-{name}"),
            "namespace": ns,
            "labels": {jobs::CHART_LABEL: name},
            "ownerReferences": [owner_ref(hc)],
        },
        "spec": {
            "suspend": true,
            "backoffLimit": spec.back_off_limit.unwrap_or(DEFAULT_BACKOFF_LIMIT),
            "template": {
                "metadata": {"annotations": {}, "labels": {jobs::CHART_LABEL: name}},
                "spec": {
                    "restartPolicy": "OnFailure",
                    "serviceAccountName": format!("helm-{name}"),
                    "priorityClassName": "system-cluster-critical",
                    "nodeSelector": {"kubernetes.io/os": "linux"},
                    "securityContext": {"runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}},
                    "containers": [{
                        "name": "helm",
                        "image": JOB_IMAGE,
                        "imagePullPolicy": "IfNotPresent",
                        "args": args,
                        "env": env,
                        "volumeMounts": mounts,
                        "securityContext": {"allowPrivilegeEscalation": false,
                            "capabilities": {"drop": ["ALL"]}, "readOnlyRootFilesystem": true},
                    }],
                    "volumes": volumes,
                },
            },
        },
    })
}

/// wrangler apply's owner reference: not a controller, does not block deletion.
fn owner_ref(hc: &DynamicObject) -> Value {
    json!({"apiVersion": "helm.cattle.io/v1", "kind": "HelmChart", "name": hc.name_any(),
        "uid": hc.uid().unwrap_or_default(), "controller": false, "blockOwnerDeletion": false})
}

/// `hashObjects()`: sha256 over the backoff limit (decimal), the pod template's
/// JSON and the values Secret's data (sorted keys, base64 values), upper-case hex.
pub fn config_hash(job: &Value, secret_data: &[(&str, &str)]) -> String {
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
    if let Some(limit) = job["spec"]["backoffLimit"].as_i64() {
        ctx.update(limit.to_string().as_bytes());
    }
    ctx.update(job["spec"]["template"].to_string().as_bytes());
    let mut data: Vec<(&str, &str)> = secret_data.to_vec();
    data.sort();
    for (k, v) in data {
        ctx.update(k.as_bytes());
        ctx.update(b64(v).as_bytes());
    }
    let hex: String = ctx.finish().as_ref().iter().map(|b| format!("{b:02X}")).collect();
    format!("SHA256={hex}")
}

fn b64(s: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(s)
}

fn conditions(job_name: &str, ns: &str, failed: bool) -> Value {
    let failed = if failed {
        json!({"type": "Failed", "status": "True", "reason": "Job failed",
            "message": "Job has reached configured number of retries without succeeding"})
    } else {
        json!({"type": "Failed", "status": "False"})
    };
    json!([
        {"type": "JobCreated", "status": "True", "reason": "Job created",
         "message": format!("Applying HelmChart using Job {ns}/{job_name}")},
        failed,
    ])
}

/// One pass of helm-controller over one HelmChart.
pub async fn reconcile(client: &Client, hc: &DynamicObject, events: &mut Recorder) -> Result<()> {
    let Ok(spec) = spec_of(hc) else {
        return Ok(()); // the CRD's schema keeps this from happening
    };
    if !is_vcluster(&spec.chart) {
        return Ok(()); // only the vCluster chart is simulated
    }
    let ns = hc.namespace().unwrap_or_default();
    let name = hc.name_any();
    let jobs_api: Api<Job> = Api::namespaced(client.clone(), &ns);
    if hc.metadata.deletion_timestamp.is_some() {
        return remove(client, hc, &spec, events).await;
    }
    set_finalizer(client, hc, true).await?;
    // The values Secret and ServiceAccount, applied like wrangler does.
    let secret_data = [("HelmChartValuesContent", spec.values_content.as_str())];
    let secret = json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": format!("chart-values-{name}"), "namespace": ns, "ownerReferences": [owner_ref(hc)]},
        "type": "helmcharts.helm.cattle.io/values",
        "stringData": {"HelmChartValuesContent": spec.values_content},
    });
    Api::<Secret>::namespaced(client.clone(), &ns)
        .patch(&format!("chart-values-{name}"), &PatchParams::apply("helm-controller").force(), &Patch::Apply(&secret))
        .await?;
    let sa = json!({"apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": {"name": format!("helm-{name}"), "namespace": ns, "ownerReferences": [owner_ref(hc)]},
        "automountServiceAccountToken": true});
    Api::<ServiceAccount>::namespaced(client.clone(), &ns)
        .patch(&format!("helm-{name}"), &PatchParams::apply("helm-controller").force(), &Patch::Apply(&sa))
        .await?;

    let mut job = job_body(hc, &spec, false);
    let hash = config_hash(&job, &secret_data);
    job["spec"]["template"]["metadata"]["annotations"][CONFIG_HASH] = json!(hash);
    let env = job["spec"]["template"]["spec"]["containers"][0]["env"].as_array_mut();
    if let Some(env) = env {
        let target = spec_target(hc, &spec);
        let revision = super::release::history(client, &target, &name)
            .await
            .ok()
            .and_then(|h| h.last().map(|r| r.revision))
            .unwrap_or(0);
        env.push(json!({"name": "EXPECTED_RELEASE_REVISION", "value": revision.to_string()}));
        let short: String = hash.trim_start_matches("SHA256=").chars().take(63).collect();
        env.push(json!({"name": "CONFIG_HASH", "value": short}));
    }
    let job_name = format!("helm-install-{name}");
    match jobs_api.get_opt(&job_name).await? {
        None => {
            let body: Job = serde_json::from_value(job)?;
            jobs_api.create(&PostParams::default(), &body).await?;
            let source = if spec.version.is_empty() {
                format!("latest stable version of {} from chart repository {}", spec.chart, spec.repo)
            } else {
                format!("{} version {} from chart repository {}", spec.chart, spec.version, spec.repo)
            };
            events
                .normal(
                    &Dynamic(hc),
                    "ApplyJob",
                    &format!("Applying HelmChart from {source} using Job {ns}/{job_name} "),
                )
                .await;
            set_status(client, hc, &job_name, conditions(&job_name, &ns, false)).await
        }
        Some(existing) => {
            let current = existing
                .spec
                .as_ref()
                .and_then(|s| s.template.metadata.as_ref())
                .and_then(|m| m.annotations.as_ref())
                .and_then(|a| a.get(CONFIG_HASH))
                .cloned();
            if current.as_deref() != Some(hash.as_str()) {
                return replace(client, &existing).await;
            }
            // A finished Job whose release is not the one it was for (helm
            // failed, or klipper-helm exited on a revision mismatch) is replaced.
            if jobs::complete(&existing) {
                let target = spec_target(hc, &spec);
                let latest = super::release::history(client, &target, &name).await?.pop();
                let short: String = hash.trim_start_matches("SHA256=").chars().take(63).collect();
                let settled =
                    latest.is_some_and(|r| r.status == super::release::Status::Deployed && r.config_hash == short);
                if !settled {
                    set_status(client, hc, &job_name, conditions(&job_name, &ns, false)).await?;
                    return replace(client, &existing).await;
                }
            }
            if job_ready(&existing) {
                resume(&jobs_api, &existing).await?;
                events.normal(&Dynamic(hc), "ResumeJob", &format!("Resumed synced Job {ns}/{job_name}")).await;
                return Ok(());
            }
            let failed = jobs::failed(&existing);
            if failed {
                events
                    .warn(&Dynamic(hc), "JobFailed", "Job has reached configured number of retries without succeeding")
                    .await;
            }
            set_status(client, hc, &job_name, conditions(&job_name, &ns, failed)).await
        }
    }
}

/// Resumes a suspended Job. Upstream sends a JSON patch whose `test` op makes it
/// conditional; the resourceVersion precondition does the same here.
async fn resume(api: &Api<Job>, job: &Job) -> Result<()> {
    let patch = json!({"metadata": {"resourceVersion": job.resource_version()}, "spec": {"suspend": false}});
    api.patch(&job.name_any(), &PatchParams::default(), &Patch::Merge(patch)).await?;
    Ok(())
}

fn spec_target(hc: &DynamicObject, spec: &Spec) -> String {
    if spec.target_namespace.is_empty() { hc.namespace().unwrap_or_default() } else { spec.target_namespace.clone() }
}

/// A Job whose template changed: suspend it, wait until its pods are gone, delete
/// it (background); the next pass creates the new one (`reconcileJob`).
async fn replace(client: &Client, job: &Job) -> Result<()> {
    let api: Api<Job> = Api::namespaced(client.clone(), &job.namespace().unwrap_or_default());
    let name = job.name_any();
    if job.spec.as_ref().and_then(|s| s.suspend) != Some(true) {
        api.patch(&name, &PatchParams::default(), &Patch::Merge(json!({"spec": {"suspend": true}}))).await?;
        return Ok(());
    }
    let status = job.status.clone().unwrap_or_default();
    if status.conditions.as_ref().is_none_or(Vec::is_empty) {
        return Ok(()); // "wait for job controller sync before replace"
    }
    if status.active.unwrap_or(0) + status.terminating.unwrap_or(0) != 0 {
        return Ok(()); // "wait for pods to terminate before replace"
    }
    let dp = DeleteParams { propagation_policy: Some(PropagationPolicy::Background), ..Default::default() };
    match api.delete(&name, &dp).await {
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        other => other.map(|_| ()).map_err(Into::into),
    }
}

/// `OnRemove`: run `helm-delete-<name>`; drop the finalizer when it completed
/// (or at once when the namespace is terminating and no Job can be created).
async fn remove(client: &Client, hc: &DynamicObject, spec: &Spec, events: &mut Recorder) -> Result<()> {
    if !hc.finalizers().iter().any(|f| f == FINALIZER) {
        return Ok(());
    }
    let ns = hc.namespace().unwrap_or_default();
    let name = hc.name_any();
    let job_name = format!("helm-delete-{name}");
    let api: Api<Job> = Api::namespaced(client.clone(), &ns);
    match api.get_opt(&job_name).await? {
        Some(job) if job_ready(&job) => {
            resume(&api, &job).await?;
            events.normal(&Dynamic(hc), "ResumeJob", &format!("Resumed synced Job {ns}/{job_name}")).await;
            Ok(())
        }
        Some(job) if jobs::complete(&job) => {
            events
                .normal(
                    &Dynamic(hc),
                    "RemoveJob",
                    &format!("Uninstalled HelmChart using Job {ns}/{job_name}, removing resources"),
                )
                .await;
            let dp = DeleteParams { propagation_policy: Some(PropagationPolicy::Background), ..Default::default() };
            let _ = api.delete(&job_name, &dp).await;
            let _ = Api::<ServiceAccount>::namespaced(client.clone(), &ns)
                .delete(&format!("helm-{name}"), &DeleteParams::default())
                .await;
            set_finalizer(client, hc, false).await
        }
        Some(_) => Ok(()),
        None => {
            let mut job = job_body(hc, spec, true);
            let hash = config_hash(&job, &[]);
            job["spec"]["template"]["metadata"]["annotations"][CONFIG_HASH] = json!(hash);
            let body: Job = serde_json::from_value(job)?;
            match api.create(&PostParams::default(), &body).await {
                Err(kube::Error::Api(e)) if e.code == 403 && e.message.contains("being terminated") => {
                    // NamespaceTerminating: nothing can run here any more.
                    set_finalizer(client, hc, false).await
                }
                Err(e) => Err(e.into()),
                Ok(_) => {
                    events
                        .normal(
                            &Dynamic(hc),
                            "RemoveJob",
                            &format!("Uninstalling HelmChart using Job {ns}/{job_name} "),
                        )
                        .await;
                    let status = hc.data.get("status").and_then(|s| s.get("conditions")).cloned().unwrap_or(json!([]));
                    set_status(client, hc, &job_name, status).await
                }
            }
        }
    }
}

/// Writes `jobName` and the conditions when they differ (so writing them does
/// not wake us forever).
async fn set_status(client: &Client, hc: &DynamicObject, job_name: &str, conditions: Value) -> Result<()> {
    let status = json!({"jobName": job_name, "conditions": conditions});
    if hc.data.get("status") == Some(&status) {
        return Ok(());
    }
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &hc.namespace().unwrap_or_default(), &resource());
    api.patch_status(&hc.name_any(), &PatchParams::default(), &Patch::Merge(json!({"status": status}))).await?;
    Ok(())
}

/// Adds or removes helm-controller's finalizer.
pub async fn set_finalizer(client: &Client, hc: &DynamicObject, present: bool) -> Result<()> {
    let mut finalizers = hc.finalizers().to_vec();
    let has = finalizers.iter().any(|f| f == FINALIZER);
    if has == present {
        return Ok(());
    }
    if present {
        finalizers.push(FINALIZER.into());
    } else {
        finalizers.retain(|f| f != FINALIZER);
    }
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &hc.namespace().unwrap_or_default(), &resource());
    let patch = json!({"metadata": {"finalizers": finalizers, "resourceVersion": hc.resource_version()}});
    match api.patch(&hc.name_any(), &PatchParams::default(), &Patch::Merge(patch)).await {
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        other => other.map(|_| ()).map_err(Into::into),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chart() -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "helm.cattle.io/v1", "kind": "HelmChart",
            "metadata": {"name": "alpha", "namespace": "ns", "uid": "u1"},
            "spec": {"chart": "vcluster", "repo": "https://charts.loft.sh", "version": "0.30.0",
                     "targetNamespace": "ns", "valuesContent": "a: 1"},
        }))
        .unwrap()
    }

    #[test]
    fn job_is_named_placed_and_suspended_like_helm_controller() {
        let hc = chart();
        let spec = spec_of(&hc).unwrap();
        let job = job_body(&hc, &spec, false);
        assert_eq!(job["metadata"]["name"], "helm-install-alpha");
        assert_eq!(job["metadata"]["namespace"], "ns");
        assert_eq!(job["spec"]["suspend"], true);
        assert_eq!(job["spec"]["backoffLimit"], 1000);
        let pod = &job["spec"]["template"]["spec"];
        assert_eq!(pod["restartPolicy"], "OnFailure");
        assert_eq!(pod["containers"][0]["name"], "helm");
        assert_eq!(pod["containers"][0]["args"][0], "install");
        let env = pod["containers"][0]["env"].as_array().unwrap();
        let get = |k: &str| env.iter().find(|e| e["name"] == k).unwrap()["value"].clone();
        assert_eq!(get("CHART"), "alpha/vcluster");
        assert_eq!(get("FAILURE_POLICY"), "reinstall");
        assert_eq!(job_body(&hc, &spec, true)["metadata"]["name"], "helm-delete-alpha");
    }

    #[test]
    fn config_hash_follows_values_and_backoff_limit() {
        let hc = chart();
        let spec = spec_of(&hc).unwrap();
        let job = job_body(&hc, &spec, false);
        let h1 = config_hash(&job, &[("HelmChartValuesContent", "a: 1")]);
        assert!(h1.starts_with("SHA256=") && h1.len() == 7 + 64, "{h1}");
        assert_eq!(h1, h1.to_uppercase());
        assert_eq!(h1, config_hash(&job, &[("HelmChartValuesContent", "a: 1")]));
        assert_ne!(h1, config_hash(&job, &[("HelmChartValuesContent", "a: 2")]));
        let spec2 = Spec { back_off_limit: Some(3), ..spec };
        assert_ne!(h1, config_hash(&job_body(&hc, &spec2, false), &[("HelmChartValuesContent", "a: 1")]));
    }
}
