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

/// Every key of the locale files is used by the code (a `section.key` path
/// in `src/`, as `t!`/`td_string!` name them): none is left behind when the
/// text that used it goes.
#[test]
fn every_key_is_used() {
    fn sources(dir: &std::path::Path, out: &mut String) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                sources(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push_str(&std::fs::read_to_string(&path).unwrap());
                out.push('\n');
            }
        }
    }
    let mut src = String::new();
    sources(std::path::Path::new("src"), &mut src);
    let used = |key: &str| {
        src.match_indices(key).any(|(i, _)| {
            let before = src[..i].chars().next_back().is_none_or(|c| !(c.is_alphanumeric() || c == '_' || c == '.'));
            let after = src[i + key.len()..].chars().next().is_none_or(|c| !(c.is_alphanumeric() || c == '_'));
            before && after
        })
    };
    let unused: Vec<String> = locale("en").into_iter().filter(|k| !used(k)).collect();
    assert!(unused.is_empty(), "locale keys no code uses: {unused:?}");
}

/// One term per concept in each language (docs/glossary.md): no locale text
/// uses a word the glossary's *never* cell names for that language.
#[test]
fn each_concept_has_one_term_per_language() {
    fn texts(prefix: &str, v: &Value, out: &mut Vec<(String, String)>) {
        match v {
            Value::Object(map) => map.iter().for_each(|(k, v)| texts(&format!("{prefix}{k}."), v, out)),
            Value::String(s) => out.push((prefix.trim_end_matches('.').to_owned(), s.clone())),
            _ => {}
        }
    }
    let glossary = std::fs::read_to_string("docs/glossary.md").unwrap();
    for (lang, min_rows) in [("zh-CN", 5), ("ja", 3)] {
        let section = glossary.split(&format!("\n## {lang}\n")).nth(1).expect("a section per language");
        let rows: Vec<(String, Vec<String>)> = section
            .lines()
            .skip_while(|l| !l.starts_with('|'))
            .take_while(|l| l.starts_with('|'))
            .skip(2)
            .map(|row| {
                let cells: Vec<&str> = row.split('|').map(str::trim).collect();
                let never = cells[3].split(',').map(|w| w.trim().trim_matches('`').to_owned()).collect();
                (cells[2].to_owned(), never)
            })
            .collect();
        assert!(rows.len() >= min_rows, "{lang}: {rows:?}");
        let mut all = Vec::new();
        let text = std::fs::read_to_string(format!("locales/{lang}.json")).unwrap();
        texts("", &serde_json::from_str(&text).unwrap(), &mut all);
        let mut found = Vec::new();
        for (term, never) in &rows {
            for (key, text) in &all {
                let rest = text.replace(term.as_str(), "");
                found.extend(never.iter().filter(|w| rest.contains(w.as_str())).map(|w| format!("{key}: {w}")));
            }
        }
        assert!(found.is_empty(), "{lang} uses words its glossary rules out: {found:?}");
    }
}
