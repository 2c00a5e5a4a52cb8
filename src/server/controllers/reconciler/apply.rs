//! Writes to the host: the cluster's namespace and HelmChart, and the
//! uninstall. The console touches only what it created:
//!
//! - the namespace and the HelmChart are made with a plain create, labelled
//!   with this console's installation id and the cluster's id
//!   ([`render::INSTALLATION_LABEL`], [`render::CLUSTER_ID_LABEL`]); an object
//!   already there without them is never modified or deleted: the cluster
//!   fails with `namespace_taken` naming it ([`Error::Taken`]);
//! - the namespace's UID is stored; the uninstall deletes the HelmChart, waits
//!   for its finalizer (helm-controller runs `helm-delete-<name>`), then the
//!   namespace, each with its UID as a precondition (a label can be copied);
//! - a HelmChart of ours is then updated with server-side apply (field manager
//!   `kubebyon`, rendered by [`crate::domain::render`]).
//!
//! A namespace of the same name still terminating is waited for, not failed.

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams, Preconditions};
use kube::{Client, ResourceExt};
use std::collections::BTreeSet;

use crate::domain::cluster::Cluster;
use crate::domain::gateway::RouteVersion;
use crate::domain::host_objects;
use crate::domain::names::SecretRef;
use crate::domain::render::{self, AddressRequest, FailurePolicy, INSTALLATION_LABEL};
use crate::domain::settings::PodSecurity;
use crate::domain::{PublicAccess, SystemSettings};
use crate::server::host::error::{Error, Result, ignore_not_found, kube};
use crate::server::host::objects::{
    FIELD_MANAGER, GENERATION_ANNOTATION, NETWORK_POLICY_ANNOTATION, Owner, ROUTE_ANNOTATION, helm_charts,
    routes_resource,
};

/// The `TLSRoute` this cluster should have: gateway mode, the admin's
/// Gateway named, and `TLSRoute` served (else none can be made; the status says why).
pub(crate) fn wanted_route(
    cluster: &Cluster,
    settings: &SystemSettings,
    version: Option<RouteVersion>,
    installation: &str,
) -> Option<serde_json::Value> {
    let PublicAccess::Gateway { host } = &cluster.spec.public_access else { return None };
    let (gateway, version) = (settings.gateway.as_ref()?, version?);
    Some(render::tls_route(cluster.id, installation, cluster.spec.name.as_str(), host, gateway, version))
}

/// Whether `have` carries everything `want` says: every key of an object
/// (others may be there: the API server's defaults, e.g. a backend's
/// `weight: 1`), arrays of the same length item by item, scalars equal.
pub(crate) fn carries(have: &serde_json::Value, want: &serde_json::Value) -> bool {
    use serde_json::Value;
    match (have, want) {
        (Value::Object(h), Value::Object(w)) => w.iter().all(|(k, v)| h.get(k).is_some_and(|hv| carries(hv, v))),
        (Value::Array(h), Value::Array(w)) => h.len() == w.len() && h.iter().zip(w).all(|(a, b)| carries(a, b)),
        _ => have == want,
    }
}

/// Makes the cluster's `TLSRoute` what `wanted` says: created, applied
/// (server-side, forced, when it differs), or deleted by UID. One of that
/// name the console did not create is never touched: [`Error::Taken`]
/// while the cluster wants it, left alone otherwise.
pub(crate) async fn ensure_route(
    client: &Client,
    cluster: &Cluster,
    owner: &Owner,
    wanted: Option<serde_json::Value>,
    version: Option<RouteVersion>,
) -> Result<()> {
    let Some(version) = version else { return Ok(()) };
    let name = cluster.spec.name.as_str();
    let ns = host_objects::namespace(name);
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &routes_resource(version));
    let current = ignore_not_found(api.get(name).await).map_err(kube("read TLSRoute"))?;
    match (current, wanted) {
        (None, Some(body)) => {
            let route: DynamicObject =
                serde_json::from_value(body).map_err(|_| Error::NotYet("rendering the TLSRoute"))?;
            match api.create(&create_params(), &route).await {
                Ok(_) => Ok(()),
                Err(kube::Error::Api(s)) if s.code == 409 => Err(Error::NotYet("the TLSRoute was created meanwhile")),
                Err(e) => Err(kube("create TLSRoute")(e)),
            }
        }
        (Some(r), Some(_)) if !owner.created(&r.metadata) => Err(Error::Taken(format!("TLSRoute {ns}/{name}"))),
        (Some(r), Some(mut body)) => {
            if !carries(&r.data["spec"], &body["spec"]) {
                body["metadata"]["uid"] = r.uid().unwrap_or_default().into();
                let pp = PatchParams::apply(FIELD_MANAGER).force();
                api.patch(name, &pp, &Patch::Apply(&body)).await.map_err(kube("apply TLSRoute"))?;
            }
            Ok(())
        }
        (Some(r), None) if owner.created(&r.metadata) => {
            ignore_not_found(api.delete(name, &delete_if_uid(r.uid())).await).map_err(kube("delete TLSRoute"))?;
            Ok(())
        }
        _ => Ok(()),
    }
}

