//! `make bench-scale` only (ignored by `cargo test`): the console's memory
//! per watched cluster, on a **light host profile** — the test host's real
//! etcd and kube-apiserver with helm-controller's own HelmChart CRD (its
//! binary runs until the CRD is served), and, per cluster, the objects the
//! console watches and reads written directly as a settled install leaves
//! them: the namespace and HelmChart the console applies itself, helm's
//! install Job (complete) and its pod, the vCluster Service, StatefulSet
//! (rolled out) and pod (Ready), and `vc-<name>` (a kubeconfig and PEM
//! credentials of the sizes vCluster writes). No helm install, scheduler or
//! kubelet runs: the console sees the same objects and the same watch
//! traffic a settled host gives it, at a cost a 2-core machine can pay for
//! 1,000 clusters. The console is the release binary in its own process
//! (`KUBEBYON_BIN`), public access off for every cluster (no probes).
//!
//! Prints the console's RSS at each point of `KUBEBYON_BENCH_POINTS`
//! (default 100,400,700,1000) once every cluster is Ready and a full pass
//! has run, what its watch caches keep then (objects and bytes, per watch,
//! from its `/metrics`), and the least-squares slope in KiB per cluster.

mod support;

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use hostsim::testhost::TestHost;
use hostsim::testsupport as ts;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, Secret, Service};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kubebyon::domain::{PublicAccess, PublicAccessMode};
use kubebyon::server::db;
use serde_json::json;

struct Kill(Child);

impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn control_plane(bin: &str) -> PathBuf {
    PathBuf::from(std::env::var("KUBEBYON_CONTROL_PLANE_DIR").expect("KUBEBYON_CONTROL_PLANE_DIR")).join(bin)
}

/// The console's watch caches as its `/metrics` gives them: objects and
/// bytes in all, and each watch's `name objects/bytes`.
fn watch_caches(port: u16) -> (u64, u64, String) {
    use std::io::{Read, Write};
    let mut text = String::new();
    if let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) {
        let _ = write!(s, "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\n\r\n");
        let _ = s.read_to_string(&mut text);
    }
    // Each family's lines come in its own (hash) order: matched by watch.
    let gauge = |metric: &str| -> std::collections::BTreeMap<String, u64> {
        text.lines()
            .filter_map(|l| l.strip_prefix(metric)?.strip_prefix("{watch=\""))
            .filter_map(|l| {
                let (watch, value) = l.split_once("\"} ")?;
                Some((watch.to_owned(), value.trim().parse().ok()?))
            })
            .collect()
    };
    let (objects, bytes) = (gauge("kubebyon_watch_cache_objects"), gauge("kubebyon_watch_cache_bytes"));
    let each =
        objects.iter().map(|(w, o)| format!("{w} {o}/{}", bytes.get(w).unwrap_or(&0))).collect::<Vec<_>>().join(", ");
    (objects.values().sum(), bytes.values().sum(), each)
}

/// PEM-shaped text of `n` base64 characters (the sizes vCluster writes).
fn pem(kind: &str, n: usize) -> String {
    let body: String = (0..n).map(|i| (b'A' + (i * 7 % 26) as u8) as char).collect();
    let lines: Vec<&str> = body.as_bytes().chunks(64).map(|c| std::str::from_utf8(c).unwrap()).collect();
    format!("-----BEGIN {kind}-----\n{}\n-----END {kind}-----\n", lines.join("\n"))
}

