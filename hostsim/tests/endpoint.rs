//! What the simulated node does where a console looks, on a host whose
//! controllers are upstream's own (helm-controller with the real helm and chart,
//! the scheduler, kube-controller-manager, MetalLB's controller): vCluster's
//! certificate, kubeconfig Secret and endpoint (relaying here: see `node.rs` for
//! the real API server), kube-proxy's NodePort and LoadBalancer listeners,
//! MetalLB's speaker, the Nodes, the chart repository, per-host addresses.

mod common;

use std::collections::{BTreeMap, BTreeSet};

use common::*;
use hostsim::pki::Ca;
use hostsim::testhost::{Net, Simulator, TestHost};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod, Secret, Service};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams};
use serde_json::json;

/// `kubectl get ns`: stdout on success, stderr on failure.
fn kubectl_ok(kubeconfig: &str, tag: &str) -> Result<String, String> {
    let out = kubectl(kubeconfig, tag, &["get", "ns", "-o", "name"]);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    if out.status.success() { Ok(stdout) } else { Err(stderr) }
}

#[tokio::test]
async fn load_balancer_chart_gives_a_working_kubeconfig() {
    let (client, ns) = setup("lb").await;
    apply_chart(&client, &ns, "alpha", &values_for("LoadBalancer", "")).await;
    assert_eq!(job_done(&client, &ns, "alpha").await, JobOutcome::Complete);

    let svc = service(&client, &ns, "alpha").await;
    let spec = svc.spec.as_ref().unwrap();
    let labels = svc.metadata.labels.clone().unwrap();
    assert_eq!(labels["app"], "vcluster");
    assert_eq!(labels["release"], "alpha");
    assert_eq!(spec.selector.as_ref().unwrap()["release"], "alpha");

    let ip = wait_ingress(&client, &ns, "alpha").await;
    let pool: Vec<String> = (200..=229).map(|n| net().addr(n).to_string()).collect();
    assert!(pool.contains(&ip), "{ip} from the test pool");

    let kc = vc_kubeconfig(&client, &ns, "alpha").await;
    assert!(kc.contains("server: https://localhost:8443"), "{kc}");
    let secret: Secret = Api::namespaced(client.clone(), &ns).get("vc-alpha").await.unwrap();
    let keys: Vec<_> = secret.data.unwrap().into_keys().collect();
    assert_eq!(keys, ["certificate-authority", "client-certificate", "client-key", "config"]);

    let public = with_server(&kc, &format!("https://{ip}:443"));
    let listed =
        eventually("kubectl through the LoadBalancer", WAIT, || async { kubectl_ok(&public, "alpha").ok() }).await;
    assert!(listed.contains(&format!("namespace/{ns}")), "relayed to the host: {listed}");
    let names = kube_rs_namespaces(&public).await.expect("kube-rs through the LoadBalancer");
    assert!(names.contains(&ns));

    // Without a client certificate the request reaches the API server anonymously
    // (kube-rs: kubectl would prompt for a password instead).
    let err = kube_rs_namespaces(&without_user(&public)).await.expect_err("anonymous is forbidden");
    let chain = format!("{err:#}");
    assert!(chain.contains("User \"system:anonymous\" cannot list resource \"namespaces\""), "{chain}");
}

