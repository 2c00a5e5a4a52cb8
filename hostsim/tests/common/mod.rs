//! Shared helpers for the integration tests: one test host per test binary, with
//! the simulator; waiting, HelmCharts, and kubeconfigs as a user would handle them.

#![allow(dead_code)] // each test binary uses a different subset

use std::future::Future;
use std::path::PathBuf;
use std::process::Output;
use std::time::{Duration, Instant};

use anyhow::Result;
use hostsim::testhost::{Simulator, TestHost};
use k8s_openapi::api::core::v1::{Event, Namespace, Secret, Service};
use kube::api::{Api, ApiResource, DynamicObject, ListParams, Patch, PatchParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use serde_json::json;

/// Pools of the tests' simulator; distinct from `hostsim up`'s default pool so a
/// hand-started host can run at the same time.
pub const POOL: &str = "default=127.0.0.200-127.0.0.229";
pub const TINY_POOL: &str = "tiny=127.0.0.230,noauto";
/// Answers with hostnames, as AWS load balancers do.
pub const NAMED_POOL: &str = "named=127.0.0.231,noauto,hostname=lb.hostsim.test";
/// A second node: node ports answer there too, but it is not in vCluster's SANs.
pub const OTHER_NODE: &str = "127.0.0.2";

pub fn host() -> &'static TestHost {
    TestHost::shared(Some(Simulator::Process {
        bin: env!("CARGO_BIN_EXE_hostsim").into(),
        args: [
            "--pool",
            POOL,
            "--pool",
            TINY_POOL,
            "--pool",
            NAMED_POOL,
            "--node-ip",
            "127.0.0.1",
            "--node-ip",
            OTHER_NODE,
        ]
        .map(String::from)
        .into(),
    }))
}

/// A client and a fresh namespace for one test.
pub async fn setup(prefix: &str) -> (Client, String) {
    let host = host();
    let client = host.client().await.expect("client for the test host");
    let ns = host
        .namespace(&client, prefix)
        .await
        .expect("test namespace");
    (client, ns)
}

/// Polls `f` until it returns `Some`, failing with `what` after `timeout`.
pub async fn eventually<T, F, Fut>(what: &str, timeout: Duration, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

pub const WAIT: Duration = Duration::from_secs(20);

pub fn helmcharts(client: &Client, ns: &str) -> Api<DynamicObject> {
    let ar = ApiResource {
        group: "helm.cattle.io".into(),
        version: "v1".into(),
        api_version: "helm.cattle.io/v1".into(),
        kind: "HelmChart".into(),
        plural: "helmcharts".into(),
    };
    Api::namespaced_with(client.clone(), ns, &ar)
}

/// Applies a vcluster HelmChart as the console does (server-side apply).
pub async fn apply_chart(client: &Client, ns: &str, name: &str, values: &str) {
    let body = json!({
        "apiVersion": "helm.cattle.io/v1",
        "kind": "HelmChart",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "chart": "vcluster",
            "repo": "https://charts.loft.sh",
            "version": "0.30.0",
            "targetNamespace": ns,
            "valuesContent": values,
        },
    });
    helmcharts(client, ns)
        .patch(
            name,
            &PatchParams::apply("kubebyon-test").force(),
            &Patch::Apply(&body),
        )
        .await
        .expect("apply HelmChart");
}

/// The HelmChart's `Failed` condition once the simulator has written one.
pub async fn failed_condition(client: &Client, ns: &str, name: &str) -> (String, String) {
    let api = helmcharts(client, ns);
    eventually("HelmChart status", WAIT, || async {
        let hc = api.get(name).await.ok()?;
        let conds = hc
            .data
            .get("status")?
            .get("conditions")?
            .as_array()?
            .clone();
        let failed = conds.iter().find(|c| c["type"] == "Failed")?;
        Some((
            failed["status"].as_str()?.to_owned(),
            failed["message"].as_str().unwrap_or_default().to_owned(),
        ))
    })
    .await
}

pub async fn service(client: &Client, ns: &str, name: &str) -> Service {
    let api: Api<Service> = Api::namespaced(client.clone(), ns);
    eventually(&format!("Service {name}"), WAIT, || async {
        api.get(name).await.ok()
    })
    .await
}

pub fn ingress_ip(svc: &Service) -> Option<String> {
    svc.status
        .as_ref()?
        .load_balancer
        .as_ref()?
        .ingress
        .as_ref()?
        .first()?
        .ip
        .clone()
}

