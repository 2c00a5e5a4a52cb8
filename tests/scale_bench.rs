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
//! has run, and the least-squares slope in KiB per cluster.

mod support;

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use hostsim::testhost::TestHost;
use hostsim::testsupport as ts;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Pod, Secret, Service};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kubebyon::domain::{ClusterName, ClusterSpec, PublicAccess, PublicAccessMode, Resources};
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

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        .unwrap_or(0)
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

/// Everything a settled install of cluster `name` leaves beside what the
/// console applies.
async fn settle(client: &kube::Client, name: &str) {
    let ns = format!("kubebyon-{name}");
    let pp = PostParams::default();
    let status = PatchParams::default();
    let chart_label = json!({"helmcharts.helm.cattle.io/chart": name});
    // helm's install Job, complete, and its pod (as helm-controller writes them).
    let jobs: Api<Job> = Api::namespaced(client.clone(), &ns);
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
    let job = jobs.create(&pp, &job).await.expect("create Job");
    let t = now();
    let done = json!({"status": {"startTime": t, "completionTime": t, "succeeded": 1, "conditions": [
        {"type": "SuccessCriteriaMet", "status": "True", "lastProbeTime": t, "lastTransitionTime": t},
        {"type": "Complete", "status": "True", "lastProbeTime": t, "lastTransitionTime": t}]}});
    jobs.patch_status(&job.metadata.name.clone().unwrap(), &status, &Patch::Merge(&done)).await.expect("Job complete");
    let uid = job.metadata.uid.unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let mut template = serde_json::to_value(&job.spec.unwrap().template).unwrap();
    template["metadata"]["name"] = json!(format!("helm-install-{name}-x7k2p"));
    template["metadata"]["labels"]["batch.kubernetes.io/controller-uid"] = json!(uid);
    template["spec"]["nodeName"] = json!("node-1");
    let helm_pod: Pod = serde_json::from_value(template).unwrap();
    pods.create(&pp, &helm_pod).await.expect("create helm pod");
    // The chart's Service, StatefulSet (rolled out) and pod (Ready).
    let labels = json!({"app": "vcluster", "release": name, "chart": "vcluster-0.30.0", "heritage": "Helm"});
    let services: Api<Service> = Api::namespaced(client.clone(), &ns);
    let svc: Service = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": labels},
        "spec": {"type": "ClusterIP", "selector": {"app": "vcluster", "release": name}, "ports": [
            {"name": "https", "port": 443, "targetPort": 8443, "protocol": "TCP"},
            {"name": "kubelet", "port": 10250, "targetPort": 8443, "protocol": "TCP"}]}
    }))
    .unwrap();
    services.create(&pp, &svc).await.expect("create Service");
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
    let sets: Api<StatefulSet> = Api::namespaced(client.clone(), &ns);
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
    let (ca, cert, key) = (pem("CERTIFICATE", 1020), pem("CERTIFICATE", 1080), pem("RSA PRIVATE KEY", 1600));
    let b64 = |s: &str| base64::Engine::encode(&base64::engine::general_purpose::STANDARD, s);
    let config = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- cluster:\n    certificate-authority-data: {}\n    server: https://localhost:8443\n  name: my-vcluster\ncontexts:\n- context:\n    cluster: my-vcluster\n    user: my-vcluster\n  name: my-vcluster\ncurrent-context: my-vcluster\nusers:\n- name: my-vcluster\n  user:\n    client-certificate-data: {}\n    client-key-data: {}\n",
        b64(&ca),
        b64(&cert),
        b64(&key)
    );
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": format!("vc-{name}"), "labels": {"vcluster.loft.sh/namespace": ns}},
        "stringData": {"config": config, "certificate-authority": ca, "client-certificate": cert, "client-key": key}
    }))
    .unwrap();
    secrets.create(&pp, &secret).await.expect("create vc Secret");
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
    // helm-controller's own CRDs: its binary registers them at start.
    {
        let log = std::fs::File::create(work.path().join("helm-controller.log")).unwrap();
        let _hc = Kill(
            Command::new(control_plane("helm-controller"))
                .args(["--kubeconfig", kc.to_str().unwrap()])
                .stdout(log.try_clone().unwrap())
                .stderr(log)
                .spawn()
                .expect("helm-controller"),
        );
        let deadline = Instant::now() + Duration::from_secs(60);
        while ts::kubectl(
            &kc,
            &["wait", "--for=condition=Established", "--timeout=5s", "crd/helmcharts.helm.cattle.io"],
        )
        .map(|o| !o.status.success())
        .unwrap_or(true)
        {
            assert!(Instant::now() < deadline, "helm-controller did not register its CRDs");
            std::thread::sleep(Duration::from_millis(300));
        }
    }
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
    println!("== console memory per watched cluster (light host profile: tests/scale_bench.rs)");
    println!("console pid {pid}: RSS {} KiB with no cluster", rss_kib(pid));
    let mut made = 0;
    let mut figures = Vec::new();
    for point in points {
        let t = Instant::now();
        for i in made..point {
            let spec = ClusterSpec {
                name: ClusterName::parse(&format!("s{i:04}")).unwrap(),
                resources: Resources::default(),
                public_access: PublicAccess::Disabled,
                own_nodes: false,
                placement: Default::default(),
            };
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
            settle(&client, &name).await;
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
            samples.push(rss_kib(pid));
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        samples.sort_unstable();
        let rss = samples[2];
        println!(
            "{point:5} clusters watched and Ready: console RSS {rss} KiB ({:.0} s to create and settle)",
            created.as_secs_f64()
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
