//! Helm's release records, where helm 3 keeps them: one Secret
//! `sh.helm.release.v1.<name>.v<revision>` of type `helm.sh/release.v1` per
//! revision in the release's namespace, labelled `name`, `owner: helm`, `status`
//! and `version` (helm `pkg/storage/driver/secrets.go`). The payload is plain JSON
//! here (helm gzips a protobuf-like JSON); only this simulator reads it.
//!
//! The vCluster part runs what the latest `deployed` revision holds, so a failed
//! upgrade leaves the running release alone, as with helm.

use std::collections::BTreeMap;

use anyhow::{Context, Result};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde::{Deserialize, Serialize};
use serde_json::json;

/// helm's release states that matter here.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    Deployed,
    Failed,
    Superseded,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Deployed => "deployed",
            Self::Failed => "failed",
            Self::Superseded => "superseded",
        }
    }
}

/// One revision of a release.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Record {
    pub name: String,
    pub namespace: String,
    pub revision: u32,
    pub status: Status,
    pub chart_version: String,
    /// The user-supplied values (valuesContent), as YAML text.
    pub values: String,
    pub description: String,
    /// klipper-helm passes `--labels helmcharts.helm.cattle.io/configHash=<hash>`.
    #[serde(default)]
    pub config_hash: String,
    /// The UID of the Secret holding this revision: a reinstall starts again at
    /// revision 1, so the number alone does not tell two installs apart.
    #[serde(skip)]
    pub uid: String,
}

const DATA_KEY: &str = "release";

fn secret_name(name: &str, revision: u32) -> String {
    format!("sh.helm.release.v1.{name}.v{revision}")
}

fn decode(s: &Secret) -> Option<Record> {
    let mut r: Record = serde_json::from_slice(&s.data.as_ref()?.get(DATA_KEY)?.0).ok()?;
    r.uid = s.uid().unwrap_or_default();
    Some(r)
}

/// Every revision of `name` in `namespace`, oldest first.
pub async fn history(client: &Client, namespace: &str, name: &str) -> Result<Vec<Record>> {
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let lp = ListParams::default().labels(&format!("owner=helm,name={name}"));
    let mut records: Vec<Record> = api.list(&lp).await?.items.iter().filter_map(decode).collect();
    records.sort_by_key(|r| r.revision);
    Ok(records)
}

/// The latest `deployed` revision of every release on the host, by (namespace, name).
pub async fn deployed(client: &Client) -> Result<BTreeMap<(String, String), Record>> {
    let api: Api<Secret> = Api::all(client.clone());
    let lp = ListParams::default().labels("owner=helm,status=deployed");
    let mut out: BTreeMap<(String, String), Record> = BTreeMap::new();
    for r in api.list(&lp).await?.items.iter().filter_map(decode) {
        let key = (r.namespace.clone(), r.name.clone());
        if out.get(&key).is_none_or(|cur| cur.revision < r.revision) {
            out.insert(key, r);
        }
    }
    Ok(out)
}

/// Stores a new revision; a successful one supersedes the previous `deployed`.
pub async fn record(client: &Client, rec: &Record) -> Result<()> {
    let api: Api<Secret> = Api::namespaced(client.clone(), &rec.namespace);
    if rec.status == Status::Deployed {
        for old in history(client, &rec.namespace, &rec.name).await? {
            if old.status == Status::Deployed {
                let mut old = old;
                old.status = Status::Superseded;
                api.patch(&secret_name(&old.name, old.revision), &PatchParams::default(), &Patch::Merge(body(&old)?))
                    .await?;
            }
        }
    }
    let secret: Secret = serde_json::from_value(body(rec)?)?;
    api.create(&PostParams::default(), &secret)
        .await
        .with_context(|| format!("storing release {} v{}", rec.name, rec.revision))?;
    Ok(())
}

fn body(rec: &Record) -> Result<serde_json::Value> {
    let data = ByteString(serde_json::to_vec(rec)?);
    Ok(json!({
        "metadata": {
            "name": secret_name(&rec.name, rec.revision),
            "namespace": rec.namespace,
            "labels": {
                "name": rec.name,
                "owner": "helm",
                "status": rec.status.as_str(),
                "version": rec.revision.to_string(),
                super::helm::CONFIG_HASH: rec.config_hash,
            },
        },
        "type": "helm.sh/release.v1",
        "data": {DATA_KEY: data},
    }))
}

/// Deletes every revision (`helm uninstall` without `--keep-history`).
pub async fn forget(client: &Client, namespace: &str, name: &str) -> Result<()> {
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let lp = ListParams::default().labels(&format!("owner=helm,name={name}"));
    for s in api.list(&lp).await?.items {
        match api.delete(&s.name_any(), &DeleteParams::default()).await {
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            other => {
                other?;
            }
        }
    }
    Ok(())
}