pub async fn wait_ingress(client: &Client, ns: &str, name: &str) -> String {
    let api: Api<Service> = Api::namespaced(client.clone(), ns);
    eventually(&format!("ingress of {name}"), WAIT, || async {
        ingress_ip(&api.get(name).await.ok()?)
    })
    .await
}

pub fn node_port(svc: &Service, port_name: &str) -> Option<i32> {
    svc.spec
        .as_ref()?
        .ports
        .as_ref()?
        .iter()
        .find(|p| p.name.as_deref() == Some(port_name))?
        .node_port
}

/// The kubeconfig vCluster published in Secret `vc-<name>`.
pub async fn vc_kubeconfig(client: &Client, ns: &str, name: &str) -> String {
    let api: Api<Secret> = Api::namespaced(client.clone(), ns);
    let secret = format!("vc-{name}");
    eventually(&format!("Secret {secret}"), WAIT, || async {
        let s = api.get(&secret).await.ok()?;
        String::from_utf8(s.data?.get("config")?.0.clone()).ok()
    })
    .await
}

/// The kubeconfig with its server replaced, as the console does for the endpoint.
pub fn with_server(kubeconfig: &str, server: &str) -> String {
    let mut doc: serde_yaml::Value = serde_yaml::from_str(kubeconfig).expect("kubeconfig is YAML");
    for c in doc["clusters"].as_sequence_mut().expect("clusters") {
        c["cluster"]["server"] = server.into();
    }
    serde_yaml::to_string(&doc).expect("kubeconfig serialises")
}

/// The kubeconfig without its client certificate (an anonymous user).
pub fn without_user(kubeconfig: &str) -> String {
    let mut doc: serde_yaml::Value = serde_yaml::from_str(kubeconfig).expect("kubeconfig is YAML");
    for u in doc["users"].as_sequence_mut().expect("users") {
        u["user"] = serde_yaml::Value::Mapping(Default::default());
    }
    serde_yaml::to_string(&doc).expect("kubeconfig serialises")
}

/// Writes a kubeconfig into the test host's folder and returns its path.
pub fn write_kubeconfig(content: &str, tag: &str) -> PathBuf {
    let path = host().data_dir.join(format!("{tag}.kubeconfig"));
    std::fs::write(&path, content).expect("write kubeconfig");
    path
}

/// `kubectl --kubeconfig <file> <args>` with a short timeout.
pub fn kubectl(kubeconfig: &str, tag: &str, args: &[&str]) -> Output {
    let path = write_kubeconfig(kubeconfig, tag);
    std::process::Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&path)
        .arg("--request-timeout=10s")
        .args(args)
        .output()
        .expect("kubectl runs")
}

/// Lists namespaces with a kube-rs client built from the kubeconfig text.
pub async fn kube_rs_namespaces(kubeconfig: &str) -> Result<Vec<String>> {
    let kc: Kubeconfig = serde_yaml::from_str(kubeconfig)?;
    let mut cfg = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).await?;
    cfg.connect_timeout = Some(Duration::from_secs(5));
    cfg.read_timeout = Some(Duration::from_secs(10));
    let client = Client::try_from(cfg)?;
    let list = Api::<Namespace>::all(client)
        .list(&ListParams::default())
        .await?;
    Ok(list
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect())
}

/// Warning Events about one object.
pub async fn events_for(client: &Client, ns: &str, name: &str) -> Vec<Event> {
    let api: Api<Event> = Api::namespaced(client.clone(), ns);
    let lp = ListParams::default().fields(&format!("involvedObject.name={name}"));
    api.list(&lp).await.map(|l| l.items).unwrap_or_default()
}

pub async fn wait_event(client: &Client, ns: &str, name: &str, reason: &str) -> Event {
    eventually(&format!("{reason} event on {name}"), WAIT, || async {
        events_for(client, ns, name)
            .await
            .into_iter()
            .find(|e| e.reason.as_deref() == Some(reason))
    })
    .await
}

/// Whether a TCP connection to `addr` is refused (nothing listens).
pub async fn refused(addr: &str) -> bool {
    matches!(
        tokio::net::TcpStream::connect(addr).await,
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused
    )
}

pub fn values_for(service_type: &str, extra: &str) -> String {
    format!("controlPlane:\n  service:\n    spec:\n      type: {service_type}\n{extra}")
}