/// What an apply changed.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Applied {
    /// The HelmChart's spec changed (helm-controller will run a new Job).
    pub changed: bool,
    /// The NetworkPolicy was looked at (created, applied or deleted).
    pub policy_applied: bool,
    /// The spec as applied.
    pub spec: serde_json::Value,
    /// The namespace's UID, when it was created or checked in this apply.
    pub namespace_uid: Option<String>,
    /// The HelmChart's UID.
    pub chart_uid: Option<String>,
}

fn create_params() -> PostParams {
    PostParams { field_manager: Some(FIELD_MANAGER.into()), ..PostParams::default() }
}

fn delete_if_uid(uid: Option<String>) -> DeleteParams {
    DeleteParams { preconditions: Some(Preconditions { uid, resource_version: None }), ..DeleteParams::default() }
}

/// The cluster's namespace, created if missing; its UID. One of another
/// owner is [`Error::Taken`]; one still terminating is waited for.
async fn ensure_namespace(client: &Client, ns: &str, owner: &Owner, pod_security: PodSecurity) -> Result<String> {
    let api: Api<Namespace> = Api::all(client.clone());
    match api.get_opt(ns).await.map_err(kube("read namespace"))? {
        Some(n) if n.metadata.deletion_timestamp.is_some() => {
            Err(Error::NotYet("a namespace of this name is still being deleted"))
        }
        Some(n) if owner.owns_namespace(&n.metadata) => Ok(n.uid().unwrap_or_default()),
        Some(_) => Err(Error::Taken(format!("namespace {ns}"))),
        None => {
            let body = render::namespace_object(owner.cluster_id, &owner.installation, ns, pod_security);
            let body: Namespace = serde_json::from_value(body).map_err(|_| Error::NotYet("rendering the namespace"))?;
            match api.create(&create_params(), &body).await {
                Ok(n) => Ok(n.uid().unwrap_or_default()),
                // Made meanwhile (by us on another replica, or by someone
                // else): the next attempt reads whose it is.
                Err(kube::Error::Api(s)) if s.code == 409 => Err(Error::NotYet("the namespace was created meanwhile")),
                Err(e) => Err(kube("create namespace")(e)),
            }
        }
    }
}

/// The value of [`NETWORK_POLICY_ANNOTATION`] the admin's settings ask for
/// (for a cluster with its own nodes, a policy that also opens konnectivity;
/// with extra egress, its digest: a policy made before either is applied again).
pub(crate) fn network_policy_switch(settings: &SystemSettings, own_nodes: bool) -> String {
    let base = match (settings.network_policy, own_nodes) {
        (false, _) => return "off".to_owned(),
        (true, false) => "on",
        (true, true) => "on-konnectivity",
    };
    match settings.extra_egress.digest() {
        d if d.is_empty() => base.to_owned(),
        d => format!("{base}+egress-{d}"),
    }
}

/// The console's NetworkPolicy in the cluster's namespace: created, or kept
/// as rendered, while the admin's setting is on; deleted (by UID) when off.
/// One of that name the console did not create is left alone.
pub(crate) async fn ensure_network_policy(
    client: &Client,
    ns: &str,
    owner: &Owner,
    settings: &SystemSettings,
    own_nodes: bool,
    helm_egress: &BTreeSet<u16>,
) -> Result<()> {
    let api: Api<NetworkPolicy> = Api::namespaced(client.clone(), ns);
    let name = render::NETWORK_POLICY;
    let wanted = settings.network_policy;
    let current = api.get_opt(name).await.map_err(kube("read NetworkPolicy"))?;
    let extra = &settings.extra_egress;
    let mut body =
        render::network_policy_object(owner.cluster_id, &owner.installation, ns, own_nodes, helm_egress, extra);
    match current {
        None if wanted => {
            let np: NetworkPolicy =
                serde_json::from_value(body).map_err(|_| Error::NotYet("rendering the NetworkPolicy"))?;
            match api.create(&create_params(), &np).await {
                Ok(_) => Ok(()),
                Err(kube::Error::Api(s)) if s.code == 409 => {
                    Err(Error::NotYet("the NetworkPolicy was created meanwhile"))
                }
                Err(e) => Err(kube("create NetworkPolicy")(e)),
            }
        }
        Some(np) if owner.created(&np.metadata) && wanted => {
            body["metadata"]["uid"] = np.uid().unwrap_or_default().into();
            let pp = PatchParams::apply(FIELD_MANAGER).force();
            api.patch(name, &pp, &Patch::Apply(&body)).await.map_err(kube("apply NetworkPolicy"))?;
            Ok(())
        }
        Some(np) if owner.created(&np.metadata) => {
            ignore_not_found(api.delete(name, &delete_if_uid(np.uid())).await).map_err(kube("delete NetworkPolicy"))?;
            Ok(())
        }
        _ => Ok(()),
    }
}

