//! The klipper-helm container: its `entry` script's flow, written from the
//! script (k3s-io/klipper-helm `entry`; the image is not a Go module and has no
//! runtime here), in the generation the pod's image tag names ([`Entry`]),
//! calling the **real helm binary** (helm v4.3.2, built from
//! `helm.sh/helm/v4`; klipper-helm v0.13.x ships helm 4.1.x, which the module
//! proxy here does not serve; for the v0.9 images helm v3.20.2 from
//! `helm.sh/helm/v3`, the release their Dockerfile fetches) against the real API server, as the Job's service
//! account (a token from the TokenRequest API in a kubeconfig, where the image
//! reads the projected token). Output streams into the container log as it comes,
//! with bash's `set -x` trace lines for the commands the script runs.
//!
//! What the image has that this does not: the `helm mapkubeapis` plugin (a no-op
//! for charts whose APIs are current, as the vCluster chart's are: not run) and
//! `helm set-status` (k3s-io/helm-set-status, not served by the module proxy):
//! mirrored in [`set_status`] from its README and helm's secrets driver.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Stdio;

use anyhow::{Context, Result};
use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, ServiceAccount};
use kube::api::{Api, ListParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::json;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

use crate::kubelet::Logs;

/// What the container needs from the node.
#[derive(Clone)]
pub struct Runtime {
    pub client: Client,
    /// helm 4 (klipper-helm v0.13 images).
    pub helm: PathBuf,
    /// helm 3 (klipper-helm v0.9 images).
    pub helm_v3: PathBuf,
    /// The API server, as the pod's in-cluster config would reach it.
    pub server: String,
    /// The cluster CA (the service account's `ca.crt`).
    pub ca_file: PathBuf,
    /// The image's `/etc/ssl/certs` (holds the chart mirror's CA).
    pub trust_dir: PathBuf,
    pub logs: Logs,
    /// Where each pod's volumes and helm's home are written.
    pub root: PathBuf,
}

/// One run of the container: the script's exit code.
pub async fn run(rt: &Runtime, pod: &Pod) -> i32 {
    let ns = pod.namespace().unwrap_or_default();
    let name = pod.name_any();
    let mut sh = match Shell::prepare(rt, pod).await {
        Ok(sh) => sh,
        Err(e) => {
            // What the kubelet would report as a mount or token failure.
            rt.logs.append(&ns, &name, "helm", &format!("{e:#}\n"));
            return 1;
        }
    };
    let code = sh.entry().await;
    if let Some(log) = sh.term_log.take() {
        tracing::debug!(pod = %name, termination_log = %log, "klipper-helm done");
    }
    code
}

struct Shell<'a> {
    rt: &'a Runtime,
    /// The `entry` the pod's image carries, and the helm it ships.
    entry: Entry,
    ns: String,
    pod: String,
    env: Vec<(String, String)>,
    args: Vec<String>,
    /// Where the pod's `/config`, `/ca-files`, `/auth` are.
    mounts: Vec<(String, PathBuf)>,
    term_log: Option<String>,
}

