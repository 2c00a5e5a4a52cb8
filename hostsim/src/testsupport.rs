//! Helpers for tests that drive a test host ([`crate::testhost`]) as KubeBYON
//! would: apply a vCluster HelmChart, wait for its helm Job (the one for the
//! chart's current config hash) to finish, read a Service's ingress and the
//! `vc-<name>` kubeconfig, read Events and a Job's log, run `kubectl`. Waiting
//! helpers poll with a deadline and return an error naming what they waited for.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Event, Namespace, Secret, Service};
use kube::api::{Api, ApiResource, DynamicObject, ListParams, Patch, PatchParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use serde_json::{Value, json};

/// helm-controller's HelmChart (`helm.cattle.io/v1`).
pub fn helmchart_resource() -> ApiResource {
    ApiResource {
        group: "helm.cattle.io".into(),
        version: "v1".into(),
        api_version: "helm.cattle.io/v1".into(),
        kind: "HelmChart".into(),
        plural: "helmcharts".into(),
    }
}

/// Polls `f` every 100 ms until it returns `Some`, or fails after `timeout`.
pub async fn eventually<T, F, Fut>(what: &str, timeout: Duration, mut f: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f().await {
            return Ok(v);
        }
        if Instant::now() >= deadline {
            bail!("timed out after {timeout:?} waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The HelmCharts of a namespace.
pub fn helmcharts(client: &Client, ns: &str) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), ns, &helmchart_resource())
}

/// Applies a vcluster HelmChart as the console does (server-side apply), chart
/// `vcluster` 0.30.0 from `https://charts.loft.sh` into `ns`; `extra_spec` fields
/// (e.g. `failurePolicy`, `backOffLimit`, `version`) override those.
pub async fn apply_chart(client: &Client, ns: &str, name: &str, values: &str, extra_spec: Value) -> Result<()> {
    let mut spec = json!({
        "chart": "vcluster",
        "repo": format!("https://{}", crate::node::repo::REPO_HOST),
        "version": "0.30.0",
        "targetNamespace": ns,
        "valuesContent": values,
    });
    if let (Some(s), Some(extra)) = (spec.as_object_mut(), extra_spec.as_object()) {
        for (k, v) in extra {
            s.insert(k.clone(), v.clone());
        }
    }
    let body = json!({
        "apiVersion": "helm.cattle.io/v1",
        "kind": "HelmChart",
        "metadata": {"name": name, "namespace": ns},
        "spec": spec,
    });
    helmcharts(client, ns)
        .patch(name, &PatchParams::apply("kubebyon-test").force(), &Patch::Apply(&body))
        .await
        .context("applying the HelmChart")?;
    Ok(())
}

/// How a helm Job ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JobOutcome {
    Complete,
    Failed,
}

/// Waits until `helm-install-<chart>` for the chart's current spec has
/// finished: helm-controller applies the Job together with Secret
/// `chart-values-<chart>`, so once that Secret holds the chart's current
/// `valuesContent`, the Job beside it is the one for this spec.
pub async fn wait_install_job(client: &Client, ns: &str, chart: &str, timeout: Duration) -> Result<JobOutcome> {
    let charts = helmcharts(client, ns);
    let jobs: Api<Job> = Api::namespaced(client.clone(), ns);
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
    let job_name = format!("helm-install-{chart}");
    eventually(&format!("Job {job_name} for the current spec to finish"), timeout, || async {
        let hc = charts.get(chart).await.ok()?;
        let want = hc.data.pointer("/spec/valuesContent").and_then(Value::as_str).unwrap_or_default().to_owned();
        let values = secrets.get(&format!("chart-values-{chart}")).await.ok()?;
        let have = values.data.as_ref().and_then(|d| d.get("HelmChartValuesContent")).map(|b| b.0.clone());
        if have.unwrap_or_default() != want.as_bytes() {
            return None;
        }
        let job = jobs.get(&job_name).await.ok()?;
        if job.spec.as_ref().and_then(|s| s.suspend) == Some(true) {
            return None;
        }
        let conds = job.status.as_ref()?.conditions.clone()?;
        let is = |t: &str| conds.iter().any(|c| c.type_ == t && c.status == "True");
        if is("Complete") {
            Some(JobOutcome::Complete)
        } else if is("Failed") {
            Some(JobOutcome::Failed)
        } else {
            None
        }
    })
    .await
}