/// `get` on the platform key's Secret for an own-nodes cluster's control
/// plane: the Role (applied: it follows the admin's key name) and the
/// cluster's RoleBinding (created once), both in the operator's key
/// namespace. A binding of that name the console did not create is
/// [`Error::Taken`].
async fn ensure_platform_key_grant(client: &Client, name: &str, key: &SecretRef, owner: &Owner) -> Result<()> {
    let pp = PatchParams::apply(FIELD_MANAGER).force();
    let role = render::platform_key_role(key, &owner.installation);
    Api::<Role>::namespaced(client.clone(), &key.namespace)
        .patch(render::PLATFORM_KEY_ROLE, &pp, &Patch::Apply(&role))
        .await
        .map_err(kube("apply the platform key's Role"))?;
    let bindings: Api<RoleBinding> = Api::namespaced(client.clone(), &key.namespace);
    let binding = render::platform_key_binding(owner.cluster_id, &owner.installation, name, key);
    let binding_name = host_objects::namespace(name);
    match bindings.get_opt(&binding_name).await.map_err(kube("read the platform key's RoleBinding"))? {
        Some(b) if owner.created(&b.metadata) => Ok(()),
        Some(_) => Err(Error::Taken(format!("RoleBinding {}/{binding_name}", key.namespace))),
        None => {
            let body: RoleBinding =
                serde_json::from_value(binding).map_err(|_| Error::NotYet("rendering the RoleBinding"))?;
            match bindings.create(&create_params(), &body).await {
                Ok(_) => Ok(()),
                Err(kube::Error::Api(s)) if s.code == 409 => {
                    Err(Error::NotYet("the platform key's RoleBinding was created meanwhile"))
                }
                Err(e) => Err(kube("create the platform key's RoleBinding")(e)),
            }
        }
    }
}

/// The cluster's RoleBinding to the platform key in `key_namespace`, deleted
/// (by UID) when it is the console's: the last step of an own-nodes uninstall.
async fn remove_platform_key_grant(client: &Client, name: &str, key_namespace: &str, owner: &Owner) -> Result<()> {
    let bindings: Api<RoleBinding> = Api::namespaced(client.clone(), key_namespace);
    let binding_name = host_objects::namespace(name);
    if let Some(b) = bindings.get_opt(&binding_name).await.map_err(kube("read the platform key's RoleBinding"))?
        && owner.created(&b.metadata)
    {
        ignore_not_found(bindings.delete(&binding_name, &delete_if_uid(b.uid())).await)
            .map_err(kube("delete the platform key's RoleBinding"))?;
    }
    Ok(())
}

/// What the console found out about the host that an apply renders from.
#[derive(Clone, Copy)]
pub(crate) struct HostFacts<'a> {
    /// How the LoadBalancer provider is asked for an address.
    pub request: AddressRequest,
    /// The `TLSRoute` version the host serves.
    pub route_version: Option<RouteVersion>,
    /// The ports helm's Jobs leave by besides 443/6443 (their proxies').
    pub helm_egress: &'a BTreeSet<u16>,
    /// The `failurePolicy` the host's helm-controller accepts.
    pub policy: FailurePolicy,
}

