//! The test host is no kinder than k3s where a console looks: one test per point
//! of docs/testing.md's fidelity table (helm-controller Jobs, failurePolicy,
//! latency, client certificates, kube-controller-manager, chart source, Nodes,
//! per-host addresses), against the real API server.

mod common;

use std::collections::BTreeMap;

use common::*;
use hostsim::pki::Ca;
use hostsim::testhost::{Simulator, TestHost};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod, Service};
use kube::api::{Api, DeleteParams, ListParams};
use kube::{Client, ResourceExt};
use serde_json::json;

async fn service_uid(client: &Client, ns: &str, name: &str) -> Option<String> {
    let api: Api<Service> = Api::namespaced(client.clone(), ns);
    api.get_opt(name).await.ok().flatten().and_then(|s| s.uid())
}

/// helm-controller's Job: named, placed and annotated as upstream, created
/// suspended and resumed (the Job controller's `Suspended` condition says so).
#[tokio::test]
async fn helm_install_job_is_built_like_helm_controllers() {
    let (client, ns) = setup("job").await;
    apply_chart(&client, &ns, "nu", &values_for("ClusterIP", "")).await;
    assert_eq!(job_done(&client, &ns, "nu").await, JobOutcome::Complete);
    let job: Job = Api::namespaced(client.clone(), &ns).get("helm-install-nu").await.unwrap();
    assert_eq!(job.labels().get("helmcharts.helm.cattle.io/chart").map(String::as_str), Some("nu"));
    let spec = job.spec.clone().unwrap();
    assert_eq!(spec.backoff_limit, Some(1000));
    assert_eq!(spec.suspend, Some(false), "resumed");
    let hc = helmcharts(&client, &ns).get("nu").await.unwrap();
    let annotations = spec.template.metadata.unwrap().annotations.unwrap();
    assert_eq!(annotations["helmcharts.helm.cattle.io/configHash"], hostsim::testsupport::expected_hash(&hc).unwrap());
    let conds = job.status.unwrap().conditions.unwrap();
    let suspended = conds.iter().find(|c| c.type_ == "Suspended").expect("was suspended");
    assert_eq!((suspended.status.as_str(), suspended.reason.as_deref()), ("False", Some("JobResumed")));
    assert!(conds.iter().any(|c| c.type_ == "Complete" && c.status == "True"));
    let pod_spec = spec.template.spec.unwrap();
    assert_eq!(pod_spec.restart_policy.as_deref(), Some("OnFailure"));
    assert_eq!(pod_spec.containers[0].name, "helm");
    // The pod ran on a simulated Node; helm's output is readable through the API server.
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let lp = ListParams::default().labels("batch.kubernetes.io/job-name=helm-install-nu");
    let pod = pods.list(&lp).await.unwrap().items.pop().expect("the Job's pod");
    assert_eq!(pod.spec.unwrap().node_name, Some(hostsim::sim::nodes::node_name(net().node())));
    let log = wait_log(&ns, "helm-install-nu", "STATUS: deployed").await;
    assert!(log.contains("NAME: nu") && log.contains("REVISION: 1"), "{log}");
    // Events as helm-controller records them.
    let reasons: Vec<String> = events_for(&client, &ns, "nu").await.into_iter().filter_map(|e| e.reason).collect();
    assert!(reasons.contains(&"ApplyJob".into()) && reasons.contains(&"ResumeJob".into()), "{reasons:?}");

    // A values change replaces the Job (new hash), and upgrades the release.
    apply_chart(&client, &ns, "nu", &values_for("NodePort", "")).await;
    assert_eq!(job_done(&client, &ns, "nu").await, JobOutcome::Complete);
    wait_log(&ns, "helm-install-nu", "REVISION: 2").await;
}

/// `failurePolicy: reinstall` (the default): a failed upgrade is uninstalled and
/// installed again on the Job's retry, so the Service goes away; fixed values
/// bring it back. `abort` leaves the release (and its Service) alone.
#[tokio::test]
async fn failure_policy_reinstall_and_abort() {
    let (client, ns) = setup("policy").await;
    let bad = values_for("NodePort", "    httpsNodePort: 99999\n");
    for (name, policy) in [("rein", "reinstall"), ("abor", "abort")] {
        let spec = json!({"failurePolicy": policy, "backOffLimit": 3});
        apply_chart_with(&client, &ns, name, &values_for("NodePort", ""), spec.clone()).await;
        assert_eq!(job_done(&client, &ns, name).await, JobOutcome::Complete);
        let before = service_uid(&client, &ns, name).await.expect("installed");
        apply_chart_with(&client, &ns, name, &bad, spec.clone()).await;
        let job = format!("helm-install-{name}");
        wait_log(&ns, &job, "Error: UPGRADE FAILED: cannot patch").await;
        if policy == "reinstall" {
            eventually("the Service uninstalled by the reinstall", WAIT, || async {
                service_uid(&client, &ns, name).await.is_none().then_some(())
            })
            .await;
            wait_log(&ns, &job, "Deleted").await;
            apply_chart_with(&client, &ns, name, &values_for("NodePort", ""), spec).await;
            assert_eq!(job_done(&client, &ns, name).await, JobOutcome::Complete);
            let after = service_uid(&client, &ns, name).await.expect("installed again");
            assert_ne!(before, after, "a new Service");
        } else {
            let log = wait_log(&ns, &job, "waiting for operator intervention").await;
            assert!(log.contains("Release status is 'failed' and failure policy is 'abort'"), "{log}");
            assert_eq!(job_done(&client, &ns, name).await, JobOutcome::Failed);
            assert_eq!(service_uid(&client, &ns, name).await, Some(before), "left alone");
        }
    }
}

