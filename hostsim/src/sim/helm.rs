//! helm-controller with the vCluster chart: for each HelmChart of chart `vcluster`,
//! installs/upgrades/uninstalls the release's host objects and reports the outcome
//! in the HelmChart's status conditions, as k3s' helm-controller does.

use anyhow::Result;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::chart;

/// The finalizer helm-controller puts on every HelmChart.
pub const FINALIZER: &str = "wrangler.cattle.io/on-helm-chart-remove";

pub fn resource() -> ApiResource {
    ApiResource {
        group: "helm.cattle.io".into(),
        version: "v1".into(),
        api_version: "helm.cattle.io/v1".into(),
        kind: "HelmChart".into(),
        plural: "helmcharts".into(),
    }
}

#[derive(Deserialize, Default, Debug)]
#[serde(rename_all = "camelCase", default)]
pub struct Spec {
    pub chart: String,
    pub version: Option<String>,
    pub target_namespace: Option<String>,
    pub create_namespace: bool,
    pub values_content: Option<String>,
    pub values: Option<Value>,
    pub set: Option<Value>,
}

/// A release the chart rendered successfully.
pub struct Release {
    pub namespace: String,
    pub name: String,
    pub values: chart::Values,
    /// The spec this release was installed from.
    pub config_hash: String,
}

/// What one HelmChart asks for right now.
pub enum Outcome {
    /// Being deleted: its release must go.
    Uninstall {
        namespace: String,
        name: String,
    },
    Installed(Release),
    /// helm failed; the previous release (if any) stays as it was.
    Failed(String),
    /// Not a chart this simulator plays.
    Ignored,
}

pub fn target_namespace(hc: &DynamicObject, spec: &Spec) -> String {
    spec.target_namespace
        .clone()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| hc.namespace().unwrap_or_else(|| "default".into()))
}

pub fn spec_of(hc: &DynamicObject) -> Result<Spec, String> {
    let spec = hc.data.get("spec").cloned().unwrap_or(json!({}));
    serde_json::from_value(spec).map_err(|e| format!("invalid HelmChart spec: {e}"))
}

/// Installs or upgrades one HelmChart's release (the Service; the caller runs the
/// vCluster itself). Never panics: every failure becomes [`Outcome::Failed`].
///
/// Like helm-controller, it runs helm only when the HelmChart's spec changed since
/// the last successful run (`last_applied`, a [`config_hash`]): a Service someone
/// changed directly stays as they left it until the next values change.
pub async fn reconcile(client: &Client, hc: &DynamicObject, last_applied: Option<&str>) -> Outcome {
    let spec = match spec_of(hc) {
        Ok(s) => s,
        Err(e) => return Outcome::Failed(e),
    };
    let namespace = target_namespace(hc, &spec);
    let name = hc.name_any();
    if hc.metadata.deletion_timestamp.is_some() {
        return Outcome::Uninstall { namespace, name };
    }
    if !is_vcluster(&spec.chart) {
        return Outcome::Ignored;
    }
    if spec
        .set
        .as_ref()
        .is_some_and(|v| v.as_object().is_some_and(|m| !m.is_empty()))
        || spec
            .values
            .as_ref()
            .is_some_and(|v| v.as_object().is_some_and(|m| !m.is_empty()))
    {
        return Outcome::Failed(
            "hostsim simulates valuesContent only: spec.set and spec.values are not supported"
                .into(),
        );
    }
    let values = match chart::parse_values(spec.values_content.as_deref().unwrap_or("")) {
        Ok(v) => v,
        Err(e) => return Outcome::Failed(format!("Error: {e}")),
    };
    let release = Release {
        namespace,
        name,
        values,
        config_hash: config_hash(hc),
    };
    if last_applied == Some(release.config_hash.as_str()) {
        return Outcome::Installed(release);
    }
    let Release {
        namespace,
        name,
        values,
        config_hash,
    } = release;
    if let Err(e) = ensure_namespace(client, &namespace, spec.create_namespace).await {
        return Outcome::Failed(e);
    }
    let version = spec.version.clone().unwrap_or_else(|| "latest".into());
    let services: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &namespace, &service_resource());
    let applied = match chart::service(&name, &namespace, &version, &values) {
        // helm overwrites what others changed in chart-owned fields on upgrade.
        Some(body) => services
            .patch(
                &name,
                &PatchParams::apply("helm").force(),
                &Patch::Apply(&body),
            )
            .await
            .map(|_| ()),
        None => match services.delete(&name, &Default::default()).await {
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            other => other.map(|_| ()),
        },
    };
    if let Err(e) = applied {
        return Outcome::Failed(format!("Error: UPGRADE FAILED: {}", api_message(&e)));
    }
    Outcome::Installed(Release {
        namespace,
        name,
        values,
        config_hash,
    })
}

/// What helm-controller hashes into its Job: the HelmChart's spec.
pub fn config_hash(hc: &DynamicObject) -> String {
    hc.data
        .get("spec")
        .map(Value::to_string)
        .unwrap_or_default()
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

async fn ensure_namespace(client: &Client, ns: &str, create: bool) -> Result<(), String> {
    let api: Api<Namespace> = Api::all(client.clone());
    match api.get_opt(ns).await {
        Ok(Some(_)) => Ok(()),
        Ok(None) if create => {
            let body: Namespace = serde_json::from_value(json!({"metadata": {"name": ns}}))
                .map_err(|e| e.to_string())?;
            api.create(&PostParams::default(), &body)
                .await
                .map(|_| ())
                .map_err(|e| api_message(&e))
        }
        Ok(None) => Err(format!(
            "Error: create: failed to create: namespaces \"{ns}\" not found"
        )),
        Err(e) => Err(api_message(&e)),
    }
}

/// Status as helm-controller reports it: `jobName` and the JobCreated/Failed conditions.
pub fn status(name: &str, failure: Option<&str>) -> Value {
    let failed = match failure {
        Some(msg) => json!({"type": "Failed", "status": "True", "reason": "Error", "message": msg}),
        None => json!({"type": "Failed", "status": "False", "reason": "", "message": ""}),
    };
    json!({
        "jobName": format!("helm-install-{name}"),
        "conditions": [
            {"type": "JobCreated", "status": "True", "reason": "Job created",
             "message": format!("Applying HelmChart using Job helm-install-{name}")},
            failed,
        ],
    })
}

/// Writes the status when it differs (so writing it does not wake us forever).
pub async fn set_status(client: &Client, hc: &DynamicObject, status: Value) -> Result<()> {
    if hc.data.get("status") == Some(&status) {
        return Ok(());
    }
    let api: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        &hc.namespace().unwrap_or_default(),
        &resource(),
    );
    api.patch_status(
        &hc.name_any(),
        &PatchParams::default(),
        &Patch::Merge(json!({"status": status})),
    )
    .await?;
    Ok(())
}

/// Adds or removes our finalizer.
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
    let api: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        &hc.namespace().unwrap_or_default(),
        &resource(),
    );
    let patch =
        json!({"metadata": {"finalizers": finalizers, "resourceVersion": hc.resource_version()}});
    api.patch(
        &hc.name_any(),
        &PatchParams::default(),
        &Patch::Merge(patch),
    )
    .await?;
    Ok(())
}
