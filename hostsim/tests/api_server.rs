//! The real kube-apiserver's own behaviour that KubeBYON depends on: nodePort
//! allocation, validation when switching Service types, server-side apply.

mod common;

use common::{node_port, setup};
use hostsim::testhost::{Net, Simulator, TestHost};
use k8s_openapi::api::core::v1::Service;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

fn node_port_service(name: &str) -> Service {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "type": "NodePort",
            "selector": {"app": "x"},
            "ports": [
                {"name": "https", "port": 443, "targetPort": 8443},
                {"name": "kubelet", "port": 10250, "targetPort": 8443},
            ],
        },
    }))
    .expect("valid Service")
}

#[tokio::test]
async fn test_host_starts_quickly_and_serves_version() {
    let host = common::host();
    eprintln!("test host startup: {:?}, processes: {:?}", host.startup, host.pids);
    let client = host.client().await.unwrap();
    let v = client.apiserver_version().await.unwrap();
    assert_eq!((v.major.as_str(), v.minor.as_str()), ("1", "36"));
    assert_eq!(v.git_version, "v1.36.3");
}

#[tokio::test]
async fn node_port_is_allocated_and_type_switch_is_validated() {
    let (client, ns) = setup("svc").await;
    let api: Api<Service> = Api::namespaced(client, &ns);
    let created = api.create(&PostParams::default(), &node_port_service("np")).await.unwrap();
    for port in ["https", "kubelet"] {
        let allocated = node_port(&created, port).expect("apiserver allocates a nodePort");
        assert!((30000..=32767).contains(&allocated), "{allocated}");
    }

    let https = node_port(&created, "https").unwrap();
    let kubelet = node_port(&created, "kubelet").unwrap();
    let to_cluster_ip = |https_node_port: i32, kubelet_node_port: i32| {
        json!({"spec": {"type": "ClusterIP", "ports": [
            {"name": "https", "port": 443, "targetPort": 8443, "nodePort": https_node_port},
            {"name": "kubelet", "port": 10250, "targetPort": 8443, "nodePort": kubelet_node_port},
        ]}})
    };
    let forbidden = |err: kube::Error| {
        let kube::Error::Api(status) = err else { panic!("not an API error: {err:?}") };
        assert_eq!(status.code, 422);
        assert!(
            status.message.contains("nodePort: Forbidden: may not be used when `type` is 'ClusterIP'"),
            "{}",
            status.message
        );
    };
    let merge = PatchParams::default();

    // A nodePort the Service does not have (a stale one): the API server's own error.
    let stale = if https == 32767 { 32766 } else { https + 1 };
    let err = api.patch("np", &merge, &Patch::Merge(&to_cluster_ip(stale, kubelet))).await;
    forbidden(err.expect_err("ClusterIP with a new nodePort must be rejected"));

    // Resending the current nodePorts while switching: the server drops them itself.
    let cip = api.patch("np", &merge, &Patch::Merge(&to_cluster_ip(https, kubelet))).await.unwrap();
    assert_eq!(cip.spec.as_ref().unwrap().type_.as_deref(), Some("ClusterIP"));
    assert_eq!((node_port(&cip, "https"), node_port(&cip, "kubelet")), (None, None));

    // Still sending the old nodePort once it is ClusterIP (the next upgrade): rejected.
    let err = api.patch("np", &merge, &Patch::Merge(&to_cluster_ip(https, kubelet))).await;
    forbidden(err.expect_err("ClusterIP keeping the old nodePort must be rejected"));

    // Back to NodePort (a new port is allocated) for the LoadBalancer step.
    let patch = json!({"spec": {"type": "NodePort"}});
    let np = api.patch("np", &merge, &Patch::Merge(&patch)).await.unwrap();
    let allocated = node_port(&np, "https").expect("allocated again");

    // NodePort -> LoadBalancer keeps the allocated port.
    let patch = json!({"spec": {"type": "LoadBalancer"}});
    let lb = api.patch("np", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    assert_eq!(node_port(&lb, "https"), Some(allocated));

    // Server-side apply without nodePort: the server drops it itself.
    let apply = json!({
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": "np"},
        "spec": {"type": "ClusterIP", "selector": {"app": "x"},
                 "ports": [{"name": "https", "port": 443, "targetPort": 8443}]},
    });
    let ssa = PatchParams::apply("kubebyon-test").force();
    let cip = api.patch("np", &ssa, &Patch::Apply(&apply)).await.unwrap();
    assert_eq!(cip.spec.as_ref().unwrap().type_.as_deref(), Some("ClusterIP"));
    assert_eq!(node_port(&cip, "https"), None);
}

/// What a migrated cluster's grace period rests on, applied as the chart
/// renders the Service (`nodePort: 0`) with server-side apply: NodePort →
/// LoadBalancer keeps the allocated port (old kubeconfigs still answer), and
/// `allocateLoadBalancerNodePorts: false` releases it (they are refused).
#[tokio::test]
async fn a_load_balancer_keeps_its_node_port_until_it_stops_allocating_them() {
    let (client, ns) = setup("svc").await;
    let api: Api<Service> = Api::namespaced(client, &ns);
    let ssa = PatchParams::apply("helm").force();
    let apply = |type_: &str, allocate: Option<bool>| {
        let mut spec = json!({"type": type_, "selector": {"app": "x"},
            "ports": [{"name": "https", "port": 443, "targetPort": 8443, "protocol": "TCP", "nodePort": 0}]});
        if let Some(a) = allocate {
            spec["allocateLoadBalancerNodePorts"] = json!(a);
        }
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "mv"}, "spec": spec})
    };
    let np = api.patch("mv", &ssa, &Patch::Apply(&apply("NodePort", None))).await.unwrap();
    let port = node_port(&np, "https").expect("allocated");
    let np = api.patch("mv", &ssa, &Patch::Apply(&apply("NodePort", None))).await.unwrap();
    assert_eq!(node_port(&np, "https"), Some(port), "re-applying nodePort: 0 keeps the port");
    let lb = api.patch("mv", &ssa, &Patch::Apply(&apply("LoadBalancer", None))).await.unwrap();
    assert_eq!(node_port(&lb, "https"), Some(port), "NodePort -> LoadBalancer keeps it");
    let closed = api.patch("mv", &ssa, &Patch::Apply(&apply("LoadBalancer", Some(false)))).await.unwrap();
    assert_eq!(node_port(&closed, "https"), None, "released once node ports are not allocated");
    // Back to NodePort (a rollback): a port again.
    let back = api.patch("mv", &ssa, &Patch::Apply(&apply("NodePort", None))).await.unwrap();
    assert!(node_port(&back, "https").is_some());
}