/// The first `status.loadBalancer.ingress` IP, once there is one.
pub async fn wait_ingress(client: &Client, ns: &str, name: &str, timeout: Duration) -> Result<String> {
    let api: Api<Service> = Api::namespaced(client.clone(), ns);
    eventually(&format!("ingress of {name}"), timeout, || async { ingress_ip(&api.get(name).await.ok()?) }).await
}

pub fn ingress_ip(svc: &Service) -> Option<String> {
    svc.status.as_ref()?.load_balancer.as_ref()?.ingress.as_ref()?.first()?.ip.clone()
}

/// The kubeconfig vCluster published in Secret `vc-<name>`.
pub async fn vc_kubeconfig(client: &Client, ns: &str, name: &str, timeout: Duration) -> Result<String> {
    let api: Api<Secret> = Api::namespaced(client.clone(), ns);
    let secret = format!("vc-{name}");
    eventually(&format!("Secret {secret}"), timeout, || async {
        let s = api.get(&secret).await.ok()?;
        String::from_utf8(s.data?.get("config")?.0.clone()).ok()
    })
    .await
}

/// `vc-<release>`'s kubeconfig pointed at the Service's `https` node port on the
/// node its pod `<release>-0` runs on (as a downloaded NodePort kubeconfig
/// goes), written into `dir`; then `kubectl get ns -o name` through it, once
/// the virtual cluster answers.
pub async fn node_port_namespaces(
    client: &Client,
    ns: &str,
    release: &str,
    dir: &Path,
    timeout: Duration,
) -> Result<(PathBuf, String)> {
    let config = vc_kubeconfig(client, ns, release, timeout).await?;
    let services: Api<Service> = Api::namespaced(client.clone(), ns);
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(client.clone(), ns);
    let svc = services.get(release).await?;
    let port = svc
        .spec
        .and_then(|s| s.ports)
        .and_then(|ports| ports.into_iter().find(|p| p.name.as_deref() == Some("https")))
        .and_then(|p| p.node_port)
        .context("no https node port")?;
    let pod = format!("{release}-0");
    let node_ip =
        eventually("the pod's node", timeout, || async { pods.get(&pod).await.ok()?.status?.host_ip }).await?;
    let config = with_server(&config, &format!("https://{node_ip}:{port}"))?;
    let path = write_kubeconfig(dir, &config, release)?;
    let listed = eventually("the virtual cluster answers", timeout, || async {
        let out = kubectl(&path, &["get", "ns", "-o", "name"]).ok()?;
        out.status.success().then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    })
    .await?;
    Ok((path, listed))
}

/// The kubeconfig with its server replaced, as the console does for the endpoint.
pub fn with_server(kubeconfig: &str, server: &str) -> Result<String> {
    let mut doc: serde_yaml::Value = serde_yaml::from_str(kubeconfig)?;
    for c in doc["clusters"].as_sequence_mut().context("no clusters")? {
        c["cluster"]["server"] = server.into();
    }
    Ok(serde_yaml::to_string(&doc)?)
}

/// The kubeconfig without its client certificate (an anonymous user).
pub fn without_user(kubeconfig: &str) -> Result<String> {
    let mut doc: serde_yaml::Value = serde_yaml::from_str(kubeconfig)?;
    for u in doc["users"].as_sequence_mut().context("no users")? {
        u["user"] = serde_yaml::Value::Mapping(Default::default());
    }
    Ok(serde_yaml::to_string(&doc)?)
}

/// Events about one object (by name) in a namespace.
pub async fn events_for(client: &Client, ns: &str, name: &str) -> Vec<Event> {
    let api: Api<Event> = Api::namespaced(client.clone(), ns);
    let lp = ListParams::default().fields(&format!("involvedObject.name={name}"));
    api.list(&lp).await.map(|l| l.items).unwrap_or_default()
}

/// Writes a kubeconfig file (mode 0600) into `dir` and returns its path.
pub fn write_kubeconfig(dir: &Path, content: &str, tag: &str) -> Result<PathBuf> {
    use std::os::unix::fs::OpenOptionsExt;
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let path = dir.join(format!("{tag}.kubeconfig"));
    // Written aside, then renamed: a concurrent reader of the same tag sees the
    // old file or the new one, never a half-written one.
    let tmp = dir.join(format!(".{tag}.{}.{}.tmp", std::process::id(), N.fetch_add(1, Ordering::Relaxed)));
    let mut f = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&tmp)?;
    std::io::Write::write_all(&mut f, content.as_bytes())?;
    std::fs::rename(&tmp, &path)?;
    Ok(path)
}

