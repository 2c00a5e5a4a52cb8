//! Writes to the host: the cluster's namespace and HelmChart (server-side apply,
//! field manager `kubebyon`, rendered by [`super::render`]), and the uninstall:
//! HelmChart deleted and its finalizer awaited (helm-controller runs
//! `helm-delete-<name>`), then the namespace. NotFound on cleanup is success.

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams};
use kube::{Client, ResourceExt};

use super::error::{Error, Result, ignore_not_found, kube};
use super::render::{self, AddressRequest};
use crate::domain::SystemSettings;
use crate::domain::cluster::Cluster;

pub const FIELD_MANAGER: &str = "kubebyon";
/// The generation of the spec a HelmChart was rendered from.
pub const GENERATION_ANNOTATION: &str = "kubebyon.io/generation";

/// helm-controller's `helm.cattle.io/v1` HelmChart.
pub fn charts_resource() -> kube::api::ApiResource {
    kube::api::ApiResource {
        group: "helm.cattle.io".into(),
        version: "v1".into(),
        api_version: "helm.cattle.io/v1".into(),
        kind: "HelmChart".into(),
        plural: "helmcharts".into(),
    }
}

pub fn helm_charts(client: &Client, ns: &str) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), ns, &charts_resource())
}

/// What an apply changed.
#[derive(Debug, PartialEq, Eq)]
pub struct Applied {
    /// The HelmChart's spec changed (helm-controller will run a new Job).
    pub changed: bool,
    /// The spec as applied.
    pub spec: serde_json::Value,
}

/// Applies the namespace and the HelmChart for the cluster's current spec.
/// `cached` is the HelmChart as the watch cache holds it (else it is read);
/// while it exists, so does its namespace, which is then not applied again.
pub async fn apply(
    client: &Client,
    cluster: &Cluster,
    settings: &SystemSettings,
    request: AddressRequest,
    cached: Option<Option<DynamicObject>>,
) -> Result<Applied> {
    let name = cluster.spec.name.as_str();
    let ns = render::namespace(name);
    let pp = PatchParams::apply(FIELD_MANAGER).force();
    let api = helm_charts(client, &ns);
    let before = match cached {
        Some(c) => c,
        None => ignore_not_found(api.get(name).await).map_err(kube("read HelmChart"))?,
    };
    if before.is_none() {
        Api::<Namespace>::all(client.clone())
            .patch(&ns, &pp, &Patch::Apply(render::namespace_object(cluster.id, name)))
            .await
            .map_err(kube("apply namespace"))?;
    }
    let mut body = render::desired(cluster, settings, request);
    body["metadata"]["annotations"] = serde_json::json!({GENERATION_ANNOTATION: cluster.generation.to_string()});
    let after = api.patch(name, &pp, &Patch::Apply(&body)).await.map_err(kube("apply HelmChart"))?;
    let changed = before.is_none_or(|b| b.data.get("spec") != after.data.get("spec"));
    Ok(Applied { changed, spec: body["spec"].clone() })
}

/// One step of the uninstall; `Err(NotYet)` while helm-controller or the
/// namespace controller are still at work.
pub async fn uninstall(client: &Client, cluster: &Cluster) -> Result<()> {
    let name = cluster.spec.name.as_str();
    let ns = render::namespace(name);
    let charts = helm_charts(client, &ns);
    if let Some(hc) = ignore_not_found(charts.get(name).await).map_err(kube("read HelmChart"))? {
        if hc.metadata.deletion_timestamp.is_none() {
            ignore_not_found(charts.delete(name, &DeleteParams::default()).await).map_err(kube("delete HelmChart"))?;
        }
        return Err(Error::NotYet("helm-controller is uninstalling the release"));
    }
    let namespaces: Api<Namespace> = Api::all(client.clone());
    if let Some(n) = ignore_not_found(namespaces.get(&ns).await).map_err(kube("read namespace"))? {
        // Only a namespace the console made for this cluster.
        let ours = n.labels().get(render::CLUSTER_ID_LABEL) == Some(&cluster.id.to_string());
        if !ours {
            return Ok(());
        }
        if n.metadata.deletion_timestamp.is_none() {
            ignore_not_found(namespaces.delete(&ns, &DeleteParams::default()).await)
                .map_err(kube("delete namespace"))?;
        }
        return Err(Error::NotYet("the namespace is being deleted"));
    }
    Ok(())
}