#[tokio::test]
async fn explicit_node_port_outside_range_is_rejected() {
    let (client, ns) = setup("svc").await;
    let api: Api<Service> = Api::namespaced(client, &ns);
    let mut svc = node_port_service("bad");
    svc.spec.as_mut().unwrap().ports.as_mut().unwrap()[0].node_port = Some(80);
    let err = api.create(&PostParams::default(), &svc).await.unwrap_err();
    let kube::Error::Api(status) = err else { panic!("{err:?}") };
    assert!(status.message.contains("provided port is not in the valid range"), "{}", status.message);
}

/// Whether a process exists (a reaped child no longer does).
fn alive(pid: u32) -> bool {
    std::path::Path::new("/proc").join(pid.to_string()).exists()
}

#[test]
fn an_owned_host_stops_everything_when_dropped_even_on_panic() {
    let (tx, rx) = std::sync::mpsc::channel();
    let outcome = std::thread::spawn(move || {
        // Upstream's parts and the in-process node on the host's own addresses.
        let guard = TestHost::start(Some(Simulator::Node(|net: Net| net.node_config()))).expect("test host starts");
        let rt = tokio::runtime::Runtime::new().unwrap();
        let addr = rt.block_on(async {
            let client = guard.host.client().await.unwrap();
            let ns = guard.host.namespace(&client, "own").await.unwrap();
            common::apply_chart(&client, &ns, "own", &common::values_for("LoadBalancer", "")).await;
            let ip = common::wait_ingress(&client, &ns, "own").await;
            let addr = format!("{ip}:443");
            common::eventually("LB answers", common::WAIT, || async { (!common::refused(&addr).await).then_some(()) })
                .await;
            addr
        });
        drop(rt);
        tx.send((guard.host.pids.clone(), guard.host.data_dir.clone(), addr)).unwrap();
        panic!("a failing test");
    })
    .join();
    assert!(outcome.is_err(), "the thread panicked");
    let (pids, dir, addr) = rx.recv().unwrap();
    let names: Vec<&str> = pids.iter().map(|(n, _)| *n).collect();
    for part in
        ["etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "helm-controller", "metallb-controller"]
    {
        assert!(names.contains(&part), "{part} in {names:?}");
    }
    for (name, pid) in pids {
        assert!(!alive(pid), "{name} ({pid}) still running");
    }
    assert!(!dir.exists(), "data folder removed");
    let closed = std::net::TcpStream::connect(&addr).is_err();
    assert!(closed, "the in-process node's listener on {addr} is closed");
}