/// `kubectl --kubeconfig <file> --request-timeout=10s <args>`.
pub fn kubectl(kubeconfig: &Path, args: &[&str]) -> Result<Output> {
    std::process::Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .arg("--request-timeout=10s")
        .args(args)
        .output()
        .context("running kubectl")
}

/// `kubectl logs job/<job>` through the real API server (and the simulated
/// kubelet); `previous` reads the container's run before its last restart.
pub fn job_logs(kubeconfig: &Path, ns: &str, job: &str, previous: bool) -> Result<Output> {
    let target = format!("job/{job}");
    let mut args = vec!["logs", "-n", ns, target.as_str()];
    if previous {
        args.push("--previous");
    }
    kubectl(kubeconfig, &args)
}

/// Lists namespaces with a kube-rs client built from kubeconfig text.
pub async fn kube_rs_namespaces(kubeconfig: &str) -> Result<Vec<String>> {
    let kc: Kubeconfig = serde_yaml::from_str(kubeconfig)?;
    let mut cfg = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).await?;
    cfg.connect_timeout = Some(Duration::from_secs(5));
    cfg.read_timeout = Some(Duration::from_secs(10));
    let client = Client::try_from(cfg)?;
    let list = Api::<Namespace>::all(client).list(&ListParams::default()).await?;
    Ok(list.items.into_iter().filter_map(|n| n.metadata.name).collect())
}

/// Whether a TCP connection to `addr` is refused (nothing listens).
pub async fn refused(addr: &str) -> bool {
    matches!(
        tokio::net::TcpStream::connect(addr).await,
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused
    )
}

/// An HTTP CONNECT proxy on `listen` that answers `CONNECT <name>:<port>` by
/// connecting to `names[name]` (else the name itself) at that port and
/// relaying the bytes untouched: kubectl names it in a kubeconfig's
/// `proxy-url`, so a DNS name no resolver here knows still reaches its
/// address, and the TLS handshake inside the tunnel still carries the name
/// as SNI. `listen` may name port 0; returns where it listens. Runs on its own
/// threads (a test may block its runtime on kubectl) until the process ends.
pub fn connect_proxy(
    listen: std::net::SocketAddr,
    names: std::collections::BTreeMap<String, std::net::IpAddr>,
) -> Result<std::net::SocketAddr> {
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};
    let listener = TcpListener::bind(listen)?;
    let at = listener.local_addr()?;
    std::thread::spawn(move || {
        for inbound in listener.incoming() {
            let Ok(mut inbound) = inbound else { continue };
            let names = names.clone();
            std::thread::spawn(move || {
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") && head.len() < 8192 {
                    if inbound.read_exact(&mut byte).is_err() {
                        return;
                    }
                    head.push(byte[0]);
                }
                let text = String::from_utf8_lossy(&head).into_owned();
                let target = text.strip_prefix("CONNECT ").and_then(|r| r.split_whitespace().next()).unwrap_or("");
                let Some((name, port)) = target.rsplit_once(':') else { return };
                let Ok(port) = port.parse::<u16>() else { return };
                let connected = match names.get(name) {
                    Some(ip) => TcpStream::connect((*ip, port)),
                    None => TcpStream::connect((name, port)),
                };
                let Ok(outbound) = connected else {
                    let _ = inbound.write_all(b"HTTP/1.1 502 Bad Gateway\r\n\r\n");
                    return;
                };
                if inbound.write_all(b"HTTP/1.1 200 Connection established\r\n\r\n").is_err() {
                    return;
                }
                let (Ok(mut in2), Ok(mut out2)) = (inbound.try_clone(), outbound.try_clone()) else { return };
                let (mut inbound, mut outbound) = (inbound, outbound);
                let up = std::thread::spawn(move || {
                    let _ = std::io::copy(&mut in2, &mut out2);
                    let _ = out2.shutdown(std::net::Shutdown::Write);
                });
                let _ = std::io::copy(&mut outbound, &mut inbound);
                let _ = inbound.shutdown(std::net::Shutdown::Write);
                let _ = up.join();
            });
        }
    });
    Ok(at)
}
