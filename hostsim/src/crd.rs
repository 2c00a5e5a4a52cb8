//! Registers the CRDs the simulated components bring (`crds/`): helm-controller's
//! HelmChart (the project's copy) and MetalLB's IPAddressPool and L2Advertisement
//! (derived from MetalLB v0.16.1), and waits until the API server serves them.

use std::time::Duration;

use anyhow::{Context, Result, bail};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, Patch, PatchParams};

pub const HELMCHART_CRD_YAML: &str = include_str!("../crds/helm.cattle.io_helmcharts.yaml");
pub const METALLB_CRDS_YAML: [&str; 2] =
    [include_str!("../crds/metallb.io_ipaddresspools.yaml"), include_str!("../crds/metallb.io_l2advertisements.yaml")];

/// Every CRD of the simulated host.
pub async fn register_all(client: &Client) -> Result<()> {
    register(client, HELMCHART_CRD_YAML).await?;
    for yaml in METALLB_CRDS_YAML {
        register(client, yaml).await?;
    }
    Ok(())
}

async fn register(client: &Client, yaml: &str) -> Result<()> {
    let crd: CustomResourceDefinition = serde_yaml::from_str(yaml).context("parsing a CRD")?;
    let name = crd.metadata.name.clone().context("CRD has no name")?;
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    api.patch(&name, &PatchParams::apply("hostsim").force(), &Patch::Apply(&crd))
        .await
        .with_context(|| format!("applying the CRD {name}"))?;
    for _ in 0..100 {
        let established = api
            .get(&name)
            .await?
            .status
            .and_then(|s| s.conditions)
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Established" && c.status == "True"));
        if established {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    bail!("CRD {name} not established after 10 s")
}