impl<'a> Shell<'a> {
    async fn prepare(rt: &'a Runtime, pod: &Pod) -> Result<Self> {
        let ns = pod.namespace().unwrap_or_default();
        let uid = pod.uid().unwrap_or_default();
        let spec = pod.spec.as_ref().context("pod has no spec")?;
        let c = spec.containers.first().context("pod has no container")?;
        let dir = rt.root.join(&uid);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("home"))?;
        let mut mounts = Vec::new();
        for m in c.volume_mounts.iter().flatten() {
            let local = dir.join("mnt").join(m.mount_path.trim_start_matches('/'));
            std::fs::create_dir_all(&local)?;
            if let Some(v) = spec.volumes.iter().flatten().find(|v| v.name == m.name) {
                materialize(&rt.client, &ns, v, &local).await?;
            }
            mounts.push((m.mount_path.clone(), local));
        }
        let sa = spec.service_account_name.clone().unwrap_or_else(|| "default".into());
        let token = service_account_token(&rt.client, &ns, &sa).await?;
        let kubeconfig = dir.join("kubeconfig");
        let ca = std::fs::read_to_string(&rt.ca_file)?;
        std::fs::write(&kubeconfig, in_cluster_kubeconfig(&rt.server, &ca, &token))?;
        let home = dir.join("home");
        let mut env: Vec<(String, String)> =
            c.env.iter().flatten().filter_map(|e| e.value.clone().map(|v| (e.name.clone(), v))).collect();
        for (k, v) in [
            ("HOME", home.display().to_string()),
            ("HELM_CONFIG_HOME", home.join(".config/helm").display().to_string()),
            ("HELM_CACHE_HOME", home.join(".cache/helm").display().to_string()),
            ("HELM_DATA_HOME", home.join(".local/share/helm").display().to_string()),
            ("KUBECONFIG", kubeconfig.display().to_string()),
            // entry: `export SSL_CERT_FILE=/var/run/secrets/kubernetes.io/serviceaccount/ca.crt`,
            // `SSL_CERT_DIR=/etc/ssl/certs`.
            ("SSL_CERT_FILE", rt.ca_file.display().to_string()),
            ("SSL_CERT_DIR", rt.trust_dir.display().to_string()),
            ("PATH", "/usr/bin:/bin".into()),
        ] {
            env.push((k.into(), v));
        }
        let entry = Entry::of_image(c.image.as_deref().unwrap_or_default());
        let args = c.args.clone().unwrap_or_default();
        Ok(Self { rt, entry, ns, pod: pod.name_any(), env, args, mounts, term_log: None })
    }

    fn var(&self, k: &str) -> String {
        self.env.iter().rev().find(|(n, _)| n == k).map(|(_, v)| v.clone()).unwrap_or_default()
    }

    /// A path inside the container, as it is on this machine.
    fn path(&self, p: &str) -> Option<PathBuf> {
        self.mounts.iter().find_map(|(m, local)| {
            let rest = p.strip_prefix(m.as_str())?;
            Some(local.join(rest.trim_start_matches('/')))
        })
    }

    /// The helm the image ships.
    fn helm_bin(&self) -> &Path {
        match self.entry {
            Entry::V0_13_3 => &self.rt.helm,
            Entry::V0_9_8 | Entry::V0_9_18 => &self.rt.helm_v3,
        }
    }

    fn log(&self, text: &str) {
        self.rt.logs.append(&self.ns, &self.pod, "helm", text);
    }

    fn term(&mut self, line: &str) {
        let log = self.term_log.get_or_insert_with(String::new);
        log.push_str(line);
        log.push('\n');
    }

    /// Runs helm with these arguments, streaming its output; its exit code.
    async fn helm(&self, args: &[String]) -> i32 {
        self.log(&format!("+ helm {}\n", args.join(" ")));
        let mut cmd = Command::new(self.helm_bin());
        cmd.args(args)
            .env_clear()
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => {
                self.log(&format!("/usr/bin/entry: line 1: helm: {e}\n"));
                return 127;
            }
        };
        let out = child.stdout.take().map(|o| BufReader::new(o).lines());
        let err = child.stderr.take().map(|o| BufReader::new(o).lines());
        let pump = |lines: Option<tokio::io::Lines<BufReader<_>>>| async move {
            let Some(mut lines) = lines else { return };
            while let Ok(Some(l)) = lines.next_line().await {
                self.log(&format!("{l}\n"));
            }
        };
        let ((), ()) = tokio::join!(pump(out), pump_err(self, err));
        child.wait().await.ok().and_then(|s| s.code()).unwrap_or(137)
    }

    /// `helm ls -f ^NAME$ --output json | jq -r '"\(.[0].chart),\(.[0].status)"'`
    /// (helm 3's `--all` is gone in helm 4, which lists every state by default,
    /// `pkg/action/list.go` `SetStateMask`; the v0.9 entry passes it to helm 3).
    async fn installed(&self, name: &str, target: &str) -> (String, String, u64) {
        let filter = format!("^{name}$");
        let mut args = vec!["ls", "-f", &filter, "--namespace", target, "--output", "json"];
        if self.entry != Entry::V0_13_3 {
            args.insert(1, "--all");
        }
        self.log(&format!("++ helm {}\n", args.join(" ")));
        let out = Command::new(self.helm_bin())
            .args(args)
            .env_clear()
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .output()
            .await;
        let list: serde_json::Value = out
            .ok()
            .and_then(|o| {
                if !o.stderr.is_empty() {
                    self.log(&String::from_utf8_lossy(&o.stderr));
                }
                serde_json::from_slice(&o.stdout).ok()
            })
            .unwrap_or(json!([]));
        let field = |k: &str| list[0][k].as_str().map(str::to_lowercase).unwrap_or_else(|| "null".into());
        (
            field("chart"),
            field("status"),
            list[0]["revision"]
                .as_u64()
                .or_else(|| list[0]["revision"].as_str().and_then(|r| r.parse().ok()))
                .unwrap_or(0),
        )
    }

    /// The script from `set -e -v` on.
    async fn entry(&mut self) -> i32 {
        let chart = self.var("CHART");
        let chart = chart.replace(
            "%{KUBERNETES_API}%",
            &format!("{}:{}", self.var("KUBERNETES_SERVICE_HOST"), self.var("KUBERNETES_SERVICE_PORT")),
        );
        if self.var("HELM_VERSION") == "v2" {
            let msg = "Helm v2 is EOL effective 2020-11-13; upgrade your chart to helm v3";
            self.term(msg);
            self.log(&format!("{msg}\n"));
            return 64;
        }
        let mut ca_pem = String::new();
        if let Some(f) = self.path("/config/ca-file.pem").filter(|f| f.is_file()) {
            ca_pem.push('\n');
            ca_pem.push_str(&std::fs::read_to_string(f).unwrap_or_default());
        }
        if let Some(dir) = self.path("/ca-files") {
            for f in std::fs::read_dir(dir).into_iter().flatten().flatten() {
                ca_pem.push('\n');
                ca_pem.push_str(&std::fs::read_to_string(f.path()).unwrap_or_default());
            }
        }
        let mut extra: Vec<String> = Vec::new();
        if !ca_pem.is_empty() {
            let f = self.rt.root.join(format!("{}-ca-file.pem", self.pod));
            let _ = std::fs::write(&f, ca_pem);
            extra.extend(["--ca-file".into(), f.display().to_string()]);
        }
        let mut repo_extra = extra.clone();
        if self.var("INSECURE_SKIP_TLS_VERIFY") == "true" {
            extra.push("--insecure-skip-tls-verify".into());
        }
        if self.var("PLAIN_HTTP") == "true" {
            extra.push("--plain-http".into());
        }
        let timeout = self.var("TIMEOUT");
        if !timeout.is_empty() {
            extra.extend(["--timeout".into(), timeout]);
        }
        let repo = self.var("REPO");
        if !repo.is_empty() && !repo.starts_with("oci://") {
            let alias = chart.split('/').next().unwrap_or_default().to_owned();
            if self.var("AUTH_PASS_CREDENTIALS") == "true" {
                repo_extra.push("--pass-credentials".into());
            }
            let mut add = vec!["repo".into(), "add".into()];
            add.extend(repo_extra);
            add.extend([alias, repo.clone()]);
            let code = self.helm(&add).await;
            if code != 0 {
                return code;
            }
            let code = self.helm(&["repo".into(), "update".into()]).await;
            if code != 0 {
                return code;
            }
        }
        let chart_ref = if repo.starts_with("oci://") {
            format!("{repo}/{}", chart.rsplit('/').next().unwrap_or_default())
        } else {
            chart
        };
        self.helm_update(chart_ref, extra).await
    }

    async fn helm_update(&mut self, chart_ref: String, extra: Vec<String>) -> i32 {
        let name = self.var("NAME");
        let target = self.var("TARGET_NAMESPACE");
        let (installed, status, revision) = self.installed(&name, &target).await;
        let mut values = Vec::new();
        if let Some(dir) = self.path("/config") {
            let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
                .into_iter()
                .flatten()
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
                .collect();
            files.sort();
            for f in files {
                values.extend(["--values".into(), f.display().to_string()]);
            }
        }
        // helm-controller v0.17 passes SERVER_SIDE (true|false|auto), FORCE_CONFLICTS
        // and CONFIG_HASH, which it reads back from the release's labels.
        let mut common = extra.clone();
        if self.var("FORCE_CONFLICTS") == "true" {
            common.push("--force-conflicts".into());
        }
        let hash = self.var("CONFIG_HASH");
        if !hash.is_empty() {
            common.extend(["--labels".into(), format!("helmcharts.helm.cattle.io/configHash={hash}")]);
        }
        let server_side = self.var("SERVER_SIDE");
        let args = self.args.clone();
        let install = {
            let mut a = args.clone();
            a.extend([name.clone(), chart_ref.clone()]);
            if server_side == "false" {
                a.push("--server-side=false".into());
            }
            a.extend(common.clone());
            a.extend(values.clone());
            a
        };
        let upgrade = {
            let mut a = vec!["upgrade".to_owned()];
            a.extend(args.iter().skip(1).cloned());
            a.extend([name.clone(), chart_ref.clone()]);
            // v0.13's `get_ssa_args`; the v0.9 entry (helm 3) has no server-side apply.
            if self.entry == Entry::V0_13_3 {
                a.push(format!("--server-side={}", if server_side.is_empty() { "auto" } else { server_side.as_str() }));
            }
            a.extend(common.clone());
            a.extend(values.clone());
            a
        };
        let uninstall = vec!["uninstall".into(), name.clone(), "--namespace".into(), target.clone(), "--wait".into()];
        // `helm status` read into STATUS and REVISION: empty when there is no release.
        let null = |v: &str| v.is_empty() || v == "null";
        let (status, revision) = match null(&installed) && null(&status) {
            true => (String::new(), String::new()),
            false => (status, revision.to_string()),
        };
        let read = Found {
            delete: args.first().map(String::as_str) == Some("delete"),
            status,
            revision,
            expected: self.var("EXPECTED_RELEASE_REVISION"),
            policy: self.var("FAILURE_POLICY"),
        };
        let mut last = 0;
        let plan = self.entry.plan(&read, &name);
        for step in plan.steps {
            let code = match step {
                Step::Term(t) => {
                    self.term(&t);
                    0
                }
                Step::Echo(t) => {
                    self.log(&format!("{t}\n"));
                    0
                }
                Step::SetStatusFailed => {
                    self.log(&format!("+ helm set-status {name} failed --namespace {target}\n"));
                    match set_status(&self.rt.client, &target, &name, "failed").await {
                        Ok(()) => 0,
                        Err(e) => {
                            self.log(&format!("Error: {e:#}\n"));
                            1
                        }
                    }
                }
                Step::Helm(call) => {
                    let a = match call {
                        Call::Install => &install,
                        Call::Upgrade => &upgrade,
                        Call::Uninstall => &uninstall,
                    };
                    self.helm(a).await
                }
            };
            last = code;
            // `set -e`: on until check_revision turns it off.
            if code != 0 && plan.errexit {
                return code;
            }
        }
        match plan.exit {
            Exit::Code(c) => c,
            Exit::Last => last,
        }
    }
}

