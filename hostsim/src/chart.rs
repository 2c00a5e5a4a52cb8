//! The vCluster chart as far as the host can see it: the repository and versions
//! it is served in, its whole values schema (upstream's `values.schema.json`) and
//! the control-plane Service its `templates/service.yaml` renders. Pure, no I/O.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::OnceLock;

use serde_json::{Map, Value, json};

/// A failure `helm install/upgrade` would report for these values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ValuesError {
    /// valuesContent is not YAML (helm: "failed to parse ...").
    Parse(String),
    /// The chart's values.schema.json rejects them: one line per violation, as
    /// helm prints them (tree of `- at '<pointer>': <message>`).
    Schema(Vec<String>),
}

impl fmt::Display for ValuesError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Parse(e) => write!(
                f,
                "failed to parse /config/values-0-000-HelmChart-ValuesContent.yaml: error converting YAML to JSON: {e}"
            ),
            Self::Schema(errs) => {
                writeln!(f, "values don't meet the specifications of the schema(s) in the following chart(s):")?;
                write!(f, "vcluster:")?;
                for e in errs {
                    write!(f, "\n{e}")?;
                }
                Ok(())
            }
        }
    }
}

/// The values the host-side objects depend on, defaults from the chart's values.yaml.
#[derive(Debug, Clone, PartialEq)]
pub struct Values {
    pub service_enabled: bool,
    /// `controlPlane.service.spec`, passed through as the template's `toYaml` does.
    pub service_spec: Map<String, Value>,
    pub https_node_port: i64,
    pub kubelet_node_port: i64,
    pub service_labels: BTreeMap<String, String>,
    pub service_annotations: BTreeMap<String, String>,
    pub global_annotations: BTreeMap<String, String>,
    pub proxy_kubelets_by_hostname: bool,
    pub extra_sans: Vec<String>,
}

/// Parses and validates `valuesContent` like `helm install -f values.yaml` would.
pub fn parse_values(values_content: &str) -> Result<Values, ValuesError> {
    let user: Value = if values_content.trim().is_empty() {
        json!({})
    } else {
        serde_yaml::from_str(values_content).map_err(|e| ValuesError::Parse(e.to_string()))?
    };
    let user = match user {
        Value::Null => json!({}),
        v @ Value::Object(_) => v,
        // helm: a values file must hold a map.
        _ => {
            return Err(ValuesError::Parse(
                "error unmarshaling JSON: json: cannot unmarshal array into Go value of type map[string]interface {}"
                    .into(),
            ));
        }
    };
    validate(&without_nulls(&user))?;
    let mut values = defaults();
    merge(&mut values, user);
    Ok(extract(&values))
}

fn defaults() -> Value {
    json!({
        "controlPlane": {
            "service": {
                "enabled": true,
                "spec": {"type": "ClusterIP"},
                "httpsNodePort": 0,
                "kubeletNodePort": 0,
                "labels": {},
                "annotations": {},
            },
            "proxy": {"bindAddress": "0.0.0.0", "port": 8443, "extraSANs": []},
            "advanced": {"globalMetadata": {"annotations": {}}},
        },
        "networking": {"advanced": {"proxyKubelets": {"byHostname": true, "byIP": true}}},
    })
}

/// Helm's coalescing: maps merge recursively, a user `null` deletes the default.
fn merge(base: &mut Value, user: Value) {
    match (base, user) {
        (Value::Object(b), Value::Object(u)) => {
            for (k, v) in u {
                if v.is_null() {
                    b.remove(&k);
                } else if let Some(existing) = b.get_mut(&k) {
                    merge(existing, v);
                } else {
                    b.insert(k, v);
                }
            }
        }
        (b, u) => *b = u,
    }
}

