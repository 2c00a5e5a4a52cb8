//! The console's objects on the host as every part of the console names
//! them: the kinds it writes (helm-controller's HelmChart, Gateway API's
//! Gateway and TLSRoute), its field manager and annotations, and who owns
//! an object ([`Owner`]: this installation, this cluster).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Client;
use kube::api::{Api, DynamicObject};

use crate::domain::gateway::RouteVersion;
use crate::domain::render::{CLUSTER_ID_LABEL, INSTALLATION_LABEL, MANAGED_BY};
use crate::server::db::clusters::HostRecord;

/// The field manager of every server-side apply of the console.
pub(crate) const FIELD_MANAGER: &str = "kubebyon";
/// The console's annotations on the HelmChart all start so (the watch cache keeps only these).
pub(crate) const ANNOTATION_PREFIX: &str = "kubebyon.io/";
/// The generation of the spec a HelmChart was rendered from.
pub(crate) const GENERATION_ANNOTATION: &str = "kubebyon.io/generation";
/// On the HelmChart: whether the namespace's NetworkPolicy was last made
/// (`on`) or removed (`off`), so a change of the admin's setting reaches it.
pub(crate) const NETWORK_POLICY_ANNOTATION: &str = "kubebyon.io/network-policy";
/// On the HelmChart: whether the cluster's `TLSRoute` was last made (`on`)
/// or not (`off`), so leaving gateway mode deletes it, and no other apply
/// spends a call looking for one.
pub(crate) const ROUTE_ANNOTATION: &str = "kubebyon.io/route";

/// Gateway API's `TLSRoute` in the version the host serves.
pub(crate) fn routes_resource(version: RouteVersion) -> kube::api::ApiResource {
    kube::api::ApiResource {
        group: crate::domain::gateway::GROUP.into(),
        version: version.as_str().into(),
        api_version: version.api_version(),
        kind: "TLSRoute".into(),
        plural: "tlsroutes".into(),
    }
}

/// Gateway API's `Gateway` (v1: GA since Gateway API 1.0).
pub(crate) fn gateways_resource() -> kube::api::ApiResource {
    kube::api::ApiResource {
        group: crate::domain::gateway::GROUP.into(),
        version: "v1".into(),
        api_version: format!("{}/v1", crate::domain::gateway::GROUP),
        kind: "Gateway".into(),
        plural: "gateways".into(),
    }
}

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

/// Who the console is on the host for one cluster: its installation id, the
/// cluster's id, and what the database remembers of the cluster's objects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Owner {
    pub installation: String,
    pub cluster_id: i64,
    pub record: HostRecord,
}

impl Owner {
    fn label<'a>(meta: &'a ObjectMeta, key: &str) -> Option<&'a str> {
        meta.labels.as_ref()?.get(key).map(String::as_str)
    }

    /// Created by this console for this cluster: both labels that only its
    /// create writes; or, for a cluster applied before the console labelled
    /// its creations (`adopt_legacy`), the old labels without any installation.
    pub(crate) fn created(&self, meta: &ObjectMeta) -> bool {
        let id = self.cluster_id.to_string();
        let cluster = Self::label(meta, CLUSTER_ID_LABEL) == Some(id.as_str());
        match Self::label(meta, INSTALLATION_LABEL) {
            Some(installation) => cluster && installation == self.installation,
            None => cluster && self.record.adopt_legacy && Self::label(meta, MANAGED_BY.0) == Some(MANAGED_BY.1),
        }
    }

    /// The namespace this cluster's objects live in: the one whose UID the
    /// console stored, or one it created and had not stored yet.
    pub(crate) fn owns_namespace(&self, meta: &ObjectMeta) -> bool {
        let stored = self.record.namespace_uid.is_some() && meta.uid == self.record.namespace_uid;
        stored || self.created(meta)
    }
}