/// The generations of klipper-helm's `entry` the test host runs, chosen by
/// the Job's image tag: what the oldest k3s release in support runs
/// (v0.9.8, k3s v1.34.1), what helm-controller v0.17.1 is paired with here
/// (v0.9.18), and today's (v0.13.3). Each pinned tag's `helm_update` is
/// mirrored branch by branch ([`Entry::plan`]; docs/testing.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Entry {
    /// `v0.9.8-build20250709` (7467f45..de91d32): no revision check, no
    /// `superseded` branch; helm 3.
    V0_9_8,
    /// `v0.9.18-build20260428` (0361c90): `check_revision` (ac8f73f),
    /// `superseded` retried (971f9fd); `set -e` throughout; helm 3.
    V0_9_18,
    /// `v0.13.3-build20260727` (09c5242): `retry`, `CONFIG_HASH`, SSA; helm 4.
    V0_13_3,
}

impl Entry {
    /// The `entry` an image carries: `rancher/klipper-helm:v0.9.N-…` is a
    /// v0.9 one: from v0.9.15 as v0.9.18, before as v0.9.8 (v0.9.9-v0.9.14
    /// already retry `superseded`, which a v0.9.8 reading installs: no image
    /// the test host runs is one of them); anything else today's.
    pub fn of_image(image: &str) -> Self {
        let tag = image.rsplit(':').next().unwrap_or_default();
        let Some(patch) = tag.strip_prefix("v0.9.").and_then(|r| r.split('-').next()?.parse::<u32>().ok()) else {
            return Self::V0_13_3;
        };
        if patch >= 15 { Self::V0_9_18 } else { Self::V0_9_8 }
    }