fn extract(v: &Value) -> Values {
    let at = |path: &[&str]| path.iter().try_fold(v, |cur, k| cur.get(k));
    let string_map = |path: &[&str]| -> BTreeMap<String, String> {
        at(path)
            .and_then(Value::as_object)
            .map(|m| m.iter().filter_map(|(k, v)| v.as_str().map(|s| (k.clone(), s.to_owned()))).collect())
            .unwrap_or_default()
    };
    let svc = ["controlPlane", "service"];
    Values {
        service_enabled: at(&[svc[0], svc[1], "enabled"]).and_then(Value::as_bool).unwrap_or(true),
        service_spec: at(&[svc[0], svc[1], "spec"]).and_then(Value::as_object).cloned().unwrap_or_default(),
        https_node_port: at(&[svc[0], svc[1], "httpsNodePort"]).and_then(Value::as_i64).unwrap_or(0),
        kubelet_node_port: at(&[svc[0], svc[1], "kubeletNodePort"]).and_then(Value::as_i64).unwrap_or(0),
        service_labels: string_map(&[svc[0], svc[1], "labels"]),
        service_annotations: string_map(&[svc[0], svc[1], "annotations"]),
        global_annotations: string_map(&["controlPlane", "advanced", "globalMetadata", "annotations"]),
        proxy_kubelets_by_hostname: at(&["networking", "advanced", "proxyKubelets", "byHostname"])
            .and_then(Value::as_bool)
            .unwrap_or(true),
        extra_sans: at(&["controlPlane", "proxy", "extraSANs"])
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(|s| s.as_str().map(str::to_owned)).collect())
            .unwrap_or_default(),
    }
}

/// The chart's values schema: vCluster v0.30.0's `chart/values.schema.json`,
/// verbatim (identical in v0.30.0–v0.30.5, the versions [`KNOWN_VERSIONS`] lists).
pub const SCHEMA_JSON: &str = include_str!("../chart/values.schema.json");
const SCHEMA_URL: &str = "file:///values.schema.json";

/// The vCluster chart versions this simulated repository serves: those whose
/// schema is [`SCHEMA_JSON`].
pub const KNOWN_VERSIONS: [&str; 6] = ["0.30.0", "0.30.1", "0.30.2", "0.30.3", "0.30.4", "0.30.5"];

/// The chart repository the vCluster chart comes from.
pub const REPO: &str = "https://charts.loft.sh";

/// The chart repositories and versions a simulated `helm repo add` + index serve.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Source {
    pub repos: Vec<String>,
    /// Oldest first; the last is "latest".
    pub versions: Vec<String>,
}

impl Default for Source {
    fn default() -> Self {
        Self { repos: vec![REPO.into()], versions: KNOWN_VERSIONS.map(String::from).into() }
    }
}

impl Source {
    pub fn knows_repo(&self, repo: &str) -> bool {
        let norm = |r: &str| r.trim_end_matches('/').to_owned();
        self.repos.iter().any(|r| norm(r) == norm(repo))
    }

    /// The version helm would install for `wanted` (empty = latest), if any.
    pub fn resolve(&self, wanted: &str) -> Option<String> {
        let wanted = wanted.trim().trim_start_matches('v');
        if wanted.is_empty() {
            return self.versions.last().cloned();
        }
        self.versions.iter().find(|v| *v == wanted).cloned()
    }
}

fn compiled_schema() -> Result<&'static (boon::Schemas, boon::SchemaIndex), String> {
    static SCHEMA: OnceLock<Result<(boon::Schemas, boon::SchemaIndex), String>> = OnceLock::new();
    SCHEMA
        .get_or_init(|| {
            let doc: Value = serde_json::from_str(SCHEMA_JSON).map_err(|e| e.to_string())?;
            let mut schemas = boon::Schemas::new();
            let mut compiler = boon::Compiler::new();
            compiler.add_resource(SCHEMA_URL, doc).map_err(|e| e.to_string())?;
            let idx = compiler.compile(SCHEMA_URL, &mut schemas).map_err(|e| e.to_string())?;
            Ok((schemas, idx))
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// Validates like helm 4 (santhosh-tekuri/jsonschema v6, whose Rust port is
/// `boon`): every violation, in its tree, in that library's words.
fn validate(values: &Value) -> Result<(), ValuesError> {
    let (schemas, idx) = compiled_schema().map_err(|e| ValuesError::Schema(vec![e]))?;
    match schemas.validate(values, *idx) {
        Ok(()) => Ok(()),
        Err(e) => {
            let mut lines = Vec::new();
            for cause in &e.causes {
                describe(cause, 0, &mut lines);
            }
            Err(ValuesError::Schema(lines))
        }
    }
}

/// One line per error, indented by depth, as jsonschema v6 prints them.
fn describe(e: &boon::ValidationError<'_, '_>, depth: usize, out: &mut Vec<String>) {
    use boon::ErrorKind;
    let location = e.instance_location.to_string();
    let message = match &e.kind {
        ErrorKind::AdditionalProperties { got } => {
            let names: Vec<String> = got.iter().map(|n| format!("'{n}'")).collect();
            format!("additional properties {} not allowed", names.join(", "))
        }
        ErrorKind::Type { got, want } => {
            let want: Vec<String> = want.iter().map(|t| t.to_string()).collect();
            format!("got {got}, want {}", want.join(" or "))
        }
        ErrorKind::Reference { .. } | ErrorKind::Group => "validation failed".to_owned(),
        other => other.to_string(),
    };
    // A `$ref` that failed only restates its causes' location.
    let skip = matches!(e.kind, ErrorKind::Reference { .. })
        && e.causes.len() == 1
        && e.causes[0].instance_location.to_string() == location;
    if skip {
        describe(&e.causes[0], depth, out);
        return;
    }
    out.push(format!("{}- at '{location}': {message}", "  ".repeat(depth)));
    for c in &e.causes {
        describe(c, depth + 1, out);
    }
}

/// Helm drops `null` values before validating (they delete defaults).
fn without_nulls(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            Value::Object(m.iter().filter(|(_, v)| !v.is_null()).map(|(k, v)| (k.clone(), without_nulls(v))).collect())
        }
        other => other.clone(),
    }
}