fn now() -> String {
    k8s_openapi::jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// The PEM credentials written into `vc-<name>`: CA, client certificate, key.
struct Creds {
    ca: String,
    cert: String,
    key: String,
}

impl Creds {
    /// PEM-shaped text of the sizes vCluster writes (nothing connects).
    fn filler() -> Self {
        Self { ca: pem("CERTIFICATE", 1020), cert: pem("CERTIFICATE", 1080), key: pem("RSA PRIVATE KEY", 1600) }
    }
}

/// helm's install Job for release `name`, complete (as helm-controller
/// writes it and the Job controller finishes it).
async fn create_complete_job(jobs: &Api<Job>, ns: &str, name: &str) -> Job {
    let chart_label = json!({"helmcharts.helm.cattle.io/chart": name});
    let job: Job = serde_json::from_value(json!({
        "metadata": {"name": format!("helm-install-{name}"), "labels": chart_label},
        "spec": {"backoffLimit": 1000, "template": {"metadata": {"labels": chart_label}, "spec": {
            "restartPolicy": "OnFailure", "serviceAccountName": format!("helm-{name}"),
            "containers": [{"name": "helm", "image": "rancher/klipper-helm:v0.13.3-build20260727",
                "args": ["install", "--set-string", "global.systemDefaultRegistry="],
                "env": [{"name": "NAME", "value": name}, {"name": "VERSION", "value": "0.30.0"},
                    {"name": "REPO", "value": "https://charts.loft.sh"}, {"name": "HELM_DRIVER", "value": "secret"},
                    {"name": "CHART_NAMESPACE", "value": ns}, {"name": "CHART", "value": "vcluster"},
                    {"name": "HELM_VERSION"}, {"name": "TARGET_NAMESPACE", "value": ns},
                    {"name": "AUTH_PASS_CREDENTIALS", "value": "false"}, {"name": "INSECURE_SKIP_TLS_VERIFY", "value": "false"},
                    {"name": "PLAIN_HTTP", "value": "false"}, {"name": "NO_PROXY", "value": ".svc,.cluster.local,10.42.0.0/16,10.43.0.0/16"},
                    {"name": "FAILURE_POLICY", "value": "reinstall"}],
                "volumeMounts": [{"name": "values", "mountPath": "/config"}, {"name": "content", "mountPath": "/chart"},
                    {"name": "klipper-helm", "mountPath": "/home/klipper-helm/.helm"},
                    {"name": "klipper-cache", "mountPath": "/home/klipper-helm/.cache"},
                    {"name": "klipper-config", "mountPath": "/home/klipper-helm/.config"}, {"name": "tmp", "mountPath": "/tmp"}]}],
            "volumes": [{"name": "values", "secret": {"secretName": format!("chart-values-{name}")}},
                {"name": "content", "configMap": {"name": format!("chart-content-{name}")}},
                {"name": "klipper-helm", "emptyDir": {"medium": "Memory"}}, {"name": "klipper-cache", "emptyDir": {"medium": "Memory"}},
                {"name": "klipper-config", "emptyDir": {"medium": "Memory"}}, {"name": "tmp", "emptyDir": {"medium": "Memory"}}]}}}
    }))
    .unwrap();
    let job = jobs.create(&PostParams::default(), &job).await.expect("create Job");
    let t = now();
    let done = json!({"status": {"startTime": t, "completionTime": t, "succeeded": 1, "conditions": [
        {"type": "SuccessCriteriaMet", "status": "True", "lastProbeTime": t, "lastTransitionTime": t},
        {"type": "Complete", "status": "True", "lastProbeTime": t, "lastTransitionTime": t}]}});
    jobs.patch_status(&job.metadata.name.clone().unwrap(), &PatchParams::default(), &Patch::Merge(&done))
        .await
        .expect("Job complete");
    job
}

/// Everything a settled install of release `name` in `ns` leaves beside what
/// the console applies; its Service of `service_type` (the API server
/// allocates a node port). Returns the Service as created.
async fn settle(client: &kube::Client, ns: &str, name: &str, service_type: &str, creds: &Creds) -> Service {
    let pp = PostParams::default();
    let status = PatchParams::default();
    // helm's install Job, complete, and its pod (as helm-controller writes them).
    let jobs: Api<Job> = Api::namespaced(client.clone(), ns);
    let job = create_complete_job(&jobs, ns, name).await;
    let t = now();
    let uid = job.metadata.uid.unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let mut template = serde_json::to_value(&job.spec.unwrap().template).unwrap();
    template["metadata"]["name"] = json!(format!("helm-install-{name}-x7k2p"));
    template["metadata"]["labels"]["batch.kubernetes.io/controller-uid"] = json!(uid);
    template["spec"]["nodeName"] = json!("node-1");
    let helm_pod: Pod = serde_json::from_value(template).unwrap();
    pods.create(&pp, &helm_pod).await.expect("create helm pod");
    // The chart's Service, StatefulSet (rolled out) and pod (Ready).
    let labels = json!({"app": "vcluster", "release": name, "chart": "vcluster-0.30.0", "heritage": "Helm"});
    let services: Api<Service> = Api::namespaced(client.clone(), ns);
    let svc: Service = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": labels},
        "spec": {"type": service_type, "selector": {"app": "vcluster", "release": name}, "ports": [
            {"name": "https", "port": 443, "targetPort": 8443, "protocol": "TCP"},
            {"name": "kubelet", "port": 10250, "targetPort": 8443, "protocol": "TCP"}]}
    }))
    .unwrap();
    let svc = services.create(&pp, &svc).await.expect("create Service");
    let container = json!({"name": "syncer", "image": "ghcr.io/loft-sh/vcluster-pro:0.30.0",
        "args": ["start"], "ports": [{"name": "https", "containerPort": 8443, "protocol": "TCP"}],
        "env": [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
            {"name": "VCLUSTER_NAME", "value": name}, {"name": "VCLUSTER_TELEMETRY_CONFIG", "value": "{\"disabled\":false}"}],
        "resources": {"limits": {"ephemeral-storage": "8Gi", "memory": "2Gi"}, "requests": {"cpu": "200m", "ephemeral-storage": "400Mi", "memory": "256Mi"}},
        "livenessProbe": {"httpGet": {"path": "/healthz", "port": 8443, "scheme": "HTTPS"}, "initialDelaySeconds": 60, "periodSeconds": 2, "failureThreshold": 60},
        "readinessProbe": {"httpGet": {"path": "/readyz", "port": 8443, "scheme": "HTTPS"}, "periodSeconds": 2, "failureThreshold": 60},
        "securityContext": {"allowPrivilegeEscalation": false, "runAsGroup": 0, "runAsUser": 0},
        "volumeMounts": [{"name": "data", "mountPath": "/data"}, {"name": "binaries", "mountPath": "/binaries"},
            {"name": "certs", "mountPath": "/pki"}, {"name": "helm-cache", "mountPath": "/.cache/helm"},
            {"name": "vcluster-config", "mountPath": "/var/lib/vcluster"}, {"name": "tmp", "mountPath": "/tmp"}]});
    let pod_spec = json!({"serviceAccountName": format!("vc-{name}"), "terminationGracePeriodSeconds": 10,
        "containers": [container], "volumes": [
            {"name": "helm-cache", "emptyDir": {}}, {"name": "binaries", "emptyDir": {}}, {"name": "tmp", "emptyDir": {}},
            {"name": "certs", "emptyDir": {}}, {"name": "vcluster-config", "secret": {"secretName": format!("vc-config-{name}")}}]});
    let sets: Api<StatefulSet> = Api::namespaced(client.clone(), ns);
    let sts: StatefulSet = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": labels},
        "spec": {"replicas": 1, "serviceName": format!("{name}-headless"), "podManagementPolicy": "Parallel",
            "selector": {"matchLabels": {"app": "vcluster", "release": name}},
            "template": {"metadata": {"labels": {"app": "vcluster", "release": name}}, "spec": pod_spec},
            "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "5Gi"}}}}]}
    }))
    .unwrap();
    let sts = sets.create(&pp, &sts).await.expect("create StatefulSet");
    // The claim its controller makes from the template (with the set's
    // selector labels), bound.
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), ns);
    let claim: PersistentVolumeClaim = serde_json::from_value(json!({
        "metadata": {"name": format!("data-{name}-0"), "labels": {"app": "vcluster", "release": name}},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "5Gi"}},
            "storageClassName": "local-path", "volumeName": format!("pvc-{name}")}
    }))
    .unwrap();
    claims.create(&pp, &claim).await.expect("create claim");
    let bound = json!({"status": {"phase": "Bound", "accessModes": ["ReadWriteOnce"], "capacity": {"storage": "5Gi"}}});
    claims.patch_status(&format!("data-{name}-0"), &status, &Patch::Merge(&bound)).await.expect("claim bound");
    let rolled = json!({"status": {"observedGeneration": sts.metadata.generation, "replicas": 1, "readyReplicas": 1,
        "currentReplicas": 1, "updatedReplicas": 1, "availableReplicas": 1,
        "currentRevision": format!("{name}-5d8f7c"), "updateRevision": format!("{name}-5d8f7c")}});
    sets.patch_status(name, &status, &Patch::Merge(&rolled)).await.expect("StatefulSet rolled out");
    let mut pod_spec = pod_spec;
    pod_spec["nodeName"] = json!("node-1");
    // The claim the StatefulSet's template asks for, as its controller names it.
    pod_spec["volumes"].as_array_mut().unwrap().push(json!({"name": "data",
        "persistentVolumeClaim": {"claimName": format!("data-{name}-0")}}));
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": format!("{name}-0"), "labels": {"app": "vcluster", "release": name,
            "statefulset.kubernetes.io/pod-name": format!("{name}-0"), "controller-revision-hash": format!("{name}-5d8f7c")}},
        "spec": pod_spec
    }))
    .unwrap();
    pods.create(&pp, &pod).await.expect("create vCluster pod");
    let ready = json!({"status": {"phase": "Running", "podIP": "10.42.0.9", "startTime": t, "conditions": [
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": t},
        {"type": "Initialized", "status": "True", "lastTransitionTime": t},
        {"type": "ContainersReady", "status": "True", "lastTransitionTime": t},
        {"type": "Ready", "status": "True", "lastTransitionTime": t}],
        "containerStatuses": [{"name": "syncer", "ready": true, "restartCount": 0, "started": true,
            "image": "ghcr.io/loft-sh/vcluster-pro:0.30.0", "imageID": "ghcr.io/loft-sh/vcluster-pro@sha256:0",
            "containerID": "containerd://0", "state": {"running": {"startedAt": t}}}]}});
    pods.patch_status(&format!("{name}-0"), &status, &Patch::Merge(&ready)).await.expect("pod Ready");
    // vc-<name>: the kubeconfig and credentials vCluster writes.
    let (ca, cert, key) = (&creds.ca, &creds.cert, &creds.key);
    let b64 = |s: &str| base64::Engine::encode(&base64::engine::general_purpose::STANDARD, s);
    let config = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- cluster:\n    certificate-authority-data: {}\n    server: https://localhost:8443\n  name: my-vcluster\ncontexts:\n- context:\n    cluster: my-vcluster\n    user: my-vcluster\n  name: my-vcluster\ncurrent-context: my-vcluster\nusers:\n- name: my-vcluster\n  user:\n    client-certificate-data: {}\n    client-key-data: {}\n",
        b64(ca),
        b64(cert),
        b64(key)
    );
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": format!("vc-{name}"), "labels": {"vcluster.loft.sh/namespace": ns}},
        "stringData": {"config": config, "certificate-authority": ca, "client-certificate": cert, "client-key": key}
    }))
    .unwrap();
    secrets.create(&pp, &secret).await.expect("create vc Secret");
    svc
}