    /// `helm_update`'s branches for what it read.
    pub fn plan(self, r: &Found, name: &str) -> Plan {
        match self {
            Self::V0_13_3 => plan(r, name),
            Self::V0_9_8 | Self::V0_9_18 => plan_v0_9(self, r, name),
        }
    }
}

/// `helm_update` of the v0.9 entries, line by line (v0.9.18-build20260428
/// `entry` lines 3-87; v0.9.8-build20250709 lines 3-81, the same branches
/// less `check_revision` and `superseded`). `set -e` holds throughout
/// (line 160; `helm_content_decode` returns early for a repository chart,
/// before its `set +e`), so a failing command ends the script with its status.
fn plan_v0_9(entry: Entry, r: &Found, name: &str) -> Plan {
    use Step::{Echo, Helm, Term};
    let newer = entry == Entry::V0_9_18;
    let done = |steps: Vec<Step>, exit| Plan { steps, errexit: true, exit };
    let revision_check = |r: &Found| if newer { check_revision(r) } else { None };
    if r.delete {
        // lines 13-24 (v0.9.8: 12-21, no check)
        if r.revision.is_empty() && r.status.is_empty() {
            return done(vec![Term("No helm chart installed; nothing to delete".into())], Exit::Code(0));
        }
        if let Some(p) = revision_check(r) {
            return p;
        }
        return done(vec![Term("Uninstalling helm chart".into()), Helm(Call::Uninstall)], Exit::Code(0));
    }
    // lines 27-31
    if r.revision.is_empty() && r.status.is_empty() {
        return done(vec![Term("Installing helm chart".into()), Helm(Call::Install)], Exit::Last);
    }
    // line 33
    if let Some(p) = revision_check(r) {
        return p;
    }
    let mut steps = Vec::new();
    let mut status = r.status.as_str();
    // lines 36-53 (v0.9.8: 31-47, `superseded` not among them)
    let interrupted: &[&str] = if newer {
        &["pending-install", "pending-upgrade", "pending-rollback", "superseded", "uninstalling"]
    } else {
        &["pending-install", "pending-upgrade", "pending-rollback", "uninstalling"]
    };
    if interrupted.contains(&status) {
        steps.extend(reset_to_failed(status));
        if matches!(status, "pending-upgrade" | "superseded") {
            steps.extend(retry_upgrade(name));
            return done(steps, Exit::Last);
        }
        status = "failed";
    }
    // lines 56-65 (`helm mapkubeapis` is not run: see the module's note)
    if status == "deployed" {
        steps.extend(upgrade_deployed(name));
        return done(steps, Exit::Last);
    }
    // lines 68-82: anything but `reinstall` waits for the operator.
    if matches!(status, "deleted" | "failed" | "null" | "unknown") {
        if r.policy.is_empty() || r.policy == "reinstall" {
            steps.push(Term(format!("Uninstalling {status} helm chart")));
            steps.push(Helm(Call::Uninstall));
            steps.push(Echo("Deleted".into()));
            steps.push(Term("Installing helm chart".into()));
            steps.push(Helm(Call::Install));
            return done(steps, Exit::Last);
        }
        let msg = format!(
            "Release status is '{status}' and failure policy is '{}', not 'reinstall'; waiting for operator intervention",
            r.policy
        );
        steps.extend([Term(msg.clone()), Echo(msg)]);
        return done(steps, Exit::Code(1));
    }
    // lines 85-86
    steps.extend([Term("Installing helm chart".into()), Helm(Call::Install)]);
    done(steps, Exit::Last)
}

/// An interrupted release set `failed` (v0.9.18 lines 37-39, v0.13.3 lines 38-40).
fn reset_to_failed(status: &str) -> [Step; 3] {
    [
        Step::Echo(format!("Previous helm job was interrupted, updating status from {status} to failed")),
        Step::Term(format!("Resetting helm release status from '{status}' to 'failed'")),
        Step::SetStatusFailed,
    ]
}