/// The vCluster pod restarts on every values change: its endpoint refuses
/// connections for a while, then answers again with the same kubeconfig.
#[tokio::test]
async fn a_values_change_restarts_the_vcluster_with_its_endpoint_down() {
    let (client, ns) = setup("restart").await;
    apply_chart(&client, &ns, "xi", &values_for("LoadBalancer", "")).await;
    let ip = wait_ingress(&client, &ns, "xi").await;
    let addr = format!("{ip}:443");
    let kc = with_server(&vc_kubeconfig(&client, &ns, "xi").await, &format!("https://{addr}"));
    eventually("endpoint answers", WAIT, || async { kube_rs_namespaces(&kc).await.ok() }).await;
    apply_chart(&client, &ns, "xi", &values_for("LoadBalancer", "    annotations: {note: two}\n")).await;
    eventually("endpoint down while the pod restarts", WAIT, || async { refused(&addr).await.then_some(()) }).await;
    eventually("endpoint back", WAIT, || async { kube_rs_namespaces(&kc).await.ok() }).await;
}

fn with_client(kubeconfig: &str, pair: &hostsim::pki::CertPair) -> String {
    use base64::Engine;
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let mut doc: serde_yaml::Value = serde_yaml::from_str(kubeconfig).unwrap();
    for u in doc["users"].as_sequence_mut().unwrap() {
        u["user"]["client-certificate-data"] = b64(&pair.cert_pem).into();
        u["user"]["client-key-data"] = b64(&pair.key_pem).into();
    }
    serde_yaml::to_string(&doc).unwrap()
}

/// A client certificate from another CA, or an expired one from the right CA,
/// completes the TLS handshake and gets HTTP 401 with a `Status` body, from
/// vCluster's endpoint as from kube-apiserver.
#[tokio::test]
async fn a_foreign_or_expired_client_certificate_gets_401() {
    let (client, ns) = setup("auth").await;
    apply_chart(&client, &ns, "pi", &values_for("LoadBalancer", "")).await;
    let ip = wait_ingress(&client, &ns, "pi").await;
    let kc = with_server(&vc_kubeconfig(&client, &ns, "pi").await, &format!("https://{ip}:443"));
    eventually("endpoint answers", WAIT, || async { kube_rs_namespaces(&kc).await.ok() }).await;
    let certs: k8s_openapi::api::core::v1::Secret = Api::namespaced(client.clone(), &ns).get("pi-certs").await.unwrap();
    let text = |k: &str| String::from_utf8(certs.data.as_ref().unwrap()[k].0.clone()).unwrap();
    let vc_ca = Ca::from_pem(hostsim::pki::CertPair { cert_pem: text("ca.crt"), key_pem: text("ca.key") }).unwrap();
    let pki = host().data_dir.join("pki");
    let read = |f: &str| std::fs::read_to_string(pki.join(f)).unwrap();
    let host_ca = Ca::from_pem(hostsim::pki::CertPair { cert_pem: read("ca.crt"), key_pem: read("ca.key") }).unwrap();
    let host_kc = std::fs::read_to_string(&host().kubeconfig).unwrap();
    let foreign = Ca::generate("someone-else").unwrap().issue_client("mallory", &["system:masters"]).unwrap();
    for (what, kubeconfig, own_ca) in [("vcluster", kc, vc_ca), ("apiserver", host_kc, host_ca)] {
        let expired = own_ca.issue_expired_client("admin", &["system:masters"]).unwrap();
        for (how, pair) in [("foreign", &foreign), ("expired", &expired)] {
            let bad = with_client(&kubeconfig, pair);
            let err = kube_rs_namespaces(&bad).await.expect_err("must be refused");
            let chain = format!("{err:#}");
            assert!(chain.contains("401") && chain.contains("Unauthorized"), "{what} {how}: {chain}");
            let out = kubectl(&bad, &format!("{what}-{how}"), &["get", "ns"]);
            let stderr = String::from_utf8_lossy(&out.stderr);
            // kubectl's words for a 401.
            assert!(stderr.contains("You must be logged in to the server"), "{what} {how}: {stderr}");
        }
    }
}