/// `node-1`, the Node the light profile's pods are bound to, Ready (no
/// kubelet runs): without it the test host's pod garbage collector deletes
/// them as orphans within a minute, and the console would watch no pods.
async fn create_node(client: &kube::Client, address: std::net::Ipv4Addr) {
    use k8s_openapi::api::core::v1::Node;
    let nodes: Api<Node> = Api::all(client.clone());
    let node: Node = serde_json::from_value(json!({"metadata": {"name": "node-1"}})).unwrap();
    match nodes.create(&PostParams::default(), &node).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 409 => {}
        Err(e) => panic!("create node-1: {e}"),
    }
    let t = now();
    let ready = json!({"status": {"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
        "lastHeartbeatTime": t, "lastTransitionTime": t}],
        "addresses": [{"type": "InternalIP", "address": address.to_string()}, {"type": "Hostname", "address": "node-1"}]}});
    nodes.patch_status("node-1", &PatchParams::default(), &Patch::Merge(&ready)).await.expect("node-1 Ready");
}

/// helm-controller's own CRDs: its binary registers them at start (and is
/// stopped once they are served).
fn register_helm_chart_crd(kc: &std::path::Path, log_dir: &std::path::Path) {
    let log = std::fs::File::create(log_dir.join("helm-controller.log")).unwrap();
    let _hc = Kill(
        Command::new(control_plane("helm-controller"))
            .args(["--kubeconfig", kc.to_str().unwrap()])
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("helm-controller"),
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    while ts::kubectl(kc, &["wait", "--for=condition=Established", "--timeout=5s", "crd/helmcharts.helm.cattle.io"])
        .map(|o| !o.status.success())
        .unwrap_or(true)
    {
        assert!(Instant::now() < deadline, "helm-controller did not register its CRDs");
        std::thread::sleep(Duration::from_millis(300));
    }
}

async fn count(pool: &sqlx::AnyPool, sql: &str) -> i64 {
    sqlx::query_scalar(sql).fetch_one(pool).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark: make bench-scale"]
async fn bench_memory_per_cluster() {
    let points: Vec<usize> = std::env::var("KUBEBYON_BENCH_POINTS")
        .unwrap_or_else(|_| "100,400,700,1000".into())
        .split(',')
        .filter_map(|p| p.trim().parse().ok())
        .collect();
    let host = TestHost::shared(None);
    let kc = host.kubeconfig.clone();
    let work = tempfile::tempdir().unwrap();
    register_helm_chart_crd(&kc, work.path());
    // The console, its own process.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let log = std::fs::File::create(work.path().join("console.log")).unwrap();
    let console = Kill(
        Command::new(std::env::var("KUBEBYON_BIN").expect("KUBEBYON_BIN (scripts/console-env.sh)"))
            .arg("serve")
            .env("KUBECONFIG", &kc)
            .env("KUBEBYON_DATA_DIR", work.path())
            .env("LEPTOS_SITE_ADDR", format!("127.0.0.1:{port}"))
            .env("KUBEBYON_ADMIN_PASSWORD", "bench-password-123")
            .env("KUBEBYON_SPEC_WRITE_LIMIT", "off")
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("console"),
    );
    let pid = console.0.id();
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "the console did not start");
        std::thread::sleep(Duration::from_millis(100));
    }
    let pool = db::connect(&db::sqlite_url(work.path()).unwrap()).await.unwrap();
    let owner = count(&pool, "SELECT MIN(id) FROM users").await;
    let client = host.client().await.unwrap();
    create_node(&client, std::net::Ipv4Addr::LOCALHOST).await;
    println!("== console memory per watched cluster (light host profile: tests/scale_bench.rs)");
    println!("console pid {pid}: RSS {} KiB with no cluster", support::rss_kib(Some(pid)));
    let mut made = 0;
    let mut figures = Vec::new();
    let filler = Creds::filler();
    for point in points {
        let t = Instant::now();
        for i in made..point {
            let spec = support::spec(&format!("s{i:04}"), PublicAccess::Disabled);
            db::clusters::insert(&pool, owner, &spec, PublicAccessMode::NodePort, None).await.unwrap();
        }
        // The console applies each (namespace, HelmChart); then the rest appears.
        for i in made..point {
            let name = format!("s{i:04}");
            let deadline = Instant::now() + Duration::from_secs(600);
            let ns = format!("kubebyon-{name}");
            while kube::Api::<kube::api::DynamicObject>::namespaced_with(
                client.clone(),
                &ns,
                &kubebyon::server::testing::charts_resource(),
            )
            .get_opt(&name)
            .await
            .ok()
            .flatten()
            .is_none()
            {
                assert!(Instant::now() < deadline, "{name}: no HelmChart after 600 s");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            settle(&client, &ns, &name, "ClusterIP", &filler).await;
        }
        made = point;
        let deadline = Instant::now() + Duration::from_secs(900);
        while count(&pool, "SELECT COUNT(*) FROM clusters WHERE phase = 'ready'").await < point as i64 {
            assert!(Instant::now() < deadline, "not every cluster became Ready");
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        let created = t.elapsed();
        // A full pass (every minute) after all settled, then the median of 5 samples.
        tokio::time::sleep(Duration::from_secs(65)).await;
        let mut samples: Vec<u64> = Vec::new();
        for _ in 0..5 {
            samples.push(support::rss_kib(Some(pid)));
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        samples.sort_unstable();
        let rss = samples[2];
        println!(
            "{point:5} clusters watched and Ready: console RSS {rss} KiB ({:.0} s to create and settle)",
            created.as_secs_f64()
        );
        let (objects, bytes, each) = watch_caches(port);
        println!(
            "{point:5} clusters: watch caches {objects} objects, {bytes} bytes ({:.0} per cluster): {each}",
            bytes as f64 / point as f64
        );
        figures.push((point as f64, rss as f64));
    }
    let n = figures.len() as f64;
    let (sx, sy) = figures.iter().fold((0.0, 0.0), |(a, b), (x, y)| (a + x, b + y));
    let (mx, my) = (sx / n, sy / n);
    let num: f64 = figures.iter().map(|(x, y)| (x - mx) * (y - my)).sum();
    let den: f64 = figures.iter().map(|(x, _)| (x - mx) * (x - mx)).sum();
    println!("slope: {:.1} KiB per cluster (least squares over {} points)", num / den, figures.len());
}

/// The light host's stand-in for what turns a HelmChart into a running
/// control plane (helm-controller, helm, the vCluster chart, MetalLB and
/// vCluster's own API endpoint), for the move bench: for each values it
/// writes `chart-values-<name>` (as helm-controller does); on a chart's first
/// values a settled install ([`settle`]) whose Service has the
/// values' type; on new values it replaces helm's Job with a complete one,
/// gives the Service the values' type and `metallb.io/loadBalancerIPs`
/// annotation, writes that address as its ingress (what MetalLB's
/// controller writes) and serves the cluster's API there. Every endpoint
/// is a relay to the host's API server (hostsim's `ApiListener`, as in
/// `--vcluster-api relay`) with a serving certificate for its address,
/// issued by one CA that all clusters share (one RSA-2048 CA and client
/// key, so a thousand clusters do not cost a thousand RSA key generations).
struct Settler {
    client: kube::Client,
    ca: hostsim::pki::Ca,
    creds: Creds,
    upstream: std::sync::Arc<hostsim::apiproxy::Upstream>,
    node: std::net::Ipv4Addr,
    /// The endpoints served, by namespace.
    listeners: std::sync::Mutex<std::collections::HashMap<String, Vec<hostsim::apiproxy::ApiListener>>>,
}

/// A rolled pod's status: scheduled and running, Ready or not yet.
fn rolled_pod_status(ready: bool) -> serde_json::Value {
    let t = now();
    json!({"status": {"phase": "Running", "podIP": "10.42.0.9", "startTime": t, "conditions": [
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": t},
        {"type": "Ready", "status": if ready { "True" } else { "False" }, "lastTransitionTime": t}],
        "containerStatuses": [{"name": "syncer", "ready": ready, "restartCount": 0, "started": true,
            "image": "ghcr.io/loft-sh/vcluster-pro:0.30.0", "imageID": "ghcr.io/loft-sh/vcluster-pro@sha256:0",
            "containerID": "containerd://1", "state": {"running": {"startedAt": t}}}]}})
}

/// How long a rolled pod takes to become Ready on the light profile (a
/// vCluster pod takes 30–90 s on a k3s host; this profile measures the
/// console's API traffic, not the pod's start).
const ROLL: Duration = Duration::from_secs(2);

/// A release: namespace and name.
type Release = (String, String);
/// One release's handling at a time, in the order its values came.
type ReleaseLock = std::sync::Arc<tokio::sync::Mutex<()>>;

/// What the settler reads from a chart's values: the Service type and the
/// requested LoadBalancer address.
fn service_of(values: &str) -> (String, Option<std::net::Ipv4Addr>) {
    let v: serde_yaml::Value = serde_yaml::from_str(values).unwrap_or_default();
    let service = &v["controlPlane"]["service"];
    let kind = service["spec"]["type"].as_str().unwrap_or("ClusterIP").to_owned();
    let ip = service["annotations"]["metallb.io/loadBalancerIPs"].as_str().and_then(|a| a.parse().ok());
    (kind, ip)
}

impl Settler {
    async fn new(host: &TestHost, node: std::net::Ipv4Addr) -> std::sync::Arc<Self> {
        use hostsim::pki::{Ca, KeyKind};
        let ca = Ca::generate_with("vcluster-ca", KeyKind::Rsa2048).unwrap();
        let client_pair = ca.issue_client_with("kube-admin", &["system:masters"], KeyKind::Rsa2048).unwrap();
        let creds = Creds { ca: ca.pair.cert_pem.clone(), cert: client_pair.cert_pem, key: client_pair.key_pem };
        let host_creds = hostsim::kubeconfig::Credentials::from_file(&host.kubeconfig).unwrap();
        std::sync::Arc::new(Self {
            client: host.client().await.unwrap(),
            ca,
            creds,
            upstream: hostsim::apiproxy::Upstream::new(&host_creds).unwrap(),
            node,
            listeners: Default::default(),
        })
    }

    /// The cluster's API served at `addr` (a relay with a certificate for its address).
    async fn serve(&self, ns: &str, addr: std::net::SocketAddr) {
        let serving = self.ca.issue_server("kube-apiserver", &[addr.ip().to_string()]).unwrap();
        let tls = hostsim::tls::server_config(&serving, &self.ca.pair.cert_pem).unwrap();
        let listener = hostsim::apiproxy::ApiListener::start_on(addr, tls, self.upstream.clone()).await.unwrap();
        self.listeners.lock().unwrap().entry(ns.to_owned()).or_default().push(listener);
    }

    /// Removes a release's Service and stops serving its endpoints (its node
    /// ports go back to the API server's range).
    async fn remove_service(&self, ns: &str, name: &str) {
        let services: Api<Service> = Api::namespaced(self.client.clone(), ns);
        services.delete(name, &Default::default()).await.expect("delete Service");
        self.listeners.lock().unwrap().remove(ns);
    }

    /// `chart-values-<name>`, as helm-controller writes it for each values.
    async fn values_secret(&self, ns: &str, name: &str, values: &str) {
        let secrets: Api<Secret> = Api::namespaced(self.client.clone(), ns);
        let body = json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": format!("chart-values-{name}"), "namespace": ns},
            "stringData": {"HelmChartValuesContent": values}});
        let pp = PatchParams::apply("helm-controller").force();
        secrets.patch(&format!("chart-values-{name}"), &pp, &Patch::Apply(&body)).await.expect("chart values");
    }

    /// A chart's first values: a settled install.
    async fn install(&self, ns: &str, name: &str, values: &str) {
        self.values_secret(ns, name, values).await;
        let (kind, _) = service_of(values);
        let svc = settle(&self.client, ns, name, &kind, &self.creds).await;
        let port = svc.spec.and_then(|s| s.ports?.into_iter().find(|p| p.port == 443)?.node_port);
        if let Some(port) = port {
            self.serve(ns, (self.node, port as u16).into()).await;
        }
    }

    /// New values: helm's upgrade Job, the Service's new type and address.
    async fn upgrade(&self, ns: &str, name: &str, values: &str) {
        self.values_secret(ns, name, values).await;
        let (kind, ip) = service_of(values);
        let jobs: Api<Job> = Api::namespaced(self.client.clone(), ns);
        let job = format!("helm-install-{name}");
        jobs.delete(&job, &Default::default()).await.expect("delete the old Job");
        while jobs.get_opt(&job).await.unwrap().is_some() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        create_complete_job(&jobs, ns, name).await;
        let services: Api<Service> = Api::namespaced(self.client.clone(), ns);
        let annotations = match ip {
            Some(ip) => json!({"metallb.io/loadBalancerIPs": ip.to_string()}),
            None => json!({}),
        };
        let patch = json!({"metadata": {"annotations": annotations}, "spec": {"type": kind}});
        services.patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await.expect("Service type");
        if let (Some(ip), "LoadBalancer") = (ip, kind.as_str()) {
            let status = json!({"status": {"loadBalancer": {"ingress": [{"ip": ip.to_string(), "ipMode": "VIP"}]}}});
            services.patch_status(name, &PatchParams::default(), &Patch::Merge(&status)).await.expect("ingress");
            self.serve(ns, (ip, 443).into()).await;
        }
    }

    /// The StatefulSet starts rolling its pod to a new revision (the chart's
    /// pod template carries a checksum of the values, so a full host rolls
    /// the pod on every switch): the set in progress, the pod replaced by a
    /// new one, scheduled and not Ready. [`Self::finish_roll`] ends it.
    async fn start_roll(&self, ns: &str, name: &str) -> String {
        let sets: Api<StatefulSet> = Api::namespaced(self.client.clone(), ns);
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), ns);
        // A revision never used before (the settled one is `<name>-5d8f7c`).
        static ROLLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        let revision = format!("{name}-r{}", ROLLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
        let rolling = json!({"status": {"readyReplicas": 0, "availableReplicas": 0, "updatedReplicas": 0,
            "updateRevision": revision}});
        sets.patch_status(name, &PatchParams::default(), &Patch::Merge(&rolling)).await.expect("StatefulSet rolling");
        let pod_name = format!("{name}-0");
        let mut pod = pods.get(&pod_name).await.expect("the vCluster pod");
        // No kubelet confirms a graceful deletion here: gone at once, as
        // the kubelet's (and the pod GC's) final deletion leaves it.
        let now = kube::api::DeleteParams { grace_period_seconds: Some(0), ..Default::default() };
        pods.delete(&pod_name, &now).await.expect("delete the old pod");
        while pods.get_opt(&pod_name).await.unwrap().is_some() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        pod.metadata = kube::api::ObjectMeta {
            name: pod.metadata.name,
            labels: pod.metadata.labels.map(|mut l| {
                l.insert("controller-revision-hash".into(), revision.clone());
                l
            }),
            ..Default::default()
        };
        pod.status = None;
        pods.create(&PostParams::default(), &pod).await.expect("create the new pod");
        let starting = rolled_pod_status(false);
        pods.patch_status(&pod_name, &PatchParams::default(), &Patch::Merge(&starting)).await.expect("pod starting");
        revision
    }

    /// The new pod Ready and the StatefulSet rolled out to `revision`.
    async fn finish_roll(&self, ns: &str, name: &str, revision: &str) {
        let sets: Api<StatefulSet> = Api::namespaced(self.client.clone(), ns);
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), ns);
        let ready = rolled_pod_status(true);
        let pod_name = format!("{name}-0");
        pods.patch_status(&pod_name, &PatchParams::default(), &Patch::Merge(&ready)).await.expect("pod Ready");
        let rolled = json!({"status": {"readyReplicas": 1, "availableReplicas": 1, "updatedReplicas": 1,
            "currentReplicas": 1, "currentRevision": revision, "updateRevision": revision}});
        sets.patch_status(name, &PatchParams::default(), &Patch::Merge(&rolled)).await.expect("StatefulSet rolled");
    }

    /// Follows every HelmChart: each new values string is installed or
    /// upgraded (its pod rolled, Ready [`ROLL`] later), charts in parallel
    /// (8 at a time), one chart's in order.
    fn run(self: std::sync::Arc<Self>) -> tokio::task::JoinHandle<()> {
        use futures::StreamExt;
        use kube::runtime::watcher;
        tokio::spawn(async move {
            let charts: Api<kube::api::DynamicObject> =
                Api::all_with(self.client.clone(), &kubebyon::server::testing::charts_resource());
            let mut events = watcher(charts, watcher::Config::default()).boxed();
            let seen: std::sync::Arc<tokio::sync::Mutex<std::collections::HashMap<Release, String>>> =
                Default::default();
            let locks: std::sync::Mutex<std::collections::HashMap<Release, ReleaseLock>> = Default::default();
            let permits = std::sync::Arc::new(tokio::sync::Semaphore::new(8));
            while let Some(event) = events.next().await {
                let Ok(watcher::Event::Apply(chart) | watcher::Event::InitApply(chart)) = event else { continue };
                let (Some(ns), Some(name)) = (chart.metadata.namespace.clone(), chart.metadata.name.clone()) else {
                    continue;
                };
                let values = chart.data["spec"]["valuesContent"].as_str().unwrap_or_default().to_owned();
                let key = (ns.clone(), name.clone());
                let lock = locks.lock().unwrap().entry(key.clone()).or_default().clone();
                let (this, seen, permits) = (self.clone(), seen.clone(), permits.clone());
                tokio::spawn(async move {
                    let _one = lock.lock().await;
                    let before = seen.lock().await.insert(key, values.clone());
                    if before.as_deref() == Some(values.as_str()) {
                        return;
                    }
                    let permit = permits.acquire().await.unwrap();
                    match before {
                        None => this.install(&ns, &name, &values).await,
                        Some(_) => {
                            this.upgrade(&ns, &name, &values).await;
                            let revision = this.start_roll(&ns, &name).await;
                            drop(permit);
                            tokio::time::sleep(ROLL).await;
                            this.finish_roll(&ns, &name, &revision).await;
                        }
                    }
                });
            }
        })
    }
}