/// The interrupted upgrade tried again (v0.9.18 lines 45-48, v0.13.3 lines 46-49).
fn retry_upgrade(name: &str) -> [Step; 3] {
    [
        Step::Term("Retrying upgrade of helm chart".into()),
        Step::Echo(format!("Retrying upgrade of {name}")),
        Step::Helm(Call::Upgrade),
    ]
}

/// A deployed release upgraded (v0.9.18 lines 57-63, v0.13.3 lines 58-64).
fn upgrade_deployed(name: &str) -> [Step; 4] {
    [
        Step::Echo(format!("Already installed {name}")),
        Step::Term("Upgrading helm chart".into()),
        Step::Echo(format!("Upgrading {name}")),
        Step::Helm(Call::Upgrade),
    ]
}

/// What `helm_update` read before it chose a branch (k3s-io/klipper-helm
/// `entry` at v0.13.3-build20260727, 09c5242, lines 3-34).
#[derive(Debug, Clone, Default)]
pub struct Found {
    /// `$1 = delete` (the delete Job's args).
    pub delete: bool,
    /// `.info.status` of `helm status`: empty with no release.
    pub status: String,
    /// `.version`: empty with no release.
    pub revision: String,
    /// `EXPECTED_RELEASE_REVISION` (helm-controller writes `0` with no release).
    pub expected: String,
    /// `FAILURE_POLICY` (empty: `reinstall`).
    pub policy: String,
}

/// One command of a branch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// `echo … >> ${TERM_LOG}`.
    Term(String),
    /// `echo …` (the container log).
    Echo(String),
    /// `${HELM} set-status --namespace … ${NAME} failed`.
    SetStatusFailed,
    Helm(Call),
}

/// Which helm command a step runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call {
    /// `${HELM} "$@" ${NAME_ARG} ${NAME} "${CHART}" …`.
    Install,
    /// `${HELM} upgrade "$@" ${NAME} "${CHART}" …` (after `shift 1`).
    Upgrade,
    /// `${HELM} uninstall ${NAME} --namespace ${TARGET_NAMESPACE} --wait`.
    Uninstall,
}

/// How the branch leaves the script.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// `exit N` (a bare `exit` after an `echo` is `exit 0`).
    Code(i32),
    /// A bare `exit` after a command: that command's status.
    Last,
}

/// A branch of `helm_update`: its steps, whether `set -e` still holds while
/// they run (line 213's `set -e` until `check_revision` ends with `set +e`),
/// and how it exits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub steps: Vec<Step>,
    pub errexit: bool,
    pub exit: Exit,
}

/// `check_revision` (lines 149-158): `Some(plan)` when the Job was made for
/// another revision: its words, then a bare `exit` after `echo` (status 0).
fn check_revision(r: &Found) -> Option<Plan> {
    if r.expected.is_empty() || r.expected == r.revision {
        return None;
    }
    let msg = format!("Current release revision {} does not match expected revision {}", r.revision, r.expected);
    Some(Plan { steps: vec![Step::Term(msg.clone()), Step::Echo(msg)], errexit: true, exit: Exit::Code(0) })
}

/// `helm_update`'s branches, line by line (entry lines 13-103).
pub fn plan(r: &Found, name: &str) -> Plan {
    use Step::{Echo, Helm, Term};
    let after_check = |steps: Vec<Step>, exit| Plan { steps, errexit: false, exit };
    if r.delete {
        // lines 14-25
        if r.revision.is_empty() {
            return Plan {
                steps: vec![Term("No helm chart installed; nothing to delete".into())],
                errexit: true,
                exit: Exit::Code(0),
            };
        }
        if let Some(p) = check_revision(r) {
            return p;
        }
        // `${HELM} uninstall … --wait || true` then `exit`: status 0.
        return after_check(vec![Term("Uninstalling helm chart".into()), Helm(Call::Uninstall)], Exit::Code(0));
    }
    // lines 27-32: no release, so no revision check; `set -e` still on.
    if r.revision.is_empty() && r.status.is_empty() {
        return Plan {
            steps: vec![Term("Installing helm chart".into()), Helm(Call::Install)],
            errexit: true,
            exit: Exit::Last,
        };
    }
    if let Some(p) = check_revision(r) {
        return p;
    }
    let mut steps = Vec::new();
    let mut status = r.status.as_str();
    // lines 36-54
    if matches!(status, "pending-install" | "pending-upgrade" | "pending-rollback" | "superseded" | "uninstalling") {
        steps.extend(reset_to_failed(status));
        if matches!(status, "pending-upgrade" | "superseded") {
            steps.extend(retry_upgrade(name));
            return after_check(steps, Exit::Last);
        }
        status = "failed";
    }
    // lines 56-66 (`helm mapkubeapis` is not run: see the module's note)
    if status == "deployed" {
        steps.extend(upgrade_deployed(name));
        return after_check(steps, Exit::Last);
    }
    // lines 68-99
    if matches!(status, "deleted" | "failed" | "null" | "unknown") {
        let policy = if r.policy.is_empty() { "reinstall" } else { r.policy.as_str() };
        match policy {
            "abort" => {
                let msg = format!(
                    "Release status is '{status}' and failure policy is '{}'; waiting for operator intervention",
                    r.policy
                );
                steps.extend([Term(msg.clone()), Echo(msg)]);
                return after_check(steps, Exit::Code(1));
            }
            "reinstall" => {
                // `set +e` by now: a failed uninstall does not stop the install.
                steps.push(Term(format!("Uninstalling {status} helm chart")));
                steps.push(Helm(Call::Uninstall));
                steps.push(Echo("Deleted".into()));
                steps.push(Term("Installing helm chart".into()));
                steps.push(Helm(Call::Install));
                return after_check(steps, Exit::Last);
            }
            "retry" => {
                // `exit 0`, whatever the upgrade returned.
                steps.push(Term(format!("Upgrading {name} from failed state")));
                steps.push(Helm(Call::Upgrade));
                return after_check(steps, Exit::Code(0));
            }
            _ => {
                let msg = format!("Unknown failure policy '{}'", r.policy);
                steps.extend([Term(msg.clone()), Echo(msg)]);
                return after_check(steps, Exit::Code(1));
            }
        }
    }
    // lines 101-103
    steps.extend([Term("Installing helm chart".into()), Helm(Call::Install)]);
    after_check(steps, Exit::Last)
}