/// Creates or updates the namespace and the HelmChart for the cluster's
/// current spec. `cached` is the HelmChart as the watch cache holds it (else
/// it is read). While a HelmChart of ours exists in the namespace whose UID
/// is stored, the namespace is not read again.
pub(crate) async fn apply(
    client: &Client,
    cluster: &Cluster,
    settings: &SystemSettings,
    cached: Option<Option<DynamicObject>>,
    owner: &Owner,
    host: &HostFacts<'_>,
) -> Result<Applied> {
    let HostFacts { request, route_version, helm_egress, policy } = *host;
    let name = cluster.spec.name.as_str();
    let ns = host_objects::namespace(name);
    let api = helm_charts(client, &ns);
    let before = match cached {
        Some(c) => c,
        None => ignore_not_found(api.get(name).await).map_err(kube("read HelmChart"))?,
    };
    let ours = before.as_ref().map(|b| owner.created(&b.metadata));
    let namespace_uid = match (&owner.record.namespace_uid, ours) {
        (Some(_), Some(true)) => None,
        _ => Some(ensure_namespace(client, &ns, owner, settings.pod_security).await?),
    };
    // The NetworkPolicy is looked at when the namespace was, and when the
    // admin's setting changed since the HelmChart was last applied.
    let switch = network_policy_switch(settings, cluster.spec.own_nodes);
    let last_switch = before.as_ref().and_then(|b| b.annotations().get(NETWORK_POLICY_ANNOTATION).cloned());
    let policy_applied = namespace_uid.is_some() || last_switch.as_deref() != Some(switch.as_str());
    if policy_applied {
        ensure_network_policy(client, &ns, owner, settings, cluster.spec.own_nodes, helm_egress).await?;
    }
    // The route is looked at when the cluster wants one or last had one.
    let route = wanted_route(cluster, settings, route_version, &owner.installation);
    let route_switch = if route.is_some() { "on" } else { "off" };
    let last_route = before.as_ref().and_then(|b| b.annotations().get(ROUTE_ANNOTATION).cloned());
    if route.is_some() || last_route.as_deref() == Some("on") {
        ensure_route(client, cluster, owner, route, route_version).await?;
    }
    // Before the chart: its control plane reads the key as it starts.
    if let Some(key) = render::platform_key(&cluster.spec, settings) {
        ensure_platform_key_grant(client, name, key, owner).await?;
    }
    let mut body = render::desired(cluster, settings, request, policy);
    body["metadata"]["labels"][INSTALLATION_LABEL] = owner.installation.clone().into();
    body["metadata"]["annotations"] = serde_json::json!({
        GENERATION_ANNOTATION: cluster.generation.to_string(),
        NETWORK_POLICY_ANNOTATION: switch,
        ROUTE_ANNOTATION: route_switch,
    });
    let after = match &before {
        None => {
            let chart: DynamicObject =
                serde_json::from_value(body.clone()).map_err(|_| Error::NotYet("rendering the HelmChart"))?;
            match api.create(&create_params(), &chart).await {
                Ok(c) => c,
                Err(kube::Error::Api(s)) if s.code == 409 => {
                    return Err(Error::NotYet("the HelmChart was created meanwhile"));
                }
                Err(e) => return Err(kube("create HelmChart")(e)),
            }
        }
        Some(b) if owner.created(&b.metadata) => {
            // Ours: kept ours by UID (the API server refuses another's).
            body["metadata"]["uid"] = b.uid().unwrap_or_default().into();
            let pp = PatchParams::apply(FIELD_MANAGER).force();
            api.patch(name, &pp, &Patch::Apply(&body)).await.map_err(kube("apply HelmChart"))?
        }
        Some(_) => return Err(Error::Taken(format!("HelmChart {ns}/{name}"))),
    };
    let changed = before.is_none_or(|b| super::gather::spec_digest(&b) != super::gather::spec_digest(&after));
    Ok(Applied { changed, policy_applied, spec: body["spec"].clone(), namespace_uid, chart_uid: after.uid() })
}

/// What [`clear_stale_failure`] did to a release record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cleared {
    /// Revision 1 (a failed first install) deleted: the Job's next run installs.
    Deleted,
    /// A later revision marked `pending-upgrade`: the Job's next run resets
    /// it to `failed` and upgrades with the chart's current values.
    PendingUpgrade,
}

/// On a host whose helm-controller takes `abort` (before v0.17.6): the
/// install Job made for the chart's current values found the release failed
/// at `revision` and stops there, "waiting for operator intervention"
/// (klipper-helm `entry`: v0.9.18-build20260428 lines 67-81, v0.13.3-build20260727
/// lines 68-75). When that record's values or chart version are not the
/// chart's `spec` (a spec corrected since: `domain::helm::stale_failure`),
/// the console is that operator: revision 1 (a failed first install) is
/// deleted, so the next run installs (the no-release branch comes before the
/// revision check, v0.9.18 lines 27-31); a later one is marked
/// `pending-upgrade`, what helm leaves when interrupted, so the next run sets
/// it `failed` and upgrades with the current values (v0.9.18 lines 36-49,
/// v0.13.3 lines 37-50). Only a `failed` record of helm's in the cluster's
/// namespace is touched, with preconditions; nothing is uninstalled.
pub(crate) async fn clear_stale_failure(
    client: &Client,
    ns: &str,
    release: &str,
    revision: u64,
    chart_spec: &serde_json::Value,
) -> Result<Option<Cleared>> {
    use k8s_openapi::api::core::v1::Secret;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
    let name = super::gather::release_record(release, revision);
    let Some(record) = ignore_not_found(secrets.get(&name).await).map_err(kube("read a release record"))? else {
        return Ok(None);
    };
    let label = |k: &str| record.labels().get(k).map(String::as_str);
    if label("owner") != Some("helm") || label("status") != Some("failed") {
        return Ok(None);
    }
    let Some(mut release_json) = super::gather::record_release(&record) else {
        return Ok(None);
    };
    let wanted_values: serde_json::Value =
        serde_yaml::from_str(chart_spec["valuesContent"].as_str().unwrap_or_default()).unwrap_or_default();
    let stale = crate::domain::helm::stale_failure(
        &release_json["config"],
        release_json["chart"]["metadata"]["version"].as_str().unwrap_or_default(),
        &wanted_values,
        chart_spec["version"].as_str().unwrap_or_default(),
    );
    if !stale {
        return Ok(None);
    }
    if revision == 1 {
        let pre = Preconditions { uid: record.uid(), resource_version: record.resource_version() };
        let dp = DeleteParams { preconditions: Some(pre), ..DeleteParams::default() };
        ignore_not_found(secrets.delete(&name, &dp).await).map_err(kube("delete a stale failed release record"))?;
        return Ok(Some(Cleared::Deleted));
    }
    release_json["info"]["status"] = "pending-upgrade".into();
    let Some(data) = super::gather::encode_release(&release_json) else {
        return Ok(None);
    };
    let mut updated = record.clone();
    updated.labels_mut().insert("status".into(), "pending-upgrade".into());
    updated.data.get_or_insert_default().insert("release".into(), data);
    // `resourceVersion` kept: refused if helm wrote the record meanwhile.
    secrets
        .replace(&name, &PostParams::default(), &updated)
        .await
        .map_err(kube("mark a stale failed release record pending-upgrade"))?;
    Ok(Some(Cleared::PendingUpgrade))
}

