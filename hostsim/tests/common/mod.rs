//! Shared helpers for the integration tests: one test host per test binary
//! (upstream's controllers, the simulated node, vClusters relaying to the host's
//! API server); thin panicking wrappers over [`hostsim::testsupport`].

#![allow(dead_code)] // each test binary uses a different subset

use std::future::Future;
use std::path::PathBuf;
use std::process::Output;
use std::time::Duration;

use hostsim::testhost::{Net, Simulator, TestHost};
use hostsim::testsupport as ts;
#[allow(unused_imports)]
pub use hostsim::testsupport::{JobOutcome, ingress_ip, kube_rs_namespaces, refused};
use k8s_openapi::api::core::v1::{Event, Pod, Service};
use kube::Client;
use kube::api::{Api, DynamicObject};
use serde_json::{Value, json};

pub fn host() -> &'static TestHost {
    TestHost::shared(Some(Simulator::Node(|net: Net| net.node_config())))
}

/// This binary's host addresses.
pub fn net() -> Net {
    host().net
}

/// A client and a fresh namespace for one test.
pub async fn setup(prefix: &str) -> (Client, String) {
    let host = host();
    let client = host.client().await.expect("client for the test host");
    let ns = host.namespace(&client, prefix).await.expect("test namespace");
    (client, ns)
}

/// Real helm in a Job, then the vCluster pod's start: tens of seconds when the
/// machine is busy.
pub const WAIT: Duration = Duration::from_secs(90);

/// Polls `f` until it returns `Some`, failing the test after `timeout`.
pub async fn eventually<T, F, Fut>(what: &str, timeout: Duration, f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    ts::eventually(what, timeout, f).await.unwrap_or_else(|e| panic!("{e}"))
}

pub fn helmcharts(client: &Client, ns: &str) -> Api<DynamicObject> {
    ts::helmcharts(client, ns)
}

/// Applies a vcluster HelmChart as the console does (server-side apply).
pub async fn apply_chart(client: &Client, ns: &str, name: &str, values: &str) {
    apply_chart_with(client, ns, name, values, json!({})).await;
}

/// The same with more HelmChart spec fields (failurePolicy, backOffLimit, …).
pub async fn apply_chart_with(client: &Client, ns: &str, name: &str, values: &str, extra: Value) {
    ts::apply_chart(client, ns, name, values, extra).await.expect("apply HelmChart");
}

/// Waits for the install Job of the chart's current spec to finish.
pub async fn job_done(client: &Client, ns: &str, name: &str) -> JobOutcome {
    ts::wait_install_job(client, ns, name, WAIT).await.unwrap_or_else(|e| panic!("{e}"))
}

pub async fn service(client: &Client, ns: &str, name: &str) -> Service {
    let api: Api<Service> = Api::namespaced(client.clone(), ns);
    eventually(&format!("Service {name}"), WAIT, || async { api.get(name).await.ok() }).await
}

pub async fn wait_ingress(client: &Client, ns: &str, name: &str) -> String {
    ts::wait_ingress(client, ns, name, WAIT).await.unwrap_or_else(|e| panic!("{e}"))
}

/// The InternalIP of the node the release's vCluster pod runs on (the one in
/// its certificate), and the other node of the host.
pub async fn pod_node(client: &Client, ns: &str, release: &str) -> (String, String) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let on = eventually(&format!("pod {release}-0 on a node"), WAIT, || async {
        pods.get(&format!("{release}-0")).await.ok()?.status?.host_ip
    })
    .await;
    let other = if on == net().node().to_string() { net().other_node() } else { net().node() };
    (on, other.to_string())
}

pub fn node_port(svc: &Service, port_name: &str) -> Option<i32> {
    svc.spec.as_ref()?.ports.as_ref()?.iter().find(|p| p.name.as_deref() == Some(port_name))?.node_port
}

/// The kubeconfig vCluster published in Secret `vc-<name>`.
pub async fn vc_kubeconfig(client: &Client, ns: &str, name: &str) -> String {
    ts::vc_kubeconfig(client, ns, name, WAIT).await.unwrap_or_else(|e| panic!("{e}"))
}

pub fn with_server(kubeconfig: &str, server: &str) -> String {
    ts::with_server(kubeconfig, server).expect("kubeconfig is YAML")
}

pub fn without_user(kubeconfig: &str) -> String {
    ts::without_user(kubeconfig).expect("kubeconfig is YAML")
}

/// Writes a kubeconfig into the test host's folder and returns its path.
pub fn write_kubeconfig(content: &str, tag: &str) -> PathBuf {
    ts::write_kubeconfig(&host().data_dir, content, tag).expect("write kubeconfig")
}

/// `kubectl --kubeconfig <file> <args>` with a short timeout.
pub fn kubectl(kubeconfig: &str, tag: &str, args: &[&str]) -> Output {
    ts::kubectl(&write_kubeconfig(kubeconfig, tag), args).expect("kubectl runs")
}

/// `kubectl logs job/<job>` as the host's admin: stdout, or stderr on failure.
pub fn job_logs(ns: &str, job: &str, previous: bool) -> Result<String, String> {
    let out = ts::job_logs(&host().kubeconfig, ns, job, previous).expect("kubectl runs");
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

/// Waits until the Job's log (current or previous run) contains `needle`.
pub async fn wait_log(ns: &str, job: &str, needle: &str) -> String {
    eventually(&format!("{needle:?} in the log of job/{job}"), WAIT, || async {
        [false, true].into_iter().filter_map(|prev| job_logs(ns, job, prev).ok()).find(|l| l.contains(needle))
    })
    .await
}

pub async fn events_for(client: &Client, ns: &str, name: &str) -> Vec<Event> {
    ts::events_for(client, ns, name).await
}

pub async fn wait_event(client: &Client, ns: &str, name: &str, reason: &str) -> Event {
    eventually(&format!("{reason} event on {name}"), WAIT, || async {
        events_for(client, ns, name).await.into_iter().find(|e| e.reason.as_deref() == Some(reason))
    })
    .await
}

pub fn values_for(service_type: &str, extra: &str) -> String {
    format!("controlPlane:\n  service:\n    spec:\n      type: {service_type}\n{extra}")
}