async fn pump_err(sh: &Shell<'_>, lines: Option<tokio::io::Lines<BufReader<tokio::process::ChildStderr>>>) {
    let Some(mut lines) = lines else { return };
    while let Ok(Some(l)) = lines.next_line().await {
        sh.log(&format!("{l}\n"));
    }
}

/// A volume source: a Secret or a ConfigMap, its `items` (key, path), optional.
type Source = (Option<String>, Option<String>, Option<Vec<(String, String)>>, bool);

/// Writes a volume's files where the container would see them.
async fn materialize(client: &Client, ns: &str, v: &k8s_openapi::api::core::v1::Volume, dir: &Path) -> Result<()> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let mut sources: Vec<Source> = Vec::new();
    if let Some(p) = &v.projected {
        for s in p.sources.iter().flatten() {
            if let Some(sec) = &s.secret {
                let items = sec.items.as_ref().map(|i| i.iter().map(|k| (k.key.clone(), k.path.clone())).collect());
                sources.push((Some(sec.name.clone()), None, items, sec.optional.unwrap_or(false)));
            }
            if let Some(cm) = &s.config_map {
                let items = cm.items.as_ref().map(|i| i.iter().map(|k| (k.key.clone(), k.path.clone())).collect());
                sources.push((None, Some(cm.name.clone()), items, cm.optional.unwrap_or(false)));
            }
        }
    }
    if let Some(sec) = &v.secret {
        let items = sec.items.as_ref().map(|i| i.iter().map(|k| (k.key.clone(), k.path.clone())).collect());
        sources.push((sec.secret_name.clone(), None, items, sec.optional.unwrap_or(false)));
    }
    if let Some(cm) = &v.config_map {
        let items = cm.items.as_ref().map(|i| i.iter().map(|k| (k.key.clone(), k.path.clone())).collect());
        sources.push((None, Some(cm.name.clone()), items, cm.optional.unwrap_or(false)));
    }
    for (secret, map, items, optional) in sources {
        let data: Vec<(String, Vec<u8>)> = if let Some(name) = secret {
            match secrets.get_opt(&name).await? {
                Some(s) => s.data.unwrap_or_default().into_iter().map(|(k, v)| (k, v.0)).collect(),
                None if optional => continue,
                None => {
                    anyhow::bail!("MountVolume.SetUp failed for volume \"{}\" : secret \"{name}\" not found", v.name)
                }
            }
        } else if let Some(name) = map {
            match maps.get_opt(&name).await? {
                Some(m) => m.data.unwrap_or_default().into_iter().map(|(k, v)| (k, v.into_bytes())).collect(),
                None if optional => continue,
                None => {
                    anyhow::bail!("MountVolume.SetUp failed for volume \"{}\" : configmap \"{name}\" not found", v.name)
                }
            }
        } else {
            continue;
        };
        for (key, bytes) in data {
            let path = match &items {
                Some(items) => match items.iter().find(|(k, _)| *k == key) {
                    Some((_, p)) => p.clone(),
                    None => continue,
                },
                None => key.clone(),
            };
            let f = dir.join(path.trim_start_matches('/'));
            if let Some(parent) = f.parent() {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::write(f, bytes)?;
        }
    }
    Ok(())
}

async fn service_account_token(client: &Client, ns: &str, sa: &str) -> Result<String> {
    let api: Api<ServiceAccount> = Api::namespaced(client.clone(), ns);
    let req: TokenRequest = serde_json::from_value(json!({"spec": {"audiences": [], "expirationSeconds": 3600}}))?;
    let out = api
        .create_token_request(sa, &PostParams::default(), &req)
        .await
        .with_context(|| format!("serviceaccounts \"{sa}\" token"))?;
    out.status.and_then(|s| s.token).context("token request returned no token")
}

fn in_cluster_kubeconfig(server: &str, ca_pem: &str, token: &str) -> String {
    use base64::Engine;
    let doc = json!({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "in-cluster", "cluster": {"server": server,
            "certificate-authority-data": base64::engine::general_purpose::STANDARD.encode(ca_pem)}}],
        "users": [{"name": "in-cluster", "user": {"token": token}}],
        "contexts": [{"name": "in-cluster", "context": {"cluster": "in-cluster", "user": "in-cluster"}}],
        "current-context": "in-cluster",
    });
    serde_yaml::to_string(&doc).unwrap_or_default()
}

