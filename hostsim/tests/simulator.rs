//! The simulated k3s host around the real API server: helm-controller with the
//! vCluster chart, vCluster's kubeconfig Secret and API endpoint, the
//! LoadBalancer provider and kube-proxy, used the way KubeBYON uses them.

mod common;

use common::*;
use k8s_openapi::api::core::v1::{Secret, Service};
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::json;

fn kubectl_ok(kubeconfig: &str, tag: &str) -> Result<String, String> {
    kubectl_args(kubeconfig, tag, &[])
}

/// `kubectl get ns` with extra flags; stdout on success, stderr on failure.
fn kubectl_args(kubeconfig: &str, tag: &str, flags: &[&str]) -> Result<String, String> {
    let mut args = flags.to_vec();
    args.extend(["get", "ns", "-o", "name"]);
    let out = kubectl(kubeconfig, tag, &args);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    if out.status.success() { Ok(stdout) } else { Err(stderr) }
}

#[tokio::test]
async fn load_balancer_chart_gives_a_working_kubeconfig() {
    let (client, ns) = setup("lb").await;
    apply_chart(&client, &ns, "alpha", &values_for("LoadBalancer", "")).await;
    assert_eq!(job_done(&client, &ns, "alpha").await, JobOutcome::Complete);
    assert_eq!(failed_condition(&client, &ns, "alpha").await, ("False".into(), String::new(), String::new()));

    let svc = service(&client, &ns, "alpha").await;
    let spec = svc.spec.as_ref().unwrap();
    let ports: Vec<_> = spec.ports.iter().flatten().map(|p| (p.name.clone().unwrap(), p.port)).collect();
    assert_eq!(ports, vec![("https".to_owned(), 443)], "no kubelet port with LoadBalancer");
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
    assert!(listed.contains(&format!("namespace/{ns}")), "{listed}");
    let names = kube_rs_namespaces(&public).await.expect("kube-rs through the LoadBalancer");
    assert!(names.contains(&ns));

    // Without a client certificate the request reaches the API server anonymously
    // (kube-rs: kubectl would prompt for a password instead).
    let err = kube_rs_namespaces(&without_user(&public)).await.expect_err("anonymous is forbidden");
    let chain = format!("{err:#}");
    assert!(chain.contains("User \"system:anonymous\" cannot list resource \"namespaces\""), "{chain}");
}

#[tokio::test]
async fn hostname_load_balancer_is_verified_by_name() {
    let (client, ns) = setup("name").await;
    let extra = "    annotations:\n      metallb.io/address-pool: named\n";
    apply_chart(&client, &ns, "eta", &values_for("LoadBalancer", extra)).await;
    let api: Api<Service> = Api::namespaced(client.clone(), &ns);
    let hostname = eventually("ingress hostname", WAIT, || async {
        let svc = api.get("eta").await.ok()?;
        svc.status?.load_balancer?.ingress?.first()?.hostname.clone()
    })
    .await;
    let named = net().addr(231);
    assert_eq!(hostname, format!("{}.lb.hostsim.test", named.to_string().replace('.', "-")));

    // The name is in no DNS: connect to the address, verify the name.
    let public = with_server(&vc_kubeconfig(&client, &ns, "eta").await, &format!("https://{named}:443"));
    eventually("kubectl with tls-server-name", WAIT, || async {
        kubectl_args(&public, "eta", &["--tls-server-name", &hostname]).ok()
    })
    .await;
    let err = kubectl_ok(&public, "eta-ip").expect_err("the address itself is not a SAN");
    assert!(err.contains(&format!("not {named}")), "{err}");
}

