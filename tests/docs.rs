//! The documents that describe the code stay true to it.

use std::collections::BTreeSet;

/// Every table a migration creates (either dialect) has its entry in
/// docs/database.md: a paragraph that starts with its name in backticks.
#[test]
fn every_table_is_described_in_database_md() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = std::fs::read_to_string(root.join("docs/database.md")).unwrap();
    let mut tables = BTreeSet::new();
    for dialect in ["sqlite", "postgres"] {
        for entry in std::fs::read_dir(root.join("migrations").join(dialect)).unwrap() {
            let sql = std::fs::read_to_string(entry.unwrap().path()).unwrap();
            for line in sql.lines() {
                let words: Vec<&str> = line.split_whitespace().collect();
                if let ["CREATE", "TABLE", rest @ ..] = words.as_slice() {
                    let name = rest.iter().find(|w| !matches!(**w, "IF" | "NOT" | "EXISTS")).unwrap();
                    tables.insert(name.trim_end_matches('(').to_owned());
                }
            }
        }
    }
    assert!(tables.len() >= 12, "{tables:?}");
    let missing: Vec<&String> = tables.iter().filter(|t| !doc.contains(&format!("\n`{t}` — "))).collect();
    assert!(missing.is_empty(), "docs/database.md does not describe {missing:?}");
}

/// docs/configuration.md's settings table is the console's settings
/// (`server::config::Config`, read by clap): every variable the console reads
/// has a row, every `KUBEBYON_*` row is one the console reads, and a row's
/// default shows the value the console uses. Variables other libraries read
/// (`KUBECONFIG`, `LEPTOS_SITE_ADDR`, `RUST_LOG`, `MIMALLOC_PURGE_DELAY`) have rows too.
#[test]
fn the_settings_table_is_the_config() {
    use clap::CommandFactory;
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("docs/configuration.md")).unwrap();
    // `| \`VAR\` | meaning | default |` rows of the table after "Configuration".
    let table = readme.split_once("\nConfiguration (all optional).").expect("the configuration table").1;
    let rows: Vec<(String, String)> = table
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .filter_map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            let var = cells.get(1)?.strip_prefix('`')?.strip_suffix('`')?;
            Some((var.to_owned(), cells.get(3)?.to_string()))
        })
        .collect();
    let documented: BTreeSet<&str> = rows.iter().map(|(v, _)| v.as_str()).collect();
    let cmd = kubebyon::server::cli::Cli::command();
    let mut read = BTreeSet::new();
    for arg in cmd.get_arguments() {
        let Some(env) = arg.get_env().and_then(|e| e.to_str()) else { continue };
        read.insert(env.to_owned());
        let default = &rows
            .iter()
            .find(|(v, _)| v == env)
            .unwrap_or_else(|| panic!("docs/configuration.md lacks a row for {env}"))
            .1;
        if arg.get_action().takes_values() {
            for value in arg.get_default_values() {
                let value = value.to_str().unwrap();
                assert!(
                    default.contains(value),
                    "docs/configuration.md's default for {env} is {default:?}, the console's {value:?}"
                );
            }
        }
    }
    assert!(read.len() >= 18, "{read:?}");
    let others = ["KUBECONFIG", "LEPTOS_SITE_ADDR", "RUST_LOG", "MIMALLOC_PURGE_DELAY"];
    let unknown: Vec<&&str> = documented.iter().filter(|v| !read.contains(**v) && !others.contains(v)).collect();
    assert!(unknown.is_empty(), "docs/configuration.md documents variables the console does not read: {unknown:?}");
}

/// docs/architecture.md's module map is the tree: every file and folder it
/// names exists where the map puts it, and every folder under `src/` is named.
#[test]
fn the_module_map_is_the_tree() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = std::fs::read_to_string(root.join("docs/architecture.md")).unwrap();
    let map = doc.split_once("## Module map\n\n```\nsrc/\n").expect("the module map").1;
    let map = map.split_once("```").expect("the map's end").0;
    // (depth, names) of each entry line: `│   ├── a.rs, b.rs   what they are`.
    let mut folders: Vec<String> = Vec::new();
    let mut named = BTreeSet::new();
    for line in map.lines() {
        let Some(at) = line.find("├── ").or_else(|| line.find("└── ")) else { continue };
        let depth = line[..at].chars().count() / 4;
        let entry = &line[at + "├── ".len()..];
        // The names lead the entry: `a.rs, b.rs`, then what they are.
        let names = leading_names(entry);
        folders.truncate(depth);
        for name in &names {
            let path = format!("src/{}{name}", folders.concat());
            assert!(root.join(&path).exists(), "docs/architecture.md's module map names {path}, which does not exist");
            named.insert(path.trim_end_matches('/').to_owned());
        }
        if let [folder] = names.as_slice()
            && folder.ends_with('/')
        {
            folders.push(folder.clone());
        }
    }
    let mut unnamed = Vec::new();
    let mut stack = vec![root.join("src")];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                let relative = path.strip_prefix(root).unwrap().to_string_lossy().into_owned();
                if !named.contains(&relative) {
                    unnamed.push(relative);
                }
                stack.push(path);
            }
        }
    }
    assert!(named.len() >= 40, "{named:?}");
    assert!(unnamed.is_empty(), "docs/architecture.md's module map does not name {unnamed:?}");
}

