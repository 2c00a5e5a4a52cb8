//! Every locale has every key, none is empty, and every code the domain can
//! produce (errors, phases, connection states) has its text.

use std::collections::BTreeSet;
use strum::VariantArray;

use kubebyon::domain::{ConnectionStatus, ErrorCode, Phase};
use serde_json::Value;

fn keys(prefix: &str, v: &Value, out: &mut BTreeSet<String>) {
    match v {
        Value::Object(map) => {
            for (k, v) in map {
                keys(&format!("{prefix}{k}."), v, out);
            }
        }
        Value::String(s) => {
            assert!(!s.trim().is_empty(), "empty translation at {prefix}");
            out.insert(prefix.trim_end_matches('.').to_owned());
        }
        other => panic!("{prefix}: not a string: {other}"),
    }
}

fn locale(name: &str) -> BTreeSet<String> {
    let text = std::fs::read_to_string(format!("locales/{name}.json")).unwrap();
    let mut out = BTreeSet::new();
    keys("", &serde_json::from_str(&text).unwrap(), &mut out);
    out
}

#[test]
fn all_locales_have_the_same_keys() {
    let files: Vec<String> = std::fs::read_dir("locales")
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().trim_end_matches(".json").to_owned())
        .collect();
    assert!(files.len() >= 3, "en, zh-CN and at least one more: {files:?}");
    let en = locale("en");
    for f in &files {
        let other = locale(f);
        let missing: Vec<_> = en.difference(&other).collect();
        let extra: Vec<_> = other.difference(&en).collect();
        assert!(missing.is_empty() && extra.is_empty(), "{f}: missing {missing:?}, extra {extra:?}");
    }
}

#[test]
fn every_domain_code_has_a_text() {
    let en = locale("en");
    let want = ErrorCode::VARIANTS
        .iter()
        .map(|c| format!("errors.{}", c.as_str()))
        .chain(Phase::VARIANTS.iter().map(|p| format!("phase.{}", p.as_str())))
        .chain(ConnectionStatus::VARIANTS.iter().map(|s| format!("connection.{}", s.as_str())));
    for key in want {
        assert!(en.contains(&key), "locales/en.json lacks {key}");
    }
}

#[test]
fn interpolations_match_across_locales() {
    let text = |f: &str| std::fs::read_to_string(format!("locales/{f}.json")).unwrap();
    let vars = |s: &str| s.matches("{{").count();
    for f in ["zh-CN", "ja"] {
        assert_eq!(vars(&text("en")), vars(&text(f)), "{f}: same number of {{{{ }}}} placeholders");
    }
}
