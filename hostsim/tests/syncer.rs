//! `--vcluster-api syncer`: upstream's own vCluster v0.30.0 syncer runs the
//! chart's pod ([`hostsim::node::syncer`]), with its kine, kube-apiserver and
//! kube-controller-manager, holding the chart's RBAC on the host. What it does
//! is vCluster's: its certificates, `vc-<name>`, the virtual cluster's own
//! namespaces, and a tenant's pod synced into the host namespace under
//! vCluster's translated name, its status synced back.

use std::time::Duration;

use hostsim::testhost::{Net, Simulator, TestHost};
use hostsim::testsupport as ts;
use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::Api;
use kube::api::ListParams;

/// At most four syncers at once, one per test (each holds its slot while its
/// pod lives; a running one is kine, kube-apiserver and
/// kube-controller-manager: ~400 MB).
fn host() -> &'static TestHost {
    TestHost::shared(Some(Simulator::Node(|net: Net| hostsim::node::Config {
        vcluster_api: hostsim::node::apiserver::VClusterApi::Syncer(hostsim::node::apiserver::RealApi::new(4)),
        ..net.node_config()
    })))
}

/// The image the console renders for shared-node clusters (the kubelet runs
/// upstream's syncer for it; the chart's default Pro image gets the stand-in).
const OSS: &str = "controlPlane:\n  statefulSet:\n    image:\n      repository: loft-sh/vcluster-oss\n";

/// A syncer's first start generates its PKI and starts three processes.
const START: Duration = Duration::from_secs(180);

#[tokio::test]
async fn upstreams_syncer_serves_the_virtual_cluster_and_syncs_its_pods_to_the_host() {
    let host = host();
    // The open-source image and telemetry off, as the console renders them
    // for the shared-node clusters it creates.
    let (client, ns) = host
        .install("synced", &format!("{OSS}  service:\n    spec:\n      type: NodePort\ntelemetry:\n  enabled: false\n"))
        .await
        .unwrap();

    // vCluster's own log: the real binary, at its version.
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    ts::vc_kubeconfig(&client, &ns, "synced", START).await.unwrap();
    let log = pods.logs("synced-0", &Default::default()).await.unwrap_or_else(|e| format!("(unread: {e})"));
    assert!(log.contains("vCluster version: 0.30.0"), "the syncer's log: {log}");
    // Its PKI lives where vCluster keeps it: Secret `<name>-certs`.
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    assert!(secrets.get_opt("synced-certs").await.unwrap().is_some(), "vCluster's certificates Secret");

    // Through the Service's node port, as a downloaded kubeconfig goes.
    let dir = tempfile::tempdir().unwrap();
    let (path, listed) = ts::node_port_namespaces(&client, &ns, "synced", dir.path(), START).await.unwrap();
    for own in ["namespace/default", "namespace/kube-system"] {
        assert!(listed.contains(own), "{own} in {listed}");
    }
    assert!(!listed.contains(&format!("namespace/{ns}")), "not the host's namespaces: {listed}");
    // The Kubernetes of the chart's distro tag (v1.34.0), not the host's.
    let out = ts::kubectl(&path, &["version", "-o", "json"]).unwrap();
    let version: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    assert_eq!(version["serverVersion"]["gitVersion"], "v1.34.0", "{}", String::from_utf8_lossy(&out.stdout));

    // A tenant's pod: synced to the host as `<pod>-x-<namespace>-x-<release>`,
    // run there by the host's kubelet, its status synced back.
    let out = ts::kubectl(&path, &["run", "web", "-n", "default", "--image=nginx", "--restart=Never"]).unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let on_host = ts::eventually("the pod on the host", START, || async {
        let lp = ListParams::default().labels("vcluster.loft.sh/managed-by=synced");
        let list = pods.list(&lp).await.ok()?;
        list.items.into_iter().find(|p| p.metadata.name.as_deref() == Some("web-x-default-x-synced"))
    })
    .await
    .unwrap();
    assert_eq!(on_host.spec.and_then(|s| s.containers.first().and_then(|c| c.image.clone())).as_deref(), Some("nginx"));
    ts::eventually("the virtual pod runs", START, || async {
        let out = ts::kubectl(&path, &["get", "pod", "web", "-n", "default", "-o", "jsonpath={.status.phase}"]).ok()?;
        (String::from_utf8_lossy(&out.stdout) == "Running").then_some(())
    })
    .await
    .unwrap();
}