/// `a.rs, b/` from `a.rs, b/  what they are`: file and folder names separated by `, `.
fn leading_names(entry: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = entry;
    loop {
        let end = rest.find(|c: char| !(c.is_ascii_alphanumeric() || "_.-/".contains(c))).unwrap_or(rest.len());
        names.push(rest[..end].to_owned());
        match rest[end..].strip_prefix(", ") {
            Some(more) => rest = more,
            None => return names,
        }
    }
}

/// The settings the chart takes as `config.<VARIABLE>` values: every
/// variable the console reads, but the secrets (from the chart's
/// `existingSecret`) and what the chart sets itself.
const CHART_SECRETS: [&str; 4] =
    ["DATABASE_URL", "KUBEBYON_ADMIN_PASSWORD", "KUBEBYON_METRICS_TOKEN", "KUBEBYON_OIDC_CLIENT_SECRET"];
const CHART_SETS: [&str; 3] = ["KUBEBYON_DATA_DIR", "KUBEBYON_HEALTH_ADDR", "KUBEBYON_SIMULATED_HOST"];

/// charts/kubebyon/values.schema.json, made from the console's own settings
/// type (`server::cli::Cli`, read by clap): one `config` property per
/// variable it reads (described by its help), none other.
fn chart_schema() -> serde_json::Value {
    use clap::CommandFactory;
    use serde_json::json;
    let cmd = kubebyon::server::cli::Cli::command();
    let mut config = serde_json::Map::new();
    for arg in cmd.get_arguments() {
        let Some(env) = arg.get_env().and_then(|e| e.to_str()) else { continue };
        if CHART_SECRETS.contains(&env) || CHART_SETS.contains(&env) {
            continue;
        }
        let help = arg.get_help().map(|h| h.to_string()).unwrap_or_default();
        config.insert(env.to_owned(), json!({"type": ["string", "integer", "boolean"], "description": help}));
    }
    for (env, help) in [
        ("RUST_LOG", "the log filter (tracing-subscriber's EnvFilter)"),
        ("MIMALLOC_PURGE_DELAY", "milliseconds before the allocator hands freed memory back to the system"),
    ] {
        config.insert(env.to_owned(), json!({"type": ["string", "integer"], "description": help}));
    }
    let text = json!({"type": "string"});
    let flag = json!({"type": "boolean"});
    let object = |properties: serde_json::Value| json!({"type": "object", "additionalProperties": false, "properties": properties});
    json!({
        "$schema": "http://json-schema.org/draft-07/schema#",
        "title": "KubeBYON chart values (generated by tests/docs.rs from the console's settings: KUBEBYON_BLESS=1 cargo test --features ssr --test docs)",
        "type": "object",
        "additionalProperties": false,
        "properties": {
            "image": object(json!({
                "repository": {"type": "string", "minLength": 1},
                "tag": text,
                "pullPolicy": {"enum": ["Always", "IfNotPresent", "Never"]},
            })),
            "replicaCount": {"type": "integer", "minimum": 1},
            "database": object(json!({
                "type": {"enum": ["postgres", "sqlite"]},
                "sqlite": object(json!({"size": text, "storageClass": text})),
                "allowUnverifiedTls": flag,
            })),
            "existingSecret": {"type": "string", "minLength": 1},
            "config": {"type": "object", "additionalProperties": false, "properties": config},
            "resources": {"type": "object"},
            "ingress": object(json!({"enabled": flag, "className": text, "host": text, "tlsSecret": text})),
            "networkPolicy": object(json!({
                "enabled": flag,
                "ingressNamespace": text,
                "metricsScraperLabel": text,
                "databasePort": {"type": "integer", "minimum": 1, "maximum": 65535},
            })),
            "admissionPolicy": object(json!({"enabled": flag})),
            "platformKey": object(json!({"createNamespace": flag})),
            "podDisruptionBudget": object(json!({"minAvailable": {"type": ["integer", "string"]}})),
            "serviceMonitor": object(json!({"enabled": flag, "interval": text, "metricsToken": flag})),
        },
    })
}

/// The chart's values schema is the console's settings: a variable added to
/// the console without the chart (or one the chart names that the console
/// no longer reads) fails here. `KUBEBYON_BLESS=1` writes the file.
#[test]
fn the_charts_schema_is_the_consoles_settings() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let path = root.join("charts/kubebyon/values.schema.json");
    let want = serde_json::to_string_pretty(&chart_schema()).unwrap() + "\n";
    if std::env::var("KUBEBYON_BLESS").as_deref() == Ok("1") {
        std::fs::write(&path, &want).unwrap();
    }
    let have = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        have == want,
        "charts/kubebyon/values.schema.json is not the console's settings: KUBEBYON_BLESS=1 cargo test --features ssr --test docs"
    );
    // The chart's values name only settings the schema holds (helm checks the
    // golden cases' values against it too: scripts/chart-test.sh).
    let values = std::fs::read_to_string(root.join("charts/kubebyon/values.yaml")).unwrap();
    let values: serde_yaml::Value = serde_yaml::from_str(&values).unwrap();
    let schema = chart_schema();
    for key in values["config"].as_mapping().unwrap().keys() {
        let key = key.as_str().unwrap();
        assert!(
            schema["properties"]["config"]["properties"].get(key).is_some(),
            "values.yaml's config.{key} is not a setting"
        );
    }
}