#[tokio::test]
async fn host_missing_from_certificate_fails_until_added_to_extra_sans() {
    let (client, ns) = setup("san").await;
    apply_chart(&client, &ns, "beta", &values_for("NodePort", "")).await;
    let svc = service(&client, &ns, "beta").await;
    let np = node_port(&svc, "https").expect("nodePort");
    let kc = vc_kubeconfig(&client, &ns, "beta").await;

    // The node the scheduler put the pod on is in the certificate.
    let (on, other_node) = pod_node(&client, &ns, "beta").await;
    let local = with_server(&kc, &format!("https://{on}:{np}"));
    eventually("node port on the pod's node", WAIT, || async { kubectl_ok(&local, "beta-local").ok() }).await;

    // The other node's address is not: a SAN error from kubectl and from kube-rs.
    let other = with_server(&kc, &format!("https://{other_node}:{np}"));
    let err = eventually("SAN error", WAIT, || async { kubectl_ok(&other, "beta-other").err() }).await;
    assert!(err.contains("x509: certificate is valid for") && err.contains(&format!("not {other_node}")), "{err}");
    let err = kube_rs_namespaces(&other).await.expect_err("kube-rs must reject the certificate");
    let chain = format!("{err:#}");
    assert!(chain.contains("NotValidForName") || chain.contains("not valid for name"), "{chain}");

    // Added to extraSANs: the values change rolls the pod, whose new certificate
    // holds it (wherever the new pod lands): the same kubeconfig works.
    let extra = format!("  proxy:\n    extraSANs:\n      - {other_node}\n");
    apply_chart(&client, &ns, "beta", &values_for("NodePort", &extra)).await;
    eventually("kubectl after extraSANs", WAIT, || async { kubectl_ok(&other, "beta-other").ok() }).await;
    kube_rs_namespaces(&other).await.expect("kube-rs after extraSANs");
}

#[tokio::test]
async fn two_clusters_get_their_own_addresses_and_certificates() {
    let (client, ns) = setup("two").await;
    apply_chart(&client, &ns, "one", &values_for("LoadBalancer", "")).await;
    apply_chart(&client, &ns, "two", &values_for("LoadBalancer", "")).await;
    let (ip1, ip2) = (wait_ingress(&client, &ns, "one").await, wait_ingress(&client, &ns, "two").await);
    assert_ne!(ip1, ip2);
    let kc1 = vc_kubeconfig(&client, &ns, "one").await;
    let kc2 = vc_kubeconfig(&client, &ns, "two").await;
    for (kc, ip, tag) in [(&kc1, &ip1, "one"), (&kc2, &ip2, "two")] {
        let public = with_server(kc, &format!("https://{ip}:443"));
        eventually(&format!("cluster {tag}"), WAIT, || async { kubectl_ok(&public, tag).ok() }).await;
    }
    // Addresses are stable once given.
    assert_eq!(wait_ingress(&client, &ns, "one").await, ip1);
    assert_eq!(wait_ingress(&client, &ns, "two").await, ip2);
    // Cluster one's kubeconfig does not trust cluster two's endpoint: another cluster.
    let crossed = with_server(&kc1, &format!("https://{ip2}:443"));
    let err = kubectl_ok(&crossed, "crossed").expect_err("another cluster's CA");
    assert!(err.contains("certificate signed by unknown authority"), "{err}");
}

/// kube-proxy: a Service's NodePort and LoadBalancer address stop answering
/// once the Service no longer has them.
#[tokio::test]
async fn switching_to_cluster_ip_closes_the_old_endpoints() {
    let (client, ns) = setup("close").await;
    apply_chart(&client, &ns, "gamma", &values_for("NodePort", "")).await;
    let np = node_port(&service(&client, &ns, "gamma").await, "https").expect("nodePort");
    let (on, _) = pod_node(&client, &ns, "gamma").await;
    let addr = format!("{on}:{np}");
    let kc = with_server(&vc_kubeconfig(&client, &ns, "gamma").await, &format!("https://{addr}"));
    eventually("node port answers", WAIT, || async { kubectl_ok(&kc, "gamma").ok() }).await;

    apply_chart(&client, &ns, "gamma", &values_for("ClusterIP", "")).await;
    eventually("old node port refused", WAIT, || async { refused(&addr).await.then_some(()) }).await;
    let svc = service(&client, &ns, "gamma").await;
    assert_eq!(svc.spec.unwrap().type_.as_deref(), Some("ClusterIP"));
    assert_eq!(job_done(&client, &ns, "gamma").await, JobOutcome::Complete);

    // LoadBalancer, then back to ClusterIP: the ingress address stops answering too.
    apply_chart(&client, &ns, "gamma", &values_for("LoadBalancer", "")).await;
    let ip = wait_ingress(&client, &ns, "gamma").await;
    let lb_addr = format!("{ip}:443");
    eventually("LB answers", WAIT, || async { (!refused(&lb_addr).await).then_some(()) }).await;
    apply_chart(&client, &ns, "gamma", &values_for("ClusterIP", "")).await;
    eventually("LB address refused", WAIT, || async { refused(&lb_addr).await.then_some(()) }).await;
    let api: Api<Service> = Api::namespaced(client.clone(), &ns);
    eventually("ingress cleared", WAIT, || async { ingress_ip(&api.get("gamma").await.ok()?).is_none().then_some(()) })
        .await;
}

