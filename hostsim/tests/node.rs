//! The upstream host (`Simulator::Node`): what `kubectl` shows on it is what a
//! k3s server with MetalLB would show — helm-controller's own HelmChart status,
//! the chart's StatefulSet with its bound claim and its pod on a node, both
//! Services — and `kubectl logs -f` follows the real helm's output to the end
//! of the run. With `--vcluster-api real`, a downloaded kubeconfig reaches the
//! virtual cluster's own API server.

use std::process::{Command, Stdio};
use std::time::Duration;

use hostsim::testhost::{Net, Simulator, TestHost};
use hostsim::testsupport as ts;
use serde_json::Value;

/// `--vcluster-api real`, at most two at once.
fn host() -> &'static TestHost {
    TestHost::shared(Some(Simulator::Node(|net: Net| hostsim::node::Config {
        vcluster_api: hostsim::node::apiserver::VClusterApi::Real(hostsim::node::apiserver::RealApi::new(2)),
        ..net.node_config()
    })))
}

const WAIT: Duration = Duration::from_secs(60);

fn kubectl_json(args: &[&str]) -> Value {
    let out = ts::kubectl(&host().kubeconfig, args).expect("kubectl");
    assert!(out.status.success(), "kubectl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("kubectl's JSON")
}

#[tokio::test]
async fn a_vcluster_chart_makes_what_kubectl_shows_on_a_k3s_host() {
    let host = host();
    let (client, ns) =
        host.install("real", "controlPlane:\n  service:\n    spec:\n      type: NodePort\n").await.unwrap();

    // `kubectl logs -f` once the install pod runs: it ends by itself when helm's run does.
    let pods: kube::Api<k8s_openapi::api::core::v1::Pod> = kube::Api::namespaced(client.clone(), &ns);
    ts::eventually("the install pod runs", WAIT, || async {
        let lp = kube::api::ListParams::default().labels("job-name=helm-install-real");
        let list = pods.list(&lp).await.ok()?;
        let running = |p: &k8s_openapi::api::core::v1::Pod| {
            p.status.as_ref().and_then(|s| s.phase.as_deref()).is_some_and(|s| s != "Pending")
        };
        list.items.iter().any(running).then_some(())
    })
    .await
    .unwrap();
    let follow = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&host.kubeconfig)
        .args(["logs", "-f", "-n", &ns, "job/helm-install-real"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = tokio::time::timeout(WAIT, tokio::task::spawn_blocking(move || follow.wait_with_output()))
        .await
        .expect("kubectl logs -f ends with the run")
        .unwrap()
        .unwrap();
    let log = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{log}{}", String::from_utf8_lossy(&out.stderr));
    assert!(log.lines().any(|l| l.starts_with("+ helm ") && l.contains(" install ")), "klipper's trace: {log}");
    assert!(log.contains("STATUS: deployed"), "helm's own output: {log}");

    // helm-controller's own status on the HelmChart.
    let hc = kubectl_json(&["get", "helmchart", "real", "-n", &ns, "-o", "json"]);
    assert_eq!(hc["status"]["jobName"], "helm-install-real", "{hc}");

    // The chart's objects as the controllers made them.
    let objects = ts::eventually("the StatefulSet rolled out", WAIT, || async {
        let all = kubectl_json(&["get", "statefulset,pvc,pod,svc", "-n", &ns, "-o", "json"]);
        let items = all["items"].as_array()?.clone();
        let sts = items.iter().find(|o| o["kind"] == "StatefulSet" && o["metadata"]["name"] == "real")?;
        (sts["status"]["readyReplicas"] == 1).then_some(items)
    })
    .await
    .unwrap();
    let find = |kind: &str, name: &str| {
        objects.iter().find(|o| o["kind"] == kind && o["metadata"]["name"] == name).cloned().unwrap_or_default()
    };
    let pvc = find("PersistentVolumeClaim", "data-real-0");
    assert_eq!(pvc["status"]["phase"], "Bound", "{pvc}");
    assert_eq!(pvc["spec"]["storageClassName"], "local-path", "the default class was assigned: {pvc}");
    let pod = find("Pod", "real-0");
    assert_eq!(pod["status"]["phase"], "Running", "{pod}");
    let node = pod["spec"]["nodeName"].as_str().unwrap_or_default();
    assert!(node.starts_with("hostsim-"), "bound to a node by the scheduler: {pod}");
    assert_eq!(find("Service", "real")["spec"]["type"], "NodePort");
    assert_eq!(find("Service", "real-headless")["spec"]["clusterIP"], "None");
}

#[tokio::test]
async fn a_real_vcluster_api_server_shows_the_virtual_clusters_own_namespaces() {
    let host = host();
    let (client, ns) =
        host.install("inside", "controlPlane:\n  service:\n    spec:\n      type: NodePort\n").await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (path, listed) = ts::node_port_namespaces(&client, &ns, "inside", dir.path(), WAIT).await.unwrap();
    for own in ["namespace/default", "namespace/kube-system", "namespace/kube-public"] {
        assert!(listed.contains(own), "{own} in {listed}");
    }
    assert!(!listed.contains(&format!("namespace/{ns}")), "not the host's namespaces: {listed}");
    // No syncer: what is made inside stays inside.
    let out = ts::kubectl(&path, &["create", "configmap", "made-inside", "-n", "default"]).unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let host_maps: kube::Api<k8s_openapi::api::core::v1::ConfigMap> = kube::Api::all(client.clone());
    let lp = kube::api::ListParams::default().fields("metadata.name=made-inside");
    assert!(host_maps.list(&lp).await.unwrap().items.is_empty(), "a virtual cluster's objects are not on the host");
}
