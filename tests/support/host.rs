//! The test host side of the tests: a console connected to a test host
//! (real kube-apiserver + etcd + kube-controller-manager, hostsim) with its
//! reconciler running, acting as the least-privilege `kubebyon-console` user.

use std::sync::Arc;
use std::time::Duration;

use hostsim::testhost::TestHost;
use hostsim::testsupport as ts;
use kubebyon::domain::render::AddressRequest;
use kubebyon::server::controllers::reconciler::{self, Context};
use kubebyon::server::host::Host;
use serde_json::{Value, json};

use super::http::Console;

/// How long a host-side change may take to show: a pod's roll on a loaded
/// 2-core host (CI runs two suites at once) plus the probe's longest
/// back-off (30 s, `reconciler::probes`). 60 s was not enough for a
/// LoadBalancer → gateway switch while `tests/moves.rs` ran beside it.
pub const WAIT: Duration = Duration::from_secs(120);

pub fn ready(s: &Value) -> bool {
    s["phase"] == "ready"
}

/// `kubectl get ns -o name` with a kubeconfig (written under the host's folder).
pub fn kubectl_get_ns_on(host: &TestHost, kubeconfig: &str, tag: &str) -> Result<String, String> {
    let path = ts::write_kubeconfig(&host.data_dir, kubeconfig, tag).unwrap();
    let out = ts::kubectl(&path, &["get", "ns", "-o", "name"]).unwrap();
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

/// The host user the console acts as in these tests.
pub const CONSOLE_USER: &str = "kubebyon-console";

/// A client acting as user `user`, bound only to the ClusterRole in
/// `deploy/rbac.yaml`: a permission the reconciler lacks fails these tests.
pub async fn console_client(host: &TestHost, user: &str) -> kube::Client {
    let path = console_kubeconfig_as(host, user).await;
    hostsim::testhost::client_for(&path).await.expect("console client")
}

/// The kubeconfig of user `kubebyon-console` (bound to `deploy/rbac.yaml`), as a file.
pub async fn console_kubeconfig(host: &TestHost) -> std::path::PathBuf {
    console_kubeconfig_as(host, CONSOLE_USER).await
}

/// The name of `user`'s ClusterRoleBinding to the console's ClusterRole.
pub fn test_binding(user: &str) -> String {
    format!("{user}-test-user")
}

/// The kubeconfig of host user `user`, bound (again) to `deploy/rbac.yaml` by
/// [`test_binding`], as a file.
pub async fn console_kubeconfig_as(host: &TestHost, user: &str) -> std::path::PathBuf {
    use k8s_openapi::api::rbac::v1::ClusterRole;
    use kube::api::{Api, Patch, PatchParams};
    let admin = host.client().await.expect("admin client");
    let role: ClusterRole = serde_yaml::from_str(include_str!("../../deploy/rbac.yaml")).expect("deploy/rbac.yaml");
    let pp = PatchParams::apply("kubebyon-test").force();
    Api::<ClusterRole>::all(admin.clone())
        .patch("kubebyon-console", &pp, &Patch::Apply(&role))
        .await
        .expect("apply the console's ClusterRole");
    // Its own binding name: `deploy/rbac-binding.yaml` (applied for real by
    // `deploy_manifests_pass_the_api_servers_dry_run`) is `kubebyon-console`
    // for the ServiceAccount, and sharing the name let that apply replace this
    // user's subject: every call of the tests running beside it was then 403
    // (a delete stuck as failed: "cannot get resource helmcharts").
    let name = test_binding(user);
    let binding = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "kubebyon-console"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
    });
    Api::<k8s_openapi::api::rbac::v1::ClusterRoleBinding>::all(admin)
        .patch(&name, &pp, &Patch::Apply(&binding))
        .await
        .expect("bind it");
    let pki = host.data_dir.join("pki");
    let read = |f: &str| std::fs::read_to_string(pki.join(f)).expect("host CA");
    let ca = hostsim::pki::Ca::from_pem(hostsim::pki::CertPair { cert_pem: read("ca.crt"), key_pem: read("ca.key") })
        .expect("host CA");
    let cert = ca.issue_client(user, &[]).expect("console certificate");
    let creds = hostsim::kubeconfig::Credentials::from_file(&host.kubeconfig).expect("host kubeconfig");
    let text = hostsim::kubeconfig::render("console", &creds.server, &ca.pair.cert_pem, &cert);
    ts::write_kubeconfig(&host.data_dir, &text, user).unwrap()
}

