//! Placement and storage (issue 24) on three-node test hosts with the real
//! kube-scheduler, StatefulSet controller and PV binder: the admin's spread
//! setting renders pod anti-affinity across the console's namespaces, and the
//! control-plane StorageClass the claim's class; both are kept per cluster.

mod support;

use std::collections::BTreeMap;

use hostsim::node::nodes::NodeAddr;
use hostsim::testhost::{Net, Simulator, TestHost, TestHostGuard};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};
use support::host::{Env, env_on, nodeport_settings, ready};

/// A host of three identical nodes.
fn three_nodes() -> TestHostGuard {
    TestHost::start(Some(Simulator::Node(|net: Net| hostsim::node::Config {
        nodes: [net.node(), net.other_node(), net.addr(240)]
            .map(|internal| NodeAddr { internal, external: None })
            .into(),
        ..net.node_config()
    })))
    .expect("a three-node host")
}

async fn set_placement(env: &Env, spread: &str, storage_class: Option<&str>) {
    let mut settings = nodeport_settings("");
    settings["placement"] =
        json!({"spread": spread, "topology_key": "kubernetes.io/hostname", "storage_class": storage_class});
    let r = env.console.json("PUT", "/api/admin/system-settings", Some(&env.cookie), settings).await;
    assert_eq!(r.status, 200, "{}", r.body);
}

/// The node a cluster's control plane pod runs on.
async fn node_of(host: &TestHost, name: &str) -> Option<String> {
    let client = host.client().await.unwrap();
    let pods: Api<Pod> = Api::namespaced(client, &format!("kubebyon-{name}"));
    pods.get(&format!("{name}-0")).await.ok()?.spec?.node_name
}

fn off() -> Value {
    json!({"enabled": false})
}

/// Preferred: six clusters created one at a time land two per node; then
/// a cluster created with a second StorageClass has its claim bound by that
/// class (preferred spreading lets it share a node).
#[tokio::test]
async fn preferred_spreading_puts_two_of_six_on_each_node_and_a_second_class_binds_its_claim() {
    let guard = three_nodes();
    let host = &guard.host;
    let env = env_on(host).await;
    set_placement(&env, "preferred", None).await;
    let mut per_node: BTreeMap<String, u32> = BTreeMap::new();
    for i in 0..6 {
        let name = format!("spread-{i}");
        let id = env.create(&name, off()).await;
        env.converge(id, &format!("{name} Ready"), ready).await;
        *per_node.entry(node_of(host, &name).await.expect("scheduled")).or_default() += 1;
    }
    assert_eq!(per_node.values().copied().collect::<Vec<_>>(), [2, 2, 2], "{per_node:?}");

    // A second class, served by the same provisioner (as local-path-provisioner
    // can serve several); the admin picks it for new clusters.
    let client = host.client().await.unwrap();
    let classes: Api<k8s_openapi::api::storage::v1::StorageClass> = Api::all(client.clone());
    let fast = json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "fast"},
        "provisioner": hostsim::node::storage::PROVISIONER, "volumeBindingMode": "WaitForFirstConsumer",
        "reclaimPolicy": "Delete"});
    classes.patch("fast", &PatchParams::apply("test").force(), &Patch::Apply(&fast)).await.unwrap();
    set_placement(&env, "preferred", Some("fast")).await;
    let settings = env.console.get("/api/admin/system-settings", Some(&env.cookie)).await.json();
    assert_eq!(settings["placement"]["storage_class"], "fast", "{settings}");
    let id = env.create("fast", off()).await;
    env.converge(id, "fast Ready", ready).await;
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), "kubebyon-fast");
    let claim =
        claims.list(&Default::default()).await.unwrap().items.into_iter().next().expect("the control plane's claim");
    assert_eq!(claim.spec.clone().unwrap().storage_class_name.as_deref(), Some("fast"));
    assert_eq!(claim.status.and_then(|s| s.phase).as_deref(), Some("Bound"));
    // The clusters created before keep the host's default class.
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client, "kubebyon-spread-0");
    let claim = claims.list(&Default::default()).await.unwrap().items.into_iter().next().expect("a claim");
    assert_eq!(claim.spec.unwrap().storage_class_name.as_deref(), Some(hostsim::node::storage::CLASS));
}

/// Required: a fourth cluster on three nodes stays pending, in the
/// scheduler's words. The rule holds both ways (the scheduler enforces an
/// existing pod's required anti-affinity against newcomers), so a cluster
/// created after the admin turned spreading off cannot join those nodes
/// either, and says so; the pending one keeps the placement it was created with.
#[tokio::test]
async fn required_spreading_leaves_a_fourth_pending_in_the_schedulers_words() {
    let guard = three_nodes();
    let host = &guard.host;
    let env = env_on(host).await;
    set_placement(&env, "required", None).await;
    let mut nodes = std::collections::BTreeSet::new();
    for i in 0..3 {
        let name = format!("req-{i}");
        let id = env.create(&name, off()).await;
        env.converge(id, &format!("{name} Ready"), ready).await;
        nodes.insert(node_of(host, &name).await.expect("scheduled"));
    }
    assert_eq!(nodes.len(), 3, "one per node: {nodes:?}");
    let fourth = env.create("req-3", off()).await;
    let words = env.converge_message(fourth, "not_starting", "anti-affinity").await;
    assert!(words.contains("0/3 nodes are available"), "{words}");

    set_placement(&env, "off", None).await;
    let later = env.create("later", off()).await;
    let words = env.converge_message(later, "not_starting", "existing pods anti-affinity").await;
    assert!(words.contains("0/3 nodes are available"), "{words}");
    let client = host.client().await.unwrap();
    let values = |name: &'static str| {
        let charts = hostsim::testsupport::helmcharts(&client, &format!("kubebyon-{name}"));
        async move { charts.get(name).await.unwrap().data["spec"]["valuesContent"].as_str().unwrap().to_owned() }
    };
    assert!(values("req-3").await.contains("requiredDuringSchedulingIgnoredDuringExecution"));
    assert!(!values("later").await.contains("podAntiAffinity"));
    let c = env.cluster(fourth).await;
    assert_eq!(c["spec"]["placement"]["spread"], "required", "{c}");
}