/// A values change rolls the StatefulSet: the endpoint refuses connections while
/// the new pod starts (no ready endpoint), then answers with the same kubeconfig.
#[tokio::test]
async fn a_values_change_rolls_the_vcluster_with_its_endpoint_down() {
    let (client, ns) = setup("restart").await;
    apply_chart(&client, &ns, "xi", &values_for("LoadBalancer", "")).await;
    let ip = wait_ingress(&client, &ns, "xi").await;
    let addr = format!("{ip}:443");
    let kc = with_server(&vc_kubeconfig(&client, &ns, "xi").await, &format!("https://{addr}"));
    eventually("endpoint answers", WAIT, || async { kube_rs_namespaces(&kc).await.ok() }).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let first = pods.get("xi-0").await.unwrap().uid();
    let values = "controlPlane:\n  service:\n    spec:\n      type: LoadBalancer\n  statefulSet:\n    annotations: {note: two}\n";
    apply_chart(&client, &ns, "xi", values).await;
    eventually("endpoint down while the pod rolls", WAIT, || async { refused(&addr).await.then_some(()) }).await;
    eventually("endpoint back", WAIT, || async { kube_rs_namespaces(&kc).await.ok() }).await;
    assert_ne!(pods.get("xi-0").await.unwrap().uid(), first, "a new pod");
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
    let certs: Secret = Api::namespaced(client.clone(), &ns).get("pi-certs").await.unwrap();
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

/// kube-controller-manager runs: a finished Job's pods are garbage-collected with
/// it; a deleted namespace (with a released chart in it) disappears.
#[tokio::test]
async fn namespace_deletion_and_garbage_collection_are_real() {
    let (client, ns) = setup("gc").await;
    apply_chart(&client, &ns, "rho", &values_for("ClusterIP", "")).await;
    assert_eq!(job_done(&client, &ns, "rho").await, JobOutcome::Complete);
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let lp = ListParams::default().labels("batch.kubernetes.io/job-name=helm-install-rho");
    let uids = |listed: Vec<Pod>| listed.into_iter().filter_map(|p| p.metadata.uid).collect::<BTreeSet<String>>();
    let job_pods = uids(pods.list(&lp).await.unwrap().items);
    assert!(!job_pods.is_empty());
    let jobs: Api<Job> = Api::namespaced(client.clone(), &ns);
    let bg = DeleteParams { propagation_policy: Some(kube::api::PropagationPolicy::Background), ..Default::default() };
    jobs.delete("helm-install-rho", &bg).await.unwrap();
    // helm-controller re-creates a deleted install Job (same name, same label):
    // the pods that must go are the ones the deleted Job owned, by UID.
    eventually("pods collected with their Job", WAIT, || async {
        let left = uids(pods.list(&lp).await.ok()?.items);
        left.is_disjoint(&job_pods).then_some(())
    })
    .await;

    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces.delete(&ns, &DeleteParams::default()).await.unwrap();
    eventually("namespace gone", WAIT, || async { namespaces.get_opt(&ns).await.ok()?.is_none().then_some(()) }).await;
}

/// The chart repository (the node's mirror of `https://charts.loft.sh`, through
/// the Job's HTTPS proxy): a version it does not have, a repository it does not
/// answer for and a values typo fail in the real helm's words, in the Job's log.
#[tokio::test]
async fn the_chart_repository_answers_like_an_air_gapped_mirror() {
    let (client, ns) = setup("version").await;
    apply_chart_with(&client, &ns, "sigma", &values_for("ClusterIP", ""), json!({"version": "9.9.9"})).await;
    let log = wait_log(&ns, "helm-install-sigma", "not found").await;
    assert!(log.contains("chart \"vcluster\" matching 9.9.9 not found in sigma index"), "{log}");
    apply_chart_with(&client, &ns, "tau", &values_for("ClusterIP", ""), json!({"repo": "https://example.com/charts"}))
        .await;
    wait_log(&ns, "helm-install-tau", "is not a valid chart repository or cannot be reached").await;
    // The whole schema is checked, not only what KubeBYON writes.
    let typo = "controlPlane:\n  statefulSet:\n    resources:\n      limitz: {}\n";
    apply_chart(&client, &ns, "upsilon", typo).await;
    wait_log(&ns, "helm-install-upsilon", "additional properties 'limitz' not allowed").await;
}

/// Nodes as k3s registers them, with capacity the scheduler fills, and
/// MetalLB's configuration where MetalLB keeps it.
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
            let cpu = st.allocatable.unwrap_or_default().get("cpu").map(|q| q.0.clone());
            assert_eq!(cpu.as_deref(), Some("32"), "{ip} allocatable CPU");
            (n.name_any(), ip)
        })
        .collect();
    assert_eq!(
        internal.values().cloned().collect::<Vec<_>>(),
        [net().node().to_string(), net().other_node().to_string()]
    );
    // Each node's own kubelet listens where its Node says: the address and
    // port kube-apiserver dials for `kubectl logs` of a pod on that node (its
    // node proxy refuses loopback addresses, so dial it here).
    for n in &nodes {
        let st = n.status.clone().unwrap();
        let port = st.daemon_endpoints.and_then(|d| d.kubelet_endpoint).map(|e| e.port).unwrap();
        let ip = &internal[&n.name_any()];
        let dialed = tokio::net::TcpStream::connect(format!("{ip}:{port}")).await;
        assert!(dialed.is_ok(), "{}'s kubelet at {ip}:{port}: {dialed:?}", n.name_any());
    }
    let out = kubectl(
        &std::fs::read_to_string(&host().kubeconfig).unwrap(),
        "admin",
        &["get", "ipaddresspools,l2advertisements", "-n", "metallb-system", "-o", "name"],
    );
    let listed = String::from_utf8_lossy(&out.stdout);
    for name in ["ipaddresspool.metallb.io/default", "ipaddresspool.metallb.io/tiny", "l2advertisement.metallb.io/all"]
    {
        assert!(listed.contains(name), "{listed}");
    }
}

