//! The values the console renders, read by the pinned helm against the pinned
//! vCluster chart (`helm template`: its `values.schema.json` and templates, no
//! API server): every public mode, and own nodes with and without a vCluster
//! Platform key Secret. A value the chart does not know fails here, in helm's
//! words, before a host ever sees it.

use std::path::PathBuf;
use std::process::Command;

use kubebyon::domain::cluster::ClusterSpec;
use kubebyon::domain::nodes::SecretRef;
use kubebyon::domain::render::{AddressRequest, values, values_yaml};
use kubebyon::domain::{ClusterName, Host, PublicAccess, Resources, SystemSettings};

fn control_plane() -> PathBuf {
    PathBuf::from(
        std::env::var("KUBEBYON_CONTROL_PLANE_DIR")
            .expect("KUBEBYON_CONTROL_PLANE_DIR (scripts/build-control-plane.sh prints it; `make test` sets it)"),
    )
}

/// `helm template` of the chart with these values: its output, or helm's error.
fn template(values: &str) -> Result<String, String> {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("values.yaml");
    std::fs::write(&file, values).unwrap();
    let cp = control_plane();
    let out = Command::new(cp.join("helm"))
        .args(["template", "demo"])
        .arg(cp.join("charts").join("vcluster-0.30.0.tgz"))
        .args(["--namespace", "kubebyon-demo", "-f"])
        .arg(&file)
        .env("HELM_CACHE_HOME", dir.path().join("cache"))
        .env("HELM_CONFIG_HOME", dir.path().join("config"))
        .env("HELM_DATA_HOME", dir.path().join("data"))
        .output()
        .expect("run helm");
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

fn spec(access: PublicAccess, own_nodes: bool) -> ClusterSpec {
    ClusterSpec {
        name: ClusterName::parse("demo").unwrap(),
        resources: Resources::default(),
        public_access: access,
        own_nodes,
        placement: Default::default(),
        telemetry: kubebyon::domain::Telemetry::Off,
    }
}

fn host(s: &str) -> Host {
    Host::parse(s).unwrap()
}

/// The rendered document of `kind` named `name` (helm separates them by `---`).
fn document<'a>(out: &'a str, kind: &str, name: &str) -> &'a str {
    out.split("\n---")
        .find(|d| d.contains(&format!("kind: {kind}\n")) && d.contains(&format!("name: {name}\n")))
        .unwrap_or_else(|| panic!("no {kind} {name} in:\n{out}"))
}

#[test]
fn every_mode_and_own_nodes_pass_the_charts_schema() {
    let key = SecretRef::parse("licences/vcluster-key").ok();
    let offered = SystemSettings { private_nodes: true, platform_api_key: key, ..SystemSettings::default() };
    let lb_dns = PublicAccess::LoadBalancer { host: host("api.example.com") };
    for (access, own, settings, service_type) in [
        (PublicAccess::Disabled, false, &SystemSettings::default(), "ClusterIP"),
        (PublicAccess::NodePort { host: None }, false, &SystemSettings::default(), "NodePort"),
        (PublicAccess::LoadBalancer { host: host("198.51.100.7") }, false, &SystemSettings::default(), "LoadBalancer"),
        (lb_dns.clone(), false, &offered, "LoadBalancer"),
        (lb_dns.clone(), true, &offered, "LoadBalancer"),
        (lb_dns.clone(), true, &SystemSettings { platform_api_key: None, ..offered.clone() }, "LoadBalancer"),
        (PublicAccess::Gateway { host: host("a.k.test") }, false, &SystemSettings::default(), "ClusterIP"),
    ] {
        let yaml = values_yaml(&values(&spec(access.clone(), own), None, settings, AddressRequest::MetalLb));
        let out = template(&yaml).unwrap_or_else(|e| panic!("{access:?} own={own}: helm refused:\n{e}\n{yaml}"));
        let svc = document(&out, "Service", "demo");
        assert!(svc.contains(&format!("type: {service_type}")), "{svc}");
        // The chart adds the konnectivity port (joined nodes' tunnel) only for private nodes.
        assert_eq!(svc.contains("name: konnectivity") && svc.contains("port: 8132"), own, "{svc}");
        // The image: upstream's open-source build for shared nodes (what the
        // test host runs), the chart's Pro default for private nodes.
        let sts = document(&out, "StatefulSet", "demo");
        let image = if own { "ghcr.io/loft-sh/vcluster-pro:0.30.0" } else { "ghcr.io/loft-sh/vcluster-oss:0.30.0" };
        assert!(sts.contains(&format!("image: \"{image}\"\n")), "{access:?} own={own}: {sts}");
        // The Platform key is read where the admin keeps it (the chart's
        // config Secret, `config.yaml`), and the chart makes no RBAC for it
        // (`createRBAC: false`: the console grants it, tests/reconciler.rs).
        let config = document(&out, "Secret", "\"vc-config-demo\"");
        let encoded = config.split("config.yaml: \"").nth(1).and_then(|c| c.split('"').next()).expect("config.yaml");
        use base64::Engine as _;
        let config = String::from_utf8(base64::engine::general_purpose::STANDARD.decode(encoded).unwrap()).unwrap();
        let reads_key = config.contains("namespace: licences") && config.contains("secretName: vcluster-key");
        assert_eq!(reads_key, own && settings.platform_api_key.is_some(), "{access:?} own={own}");
        assert!(!out.contains("platform-role") && !out.contains("namespace: licences"), "{out}");
    }
}