/// kube-controller-manager runs: a deleted namespace (with a released chart in it)
/// disappears; a deleted Job's pods are garbage-collected.
#[tokio::test]
async fn namespace_deletion_and_garbage_collection_are_real() {
    let (client, ns) = setup("gc").await;
    apply_chart(&client, &ns, "rho", &values_for("ClusterIP", "")).await;
    assert_eq!(job_done(&client, &ns, "rho").await, JobOutcome::Complete);
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let lp = ListParams::default().labels("batch.kubernetes.io/job-name=helm-install-rho");
    assert!(!pods.list(&lp).await.unwrap().items.is_empty());
    let jobs: Api<Job> = Api::namespaced(client.clone(), &ns);
    let bg = DeleteParams { propagation_policy: Some(kube::api::PropagationPolicy::Background), ..Default::default() };
    jobs.delete("helm-install-rho", &bg).await.unwrap();
    eventually("pods collected with their Job", WAIT, || async {
        let listed = pods.list(&lp).await.ok()?;
        listed.items.is_empty().then_some(())
    })
    .await;

    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces.delete(&ns, &DeleteParams::default()).await.unwrap();
    eventually("namespace gone", WAIT, || async { namespaces.get_opt(&ns).await.ok()?.is_none().then_some(()) }).await;
}

/// Chart source: a version the repository does not have fails as helm would,
/// in the Job's log.
#[tokio::test]
async fn an_unknown_chart_version_fails_like_helm() {
    let (client, ns) = setup("version").await;
    apply_chart_with(&client, &ns, "sigma", &values_for("ClusterIP", ""), json!({"version": "9.9.9"})).await;
    let log = wait_log(&ns, "helm-install-sigma", "not found").await;
    assert!(
        log.contains("Error: INSTALLATION FAILED: chart \"vcluster\" matching 9.9.9 not found in sigma index. (try 'helm repo update'): no chart version found for vcluster-9.9.9"),
        "{log}"
    );
    apply_chart_with(&client, &ns, "tau", &values_for("ClusterIP", ""), json!({"repo": "https://example.com/charts"}))
        .await;
    wait_log(&ns, "helm-install-tau", "is not a valid chart repository or cannot be reached").await;
    // The whole schema is checked, not only what KubeBYON writes.
    let typo = "controlPlane:\n  statefulSet:\n    resources:\n      limitz: {}\n";
    apply_chart(&client, &ns, "upsilon", typo).await;
    wait_log(
        &ns,
        "helm-install-upsilon",
        "- at '/controlPlane/statefulSet/resources': additional properties 'limitz' not allowed",
    )
    .await;
}

/// Nodes as k3s registers them, and MetalLB's configuration where MetalLB keeps it.
#[tokio::test]
async fn nodes_and_address_pools_are_api_objects() {
    let (client, _ns) = setup("nodes").await;
    let nodes: Vec<Node> = Api::<Node>::all(client.clone()).list(&ListParams::default()).await.unwrap().items;
    let internal: BTreeMap<String, String> = nodes
        .iter()
        .map(|n| {
            let st = n.status.clone().unwrap();
            let ip = st.addresses.unwrap().into_iter().find(|a| a.type_ == "InternalIP").unwrap().address;
            let ready = st.conditions.unwrap().iter().any(|c| c.type_ == "Ready" && c.status == "True");
            assert!(ready, "{ip} Ready");
            (n.name_any(), ip)
        })
        .collect();
    assert_eq!(
        internal.values().cloned().collect::<Vec<_>>(),
        [net().node().to_string(), net().other_node().to_string()]
    );
    let out = kubectl(
        &std::fs::read_to_string(&host().kubeconfig).unwrap(),
        "admin",
        &["get", "ipaddresspools", "-n", "metallb-system", "-o", "name"],
    );
    let listed = String::from_utf8_lossy(&out.stdout);
    for name in ["default", "tiny", "named"] {
        assert!(listed.contains(&format!("ipaddresspool.metallb.io/{name}")), "{listed}");
    }
}

/// Each test host has its own node and LoadBalancer addresses: a second host
/// beside this binary's (and beside `scripts/host-up.sh`'s, on 127.0.0.x) serves
/// the same nodePort without a clash.
#[tokio::test]
async fn a_second_host_shares_no_address() {
    let (client, ns) = setup("twin").await;
    let guard = TestHost::start(Some(Simulator::Process { bin: env!("CARGO_BIN_EXE_hostsim").into(), args: vec![] }))
        .expect("second host");
    let other = &guard.host;
    assert_ne!(other.net, net());
    for n in [net(), other.net] {
        assert_ne!(n.0[0], 0, "never 127.0.0.x, the hand-started host's");
    }
    let other_client = other.client().await.unwrap();
    let other_ns = other.namespace(&other_client, "twin").await.unwrap();
    let values = values_for("NodePort", "    httpsNodePort: 31777\n");
    apply_chart(&client, &ns, "phi", &values).await;
    apply_chart(&other_client, &other_ns, "phi", &values).await;
    for (c, n, host_net) in [(&client, &ns, net()), (&other_client, &other_ns, other.net)] {
        let kc = with_server(&vc_kubeconfig(c, n, "phi").await, &format!("https://{}:31777", host_net.node()));
        eventually("node port answers on each host", WAIT, || async { kube_rs_namespaces(&kc).await.ok() }).await;
    }
}