/// One step of the uninstall; `Err(NotYet)` while helm-controller or the
/// namespace controller are still at work. Nothing that is not the
/// cluster's own is deleted: a namespace of another owner (or none) ends it.
/// An own-nodes cluster's grant on the platform key (in `key_namespace`,
/// the operator's) goes last, once the namespace has.
pub(crate) async fn uninstall(
    client: &Client,
    cluster: &Cluster,
    owner: &Owner,
    key_namespace: Option<&str>,
) -> Result<()> {
    let name = cluster.spec.name.as_str();
    let ns = host_objects::namespace(name);
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let gone = || async {
        match key_namespace.filter(|_| cluster.spec.own_nodes) {
            Some(key_ns) => remove_platform_key_grant(client, name, key_ns, owner).await,
            None => Ok(()),
        }
    };
    let Some(n) = ignore_not_found(namespaces.get(&ns).await).map_err(kube("read namespace"))? else {
        return gone().await;
    };
    if !owner.owns_namespace(&n.metadata) {
        return gone().await;
    }
    if n.metadata.deletion_timestamp.is_some() {
        return Err(Error::NotYet("the namespace is being deleted"));
    }
    let charts = helm_charts(client, &ns);
    if let Some(hc) = ignore_not_found(charts.get(name).await).map_err(kube("read HelmChart"))?
        && owner.created(&hc.metadata)
    {
        if hc.metadata.deletion_timestamp.is_none() {
            ignore_not_found(charts.delete(name, &delete_if_uid(hc.uid())).await).map_err(kube("delete HelmChart"))?;
        }
        return Err(Error::NotYet("helm-controller is uninstalling the release"));
    }
    ignore_not_found(namespaces.delete(&ns, &delete_if_uid(n.uid())).await).map_err(kube("delete namespace"))?;
    Err(Error::NotYet("the namespace is being deleted"))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;
    use crate::domain::render::{CLUSTER_ID_LABEL, MANAGED_BY};
    use crate::server::db::clusters::HostRecord;

    fn meta(uid: &str, labels: &[(&str, &str)]) -> ObjectMeta {
        ObjectMeta {
            uid: Some(uid.into()),
            labels: Some(labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<BTreeMap<_, _>>()),
            ..ObjectMeta::default()
        }
    }

    fn owner(stored: Option<&str>, adopt_legacy: bool) -> Owner {
        Owner {
            installation: "inst-a".into(),
            cluster_id: 7,
            record: HostRecord { namespace_uid: stored.map(Into::into), adopt_legacy },
        }
    }

    /// The API server's defaults (a backend's `weight`) are no drift; a changed or missing field is.
    #[test]
    fn a_route_carries_its_rendering_under_the_servers_defaults() {
        use serde_json::json;
        let want = json!({"hostnames": ["a.k.test"], "rules": [{"backendRefs": [{"name": "a", "port": 443}]}]});
        let stored =
            json!({"hostnames": ["a.k.test"], "rules": [{"backendRefs": [{"name": "a", "port": 443, "weight": 1}]}]});
        assert!(carries(&stored, &want));
        assert!(!carries(&json!({"hostnames": ["b.k.test"], "rules": stored["rules"]}), &want));
        assert!(!carries(&json!({"hostnames": ["a.k.test", "b.k.test"], "rules": stored["rules"]}), &want));
        assert!(!carries(&json!({"hostnames": ["a.k.test"]}), &want));
    }

    /// Whose an object is, from its UID and labels and what the console stored.
    #[test]
    fn what_the_console_counts_as_its_own() {
        let managed = (MANAGED_BY.0, MANAGED_BY.1);
        let ours = [managed, (CLUSTER_ID_LABEL, "7"), (INSTALLATION_LABEL, "inst-a")];
        let other_console = [managed, (CLUSTER_ID_LABEL, "7"), (INSTALLATION_LABEL, "inst-b")];
        let other_cluster = [managed, (CLUSTER_ID_LABEL, "8"), (INSTALLATION_LABEL, "inst-a")];
        let legacy = [managed, (CLUSTER_ID_LABEL, "7")];
        let operators: [(&str, &str); 1] = [("team", "db")];
        // (object uid, labels, stored uid, adopt legacy, created, owns the namespace)
        type Case<'a> = (&'a str, &'a [(&'a str, &'a str)], Option<&'a str>, bool, bool, bool);
        let cases: Vec<Case> = vec![
            ("u1", &ours, None, false, true, true),
            ("u1", &ours, Some("u0"), false, true, true),
            ("u1", &other_console, None, false, false, false),
            ("u1", &other_console, None, true, false, false),
            ("u1", &other_cluster, None, false, false, false),
            ("u1", &operators, None, false, false, false),
            ("u1", &operators, None, true, false, false),
            // The stored UID is the namespace's identity, whatever its labels.
            ("u1", &operators, Some("u1"), false, false, true),
            // Before migration 6: taken over only where the records allow.
            ("u1", &legacy, None, true, true, true),
            ("u1", &legacy, None, false, false, false),
            ("u1", &[(CLUSTER_ID_LABEL, "7")], None, true, false, false),
        ];
        for (uid, labels, stored, adopt, created, owns) in cases {
            let (m, o) = (meta(uid, labels), owner(stored, adopt));
            assert_eq!(o.created(&m), created, "created: {labels:?} stored {stored:?} adopt {adopt}");
            assert_eq!(o.owns_namespace(&m), owns, "owns: {labels:?} stored {stored:?} adopt {adopt}");
        }
    }

    /// The fast tier: every branch of `apply` and `uninstall` against a
    /// scripted API server ([`super::super::fixtures`]), the calls in order
    /// and no others.
    mod branches {
        use http::Method;
        use serde_json::{Value, json};

        use super::super::*;
        use crate::domain::cluster::{ClusterStatus, test_cluster};
        use crate::domain::{Host, PublicAccess};
        use crate::server::controllers::reconciler::fixtures::{Call, expect, not_found, status};
        use crate::server::db::clusters::HostRecord;

        const NS: &str = "/api/v1/namespaces/kubebyon-db";
        const CHART: &str = "/apis/helm.cattle.io/v1/namespaces/kubebyon-db/helmcharts/db";
        /// The HelmChart's server-side apply, forced, as the console's field manager.
        const CHART_APPLY: &str =
            "/apis/helm.cattle.io/v1/namespaces/kubebyon-db/helmcharts/db?force=true&fieldManager=kubebyon";
        const POLICY: &str = "/apis/networking.k8s.io/v1/namespaces/kubebyon-db/networkpolicies/kubebyon-isolation";
        const POLICIES: &str = "/apis/networking.k8s.io/v1/namespaces/kubebyon-db/networkpolicies";

        fn cluster() -> Cluster {
            let lb = PublicAccess::LoadBalancer { host: Host::parse("db.example.com").unwrap() };
            test_cluster(7, "db", "alice", lb, ClusterStatus::default())
        }

        fn owner(stored: Option<&str>) -> Owner {
            Owner {
                installation: "inst-a".into(),
                cluster_id: 7,
                record: HostRecord { namespace_uid: stored.map(Into::into), adopt_legacy: false },
            }
        }

        fn labels(installation: &str) -> Value {
            json!({"app.kubernetes.io/managed-by": "kubebyon", "kubebyon.io/cluster-id": "7",
                   "kubebyon.io/installation": installation})
        }

        fn namespace(uid: &str, installation: &str, terminating: bool) -> Value {
            let mut meta = json!({"name": "kubebyon-db", "uid": uid, "labels": labels(installation)});
            if terminating {
                meta["deletionTimestamp"] = "2026-12-03T00:00:00Z".into();
            }
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": meta})
        }

        fn chart(uid: &str, installation: &str, policy: &str, spec: Value) -> Value {
            json!({"apiVersion": "helm.cattle.io/v1", "kind": "HelmChart",
                   "metadata": {"name": "db", "namespace": "kubebyon-db", "uid": uid, "labels": labels(installation),
                                "annotations": {NETWORK_POLICY_ANNOTATION: policy}},
                   "spec": spec})
        }

        fn policy(uid: &str) -> Value {
            json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
                   "metadata": {"name": "kubebyon-isolation", "namespace": "kubebyon-db", "uid": uid,
                                "labels": labels("inst-a")}, "spec": {}})
        }

        async fn apply_with(settings: SystemSettings, stored: Option<&str>, calls: Vec<Call>) -> Result<Applied> {
            expect(calls, |client| async move {
                let egress = BTreeSet::new();
                let host = HostFacts {
                    request: AddressRequest::MetalLb,
                    route_version: None,
                    helm_egress: &egress,
                    policy: FailurePolicy::Retry,
                };
                apply(&client, &cluster(), &settings, None, &owner(stored), &host).await
            })
            .await
        }

        #[tokio::test]
        async fn a_new_cluster_gets_its_namespace_policy_and_chart_created_in_that_order() {
            let rendered =
                render::desired(&cluster(), &SystemSettings::default(), AddressRequest::MetalLb, FailurePolicy::Retry);
            let calls = vec![
                Call::new(Method::GET, CHART, 404, not_found("helmcharts", "db")),
                Call::new(Method::GET, NS, 404, not_found("namespaces", "kubebyon-db")),
                Call::new(
                    Method::POST,
                    "/api/v1/namespaces?fieldManager=kubebyon",
                    201,
                    namespace("ns-1", "inst-a", false),
                )
                .checked(|body| {
                    assert_eq!(body["metadata"]["labels"]["kubebyon.io/installation"], "inst-a");
                    assert_eq!(body["metadata"]["labels"]["kubebyon.io/cluster-id"], "7");
                }),
                Call::new(Method::GET, POLICY, 404, not_found("networkpolicies", "kubebyon-isolation")),
                Call::new(Method::POST, POLICIES, 201, policy("np-1")),
                Call::new(
                    Method::POST,
                    "/apis/helm.cattle.io/v1/namespaces/kubebyon-db/helmcharts?fieldManager=kubebyon",
                    201,
                    chart("hc-1", "inst-a", "on", rendered["spec"].clone()),
                )
                .checked(|body| {
                    assert_eq!(body["metadata"]["annotations"][GENERATION_ANNOTATION], "1");
                    assert_eq!(body["metadata"]["labels"]["kubebyon.io/installation"], "inst-a");
                    assert_eq!(body["spec"]["chart"], "vcluster");
                }),
            ];
            let applied = apply_with(SystemSettings::default(), None, calls).await.unwrap();
            assert!(applied.changed);
            assert_eq!((applied.namespace_uid.as_deref(), applied.chart_uid.as_deref()), (Some("ns-1"), Some("hc-1")));
            assert_eq!(applied.spec, rendered["spec"]);
        }

        #[tokio::test]
        async fn without_the_policy_setting_none_is_created() {
            let settings = SystemSettings { network_policy: false, ..SystemSettings::default() };
            let rendered = render::desired(&cluster(), &settings, AddressRequest::MetalLb, FailurePolicy::Retry);
            let calls = vec![
                Call::new(Method::GET, CHART, 404, not_found("helmcharts", "db")),
                Call::new(Method::GET, NS, 200, namespace("ns-1", "inst-a", false)),
                Call::new(Method::GET, POLICY, 404, not_found("networkpolicies", "kubebyon-isolation")),
                Call::new(
                    Method::POST,
                    "/apis/helm.cattle.io/v1/namespaces/kubebyon-db/helmcharts?fieldManager=kubebyon",
                    201,
                    chart("hc-1", "inst-a", "off", rendered["spec"].clone()),
                ),
            ];
            assert!(apply_with(settings, None, calls).await.unwrap().changed);
        }

        #[tokio::test]
        async fn an_unchanged_chart_of_ours_is_applied_alone_by_uid_and_reports_no_change() {
            let rendered =
                render::desired(&cluster(), &SystemSettings::default(), AddressRequest::MetalLb, FailurePolicy::Retry);
            let spec = rendered["spec"].clone();
            let calls = vec![
                Call::new(Method::GET, CHART, 200, chart("hc-1", "inst-a", "on", spec.clone())),
                Call::new(Method::PATCH, CHART_APPLY, 200, chart("hc-1", "inst-a", "on", spec.clone()))
                    .checked(|body| assert_eq!(body["metadata"]["uid"], "hc-1", "kept ours by UID")),
            ];
            let applied = apply_with(SystemSettings::default(), Some("ns-1"), calls).await.unwrap();
            assert!(!applied.changed);
            assert_eq!(applied.namespace_uid, None, "the namespace was not read again");
        }

        #[tokio::test]
        async fn a_changed_policy_setting_removes_the_policy_by_uid() {
            let settings = SystemSettings { network_policy: false, ..SystemSettings::default() };
            let spec =
                render::desired(&cluster(), &settings, AddressRequest::MetalLb, FailurePolicy::Retry)["spec"].clone();
            let calls = vec![
                Call::new(Method::GET, CHART, 200, chart("hc-1", "inst-a", "on", spec.clone())),
                Call::new(Method::GET, POLICY, 200, policy("np-1")),
                Call::new(Method::DELETE, POLICY, 200, policy("np-1"))
                    .checked(|body| assert_eq!(body["preconditions"]["uid"], "np-1")),
                Call::new(Method::PATCH, CHART_APPLY, 200, chart("hc-1", "inst-a", "off", spec)),
            ];
            apply_with(settings, Some("ns-1"), calls).await.unwrap();
        }

        #[tokio::test]
        async fn what_is_not_the_consoles_is_refused_and_never_written() {
            // Another console's namespace.
            let calls = vec![
                Call::new(Method::GET, CHART, 404, not_found("helmcharts", "db")),
                Call::new(Method::GET, NS, 200, namespace("ns-9", "inst-b", false)),
            ];
            let e = apply_with(SystemSettings::default(), None, calls).await.unwrap_err();
            assert_eq!(e.status_reason().to_string(), "namespace_taken: namespace kubebyon-db");
            // Another console's HelmChart in a namespace whose UID is ours.
            let calls = vec![
                Call::new(Method::GET, CHART, 200, chart("hc-9", "inst-b", "on", json!({}))),
                Call::new(Method::GET, NS, 200, namespace("ns-1", "inst-a", false)),
                Call::new(Method::GET, POLICY, 200, policy("np-1")),
                Call::new(Method::PATCH, POLICY, 200, policy("np-1")),
            ];
            let e = apply_with(SystemSettings::default(), Some("ns-1"), calls).await.unwrap_err();
            assert_eq!(e.status_reason().to_string(), "namespace_taken: HelmChart kubebyon-db/db");
        }

        #[tokio::test]
        async fn a_terminating_namespace_or_a_create_race_is_waited_for() {
            let calls = vec![
                Call::new(Method::GET, CHART, 404, not_found("helmcharts", "db")),
                Call::new(Method::GET, NS, 200, namespace("ns-1", "inst-a", true)),
            ];
            let e = apply_with(SystemSettings::default(), None, calls).await.unwrap_err();
            assert!(matches!(e, Error::NotYet(_)) && !e.is_permanent(), "{e}");
            let calls = vec![
                Call::new(Method::GET, CHART, 404, not_found("helmcharts", "db")),
                Call::new(Method::GET, NS, 404, not_found("namespaces", "kubebyon-db")),
                Call::new(
                    Method::POST,
                    "/api/v1/namespaces?fieldManager=kubebyon",
                    409,
                    status(409, "AlreadyExists", "namespaces \"kubebyon-db\" already exists"),
                ),
            ];
            let e = apply_with(SystemSettings::default(), None, calls).await.unwrap_err();
            assert!(matches!(e, Error::NotYet(_)), "{e}");
        }

        #[tokio::test]
        async fn a_refused_chart_apply_fails_with_the_api_servers_words() {
            let spec =
                render::desired(&cluster(), &SystemSettings::default(), AddressRequest::MetalLb, FailurePolicy::Retry)
                    ["spec"]
                    .clone();
            let calls = vec![
                Call::new(Method::GET, CHART, 200, chart("hc-1", "inst-a", "on", spec)),
                Call::new(Method::PATCH, CHART_APPLY, 422, status(422, "Invalid", "spec.valuesContent: Invalid value")),
            ];
            let e = apply_with(SystemSettings::default(), Some("ns-1"), calls).await.unwrap_err();
            assert!(e.is_permanent());
            assert_eq!(
                e.status_reason().to_string(),
                "host_refused: apply HelmChart: spec.valuesContent: Invalid value"
            );
        }

        async fn uninstall_with(stored: Option<&str>, calls: Vec<Call>) -> Result<()> {
            expect(calls, |client| async move { uninstall(&client, &cluster(), &owner(stored), None).await }).await
        }

        #[tokio::test]
        async fn the_uninstall_deletes_the_chart_then_the_namespace_each_by_uid() {
            // Nothing there: done.
            uninstall_with(Some("ns-1"), vec![Call::new(Method::GET, NS, 404, not_found("namespaces", "kubebyon-db"))])
                .await
                .unwrap();
            // Not ours (another UID, another installation): left alone, done.
            let calls = vec![Call::new(Method::GET, NS, 200, namespace("ns-9", "inst-b", false))];
            uninstall_with(Some("ns-1"), calls).await.unwrap();
            // Ours with its chart: the chart goes first, by UID; then wait.
            let calls = vec![
                Call::new(Method::GET, NS, 200, namespace("ns-1", "inst-a", false)),
                Call::new(Method::GET, CHART, 200, chart("hc-1", "inst-a", "on", json!({}))),
                Call::new(Method::DELETE, CHART, 200, chart("hc-1", "inst-a", "on", json!({})))
                    .checked(|body| assert_eq!(body["preconditions"]["uid"], "hc-1")),
            ];
            assert!(matches!(uninstall_with(Some("ns-1"), calls).await, Err(Error::NotYet(_))));
            // The chart gone: the namespace, by UID; then wait for it.
            let calls = vec![
                Call::new(Method::GET, NS, 200, namespace("ns-1", "inst-a", false)),
                Call::new(Method::GET, CHART, 404, not_found("helmcharts", "db")),
                Call::new(Method::DELETE, NS, 200, namespace("ns-1", "inst-a", true))
                    .checked(|body| assert_eq!(body["preconditions"]["uid"], "ns-1")),
            ];
            assert!(matches!(uninstall_with(Some("ns-1"), calls).await, Err(Error::NotYet(_))));
            // Terminating: only waited for.
            let calls = vec![Call::new(Method::GET, NS, 200, namespace("ns-1", "inst-a", true))];
            assert!(matches!(uninstall_with(Some("ns-1"), calls).await, Err(Error::NotYet(_))));
        }
    }
}