/// The Service `templates/service.yaml` renders, as an apply body; `None` when
/// `controlPlane.service.enabled` is false.
pub fn service(release: &str, namespace: &str, chart_version: &str, v: &Values) -> Option<Value> {
    if !v.service_enabled {
        return None;
    }
    let mut labels = Map::new();
    for (k, val) in [
        ("app", "vcluster"),
        ("chart", &format!("vcluster-{}", chart_version.replace('+', "_"))),
        ("release", release),
        ("heritage", "Helm"),
        ("vcluster.loft.sh/service", "true"),
    ] {
        labels.insert(k.to_owned(), json!(val));
    }
    for (k, val) in &v.service_labels {
        labels.insert(k.clone(), json!(val));
    }
    // sprig `merge dict global service`: the first source wins on conflicts.
    let mut annotations = Map::new();
    for (k, val) in v.service_annotations.iter().chain(&v.global_annotations) {
        annotations.insert(k.clone(), json!(val));
    }
    let mut spec = v.service_spec.clone();
    if !spec.contains_key("ports") {
        let is_lb = spec.get("type").and_then(Value::as_str) == Some("LoadBalancer");
        let mut ports = vec![port("https", 443, v.https_node_port)];
        if v.proxy_kubelets_by_hostname && !is_lb {
            ports.push(port("kubelet", 10250, v.kubelet_node_port));
        }
        spec.insert("ports".into(), Value::Array(ports));
    }
    if !spec.contains_key("selector") {
        spec.insert("selector".into(), json!({"app": "vcluster", "release": release}));
    }
    let mut metadata = json!({"name": release, "namespace": namespace, "labels": labels});
    if !annotations.is_empty() {
        metadata["annotations"] = Value::Object(annotations);
    }
    Some(json!({"apiVersion": "v1", "kind": "Service", "metadata": metadata, "spec": spec}))
}

