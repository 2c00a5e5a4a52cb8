//! What integration tests reach that is not otherwise the crate's public
//! surface (the binary's and the tests' needs: see `lib.rs`). Test helpers
//! live here, not in production modules.

use anyhow::Result;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ListParams};
use kube::{Client, ResourceExt};

use crate::domain::render::MANAGED_BY;
pub use crate::server::controllers::reconciler::apply::{charts_resource, helm_charts};

/// The namespaces of the console's clusters, by the label it puts on them.
pub async fn managed_namespaces(client: &Client) -> Result<Vec<String>> {
    let lp = ListParams::default().labels(&format!("{}={}", MANAGED_BY.0, MANAGED_BY.1));
    let list = Api::<Namespace>::all(client.clone()).list(&lp).await?;
    Ok(list.items.iter().map(ResourceExt::name_any).collect())
}

/// One reconciler pass (the queue, then the observer; `full`: every cluster
/// looked at on the host), as the loop runs it.
pub async fn reconcile_pass(ctx: &crate::server::controllers::reconciler::Context, full: bool) -> Result<()> {
    crate::server::controllers::reconciler::pass(ctx, full).await.map_err(|e| anyhow::anyhow!("{e}"))
}