/// `deploy/platform-key.yaml`'s Role for the console, in `namespace` (made if
/// missing) instead of `kubebyon-platform-key`, bound to host user `user`:
/// what the console may write beside the platform key's Secret.
pub async fn bind_platform_key_role(host: &TestHost, namespace: &str, user: &str) {
    use kube::ResourceExt;
    use kube::api::{Api, DynamicObject, Patch, PatchParams};
    use serde::Deserialize;
    let admin = host.client().await.expect("admin client");
    let pp = PatchParams::apply("kubebyon-test").force();
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}});
    Api::<k8s_openapi::api::core::v1::Namespace>::all(admin.clone())
        .patch(namespace, &pp, &Patch::Apply(&ns))
        .await
        .expect("the key's namespace");
    let docs: Vec<Value> = serde_yaml::Deserializer::from_str(include_str!("../../deploy/platform-key.yaml"))
        .map(|d| Value::deserialize(d).expect("deploy/platform-key.yaml"))
        .collect();
    let mut role = docs.iter().find(|d| d["kind"] == "Role").expect("a Role").clone();
    role["metadata"]["namespace"] = namespace.into();
    let name = role["metadata"]["name"].as_str().expect("its name").to_owned();
    let binding = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": format!("{name}-{user}"), "namespace": namespace},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
    });
    for object in [role, binding] {
        let object: DynamicObject = serde_json::from_value(object).expect("an object");
        let kind = object.types.as_ref().map(|t| t.kind.clone()).unwrap_or_default();
        let ar = kube::api::ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk(
            "rbac.authorization.k8s.io",
            "v1",
            &kind,
        ));
        Api::<DynamicObject>::namespaced_with(admin.clone(), namespace, &ar)
            .patch(&object.name_any(), &pp, &Patch::Apply(&object))
            .await
            .expect("apply the console's platform-key Role");
    }
}

pub struct Env {
    pub console: Console,
    pub cookie: String,
    pub ctx: Arc<Context>,
    pub _db: tempfile::TempDir,
}

/// A reconciler as the tests run it: short resync, retry and lease.
pub async fn context_on(host: &TestHost, pool: sqlx::AnyPool) -> Arc<Context> {
    context_as(host, pool, CONSOLE_USER).await
}

/// [`context_on`], acting as host user `user`.
pub async fn context_as(host: &TestHost, pool: sqlx::AnyPool, user: &str) -> Arc<Context> {
    context_with(console_client(host, user).await, pool).await
}

/// [`context_on`] with its host client given.
pub async fn context_with(client: kube::Client, pool: sqlx::AnyPool) -> Arc<Context> {
    let request = kubebyon::server::host::detect_address_request(&client).await;
    assert_eq!(request, AddressRequest::MetalLb, "MetalLB's IPAddressPool CRD is detected");
    let mut host = Host::new(client, pool.clone(), request);
    // The test host serves on 127.0.0.0/8.
    host.resolver.targets.allow_loopback = true;
    let mut ctx = Context::new(Arc::new(host), pool);
    ctx.timing.resync = Duration::from_millis(500);
    ctx.timing.retry_base = Duration::from_millis(200);
    ctx.timing.lease = Duration::from_secs(2);
    ctx.timing.leader_lease = Duration::from_secs(2);
    ctx.timing.route_grace = Duration::from_secs(3);
    Arc::new(ctx)
}

/// The system settings with `host` as the admin's NodePort public host.
pub fn nodeport_settings(host: &str) -> Value {
    json!({"default_cluster_public_access_mode": "nodeport", "nodeport_public_host": host,
        "load_balancer_annotations": {}, "load_balancer_class": null})
}

/// Creates and signs in admin `name`, who sets `node_host` as the NodePort public host.
pub async fn sign_in_admin(console: &Console, name: &str, node_host: &str) -> String {
    console.user(name, "correct horse battery", true).await;
    let cookie = console.login(name, "correct horse battery").await;
    let r = console.json("PUT", "/api/admin/system-settings", Some(&cookie), nodeport_settings(node_host)).await;
    assert_eq!(r.status, 200, "{}", r.body);
    cookie
}

/// A console on a fresh SQLite file, connected to `host`, with its
/// reconciler running; signed in as an admin.
pub async fn env_on(host: &TestHost) -> Env {
    env_as(host, CONSOLE_USER).await
}

/// [`env_on`], its reconciler acting as host user `user`.
pub async fn env_as(host: &TestHost, user: &str) -> Env {
    let env = env_parked(host, user).await;
    env.start();
    env
}

/// [`env_on`] whose reconciler's every host call `calls` counts
/// (`support::calls`), acting as the console's user.
pub async fn env_counting(host: &TestHost, calls: &'static super::calls::Calls) -> Env {
    let path = console_kubeconfig(host).await;
    let client = super::calls::counting_client(&path, calls).await;
    let env = env_with(host, |pool| context_with(client, pool)).await;
    env.start();
    env
}

/// [`env_as`] with its reconciler not running yet ([`Env::start`]): a test
/// can set up what an older console left first.
pub async fn env_parked(host: &TestHost, user: &str) -> Env {
    env_with(host, |pool| context_as(host, pool, user)).await
}

