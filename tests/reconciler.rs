//! The reconciler against the test host (real kube-apiserver, etcd and
//! kube-controller-manager; hostsim's helm-controller, vCluster, MetalLB and
//! kube-proxy with test delays): clusters created through the JSON API become
//! Ready, their downloaded kubeconfig works with kubectl and kube-rs, mode
//! switches converge, failures say why in helm's words, deletion frees the name.

mod support;

use std::sync::Arc;
use std::time::Duration;

use hostsim::testhost::{Net, Simulator, TestHost};
use hostsim::testsupport as ts;
use kubebyon::server::reconciler::{self, Context, render::AddressRequest};
use serde_json::{Value, json};
use support::http::Console;

const WAIT: Duration = Duration::from_secs(60);

fn host() -> &'static TestHost {
    TestHost::shared(Some(Simulator::InProcess(|net: Net| net.default_config())))
}

struct Env {
    console: Console,
    cookie: String,
    ctx: Arc<Context>,
    _db: tempfile::TempDir,
}

/// A console on a fresh SQLite file, connected to the shared test host, with
/// its reconciler running; signed in as an admin.
async fn env() -> Env {
    let host = host();
    let (url, dir) = support::sqlite_url();
    let pool = kubebyon::server::db::connect(&url).await.expect("database");
    let client = host.client().await.expect("host client");
    let request = reconciler::detect_address_request(&client).await;
    assert_eq!(request, AddressRequest::MetalLb, "MetalLB's IPAddressPool CRD is detected");
    let mut ctx = Context::new(client, pool.clone(), request);
    ctx.resync = Duration::from_millis(500);
    ctx.retry_base = Duration::from_millis(200);
    let ctx = Arc::new(ctx);
    tokio::spawn(reconciler::run(ctx.clone()));
    let console = Console::with_host(pool, Some(ctx.clone()));
    console.user("root", "correct horse battery", true).await;
    let cookie = console.login("root", "correct horse battery").await;
    // The admin's NodePort public host: the test host's first node.
    let settings = json!({"default_cluster_public_access_mode": "nodeport",
        "nodeport_public_host": host.net.node().to_string(), "load_balancer_annotations": {}, "load_balancer_class": null});
    let r = console.json("PUT", "/api/admin/system-settings", Some(&cookie), settings).await;
    assert_eq!(r.status, 200, "{}", r.body);
    Env { console, cookie, ctx, _db: dir }
}

impl Env {
    async fn create(&self, name: &str, access: Value) -> i64 {
        let body = json!({"name": name, "resources": {"cpu": "1", "memory_gib": 2, "storage_gib": 5}, "public_access": access});
        let r = self.console.json("POST", "/api/console/clusters", Some(&self.cookie), body).await;
        assert_eq!(r.status, 201, "{}", r.body);
        self.ctx.wake();
        r.json()["id"].as_i64().expect("id")
    }

    async fn patch(&self, id: i64, access: Value) {
        let r = self
            .console
            .json("PATCH", &format!("/api/console/clusters/{id}"), Some(&self.cookie), json!({"public_access": access}))
            .await;
        assert_eq!(r.status, 200, "{}", r.body);
        self.ctx.wake();
    }

    async fn cluster(&self, id: i64) -> Value {
        self.console.get(&format!("/api/console/clusters/{id}"), Some(&self.cookie)).await.json()
    }

    /// Waits until the status observed for the current generation matches `want`.
    async fn converge(&self, id: i64, what: &str, want: impl Fn(&Value) -> bool) -> Value {
        let found = ts::eventually(what, WAIT, || async {
            let c = self.cluster(id).await;
            let current = c["status"]["observed_generation"] == c["generation"];
            (current && want(&c["status"])).then_some(c)
        })
        .await;
        match found {
            Ok(c) => c,
            Err(e) => panic!("{e}; last seen: {}", self.cluster(id).await),
        }
    }

    async fn kubeconfig(&self, id: i64) -> String {
        let r = self.console.get(&format!("/api/console/clusters/{id}/kubeconfig"), Some(&self.cookie)).await;
        assert_eq!(r.status, 200, "{}", r.body);
        assert_eq!(r.headers["cache-control"], "no-store");
        assert!(r.headers["content-disposition"].to_str().unwrap().starts_with("attachment"));
        r.body
    }
}

fn ready(s: &Value) -> bool {
    s["phase"] == "ready"
}

