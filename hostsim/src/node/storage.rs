//! k3s' `local-path` storage, mirrored from rancher/local-path-provisioner
//! (`provisioner.go`, v0.0.3x, which k3s bundles; its helper pods need a container
//! runtime, so it does not run here): the default StorageClass `local-path`
//! (`WaitForFirstConsumer`, `Delete`), and for each claim that the PV binder
//! controller hands to `rancher.io/local-path` once the scheduler picked a node
//! (`volume.kubernetes.io/storage-provisioner` + `volume.kubernetes.io/selected-node`),
//! a hostPath PersistentVolume `pvc-<claim uid>` pinned to that node, which the
//! real PV binder controller then binds. Released volumes are deleted.

use anyhow::Result;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::json;

pub const PROVISIONER: &str = "rancher.io/local-path";
pub const CLASS: &str = "local-path";
const STORAGE_ROOT: &str = "/var/lib/rancher/k3s/storage";

/// The StorageClass k3s installs from its `local-storage.yaml` manifest.
pub async fn ensure_class(client: &Client) -> Result<()> {
    let api: Api<StorageClass> = Api::all(client.clone());
    let body = json!({
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
        "metadata": {"name": CLASS, "annotations": {
            "storageclass.kubernetes.io/is-default-class": "true",
            "objectset.rio.cattle.io/id": "",
        }},
        "provisioner": PROVISIONER,
        "volumeBindingMode": "WaitForFirstConsumer",
        "reclaimPolicy": "Delete",
    });
    api.patch(CLASS, &PatchParams::apply("k3s-deploy"), &Patch::Apply(&body)).await?;
    Ok(())
}

/// One pass: provision what waits for us, delete what was released.
pub async fn sync(client: &Client) -> Result<()> {
    let claims: Api<PersistentVolumeClaim> = Api::all(client.clone());
    let volumes: Api<PersistentVolume> = Api::all(client.clone());
    let existing = volumes.list(&ListParams::default()).await?.items;
    for pvc in claims.list(&ListParams::default()).await?.items {
        let a = pvc.annotations();
        let ours = a.get("volume.kubernetes.io/storage-provisioner").map(String::as_str) == Some(PROVISIONER)
            || a.get("volume.beta.kubernetes.io/storage-provisioner").map(String::as_str) == Some(PROVISIONER);
        let Some(node) = a.get("volume.kubernetes.io/selected-node") else { continue };
        let bound = pvc.spec.as_ref().and_then(|s| s.volume_name.as_ref()).is_some_and(|v| !v.is_empty());
        if !ours || bound || pvc.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let uid = pvc.uid().unwrap_or_default();
        let pv_name = format!("pvc-{uid}");
        if existing.iter().any(|v| v.name_any() == pv_name) {
            continue;
        }
        let ns = pvc.namespace().unwrap_or_default();
        let spec = pvc.spec.clone().unwrap_or_default();
        let size = spec
            .resources
            .as_ref()
            .and_then(|r| r.requests.as_ref())
            .and_then(|r| r.get("storage"))
            .map(|q| q.0.clone())
            .unwrap_or_else(|| "1Gi".into());
        let body: PersistentVolume = serde_json::from_value(json!({
            "metadata": {"name": pv_name, "annotations": {
                "pv.kubernetes.io/provisioned-by": PROVISIONER,
                "local.path.provisioner/selected-node": node,
            }},
            "spec": {
                "capacity": {"storage": size},
                "accessModes": spec.access_modes.clone().unwrap_or_else(|| vec!["ReadWriteOnce".into()]),
                "persistentVolumeReclaimPolicy": "Delete",
                "storageClassName": spec.storage_class_name.clone().unwrap_or_else(|| CLASS.into()),
                "volumeMode": "Filesystem",
                "hostPath": {"path": format!("{STORAGE_ROOT}/{pv_name}_{ns}_{}", pvc.name_any()), "type": "DirectoryOrCreate"},
                "claimRef": {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "namespace": ns,
                             "name": pvc.name_any(), "uid": uid},
                "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}]}},
            },
        }))?;
        match volumes.create(&PostParams::default(), &body).await {
            Ok(_) => tracing::info!(claim = %format!("{ns}/{}", pvc.name_any()), %node, "local-path: provisioned"),
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => tracing::warn!(error = %e, "local-path: provisioning"),
        }
    }
    for pv in existing {
        let released = pv.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Released");
        let ours = pv.annotations().get("pv.kubernetes.io/provisioned-by").map(String::as_str) == Some(PROVISIONER);
        let delete = pv.spec.as_ref().and_then(|s| s.persistent_volume_reclaim_policy.as_deref()) == Some("Delete");
        if released && ours && delete && pv.metadata.deletion_timestamp.is_none() {
            let _ = volumes.delete(&pv.name_any(), &DeleteParams::default()).await;
        }
    }
    Ok(())
}