/// A parked console on a fresh SQLite file whose reconciler `context` makes.
async fn env_with<F, Fut>(host: &TestHost, context: F) -> Env
where
    F: FnOnce(sqlx::AnyPool) -> Fut,
    Fut: std::future::Future<Output = Arc<Context>>,
{
    let (url, dir) = super::sqlite_url();
    let pool = kubebyon::server::db::connect(&url).await.expect("database");
    let ctx = context(pool.clone()).await;
    let console = Console::with_host(pool, Some(ctx.host.clone()));
    // The admin's NodePort public host: the test host's first node.
    let cookie = sign_in_admin(&console, "root", &host.net.node().to_string()).await;
    Env { console, cookie, ctx, _db: dir }
}

impl Env {
    /// Runs the reconciler and the node-removal driver, as the console does.
    pub fn start(&self) {
        tokio::spawn(reconciler::run(self.ctx.clone()));
        let every = std::time::Duration::from_secs(1);
        tokio::spawn(kubebyon::server::controllers::node_removal::drive(
            self.ctx.pool.clone(),
            self.ctx.host.clone(),
            every,
        ));
    }

    /// Asks for the deletion of a cluster and waits until its row is gone.
    pub async fn delete(&self, id: i64) -> Result<(), String> {
        let r = self.console.send("DELETE", &format!("/api/console/clusters/{id}"), Some(&self.cookie), None, "").await;
        assert_eq!(r.status, 202, "{}", r.body);
        self.ctx.host.wake();
        ts::eventually("the cluster row gone", 3 * WAIT, || async {
            let r = self.console.get(&format!("/api/console/clusters/{id}"), Some(&self.cookie)).await;
            (r.status == 404).then_some(())
        })
        .await
        .map_err(|e| e.to_string())
    }

    pub async fn create(&self, name: &str, access: Value) -> i64 {
        self.create_sized(name, json!({"cpu": "1", "memory_gib": 2, "storage_gib": 5}), access).await
    }

    pub async fn create_sized(&self, name: &str, resources: Value, access: Value) -> i64 {
        let body = json!({"name": name, "resources": resources, "public_access": access});
        let r = self.console.json("POST", "/api/console/clusters", Some(&self.cookie), body).await;
        assert_eq!(r.status, 201, "{}", r.body);
        self.ctx.host.wake();
        r.json()["id"].as_i64().expect("id")
    }

    pub async fn patch(&self, id: i64, access: Value) {
        self.patch_with(id, json!({"public_access": access})).await
    }

    pub async fn patch_with(&self, id: i64, body: Value) {
        let r = self.console.json("PATCH", &format!("/api/console/clusters/{id}"), Some(&self.cookie), body).await;
        assert_eq!(r.status, 200, "{}", r.body);
        self.ctx.host.wake();
    }

    pub async fn cluster(&self, id: i64) -> Value {
        self.console.get(&format!("/api/console/clusters/{id}"), Some(&self.cookie)).await.json()
    }

    /// Waits until the status observed for the current generation matches `want`.
    pub async fn converge(&self, id: i64, what: &str, want: impl Fn(&Value) -> bool) -> Value {
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

    /// Creates a cluster and waits until it is Ready.
    pub async fn create_ready(&self, name: &str, access: Value) -> i64 {
        let id = self.create(name, access).await;
        self.converge(id, "Ready", ready).await;
        id
    }

    /// Waits until the status message starts with `code: ` and holds `words`;
    /// returns it.
    pub async fn converge_message(&self, id: i64, code: &str, words: &str) -> String {
        let prefix = format!("{code}: ");
        let c = self
            .converge(id, &format!("{code} with {words:?}"), |s| {
                s["message"].as_str().is_some_and(|m| m.starts_with(&prefix) && m.contains(words))
            })
            .await;
        c["status"]["message"].as_str().unwrap_or_default().to_owned()
    }

    /// The cluster's own admin credential, by break-glass (the suite's user is
    /// a console admin): how the host suites reach an endpoint whatever the
    /// cluster's control plane (a relaying one issues no per-user
    /// certificates; `per_user_kubeconfigs_follow_membership` proves those).
    pub async fn kubeconfig(&self, id: i64) -> String {
        let path = format!("/api/console/clusters/{id}/admin-kubeconfig");
        let r =
            self.console.json("POST", &path, Some(&self.cookie), json!({"reason": "test: the endpoint answers"})).await;
        assert_eq!(r.status, 200, "{}", r.body);
        assert_eq!(r.headers["cache-control"], "no-store");
        assert!(r.headers["content-disposition"].to_str().unwrap().starts_with("attachment"));
        r.body
    }

    /// The own kubeconfig of the user `cookie` signs in (a certificate signed
    /// inside the cluster for them, `issue 42`), or the refusal.
    pub async fn own_kubeconfig(&self, id: i64, cookie: &str) -> Result<String, (u16, String)> {
        let path = format!("/api/console/clusters/{id}/kubeconfig");
        let r = self.console.json("POST", &path, Some(cookie), json!({"lifetime": "1h"})).await;
        if r.status != 200 {
            return Err((r.status.as_u16(), r.code()));
        }
        assert_eq!(r.headers["cache-control"], "no-store");
        Ok(r.body)
    }
}
