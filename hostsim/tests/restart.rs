//! The simulator keeps no state of its own: stopped and started again, it finds
//! the same addresses, certificates and kubeconfigs in the API server.

mod common;

use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant};

use common::*;
use hostsim::controlplane;
use hostsim::testhost::TestHost;

fn start_simulator(host: &TestHost, run: u32) -> Child {
    let (kubeconfig, dir) = (&host.kubeconfig, &host.data_dir);
    let ready = dir.join(format!("restart-{run}.ready"));
    let log = dir.join(format!("logs/restart-{run}.log"));
    let (kc, rf) = (kubeconfig.display().to_string(), ready.display().to_string());
    let pool = format!("own={}-{}", host.net.addr(242), host.net.addr(243));
    let node = host.net.node().to_string();
    let args = ["run", "--kubeconfig", &kc, "--ready-file", &rf, "--test-latency", "--node-ip", &node, "--pool", &pool];
    let mut child = controlplane::spawn(Path::new(env!("CARGO_BIN_EXE_hostsim")), &log, &args).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !ready.exists() {
        assert!(child.try_wait().unwrap().is_none(), "simulator exited: see {}", log.display());
        assert!(Instant::now() < deadline, "simulator not ready");
        std::thread::sleep(Duration::from_millis(50));
    }
    child
}

#[tokio::test]
async fn a_restarted_simulator_keeps_addresses_and_kubeconfigs() {
    let guard = TestHost::start(None).expect("test host");
    let host = &guard.host;
    let client = host.client().await.unwrap();
    let ns = host.namespace(&client, "restart").await.unwrap();

    let mut sim = start_simulator(host, 1);
    apply_chart(&client, &ns, "kappa", &values_for("LoadBalancer", "")).await;
    let ip = wait_ingress(&client, &ns, "kappa").await;
    let addr = format!("{ip}:443");
    let kc = with_server(&vc_kubeconfig(&client, &ns, "kappa").await, &format!("https://{addr}"));
    eventually("endpoint answers", WAIT, || async { kube_rs_namespaces(&kc).await.ok() }).await;

    controlplane::terminate(&mut sim, Duration::from_secs(5));
    assert!(refused(&addr).await, "nothing listens while the simulator is down");

    let mut sim = start_simulator(host, 2);
    assert_eq!(wait_ingress(&client, &ns, "kappa").await, ip, "same address");
    assert_eq!(
        with_server(&vc_kubeconfig(&client, &ns, "kappa").await, &format!("https://{addr}")),
        kc,
        "same kubeconfig"
    );
    eventually("same kubeconfig works again", WAIT, || async { kube_rs_namespaces(&kc).await.ok() }).await;
    controlplane::terminate(&mut sim, Duration::from_secs(5));
}

/// An API server outage, as the test-support API offers it: clients fail while
/// it is down; etcd keeps everything, and the simulator carries on afterwards.
#[tokio::test]
async fn the_api_server_can_be_stopped_and_started_keeping_etcd() {
    let guard = TestHost::start(Some(hostsim::testhost::Simulator::Process {
        bin: env!("CARGO_BIN_EXE_hostsim").into(),
        args: vec![],
    }))
    .expect("test host");
    let host = &guard.host;
    let client = host.client().await.unwrap();
    let ns = host.namespace(&client, "outage").await.unwrap();
    apply_chart(&client, &ns, "mu", &values_for("LoadBalancer", "")).await;
    let ip = wait_ingress(&client, &ns, "mu").await;

    host.stop_api_server().unwrap();
    let charts = helmcharts(&client, &ns);
    assert!(charts.get("mu").await.is_err(), "no API server, no answer");

    host.start_api_server().unwrap();
    let client = host.client().await.unwrap();
    helmcharts(&client, &ns).get("mu").await.expect("the chart survived in etcd");
    assert_eq!(wait_ingress(&client, &ns, "mu").await, ip);
    // The simulator reconnects: a values change is installed.
    apply_chart(&client, &ns, "mu", &values_for("NodePort", "")).await;
    assert_eq!(job_done(&client, &ns, "mu").await, JobOutcome::Complete);
}