/// Each test host has its own node and LoadBalancer addresses: a second host
/// beside this binary's (and beside `scripts/host-up.sh`'s, on 127.0.0.x) serves
/// the same nodePort without a clash.
#[tokio::test]
async fn a_second_host_shares_no_address() {
    let (client, ns) = setup("twin").await;
    let guard = TestHost::start(Some(Simulator::Node(|net: Net| net.node_config()))).expect("second host");
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
        let pods: Api<Pod> = Api::namespaced(c.clone(), n);
        let on = eventually("the pod's node", WAIT, || async { pods.get("phi-0").await.ok()?.status?.host_ip }).await;
        assert_eq!(on.parse::<std::net::Ipv4Addr>().unwrap().octets()[..3], host_net.node().octets()[..3]);
        let kc = with_server(&vc_kubeconfig(c, n, "phi").await, &format!("https://{on}:31777"));
        eventually("node port answers on each host", WAIT, || async { kube_rs_namespaces(&kc).await.ok() }).await;
    }
}

/// An API server outage, as the test-support API offers it: clients fail while
/// it is down; etcd keeps everything.
#[tokio::test]
async fn the_api_server_can_be_stopped_and_started_keeping_etcd() {
    let guard = TestHost::start(None).expect("bare test host");
    let host = &guard.host;
    let client = host.client().await.unwrap();
    let ns = host.namespace(&client, "outage").await.unwrap();
    let maps: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(client.clone(), &ns);
    let cm = serde_json::from_value(json!({"metadata": {"name": "kept"}, "data": {"k": "v"}})).unwrap();
    maps.create(&Default::default(), &cm).await.unwrap();

    host.stop_api_server().unwrap();
    assert!(maps.get("kept").await.is_err(), "no API server, no answer");

    host.start_api_server().unwrap();
    let client = host.client().await.unwrap();
    let maps: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(client, &ns);
    let kept = maps.get("kept").await.expect("the object survived in etcd");
    assert_eq!(kept.data.unwrap()["k"], "v");
}