#[tokio::test]
async fn host_missing_from_certificate_fails_until_added_to_extra_sans() {
    let (client, ns) = setup("san").await;
    apply_chart(&client, &ns, "beta", &values_for("NodePort", "")).await;
    let svc = service(&client, &ns, "beta").await;
    let np = node_port(&svc, "https").expect("nodePort");
    let kc = vc_kubeconfig(&client, &ns, "beta").await;

    // The vCluster pod's node is in the certificate.
    let local = with_server(&kc, &format!("https://{}:{np}", net().node()));
    eventually("node port on the pod's node", WAIT, || async { kubectl_ok(&local, "beta-local").ok() }).await;

    // Another node's address is not: a SAN error from kubectl and from kube-rs.
    let other_node = net().other_node();
    let other = with_server(&kc, &format!("https://{other_node}:{np}"));
    let err = eventually("SAN error", WAIT, || async { kubectl_ok(&other, "beta-other").err() }).await;
    assert!(err.contains("x509: certificate is valid for") && err.contains(&format!("not {other_node}")), "{err}");
    let err = kube_rs_namespaces(&other).await.expect_err("kube-rs must reject the certificate");
    let chain = format!("{err:#}");
    assert!(chain.contains("NotValidForName") || chain.contains("not valid for name"), "{chain}");

    // Added to extraSANs and the values updated: the same kubeconfig works.
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

#[tokio::test]
async fn switching_to_cluster_ip_closes_the_old_endpoints() {
    let (client, ns) = setup("close").await;
    apply_chart(&client, &ns, "gamma", &values_for("NodePort", "")).await;
    let np = node_port(&service(&client, &ns, "gamma").await, "https").expect("nodePort");
    let addr = format!("{}:{np}", net().node());
    let kc = with_server(&vc_kubeconfig(&client, &ns, "gamma").await, &format!("https://{addr}"));
    eventually("node port answers", WAIT, || async { kubectl_ok(&kc, "gamma").ok() }).await;

    apply_chart(&client, &ns, "gamma", &values_for("ClusterIP", "")).await;
    eventually("old node port refused", WAIT, || async { refused(&addr).await.then_some(()) }).await;
    let svc = service(&client, &ns, "gamma").await;
    assert_eq!(svc.spec.unwrap().type_.as_deref(), Some("ClusterIP"));
    assert_eq!(job_done(&client, &ns, "gamma").await, JobOutcome::Complete);
    assert_eq!(failed_condition(&client, &ns, "gamma").await.0, "False");

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

/// helm's words are in the Job's log, never in the HelmChart's conditions:
/// those say `Failed=False` while the Job retries, and `Failed=True` with
/// helm-controller's fixed reason and message once its backoff limit is reached.
#[tokio::test]
async fn bad_values_fail_like_helm_and_recover() {
    let (client, ns) = setup("bad").await;
    let limit = json!({"backOffLimit": 3});
    apply_chart_with(&client, &ns, "delta", "controlPlane: [unclosed\n", limit).await;
    let log = wait_log(&ns, "helm-install-delta", "failed to parse").await;
    assert!(log.contains("error converting YAML to JSON"), "{log}");
    // helm has failed, yet the chart still says only that its Job exists.
    let conds = hostsim::testsupport::chart_conditions(&client, &ns, "delta").await.unwrap();
    let created = (
        "JobCreated".to_owned(),
        "True".to_owned(),
        "Job created".to_owned(),
        format!("Applying HelmChart using Job {ns}/helm-install-delta"),
    );
    assert!(conds.contains(&created), "{conds:?}");
    assert!(conds.iter().any(|c| c.0 == "Failed" && c.1 == "False" && c.3.is_empty()), "{conds:?}");
    // After the backoff limit: helm-controller's words, not helm's.
    assert_eq!(job_done(&client, &ns, "delta").await, JobOutcome::Failed);
    let want = (
        "True".to_owned(),
        "Job failed".to_owned(),
        "Job has reached configured number of retries without succeeding".to_owned(),
    );
    eventually("Failed=True", WAIT, || async { (failed_condition(&client, &ns, "delta").await == want).then_some(()) })
        .await;
    wait_event(&client, &ns, "delta", "JobFailed").await;

    let typo = "controlPlane:\n  service:\n    typo: 1\n    httpsNodePort: x\n";
    // The default backoff limit (1000): the Job keeps retrying, its log stays readable.
    apply_chart(&client, &ns, "delta", typo).await;
    let log = wait_log(&ns, "helm-install-delta", "additional properties 'typo' not allowed").await;
    let head = "Error: INSTALLATION FAILED: values don't meet the specifications of the schema(s) in the following chart(s):\nvcluster:\n";
    assert!(log.contains(head), "{log}");
    assert!(log.contains("- at '/controlPlane/service/httpsNodePort': got string, want integer"), "{log}");

    // Valid for the chart, invalid for the API server: its own message, in the log.
    apply_chart(&client, &ns, "delta", &values_for("Bogus", "")).await;
    let log = wait_log(&ns, "helm-install-delta", "Unsupported value").await;
    assert!(log.contains("spec.type: Unsupported value: \"Bogus\""), "{log}");
    let services: Api<Service> = Api::namespaced(client.clone(), &ns);
    assert!(services.get_opt("delta").await.unwrap().is_none(), "nothing installed yet");

    // Fixed values: installed, the condition clears.
    apply_chart(&client, &ns, "delta", &values_for("ClusterIP", "")).await;
    assert_eq!(job_done(&client, &ns, "delta").await, JobOutcome::Complete);
    assert_eq!(failed_condition(&client, &ns, "delta").await.0, "False");
    service(&client, &ns, "delta").await;
}

fn lb_service(name: &str, annotations: serde_json::Value, class: Option<&str>) -> Service {
    let mut spec = json!({"type": "LoadBalancer", "selector": {"app": name},
                          "ports": [{"port": 443, "targetPort": 8443}]});
    if let Some(c) = class {
        spec["loadBalancerClass"] = json!(c);
    }
    serde_json::from_value(json!({"metadata": {"name": name, "annotations": annotations}, "spec": spec})).unwrap()
}

#[tokio::test]
async fn load_balancer_provider_pools_annotations_and_classes() {
    let (client, ns) = setup("pool").await;
    let api: Api<Service> = Api::namespaced(client.clone(), &ns);
    let pp = PostParams::default();
    let tiny_ip = net().addr(230).to_string();
    let tiny = json!({"metallb.io/address-pool": "tiny"});
    api.create(&pp, &lb_service("first", tiny.clone(), None)).await.unwrap();
    assert_eq!(wait_ingress(&client, &ns, "first").await, tiny_ip);
    let ev = wait_event(&client, &ns, "first", "IPAllocated").await;
    assert_eq!(ev.type_.as_deref(), Some("Normal"));
    assert_eq!(ev.message.unwrap(), format!("Assigned IP [\"{tiny_ip}\"]"));

    // The pool has one address: the second Service stays pending, with an Event.
    api.create(&pp, &lb_service("second", tiny, None)).await.unwrap();
    let ev = wait_event(&client, &ns, "second", "AllocationFailed").await;
    assert_eq!(
        ev.message.unwrap(),
        format!("Failed to allocate IP for \"{ns}/second\": no available IPs in pool tiny")
    );
    assert_eq!(ingress_ip(&api.get("second").await.unwrap()), None);

    // Another provider's class: left pending; MetalLB only logs it (no Event).
    api.create(&pp, &lb_service("other", json!({}), Some("example.com/other"))).await.unwrap();

    // An address asked for by annotation, and one outside every pool.
    let wanted_ip = net().addr(229).to_string();
    let want = json!({"metallb.io/loadBalancerIPs": wanted_ip});
    api.create(&pp, &lb_service("wanted", want, None)).await.unwrap();
    assert_eq!(wait_ingress(&client, &ns, "wanted").await, wanted_ip);
    let outside = json!({"metallb.io/loadBalancerIPs": "10.1.2.3"});
    api.create(&pp, &lb_service("outside", outside, None)).await.unwrap();
    let ev = wait_event(&client, &ns, "outside", "AllocationFailed").await;
    assert!(ev.message.unwrap().ends_with("[\"10.1.2.3\"] is not allowed in config"));
    assert!(events_for(&client, &ns, "other").await.is_empty(), "no Event for a class not served");
    assert_eq!(ingress_ip(&api.get("other").await.unwrap()), None);

    // Freeing the tiny pool's address lets the pending Service have it.
    api.delete("first", &DeleteParams::default()).await.unwrap();
    assert_eq!(wait_ingress(&client, &ns, "second").await, tiny_ip);
}

/// `metallb.io/allow-shared-ip`: the same key and no port clash share an address;
/// a clashing port, or no key, is refused in MetalLB's words.
#[tokio::test]
async fn services_with_the_same_sharing_key_share_an_address() {
    let (client, ns) = setup("share").await;
    let api: Api<Service> = Api::namespaced(client.clone(), &ns);
    let pp = PostParams::default();
    let ip = net().addr(228).to_string();
    let svc = |name: &str, port: i32, key: Option<&str>| -> Service {
        let mut annotations = json!({"metallb.io/loadBalancerIPs": ip});
        if let Some(k) = key {
            annotations["metallb.io/allow-shared-ip"] = json!(k);
        }
        serde_json::from_value(json!({
            "metadata": {"name": name, "annotations": annotations},
            "spec": {"type": "LoadBalancer", "selector": {"app": name},
                     "ports": [{"port": port, "targetPort": 8443}]},
        }))
        .unwrap()
    };
    api.create(&pp, &svc("web", 443, Some("k1"))).await.unwrap();
    assert_eq!(wait_ingress(&client, &ns, "web").await, ip);
    api.create(&pp, &svc("alt", 8443, Some("k1"))).await.unwrap();
    assert_eq!(wait_ingress(&client, &ns, "alt").await, ip);
    api.create(&pp, &svc("clash", 443, Some("k1"))).await.unwrap();
    let ev = wait_event(&client, &ns, "clash", "AllocationFailed").await;
    assert!(ev.message.unwrap().ends_with(&format!("port TCP/443 is already in use on \"{ip}\"")));
    api.create(&pp, &svc("loner", 9443, None)).await.unwrap();
    let ev = wait_event(&client, &ns, "loner", "AllocationFailed").await;
    let msg = ev.message.unwrap();
    assert!(msg.contains(&format!("can't change sharing key for \"{ns}/loner\", address also in use by")), "{msg}");
}

#[tokio::test]
async fn deleting_the_helm_chart_uninstalls_the_release() {
    let (client, ns) = setup("del").await;
    apply_chart(&client, &ns, "omega", &values_for("LoadBalancer", "")).await;
    let ip = wait_ingress(&client, &ns, "omega").await;
    let addr = format!("{ip}:443");
    vc_kubeconfig(&client, &ns, "omega").await;
    let charts = helmcharts(&client, &ns);
    let hc = charts.get("omega").await.unwrap();
    assert!(hc.metadata.finalizers.unwrap().contains(&"wrangler.cattle.io/on-helm-chart-remove".to_owned()));

    charts.delete("omega", &DeleteParams::default()).await.unwrap();
    eventually("HelmChart gone", WAIT, || async { charts.get_opt("omega").await.ok()?.is_none().then_some(()) }).await;
    let services: Api<Service> = Api::namespaced(client.clone(), &ns);
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    assert!(services.get_opt("omega").await.unwrap().is_none());
    assert!(secrets.get_opt("vc-omega").await.unwrap().is_none());
    assert!(secrets.get_opt("omega-certs").await.unwrap().is_none());
    eventually("endpoint closed", WAIT, || async { refused(&addr).await.then_some(()) }).await;
}

#[tokio::test]
async fn a_direct_service_switch_stands_until_the_next_values_change() {
    let (client, ns) = setup("fast").await;
    apply_chart(&client, &ns, "theta", &values_for("NodePort", "")).await;
    service(&client, &ns, "theta").await;
    assert_eq!(job_done(&client, &ns, "theta").await, JobOutcome::Complete);

    // The console's fast switch: a direct server-side apply on the Service.
    let api: Api<Service> = Api::namespaced(client.clone(), &ns);
    let direct = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "theta"},
                        "spec": {"type": "LoadBalancer"}});
    let pp = kube::api::PatchParams::apply("kubebyon").force();
    api.patch("theta", &pp, &kube::api::Patch::Apply(&direct)).await.unwrap();
    let ip = wait_ingress(&client, &ns, "theta").await;
    // helm-controller does not run while the HelmChart is unchanged.
    tokio::time::sleep(std::time::Duration::from_secs(6)).await;
    let svc = api.get("theta").await.unwrap();
    assert_eq!(svc.spec.unwrap().type_.as_deref(), Some("LoadBalancer"));
    assert_eq!(ingress_ip(&api.get("theta").await.unwrap()), Some(ip));

    // New values: helm applies the chart again and its type wins.
    apply_chart(&client, &ns, "theta", &values_for("ClusterIP", "")).await;
    eventually("helm reapplied", WAIT, || async {
        let t = api.get("theta").await.ok()?.spec?.type_?;
        (t == "ClusterIP").then_some(())
    })
    .await;
}