fn kubectl_get_ns(kubeconfig: &str, tag: &str) -> Result<String, String> {
    let path = ts::write_kubeconfig(&host().data_dir, kubeconfig, tag).unwrap();
    let out = ts::kubectl(&path, &["get", "ns", "-o", "name"]).unwrap();
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

/// 1. A LoadBalancer cluster with an IP host: Ready; endpoint `https://<host>:443`;
/// the downloaded kubeconfig works with kubectl and kube-rs.
#[tokio::test]
async fn load_balancer_cluster_with_an_ip_host_is_ready_and_its_kubeconfig_works() {
    let env = env().await;
    let ip = host().net.addr(210).to_string();
    let id = env.create("lb-ip", json!({"enabled": true, "mode": "loadbalancer", "control_plane_host": ip})).await;
    let c = env.converge(id, "Ready", ready).await;
    assert_eq!(c["status"]["api_endpoint"], format!("https://{ip}:443"));
    assert_eq!(c["status"]["public_access_port"], Value::Null);
    assert_eq!(c["status"]["connection_status"], "ok");
    assert_eq!(c["status"]["kubeconfig_available"], true);
    let kc = env.kubeconfig(id).await;
    assert!(kc.contains(&format!("server: https://{ip}:443")), "{kc}");
    let listed = kubectl_get_ns(&kc, "lb-ip").expect("kubectl with the downloaded kubeconfig");
    assert!(listed.contains("namespace/kubebyon-lb-ip"), "{listed}");
    ts::kube_rs_namespaces(&kc).await.expect("kube-rs with the downloaded kubeconfig");
    let events = env.console.get(&format!("/api/console/clusters/{id}/events"), Some(&env.cookie)).await.json();
    assert_eq!(events[0]["state"], "done", "{events}");
}

/// 3. A NodePort cluster: the port is shown and the kubeconfig works against
/// `<admin's node host>:<port>`; then 4. switched LoadBalancer → disabled →
/// NodePort: each converge right, the old endpoint refuses.
#[tokio::test]
async fn node_port_cluster_and_mode_switches_converge() {
    let env = env().await;
    let node = host().net.node().to_string();
    let id = env.create("np", json!({"enabled": true, "mode": "nodeport"})).await;
    let c = env.converge(id, "NodePort Ready", ready).await;
    let port = c["status"]["public_access_port"].as_u64().expect("port in NodePort mode");
    assert_eq!(c["status"]["api_endpoint"], format!("https://{node}:{port}"));
    let kc = env.kubeconfig(id).await;
    kubectl_get_ns(&kc, "np").expect("NodePort kubeconfig works");

    let ip = host().net.addr(211).to_string();
    env.patch(id, json!({"enabled": true, "mode": "loadbalancer", "control_plane_host": ip})).await;
    let c = env.converge(id, "LoadBalancer Ready", ready).await;
    assert_eq!(c["status"]["api_endpoint"], format!("https://{ip}:443"));
    assert_eq!(c["status"]["public_access_port"], Value::Null, "no port outside NodePort");
    kubectl_get_ns(&env.kubeconfig(id).await, "np-lb").expect("LB kubeconfig works");

    env.patch(id, json!({"enabled": false})).await;
    let c = env.converge(id, "disabled Ready", ready).await;
    assert_eq!(c["status"]["api_endpoint"], Value::Null);
    assert_eq!(c["status"]["kubeconfig_available"], false);
    let r = env.console.get(&format!("/api/console/clusters/{id}/kubeconfig"), Some(&env.cookie)).await;
    assert_eq!((r.status.as_u16(), r.code()), (409, "kubeconfig_unavailable".to_owned()));
    ts::eventually("the LB address refuses", WAIT, || async { ts::refused(&format!("{ip}:443")).await.then_some(()) })
        .await
        .unwrap();

    env.patch(id, json!({"enabled": true, "mode": "nodeport"})).await;
    let c = env.converge(id, "NodePort again", ready).await;
    assert!(c["status"]["public_access_port"].as_u64().is_some());
    kubectl_get_ns(&env.kubeconfig(id).await, "np-again").expect("NodePort kubeconfig works again");
}

/// 6. An address outside every pool: pending with MetalLB's reason in words.
#[tokio::test]
async fn a_load_balancer_that_cannot_get_its_address_says_why() {
    let env = env().await;
    let id = env
        .create("lb-far", json!({"enabled": true, "mode": "loadbalancer", "control_plane_host": "198.51.100.77"}))
        .await;
    let c = env
        .converge(id, "LB pending with MetalLB's reason", |s| {
            s["message"].as_str().is_some_and(|m| m.starts_with("lb_pending: ") && m.contains("is not allowed"))
        })
        .await;
    let msg = c["status"]["message"].as_str().unwrap();
    assert!(msg.contains("[\"198.51.100.77\"] is not allowed in config"), "{msg}");
    assert_eq!(c["status"]["phase"], "provisioning");
}

/// 12. Delete: HelmChart and namespace gone, the row gone, the name free again.
#[tokio::test]
async fn deleting_a_cluster_uninstalls_it_and_frees_the_name() {
    let env = env().await;
    let id = env.create("gone", json!({"enabled": false})).await;
    env.converge(id, "Ready", ready).await;
    let r = env.console.send("DELETE", &format!("/api/console/clusters/{id}"), Some(&env.cookie), None, "").await;
    assert_eq!(r.status, 202, "{}", r.body);
    env.ctx.wake();
    ts::eventually("the cluster row gone", WAIT, || async {
        let r = env.console.get(&format!("/api/console/clusters/{id}"), Some(&env.cookie)).await;
        (r.status == 404).then_some(())
    })
    .await
    .unwrap();
    let client = host().client().await.unwrap();
    let namespaces = reconciler::managed_namespaces(&client).await.unwrap();
    assert!(!namespaces.contains(&"kubebyon-gone".to_owned()), "{namespaces:?}");
    let again = env.create("gone", json!({"enabled": false})).await;
    assert_ne!(again, id);
}
