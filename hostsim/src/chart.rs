//! The vCluster chart as far as the host can see it: its values schema (the parts
//! KubeBYON touches) and the control-plane Service its `templates/service.yaml`
//! renders. Pure functions, no I/O.

use std::collections::BTreeMap;
use std::fmt;

use serde_json::{Map, Value, json};

/// A failure `helm install/upgrade` would report for these values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ValuesError {
    /// valuesContent is not YAML (helm: "failed to parse ...").
    Parse(String),
    /// The chart's values.schema.json rejects them (helm lists every violation).
    Schema(Vec<String>),
}

impl fmt::Display for ValuesError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Parse(e) => write!(
                f,
                "failed to parse values.yaml: error converting YAML to JSON: {e}"
            ),
            Self::Schema(errs) => {
                writeln!(
                    f,
                    "values don't meet the specifications of the schema(s) in the following chart(s):"
                )?;
                write!(f, "vcluster:")?;
                for e in errs {
                    write!(f, "\n- {e}")?;
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
        other => {
            return Err(ValuesError::Schema(vec![format!(
                "(root): Invalid type. Expected: object, given: {}",
                type_name(&other)
            )]));
        }
    };
    let mut errors = Vec::new();
    check(&user, &ROOT, "(root)", &mut errors);
    if !errors.is_empty() {
        return Err(ValuesError::Schema(errors));
    }
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
            .map(|m| {
                m.iter()
                    .filter_map(|(k, v)| v.as_str().map(|s| (k.clone(), s.to_owned())))
                    .collect()
            })
            .unwrap_or_default()
    };
    let svc = ["controlPlane", "service"];
    Values {
        service_enabled: at(&[svc[0], svc[1], "enabled"])
            .and_then(Value::as_bool)
            .unwrap_or(true),
        service_spec: at(&[svc[0], svc[1], "spec"])
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default(),
        https_node_port: at(&[svc[0], svc[1], "httpsNodePort"])
            .and_then(Value::as_i64)
            .unwrap_or(0),
        kubelet_node_port: at(&[svc[0], svc[1], "kubeletNodePort"])
            .and_then(Value::as_i64)
            .unwrap_or(0),
        service_labels: string_map(&[svc[0], svc[1], "labels"]),
        service_annotations: string_map(&[svc[0], svc[1], "annotations"]),
        global_annotations: string_map(&[
            "controlPlane",
            "advanced",
            "globalMetadata",
            "annotations",
        ]),
        proxy_kubelets_by_hostname: at(&["networking", "advanced", "proxyKubelets", "byHostname"])
            .and_then(Value::as_bool)
            .unwrap_or(true),
        extra_sans: at(&["controlPlane", "proxy", "extraSANs"])
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default(),
    }
}

/// A fragment of the chart's values.schema.json.
enum Shape {
    Str,
    Int,
    Bool,
    /// `additionalProperties: false` with these properties.
    Closed(&'static [(&'static str, Shape)]),
    /// Any object (`"type": "object"` with no property list).
    Object,
    StrMap,
    StrList,
    /// Not checked by the simulator (the real schema checks it).
    Any,
}

use Shape::*;

