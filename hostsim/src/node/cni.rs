//! The CNI a private-nodes vCluster deploys into itself for its joined
//! machines: `deploy.cni.flannel.enabled` is `true` by default (vCluster
//! v0.30.0 `chart/values.yaml`, `deploy.cni.flannel`); the code that deploys
//! it is in the closed Pro image, so this is flannel's own manifest
//! (`kube-flannel.yml`: namespace `kube-flannel`, DaemonSet
//! `kube-flannel-ds`, host network, tolerating every `NoSchedule` taint —
//! so it runs on a node that is not Ready yet). A joined machine
//! ([`crate::machine`]) has no pod network, and so is not Ready, until this
//! DaemonSet's pod runs on it.

use anyhow::Result;
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::Namespace;
use kube::Client;
use kube::api::Api;

use super::kubeadm::create;
use serde_json::json;

pub const NAMESPACE: &str = "kube-flannel";
pub const DAEMONSET: &str = "kube-flannel-ds";
/// The label flannel's pods carry (`app: flannel`).
pub const APP_LABEL: (&str, &str) = ("app", "flannel");

/// Creates the namespace and the DaemonSet when missing (kept as they are
/// otherwise: a test may hold the CNI back with a node selector).
pub async fn deploy(client: &Client) -> Result<()> {
    create(
        Api::<Namespace>::all(client.clone()),
        json!({"metadata": {"name": NAMESPACE,
        "labels": {"k8s-app": "flannel", "pod-security.kubernetes.io/enforce": "privileged"}}}),
    )
    .await?;
    let labels = json!({"app": "flannel", "k8s-app": "flannel", "tier": "node"});
    let daemonset = json!({
        "metadata": {"name": DAEMONSET, "namespace": NAMESPACE, "labels": labels},
        "spec": {
            "selector": {"matchLabels": {"app": "flannel"}},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [{"matchExpressions": [
                            {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}]}]}}},
                    "hostNetwork": true,
                    "priorityClassName": "system-node-critical",
                    "tolerations": [{"operator": "Exists", "effect": "NoSchedule"}],
                    "serviceAccountName": "flannel",
                    "containers": [{
                        "name": "kube-flannel",
                        "image": "ghcr.io/flannel-io/flannel:v0.27.4",
                        "command": ["/opt/bin/flanneld"],
                        "args": ["--ip-masq", "--kube-subnet-mgr"],
                        "securityContext": {"privileged": false,
                            "capabilities": {"add": ["NET_ADMIN", "NET_RAW"]}},
                    }],
                },
            },
        },
    });
    create(Api::<DaemonSet>::namespaced(client.clone(), NAMESPACE), daemonset).await
}