fn port(name: &str, port: i64, node_port: i64) -> Value {
    // The template always renders `nodePort` (0 by default: the chart's own
    // `tests/service_test.yaml` expects `nodePort: 0`). Sent as 0, the API
    // server keeps the port it allocated while the Service still needs one
    // (`patchAllocatedValues`), and releases it once it does not — e.g. a
    // LoadBalancer with `allocateLoadBalancerNodePorts: false`. Omitting the
    // field would keep the port for ever under server-side apply.
    json!({"name": name, "port": port, "targetPort": 8443, "protocol": "TCP", "nodePort": node_port})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_render_cluster_ip_with_kubelet_port() {
        let v = parse_values("").unwrap();
        let svc = service("vc1", "ns", "0.30.0", &v).unwrap();
        assert_eq!(svc["spec"]["type"], "ClusterIP");
        let ports = svc["spec"]["ports"].as_array().unwrap();
        assert_eq!(ports.len(), 2);
        assert_eq!(ports[0]["name"], "https");
        assert_eq!(ports[1]["port"], 10250);
        assert_eq!(ports[0]["nodePort"], 0, "rendered as the template does");
        assert_eq!(svc["spec"]["selector"]["release"], "vc1");
        assert_eq!(svc["metadata"]["labels"]["chart"], "vcluster-0.30.0");
    }

    #[test]
    fn load_balancer_drops_kubelet_port_and_keeps_spec_fields() {
        let v = parse_values(
            "controlPlane:\n  service:\n    annotations: {a: b}\n    spec:\n      type: LoadBalancer\n      loadBalancerClass: x\n  proxy:\n    extraSANs: [api.example.test]\n",
        )
        .unwrap();
        let svc = service("vc1", "ns", "1", &v).unwrap();
        assert_eq!(svc["spec"]["type"], "LoadBalancer");
        assert_eq!(svc["spec"]["loadBalancerClass"], "x");
        assert_eq!(svc["spec"]["ports"].as_array().unwrap().len(), 1);
        assert_eq!(svc["metadata"]["annotations"]["a"], "b");
        assert_eq!(v.extra_sans, vec!["api.example.test"]);
    }

    #[test]
    fn node_port_value_is_rendered() {
        let v =
            parse_values("controlPlane:\n  service:\n    httpsNodePort: 30443\n    spec: {type: NodePort}\n").unwrap();
        let svc = service("vc1", "ns", "1", &v).unwrap();
        assert_eq!(svc["spec"]["ports"][0]["nodePort"], 30443);
    }

    #[test]
    fn disabled_service_renders_nothing() {
        let v = parse_values("controlPlane:\n  service:\n    enabled: false\n").unwrap();
        assert!(service("vc1", "ns", "1", &v).is_none());
    }

    #[test]
    fn unknown_keys_and_wrong_types_fail_like_helm() {
        let err = parse_values(
            "foo: 1\ncontrolPlane:\n  service:\n    httpsNodePort: \"30443\"\n    typo: x\n  proxy:\n    extraSANs: [1]\n",
        )
        .unwrap_err();
        let ValuesError::Schema(errs) = &err else { panic!("{err:?}") };
        for want in [
            "- at '': additional properties 'foo' not allowed",
            "- at '/controlPlane': validation failed",
            "  - at '/controlPlane/service': validation failed",
            "    - at '/controlPlane/service/httpsNodePort': got string, want integer",
            "    - at '/controlPlane/service': additional properties 'typo' not allowed",
            "    - at '/controlPlane/proxy/extraSANs/0': got number, want string",
        ] {
            assert!(errs.contains(&want.to_owned()), "{want}\n{errs:#?}");
        }
        assert!(err.to_string().starts_with("values don't meet the specifications"));
    }

    /// Every section, not only what KubeBYON writes, is checked to its leaves.
    #[test]
    fn the_whole_schema_is_checked() {
        for (values, want) in [
            (
                "controlPlane:\n  statefulSet:\n    resources:\n      limitz: {}\n",
                "- at '/controlPlane/statefulSet/resources': additional properties 'limitz' not allowed",
            ),
            (
                "exportKubeConfig:\n  contex: a\n",
                "- at '/exportKubeConfig': additional properties 'contex' not allowed",
            ),
            ("sync:\n  toHost:\n    pods:\n      enabled: yes please\n", "got string, want boolean"),
            (
                "networking:\n  advanced:\n    proxyKubelets:\n      byHostname: 1\n",
                "- at '/networking/advanced/proxyKubelets/byHostname': got number, want boolean",
            ),
        ] {
            let err = parse_values(values).unwrap_err().to_string();
            assert!(err.contains(want), "{values}: {err}");
        }
        for ok in [
            "controlPlane:\n  statefulSet:\n    resources:\n      limits: {memory: 2Gi}\n",
            "exportKubeConfig:\n  context: a\n  server: https://x:443\n",
            "controlPlane:\n  service:\n    spec: {type: NodePort, anything: [1]}\n",
        ] {
            assert!(parse_values(ok).is_ok(), "{ok}");
        }
    }

    #[test]
    fn source_knows_repo_and_versions() {
        let s = Source::default();
        assert!(s.knows_repo("https://charts.loft.sh/"));
        assert!(!s.knows_repo("https://example.com/charts"));
        assert_eq!(s.resolve(""), Some("0.30.5".into()));
        assert_eq!(s.resolve("0.30.0"), Some("0.30.0".into()));
        assert_eq!(s.resolve("v0.30.1"), Some("0.30.1".into()));
        assert_eq!(s.resolve("9.9.9"), None);
    }

    #[test]
    fn malformed_yaml_is_a_parse_error() {
        assert!(matches!(parse_values("a: [1\n"), Err(ValuesError::Parse(_))));
        assert!(matches!(parse_values("- a\n"), Err(ValuesError::Parse(_))));
    }

    #[test]
    fn null_deletes_a_default() {
        let v = parse_values("controlPlane:\n  service:\n    spec:\n      type: null\n").unwrap();
        let svc = service("vc1", "ns", "1", &v).unwrap();
        assert!(svc["spec"].get("type").is_none());
    }
}