/// `make bench-scale` only: N clusters (`KUBEBYON_BENCH_MOVE_CLUSTERS`,
/// default 1,000) switched NodePort → LoadBalancer by the console's
/// reconciler, against a bare kube-rs client doing the minimal calls for
/// the same switches (server-side apply of the HelmChart, one Service watch,
/// one Secret read, the same TLS probe), on the light host profile with the
/// [`Settler`]; LoadBalancer addresses from their own /24s (240 per block).
/// Prints the wall-time ratio and API calls per cluster (every request the
/// console sends, Events included, counted by a client-side layer).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark: make bench-scale"]
async fn bench_move_to_load_balancer() {
    use kubebyon::server::controllers::reconciler::{self, Context};
    use kubebyon::server::service::clusters;
    use support::calls::{Calls, counting_client};
    static CONSOLE: Calls = Calls::new();
    static BARE: Calls = Calls::new();
    let n: usize = std::env::var("KUBEBYON_BENCH_MOVE_CLUSTERS").ok().and_then(|v| v.parse().ok()).unwrap_or(1000);
    let host = TestHost::shared(None);
    let work = tempfile::tempdir().unwrap();
    register_helm_chart_crd(&host.kubeconfig, work.path());
    let blocks = n.div_ceil(240);
    let node = hostsim::testhost::NetLease::claim().unwrap();
    let mine: Vec<_> = (0..blocks).map(|_| hostsim::testhost::NetLease::claim().unwrap()).collect();
    let theirs: Vec<_> = (0..blocks).map(|_| hostsim::testhost::NetLease::claim().unwrap()).collect();
    let at = |leases: &[hostsim::testhost::NetLease], i: usize| leases[i / 240].0.addr(10 + (i % 240) as u8);
    let settler = Settler::new(host, node.0.node()).await;
    let _settling = settler.clone().run();
    let admin = host.client().await.unwrap();
    create_node(&admin, node.0.node()).await;

    // --- the console: N NodePort clusters, Ready, then switched ---
    let (url, _db_dir) = support::sqlite_url();
    let pool = db::connect(&url).await.unwrap();
    let user = support::user(&pool, "bench", kubebyon::domain::user::Role::Admin).await;
    let mut settings = db::settings::load(&pool).await.unwrap();
    settings.nodeport_public_host = Some(kubebyon::domain::Host::parse(&node.0.node().to_string()).unwrap());
    // No MetalLB runs to be detected: the admin's setting names it.
    settings.load_balancer_address_request = kubebyon::domain::settings::AddressStyle::MetalLb;
    db::settings::save(&pool, &settings).await.unwrap();
    let mut console_host = kubebyon::server::host::Host::new(
        counting_client(&host.kubeconfig, &CONSOLE).await,
        pool.clone(),
        kubebyon::domain::render::AddressRequest::MetalLb,
    );
    console_host.resolver.targets.allow_loopback = true;
    let ctx = std::sync::Arc::new(Context::new(std::sync::Arc::new(console_host), pool.clone()));
    let reconciling = tokio::spawn(reconciler::run(ctx.clone()));
    let t = Instant::now();
    let mut ids = Vec::new();
    for i in 0..n {
        let spec = support::spec(&format!("m{i:04}"), PublicAccess::NodePort { host: None });
        ids.push(db::clusters::insert(&pool, user.id, &spec, PublicAccessMode::NodePort, None).await.unwrap());
    }
    ctx.host.wake();
    let all_ready = |on_lb: bool| {
        let pool = pool.clone();
        async move {
            let sql = "SELECT COUNT(*) FROM clusters WHERE phase = 'ready' AND observed_generation = generation";
            let like = if on_lb { " AND api_endpoint LIKE '%:443'" } else { " AND api_endpoint NOT LIKE '%:443'" };
            count(&pool, &format!("{sql}{like}")).await
        }
    };
    let wait_all = |what: &'static str, on_lb: bool| async move {
        let deadline = Instant::now() + Duration::from_secs(1800);
        while all_ready(on_lb).await < n as i64 {
            assert!(Instant::now() < deadline, "{what}: not all Ready after 1,800 s");
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    };
    wait_all("NodePort", false).await;
    println!("created {n} NodePort clusters, all Ready, in {:.0} s", t.elapsed().as_secs_f64());

    CONSOLE.reset();
    let t0 = Instant::now();
    for (i, id) in ids.iter().enumerate() {
        let patch: clusters::ClusterPatch = serde_json::from_value(json!({"public_access":
            {"enabled": true, "mode": "loadbalancer", "control_plane_host": at(&mine, i).to_string()}}))
        .unwrap();
        clusters::update(&pool, &Default::default(), &Default::default(), &user, *id, &patch).await.unwrap();
    }
    ctx.host.wake();
    wait_all("LoadBalancer", true).await;
    let console_time = t0.elapsed();
    let (console_calls, console_kinds) = (CONSOLE.total(), CONSOLE.by_kind());
    // Each Service holds two node ports (https, kubelet): 2 × 2N would not fit
    // the API server's default range (30000–32767; a real host with as many
    // NodePort clusters needs a wider `--service-node-port-range`). The
    // console is stopped and its Services removed before the bare client's turn.
    reconciling.abort();
    for i in 0..n {
        let name = format!("m{i:04}");
        settler.remove_service(&format!("kubebyon-{name}"), &name).await;
    }

    // --- a bare kube-rs client, the same switches ---
    let bare = counting_client(&host.kubeconfig, &BARE).await;
    support::bare::install(&admin, n, Duration::from_secs(1800)).await;
    BARE.reset();
    let bare_time = support::bare::switch(&bare, n, |i| at(&theirs, i), Duration::from_secs(600)).await;
    let bare_calls = BARE.total();
    println!("== {n} clusters switched NodePort -> LoadBalancer (light host profile: tests/scale_bench.rs, Settler)");
    println!(
        "console reconciler: {:.1} s, {console_calls} API calls ({:.2} per cluster)",
        console_time.as_secs_f64(),
        console_calls as f64 / n as f64
    );
    println!("console calls by kind: {console_kinds}");
    println!(
        "bare kube-rs:       {:.1} s, {bare_calls} API calls ({:.2} per cluster)",
        bare_time.as_secs_f64(),
        bare_calls as f64 / n as f64
    );
    println!(
        "wall-time ratio console/bare: {:.2}x (goal <= 1.0x; <= 1.5 calls per cluster)",
        console_time.as_secs_f64() / bare_time.as_secs_f64()
    );
}