/// Values the chart's schema accepts but vCluster's own validation refuses
/// (`pkg/config/validation.go`): on a real host the syncer exits with its
/// reason in its log and the pod crash-loops — which the stand-in never did.
#[tokio::test]
async fn values_vclusters_validation_refuses_crash_loop_the_syncer_with_its_reason() {
    let values = format!("{OSS}policies:\n  podSecurityStandard: strict\n");
    let (client, ns) = host().install("refused", &values).await.unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let status = ts::eventually("the syncer crash-loops", START, || async {
        let pod = pods.get("refused-0").await.ok()?;
        let c = pod.status?.container_statuses?.into_iter().next()?;
        let waiting = c.state.as_ref()?.waiting.as_ref()?.reason.clone()?;
        (waiting == "CrashLoopBackOff" && c.restart_count >= 1).then_some(c)
    })
    .await
    .unwrap();
    let code = status.last_state.and_then(|s| s.terminated).map(|t| t.exit_code);
    assert_eq!(code, Some(1), "the syncer's own exit");
    let previous = kube::api::LogParams { previous: true, ..Default::default() };
    let log = pods.logs("refused-0", &previous).await.unwrap_or_else(|e| format!("(unread: {e})"));
    assert!(log.contains("invalid argument enforce-pod-security-standard=strict"), "vCluster's words: {log}");
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    assert!(
        secrets.get_opt("vc-refused").await.unwrap().is_none(),
        "no kubeconfig from a control plane that never ran"
    );
}

/// The container's memory limit is the kernel's (a cgroup per start): a
/// control plane given less than kine, kube-apiserver and
/// kube-controller-manager need is ended by the OOM killer and reported as a
/// kubelet reports it, `OOMKilled`, then restarted with back-off.
#[tokio::test]
async fn a_syncer_over_its_memory_limit_is_oom_killed() {
    let values = format!(
        "{OSS}    resources:\n      limits:\n        memory: 96Mi\n      requests:\n        memory: 64Mi\ntelemetry:\n  enabled: false\n"
    );
    let (client, ns) = host().install("starved", &values).await.unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let status = ts::eventually("the syncer is OOM-killed", START, || async {
        let pod = pods.get("starved-0").await.ok()?;
        let c = pod.status?.container_statuses?.into_iter().next()?;
        let t = c.last_state.as_ref()?.terminated.clone()?;
        (t.reason.as_deref() == Some("OOMKilled")).then_some((c, t))
    })
    .await
    .unwrap();
    assert!(status.0.restart_count >= 1, "restarted: {:?}", status.0);
}

/// The chart's `kubernetes` init container names the distro's image
/// (`controlPlane.distro.k8s.image.tag`); a tag this host has no build of
/// cannot be pulled: `Init:ImagePullBackOff` with the image's name, the
/// syncer waiting in `PodInitializing`, the pod Pending.
#[tokio::test]
async fn an_unknown_distro_tag_fails_the_init_container_with_the_images_name() {
    let values =
        format!("{OSS}  distro:\n    k8s:\n      image:\n        tag: v1.34.99\ntelemetry:\n  enabled: false\n");
    let (client, ns) = host().install("untagged", &values).await.unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let pod = ts::eventually("the init container cannot pull", START, || async {
        let pod = pods.get("untagged-0").await.ok()?;
        let init = pod.status.as_ref()?.init_container_statuses.as_ref()?.first()?.clone();
        let waiting = init.state.as_ref()?.waiting.as_ref()?.reason.clone()?;
        (waiting == "ImagePullBackOff").then_some((pod, init))
    })
    .await
    .unwrap();
    assert_eq!(pod.1.image, "ghcr.io/loft-sh/kubernetes:v1.34.99");
    let status = pod.0.status.unwrap();
    assert_eq!(status.phase.as_deref(), Some("Pending"));
    let main = status.container_statuses.unwrap().into_iter().next().unwrap();
    assert_eq!(main.state.and_then(|s| s.waiting).and_then(|w| w.reason).as_deref(), Some("PodInitializing"));
}
