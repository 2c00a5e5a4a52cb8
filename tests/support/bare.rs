//! The benchmarks' yardstick: a bare kube-rs client doing the minimal calls
//! for N NodePort → LoadBalancer switches — server-side apply of each
//! HelmChart, one watch on the Services until each has its address, one
//! Secret read each, then the console's own TLS probe until it answers.
//! Release `bare` in namespaces `bare-<i>`.

use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use futures::StreamExt;
use hostsim::testsupport as ts;
use k8s_openapi::api::core::v1::{Namespace, Secret, Service};
use kube::api::{Api, PostParams};
use kube::runtime::watcher;
use kubebyon::server::host::probe::{Credentials, Resolver, probe};
use serde_json::json;

/// N NodePort installs (by `admin`, not timed), each until helm's Job completes.
pub async fn install(admin: &kube::Client, n: usize, timeout: Duration) {
    for i in 0..n {
        let ns = format!("bare-{i}");
        let body: Namespace = serde_json::from_value(json!({"metadata": {"name": ns}})).unwrap();
        Api::<Namespace>::all(admin.clone()).create(&PostParams::default(), &body).await.unwrap();
        ts::apply_chart(admin, &ns, "bare", "controlPlane:\n  service:\n    spec:\n      type: NodePort\n", json!({}))
            .await
            .unwrap();
    }
    for i in 0..n {
        ts::wait_install_job(admin, &format!("bare-{i}"), "bare", timeout).await.unwrap();
    }
}

/// Switches the N installs to LoadBalancer at `ip(i)` with `client` and
/// waits until every endpoint answers the probe; the wall time.
pub async fn switch(client: &kube::Client, n: usize, ip: impl Fn(usize) -> Ipv4Addr, timeout: Duration) -> Duration {
    let t = Instant::now();
    for i in 0..n {
        let ip = ip(i);
        let values = format!(
            "controlPlane:\n  service:\n    annotations:\n      metallb.io/loadBalancerIPs: \"{ip}\"\n    spec:\n      type: LoadBalancer\n  proxy:\n    extraSANs: [\"{ip}\"]\n"
        );
        ts::apply_chart(client, &format!("bare-{i}"), "bare", &values, json!({})).await.unwrap();
    }
    // One watch on the Services until every one has its address.
    let services: Api<Service> = Api::all(client.clone());
    let mut stream = watcher(services, watcher::Config::default().labels("release=bare")).boxed();
    let mut done = std::collections::BTreeSet::new();
    while done.len() < n {
        if let Some(Ok(watcher::Event::Apply(s) | watcher::Event::InitApply(s))) = stream.next().await
            && ts::ingress_ip(&s).is_some()
        {
            done.insert(kube::ResourceExt::namespace(&s).unwrap_or_default());
        }
    }
    drop(stream);
    // One Secret read each, then the same probe until it answers.
    let mut loopback = Resolver::default();
    loopback.targets.allow_loopback = true;
    for i in 0..n {
        let s: Secret = Api::namespaced(client.clone(), &format!("bare-{i}")).get("vc-bare").await.unwrap();
        let text = |k: &str| String::from_utf8(s.data.as_ref().unwrap()[k].0.clone()).unwrap();
        let creds = Credentials {
            ca_pem: text("certificate-authority"),
            cert_pem: text("client-certificate"),
            key_pem: text("client-key"),
        };
        let endpoint = format!("https://{}:443", ip(i));
        ts::eventually("bare endpoint answers", timeout, || async {
            (probe(&endpoint, &creds, &loopback).await.status == kubebyon::domain::ConnectionStatus::Ok).then_some(())
        })
        .await
        .unwrap();
    }
    t.elapsed()
}
