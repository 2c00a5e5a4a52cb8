//! What `kubeadm init` sets up for joining nodes, made inside a private-nodes
//! vCluster's own API server once it is ready (vCluster does the same for its
//! private nodes): `kube-public/cluster-info` (the CA and endpoint, which
//! kube-controller-manager's `bootstrapsigner` signs with every bootstrap
//! token), `kube-system/kubeadm-config`, and the bootstrappers' RBAC as kubeadm
//! writes it (`cmd/kubeadm/app/phases/bootstraptoken/node/tlsbootstrap.go`,
//! `clusterinfo/clusterinfo.go`, `uploadconfig/uploadconfig.go`).

use anyhow::Result;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::rbac::v1::{ClusterRoleBinding, Role, RoleBinding};
use kube::api::{Api, PostParams};
use kube::{Client, Resource};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

/// kubeadm's group for the default node token (vCluster's tokens carry it).
pub const NODE_TOKEN_GROUP: &str = "system:bootstrappers:kubeadm:default-node-token";

/// Creates `body`; one that exists already is kept.
pub(crate) async fn create<K>(api: Api<K>, body: Value) -> Result<()>
where
    K: Resource + Clone + std::fmt::Debug + DeserializeOwned + serde::Serialize,
{
    let obj: K = serde_json::from_value(body)?;
    match api.create(&PostParams::default(), &obj).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

fn cluster_role_binding(name: &str, role: &str, group: &str) -> Value {
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": group}],
    })
}

/// Role `name` in `ns` that may `get` ConfigMap `config_map`, bound to `subjects`
/// (`(kind, name)`), as kubeadm grants its ConfigMaps.
async fn config_map_reader(
    client: &Client,
    ns: &str,
    name: &str,
    config_map: &str,
    subjects: &[(&str, &str)],
) -> Result<()> {
    let meta = json!({"name": name, "namespace": ns});
    let rules =
        json!([{"apiGroups": [""], "resources": ["configmaps"], "resourceNames": [config_map], "verbs": ["get"]}]);
    create(Api::<Role>::namespaced(client.clone(), ns), json!({"metadata": meta, "rules": rules})).await?;
    let subjects: Vec<Value> = subjects
        .iter()
        .map(|(kind, who)| json!({"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": who}))
        .collect();
    let role_ref = json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name});
    create(
        Api::<RoleBinding>::namespaced(client.clone(), ns),
        json!({"metadata": meta, "roleRef": role_ref, "subjects": subjects}),
    )
    .await
}

/// A namespace annotation: `follow` has a restarted control plane point an
/// existing `kube-public/cluster-info` at its current endpoint. Unset, it is
/// kept as first written, as kubeadm keeps it (`kubeadm init` writes it once;
/// only `kubeadm init phase bootstrap-token` rewrites it). Whether vCluster's
/// private nodes (Pro, closed) rewrite it after `controlPlane.endpoint`
/// changes is not known: tests run both ways, and the console assumes
/// nothing (it rewrites the server at each join token's creation).
pub const CLUSTER_INFO: &str = "hostsim.kubebyon.io/cluster-info";

/// Creates what is missing; existing objects are kept (a restarted pod), but
/// with `follow` cluster-info names `endpoint` again ([`CLUSTER_INFO`]).
pub async fn bootstrap(client: &Client, endpoint: &str, ca_pem: &str, follow: bool) -> Result<()> {
    use base64::Engine;
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    let kubeconfig = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- cluster:\n    certificate-authority-data: {ca}\n    server: https://{endpoint}\n  name: \"\"\ncontexts: null\ncurrent-context: \"\"\npreferences: {{}}\nusers: null\n"
    );
    let public: Api<ConfigMap> = Api::namespaced(client.clone(), "kube-public");
    let info =
        json!({"metadata": {"name": "cluster-info", "namespace": "kube-public"}, "data": {"kubeconfig": kubeconfig}});
    create(public.clone(), info).await?;
    if follow {
        let merge = json!({"data": {"kubeconfig": kubeconfig}});
        public.patch("cluster-info", &kube::api::PatchParams::default(), &kube::api::Patch::Merge(merge)).await?;
    }
    let clusterinfo = "kubeadm:bootstrap-signer-clusterinfo";
    config_map_reader(client, "kube-public", clusterinfo, "cluster-info", &[("User", "system:anonymous")]).await?;
    let system: Api<ConfigMap> = Api::namespaced(client.clone(), "kube-system");
    let config = format!(
        "apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\ncontrolPlaneEndpoint: {endpoint}\nkubernetesVersion: v1.36.3\nnetworking:\n  serviceSubnet: 10.96.0.0/16\n"
    );
    create(system, json!({"metadata": {"name": "kubeadm-config", "namespace": "kube-system"}, "data": {"ClusterConfiguration": config}}))
        .await?;
    let readers = [("Group", NODE_TOKEN_GROUP), ("Group", "system:nodes")];
    config_map_reader(client, "kube-system", "kubeadm:nodes-kubeadm-config", "kubeadm-config", &readers).await?;
    let crbs: Api<ClusterRoleBinding> = Api::all(client.clone());
    for (name, role, group) in [
        ("kubeadm:kubelet-bootstrap", "system:node-bootstrapper", NODE_TOKEN_GROUP),
        (
            "kubeadm:node-autoapprove-bootstrap",
            "system:certificates.k8s.io:certificatesigningrequests:nodeclient",
            NODE_TOKEN_GROUP,
        ),
        (
            "kubeadm:node-autoapprove-certificate-rotation",
            "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient",
            "system:nodes",
        ),
    ] {
        create(crbs.clone(), cluster_role_binding(name, role, group)).await?;
    }
    Ok(())
}