/// `helm set-status NAME STATUS`: rewrites the latest revision's record in helm's
/// secrets driver (`sh.helm.release.v1.<name>.v<n>`: label `status`, and
/// `info.status` inside the gzipped, base64-encoded release JSON).
pub async fn set_status(client: &Client, ns: &str, name: &str, status: &str) -> Result<()> {
    use base64::Engine;
    let api: Api<Secret> = Api::namespaced(client.clone(), ns);
    let lp = ListParams::default().labels(&format!("owner=helm,name={name}"));
    let latest = api
        .list(&lp)
        .await?
        .items
        .into_iter()
        .max_by_key(|s| s.labels().get("version").and_then(|v| v.parse::<u64>().ok()).unwrap_or(0))
        .with_context(|| format!("release: not found: {name}"))?;
    let b64 = base64::engine::general_purpose::STANDARD;
    let raw = latest.data.as_ref().and_then(|d| d.get("release")).context("release record has no data")?;
    let gz = b64.decode(&raw.0)?;
    let mut json = Vec::new();
    flate2::read::GzDecoder::new(&gz[..]).read_to_end(&mut json)?;
    let mut rel: serde_json::Value = serde_json::from_slice(&json)?;
    rel["info"]["status"] = json!(status);
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(&serde_json::to_vec(&rel)?)?;
    let data = b64.encode(enc.finish()?);
    let mut updated = latest.clone();
    updated.labels_mut().insert("status".into(), status.into());
    updated.data.get_or_insert_default().insert("release".into(), k8s_openapi::ByteString(data.into_bytes()));
    api.replace(&latest.name_any(), &PostParams::default(), &updated).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One row per branch of `helm_update` (entry at v0.13.3-build20260727):
    /// (line, delete, status, revision, expected, policy) → the helm calls in
    /// order, whether `set -e` holds, the exit.
    #[test]
    fn each_branch_of_entry_runs_what_upstream_runs_and_exits_as_it_does() {
        use Call::{Install, Uninstall, Upgrade};
        type Row =
            (&'static str, bool, &'static str, &'static str, &'static str, &'static str, &'static [Call], bool, Exit);
        let rows: &[Row] = &[
            ("15 delete, no release", true, "", "", "3", "retry", &[], true, Exit::Code(0)),
            ("20 delete, other revision", true, "deployed", "4", "3", "retry", &[], true, Exit::Code(0)),
            ("23 delete: uninstall || true", true, "deployed", "3", "3", "retry", &[Uninstall], false, Exit::Code(0)),
            ("28 no release: install, helm's status", false, "", "", "0", "retry", &[Install], true, Exit::Last),
            ("34 another revision: exit 0", false, "failed", "2", "1", "retry", &[], true, Exit::Code(0)),
            ("34 first install failed, Job made for 0", false, "failed", "1", "0", "retry", &[], true, Exit::Code(0)),
            ("45 pending-upgrade", false, "pending-upgrade", "3", "3", "retry", &[Upgrade], false, Exit::Last),
            ("45 superseded", false, "superseded", "3", "3", "reinstall", &[Upgrade], false, Exit::Last),
            ("52 pending-install", false, "pending-install", "1", "1", "retry", &[Upgrade], false, Exit::Code(0)),
            ("57 deployed", false, "deployed", "3", "3", "retry", &[Upgrade], false, Exit::Last),
            ("70 failed, abort: exit 1", false, "failed", "3", "3", "abort", &[], false, Exit::Code(1)),
            ("76 failed, reinstall (default)", false, "failed", "3", "3", "", &[Uninstall, Install], false, Exit::Last),
            ("86 failed, retry: upgrade, exit 0", false, "failed", "3", "3", "retry", &[Upgrade], false, Exit::Code(0)),
            ("86 unknown, retry", false, "unknown", "3", "", "retry", &[Upgrade], false, Exit::Code(0)),
            ("93 failed, unknown policy: exit 1", false, "failed", "3", "3", "rollback", &[], false, Exit::Code(1)),
            ("102 another status: install", false, "pending-weird", "3", "3", "retry", &[Install], false, Exit::Last),
        ];
        for (line, delete, status, revision, expected, policy, calls, errexit, exit) in rows {
            let read = Found {
                delete: *delete,
                status: (*status).into(),
                revision: (*revision).into(),
                expected: (*expected).into(),
                policy: (*policy).into(),
            };
            let p = plan(&read, "demo");
            let got: Vec<Call> =
                p.steps.iter().filter_map(|s| if let Step::Helm(c) = s { Some(*c) } else { None }).collect();
            assert_eq!(&got[..], *calls, "{line}: {p:?}");
            assert_eq!(p.errexit, *errexit, "{line}");
            assert_eq!(p.exit, *exit, "{line}");
        }
    }

    /// The v0.9 entries, one row per branch (v0.9.18-build20260428 lines;
    /// v0.9.8-build20250709 where it differs): (line, entry, delete, status,
    /// revision, expected, policy) → the helm calls, the exit.
    #[test]
    fn each_branch_of_the_v0_9_entries_runs_what_upstream_runs() {
        use Call::{Install, Uninstall, Upgrade};
        use Entry::{V0_9_8, V0_9_18};
        type Row =
            (&'static str, Entry, bool, &'static str, &'static str, &'static str, &'static str, &'static [Call], Exit);
        let rows: &[Row] = &[
            ("14 delete, no release", V0_9_18, true, "", "", "", "abort", &[], Exit::Code(0)),
            ("19 delete, other revision", V0_9_18, true, "deployed", "4", "3", "abort", &[], Exit::Code(0)),
            ("22 delete: uninstall || true", V0_9_18, true, "deployed", "3", "3", "abort", &[Uninstall], Exit::Code(0)),
            ("v0.9.8 19 delete, no check", V0_9_8, true, "deployed", "4", "3", "abort", &[Uninstall], Exit::Code(0)),
            ("29 no release: install", V0_9_18, false, "", "", "", "abort", &[Install], Exit::Last),
            ("29 no release, any expectation", V0_9_18, false, "", "", "1", "abort", &[Install], Exit::Last),
            ("33 another revision: exit 0", V0_9_18, false, "failed", "3", "2", "abort", &[], Exit::Code(0)),
            ("v0.9.8 no check: abort", V0_9_8, false, "failed", "3", "2", "abort", &[], Exit::Code(1)),
            (
                "48 pending-upgrade: upgrade",
                V0_9_18,
                false,
                "pending-upgrade",
                "3",
                "3",
                "abort",
                &[Upgrade],
                Exit::Last,
            ),
            ("48 superseded: upgrade", V0_9_18, false, "superseded", "3", "3", "abort", &[Upgrade], Exit::Last),
            ("v0.9.8 superseded: install", V0_9_8, false, "superseded", "3", "3", "abort", &[Install], Exit::Last),
            (
                "51 pending-install: failed, abort",
                V0_9_18,
                false,
                "pending-install",
                "1",
                "1",
                "abort",
                &[],
                Exit::Code(1),
            ),
            ("63 deployed: upgrade", V0_9_18, false, "deployed", "3", "3", "abort", &[Upgrade], Exit::Last),
            (
                "69 failed, reinstall (default)",
                V0_9_18,
                false,
                "failed",
                "3",
                "3",
                "",
                &[Uninstall, Install],
                Exit::Last,
            ),
            ("79 failed, abort: exit 1", V0_9_18, false, "failed", "3", "3", "abort", &[], Exit::Code(1)),
            ("79 failed, retry: unknown here, waits", V0_9_18, false, "failed", "3", "3", "retry", &[], Exit::Code(1)),
            ("86 another status: install", V0_9_18, false, "pending-weird", "3", "3", "abort", &[Install], Exit::Last),
        ];
        for (line, entry, delete, status, revision, expected, policy, calls, exit) in rows {
            let read = Found {
                delete: *delete,
                status: (*status).into(),
                revision: (*revision).into(),
                expected: (*expected).into(),
                policy: (*policy).into(),
            };
            let p = entry.plan(&read, "demo");
            let got: Vec<Call> =
                p.steps.iter().filter_map(|s| if let Step::Helm(c) = s { Some(*c) } else { None }).collect();
            assert_eq!(&got[..], *calls, "{line}: {p:?}");
            assert!(p.errexit, "{line}: set -e throughout");
            assert_eq!(p.exit, *exit, "{line}");
        }
        let p = V0_9_18.plan(
            &Found {
                status: "failed".into(),
                revision: "3".into(),
                expected: "3".into(),
                policy: "abort".into(),
                ..Found::default()
            },
            "demo",
        );
        assert!(p.steps.contains(&Step::Echo(
            "Release status is 'failed' and failure policy is 'abort', not 'reinstall'; waiting for operator intervention".into()
        )));
    }

    #[test]
    fn the_image_tag_picks_the_entry() {
        for (image, entry) in [
            ("rancher/klipper-helm:v0.13.3-build20260727", Entry::V0_13_3),
            ("rancher/klipper-helm:v0.9.18-build20260428", Entry::V0_9_18),
            ("rancher/klipper-helm:v0.9.15-build20260324", Entry::V0_9_18),
            ("rancher/klipper-helm:v0.9.8-build20250709", Entry::V0_9_8),
            ("rancher/klipper-helm:v0.9.12-build20251215", Entry::V0_9_8),
            ("rancher/klipper-helm:latest", Entry::V0_13_3),
        ] {
            assert_eq!(Entry::of_image(image), entry, "{image}");
        }
    }

    #[test]
    fn the_words_are_upstreams() {
        let read = |status: &str, revision: &str, expected: &str, policy: &str| Found {
            delete: false,
            status: status.into(),
            revision: revision.into(),
            expected: expected.into(),
            policy: policy.into(),
        };
        let p = plan(&read("failed", "8", "7", "retry"), "demo");
        assert!(p.steps.contains(&Step::Echo("Current release revision 8 does not match expected revision 7".into())));
        let p = plan(&read("failed", "3", "3", "abort"), "demo");
        assert!(p.steps.contains(&Step::Echo(
            "Release status is 'failed' and failure policy is 'abort'; waiting for operator intervention".into()
        )));
        let p = plan(&read("pending-upgrade", "3", "3", "retry"), "demo");
        assert_eq!(p.steps.iter().filter(|s| **s == Step::SetStatusFailed).count(), 1);
        let p = plan(&read("failed", "3", "3", "retry"), "demo");
        assert_eq!(p.steps[0], Step::Term("Upgrading demo from failed state".into()));
    }
}
