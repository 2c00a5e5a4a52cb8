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