#[tokio::test]
async fn keeping_https_node_port_in_cluster_ip_values_fails_on_the_next_upgrade() {
    let (client, ns) = setup("keep").await;
    let values = |ty: &str, note: &str| {
        let extra = format!("    httpsNodePort: 30999\n    annotations: {{note: \"{note}\"}}\n");
        values_for(ty, &extra)
    };
    apply_chart(&client, &ns, "iota", &values("NodePort", "1")).await;
    let api: Api<Service> = Api::namespaced(client.clone(), &ns);
    eventually("nodePort 30999", WAIT, || async {
        (node_port(&api.get("iota").await.ok()?, "https")? == 30999).then_some(())
    })
    .await;

    // The switch itself passes: the server drops the unchanged nodePort.
    apply_chart(&client, &ns, "iota", &values("ClusterIP", "1")).await;
    eventually("ClusterIP", WAIT, || async {
        let svc = api.get("iota").await.ok()?;
        (svc.spec.as_ref()?.type_.as_deref()? == "ClusterIP").then_some(())
    })
    .await;
    assert_eq!(job_done(&client, &ns, "iota").await, JobOutcome::Complete);

    // Any later upgrade still sends nodePort with ClusterIP: the API server refuses,
    // and helm says so in the Job's log.
    apply_chart(&client, &ns, "iota", &values("ClusterIP", "2")).await;
    let log = wait_log(&ns, "helm-install-iota", "UPGRADE FAILED").await;
    assert!(log.contains("spec.ports[0].nodePort: Forbidden: may not be used when `type` is 'ClusterIP'"), "{log}");
}
