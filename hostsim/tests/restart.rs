//! The simulator keeps no state of its own: stopped and started again, it finds
//! the same addresses, certificates and kubeconfigs in the API server.

mod common;

use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant};

use common::*;
use hostsim::controlplane;
use hostsim::testhost::TestHost;

fn start_simulator(kubeconfig: &Path, dir: &Path, run: u32) -> Child {
    let ready = dir.join(format!("restart-{run}.ready"));
    let log = dir.join(format!("logs/restart-{run}.log"));
    let (kc, rf) = (kubeconfig.display().to_string(), ready.display().to_string());
    let args = ["run", "--kubeconfig", &kc, "--ready-file", &rf, "--pool", "own=127.0.0.242-127.0.0.243"];
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

    let mut sim = start_simulator(&host.kubeconfig, &host.data_dir, 1);
    apply_chart(&client, &ns, "kappa", &values_for("LoadBalancer", "")).await;
    let ip = wait_ingress(&client, &ns, "kappa").await;
    let addr = format!("{ip}:443");
    let kc = with_server(&vc_kubeconfig(&client, &ns, "kappa").await, &format!("https://{addr}"));
    eventually("endpoint answers", WAIT, || async { kube_rs_namespaces(&kc).await.ok() }).await;

    controlplane::terminate(&mut sim, Duration::from_secs(5));
    assert!(refused(&addr).await, "nothing listens while the simulator is down");

    let mut sim = start_simulator(&host.kubeconfig, &host.data_dir, 2);
    assert_eq!(wait_ingress(&client, &ns, "kappa").await, ip, "same address");
    assert_eq!(
        with_server(&vc_kubeconfig(&client, &ns, "kappa").await, &format!("https://{addr}")),
        kc,
        "same kubeconfig"
    );
    eventually("same kubeconfig works again", WAIT, || async { kube_rs_namespaces(&kc).await.ok() }).await;
    controlplane::terminate(&mut sim, Duration::from_secs(5));
}
