//! Registers the project's own copy of the HelmChart CRD (`crds/`) and waits until
//! the API server serves it.

use std::time::Duration;

use anyhow::{Context, Result, bail};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, Patch, PatchParams};

pub const HELMCHART_CRD_YAML: &str = include_str!("../crds/helm.cattle.io_helmcharts.yaml");

pub async fn register_helmchart(client: &Client) -> Result<()> {
    let crd: CustomResourceDefinition =
        serde_yaml::from_str(HELMCHART_CRD_YAML).context("parsing the HelmChart CRD")?;
    let name = crd.metadata.name.clone().context("CRD has no name")?;
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    api.patch(
        &name,
        &PatchParams::apply("hostsim").force(),
        &Patch::Apply(&crd),
    )
    .await
    .context("applying the HelmChart CRD")?;
    for _ in 0..100 {
        let established = api
            .get(&name)
            .await?
            .status
            .and_then(|s| s.conditions)
            .is_some_and(|c| {
                c.iter()
                    .any(|c| c.type_ == "Established" && c.status == "True")
            });
        if established {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    bail!("CRD {name} not established after 10 s")
}