/// The checked subset of vCluster's values.schema.json: every top-level key, and in
/// full the parts KubeBYON writes (controlPlane.service, controlPlane.proxy).
static ROOT: Shape = Closed(&[
    ("global", Any),
    ("exportKubeConfig", Any),
    ("sync", Any),
    ("integrations", Any),
    ("deploy", Any),
    ("networking", Any),
    ("policies", Any),
    (
        "controlPlane",
        Closed(&[
            ("endpoint", Str),
            ("distro", Any),
            ("standalone", Any),
            ("backingStore", Any),
            ("coredns", Any),
            (
                "proxy",
                Closed(&[("bindAddress", Str), ("port", Int), ("extraSANs", StrList)]),
            ),
            ("hostPathMapper", Any),
            ("ingress", Any),
            (
                "service",
                Closed(&[
                    ("enabled", Bool),
                    ("spec", Object),
                    ("kubeletNodePort", Int),
                    ("httpsNodePort", Int),
                    ("annotations", StrMap),
                    ("labels", StrMap),
                ]),
            ),
            ("statefulSet", Any),
            ("serviceMonitor", Any),
            ("advanced", Any),
        ]),
    ),
    ("privateNodes", Any),
    ("rbac", Any),
    ("plugins", Any),
    ("experimental", Any),
    ("external", Any),
    ("telemetry", Any),
    ("serviceCIDR", Str),
    ("pro", Bool),
    ("plugin", Any),
    ("sleepMode", Any),
    ("logging", Any),
]);

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Errors in gojsonschema's wording, which is what helm prints.
fn check(v: &Value, shape: &Shape, path: &str, errors: &mut Vec<String>) {
    if v.is_null() {
        return; // helm drops null values before validating
    }
    let mut want = |expected: &str, ok: bool| {
        if !ok {
            errors.push(format!(
                "{path}: Invalid type. Expected: {expected}, given: {}",
                type_name(v)
            ));
        }
        ok
    };
    match shape {
        Any => {}
        Str => {
            want("string", v.is_string());
        }
        Int => {
            want("integer", type_name(v) == "integer");
        }
        Bool => {
            want("boolean", v.is_boolean());
        }
        Object => {
            want("object", v.is_object());
        }
        StrList => {
            if want("array", v.is_array()) {
                for (i, item) in v.as_array().into_iter().flatten().enumerate() {
                    check(item, &Str, &format!("{path}.{i}"), errors);
                }
            }
        }
        StrMap => {
            if want("object", v.is_object()) {
                for (k, item) in v.as_object().into_iter().flatten() {
                    check(item, &Str, &format!("{path}.{k}"), errors);
                }
            }
        }
        Closed(props) => {
            if !want("object", v.is_object()) {
                return;
            }
            for (k, item) in v.as_object().into_iter().flatten() {
                let child = if path == "(root)" {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                match props.iter().find(|(name, _)| name == k) {
                    Some((_, s)) => check(item, s, &child, errors),
                    None => errors.push(format!("{path}: Additional property {k} is not allowed")),
                }
            }
        }
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
        (
            "chart",
            &format!("vcluster-{}", chart_version.replace('+', "_")),
        ),
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
        spec.insert(
            "selector".into(),
            json!({"app": "vcluster", "release": release}),
        );
    }
    let mut metadata = json!({"name": release, "namespace": namespace, "labels": labels});
    if !annotations.is_empty() {
        metadata["annotations"] = Value::Object(annotations);
    }
    Some(json!({"apiVersion": "v1", "kind": "Service", "metadata": metadata, "spec": spec}))
}

fn port(name: &str, port: i64, node_port: i64) -> Value {
    let mut p = json!({"name": name, "port": port, "targetPort": 8443, "protocol": "TCP"});
    // The template renders `nodePort: 0`, which the API reads as "not set".
    if node_port != 0 {
        p["nodePort"] = json!(node_port);
    }
    p
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
        assert!(ports[0].get("nodePort").is_none());
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
        let v = parse_values(
            "controlPlane:\n  service:\n    httpsNodePort: 30443\n    spec: {type: NodePort}\n",
        )
        .unwrap();
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
        let ValuesError::Schema(errs) = &err else {
            panic!("{err:?}")
        };
        assert!(errs.contains(&"(root): Additional property foo is not allowed".to_owned()));
        assert!(errs.contains(
            &"controlPlane.service.httpsNodePort: Invalid type. Expected: integer, given: string"
                .to_owned()
        ));
        assert!(
            errs.contains(
                &"controlPlane.service: Additional property typo is not allowed".to_owned()
            )
        );
        assert!(
            errs.contains(
                &"controlPlane.proxy.extraSANs.0: Invalid type. Expected: string, given: integer"
                    .to_owned()
            )
        );
        assert!(
            err.to_string()
                .starts_with("values don't meet the specifications")
        );
    }

    #[test]
    fn malformed_yaml_is_a_parse_error() {
        assert!(matches!(
            parse_values("a: [1\n"),
            Err(ValuesError::Parse(_))
        ));
        assert!(matches!(parse_values("- a\n"), Err(ValuesError::Schema(_))));
    }

    #[test]
    fn null_deletes_a_default() {
        let v = parse_values("controlPlane:\n  service:\n    spec:\n      type: null\n").unwrap();
        let svc = service("vc1", "ns", "1", &v).unwrap();
        assert!(svc["spec"].get("type").is_none());
    }
}