/// Placement: spreading renders the StatefulSet's pod anti-affinity across the
/// console's namespaces, and a StorageClass the claim's `storageClassName`;
/// off and the host default render neither.
#[test]
fn placement_reaches_the_statefulset() {
    use kubebyon::domain::placement::{Placement, Spread};
    let gw = PublicAccess::Gateway { host: host("a.k.test") };
    let sp = |placement: Placement| ClusterSpec { placement, ..spec(gw.clone(), false) };
    let plain = template(&values_yaml(&values(
        &sp(Placement::default()),
        None,
        &SystemSettings::default(),
        AddressRequest::MetalLb,
    )))
    .unwrap();
    let sts = document(&plain, "StatefulSet", "demo");
    assert!(!sts.contains("podAntiAffinity") && !sts.contains("storageClassName"), "{sts}");
    for (spread, term) in [
        (Spread::Preferred, "preferredDuringSchedulingIgnoredDuringExecution"),
        (Spread::Required, "requiredDuringSchedulingIgnoredDuringExecution"),
    ] {
        let placement = Placement { spread, storage_class: Some("fast-ssd".into()), ..Placement::default() };
        let yaml = values_yaml(&values(&sp(placement), None, &SystemSettings::default(), AddressRequest::MetalLb));
        let out = template(&yaml).unwrap_or_else(|e| panic!("{spread:?}: helm refused:\n{e}\n{yaml}"));
        let sts = document(&out, "StatefulSet", "demo");
        assert!(sts.contains("podAntiAffinity") && sts.contains(term), "{sts}");
        assert!(
            sts.contains("app.kubernetes.io/managed-by: kubebyon")
                && sts.contains("topologyKey: kubernetes.io/hostname"),
            "{sts}"
        );
        assert!(sts.contains("storageClassName: fast-ssd"), "{sts}");
    }
}

#[test]
fn a_key_the_chart_does_not_know_fails_in_helms_words() {
    let offered = SystemSettings { private_nodes: true, ..SystemSettings::default() };
    let sp = spec(PublicAccess::LoadBalancer { host: host("api.example.com") }, true);
    let yaml = values_yaml(&values(&sp, None, &offered, AddressRequest::MetalLb));
    assert!(template(&yaml).is_ok());
    let typo = yaml.replace("autoUpgrade:", "autoUpgrades:");
    assert_ne!(typo, yaml);
    let err = template(&typo).expect_err("the schema refuses an unknown key");
    assert!(err.contains("additional properties 'autoUpgrades' not allowed"), "{err}");
}
