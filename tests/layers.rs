//! The walls of the house, as tests: which part of `src/` may name which.
//! Each rule reads the production part of every file (a `#[cfg(test)]`
//! module and the files only tests compile are left out; comments too,
//! except where the rule is about comments) and says, when it fails, where
//! the thing belongs instead. docs/architecture.md draws the same walls.

use std::path::{Path, PathBuf};

/// One source file: its path under `src/` ("server/db/shared.rs"), its
/// production code without comments, and its comments.
struct Source {
    path: String,
    code: Vec<(usize, String)>,
    comments: Vec<(usize, String)>,
}

fn sources() -> Vec<Source> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    walk(&root, &mut files);
    let test_only = test_only_files(&root, &files);
    let mut out = Vec::new();
    for file in files {
        let path = file.strip_prefix(&root).unwrap().to_string_lossy().replace('\\', "/");
        if test_only.contains(&file) {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap();
        let (mut code, mut comments) = (Vec::new(), Vec::new());
        let lines: Vec<&str> = text.lines().collect();
        let mut skip_to: Option<String> = None;
        for (i, line) in lines.iter().enumerate() {
            // A test module: skipped to its closing brace (rustfmt puts it at the `mod`'s indent).
            if let Some(end) = &skip_to {
                if line.trim_end() == end {
                    skip_to = None;
                }
                continue;
            }
            if line.trim() == "#[cfg(test)]" && lines.get(i + 1).is_some_and(|next| is_inline_mod(next)) {
                let indent = line.len() - line.trim_start().len();
                skip_to = Some(format!("{}}}", &line[..indent]));
                continue;
            }
            match line.find("//") {
                Some(at) => {
                    code.push((i + 1, line[..at].to_owned()));
                    comments.push((i + 1, line[at..].to_owned()));
                }
                None => code.push((i + 1, (*line).to_owned())),
            }
        }
        out.push(Source { path, code, comments });
    }
    assert!(out.len() > 100, "src/ read: {} files", out.len());
    out
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            walk(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// `mod tests {` (any visibility), not `mod name;`.
fn is_inline_mod(line: &str) -> bool {
    let t = line.trim();
    let t = t.strip_prefix("pub(crate) ").or_else(|| t.strip_prefix("pub ")).unwrap_or(t);
    t.starts_with("mod ") && t.ends_with('{')
}

/// Files declared `#[cfg(test)] mod name;`: only tests compile them.
fn test_only_files(root: &Path, files: &[PathBuf]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(file).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for pair in lines.windows(2) {
            let next = pair[1].trim();
            if pair[0].trim() != "#[cfg(test)]" || !next.ends_with(';') {
                continue;
            }
            let Some(name) = next.trim_end_matches(';').split_whitespace().last() else { continue };
            if !next.contains("mod ") {
                continue;
            }
            // The module's file: beside a mod.rs/lib.rs, else in the folder named after the file.
            let dir = match file.file_name().and_then(|n| n.to_str()) {
                Some("mod.rs" | "lib.rs" | "main.rs") => file.parent().unwrap().to_path_buf(),
                _ => file.with_extension(""),
            };
            for candidate in [dir.join(format!("{name}.rs")), dir.join(name).join("mod.rs")] {
                if candidate.exists() {
                    out.push(candidate);
                }
            }
        }
    }
    assert!(out.iter().all(|p| p.starts_with(root)));
    out
}

/// A rule: where it applies, what it forbids there, where the thing belongs.
struct Rule {
    name: &'static str,
    /// Paths under `src/` the rule applies to (prefixes); empty: everywhere.
    within: &'static [&'static str],
    /// Paths under `src/` the rule leaves alone (prefixes).
    except: &'static [&'static str],
    /// Whether a code line breaks it.
    breaks: fn(&str) -> bool,
    instead: &'static str,
}

const OUTSIDE_CONTROLLERS: &[&str] =
    &["server/service/", "server/http/", "actions/", "server/host/", "server/tenant/", "server/db/"];

fn rules() -> Vec<Rule> {
    vec![
        Rule {
            name: "names `controllers::`",
            within: OUTSIDE_CONTROLLERS,
            except: &[],
            breaks: |code| code.contains("controllers::"),
            instead: "background work is started by `controllers::start` and reached through what it shares \
                      (the host's doorbells, the database); what a request needs from it (a worker's health, \
                      say) belongs in a neutral module such as `server::metrics`",
        },
        Rule {
            name: "names `service::` from a worker",
            within: &["server/controllers/"],
            except: &[],
            breaks: |code| names_module(code, "service"),
            instead: "workers reach a tenant's cluster through `tenant::` and the host through `host::`; the \
                      services keep who may ask, budgets, audit of users' acts and error mapping",
        },
        Rule {
            name: "names `service::` from below",
            within: &["server/host/", "server/tenant/", "server/db/"],
            except: &[],
            breaks: |code| names_module(code, "service"),
            instead: "the host, the tenants' clusters and the database are below the services: a rule they \
                      share belongs in `domain/`, a limit of host calls in `host/`",
        },
        Rule {
            name: "names `auth::`",
            within: &["server/db/"],
            except: &[],
            breaks: |code| names_module(code, "auth"),
            instead: "the repositories store what the rules decide: shared numbers belong in `domain/` \
                      (`domain::sign_in`)",
        },
        Rule {
            name: "names `AppState`",
            within: &[],
            except: &["main.rs", "server/state.rs", "server/context.rs", "server/http/"],
            breaks: |code| code.contains("AppState"),
            instead: "`AppState` is the HTTP edge's: pass what a use case or a loop needs (the pool, the \
                      host, the configuration) as arguments",
        },
        Rule {
            name: "calls `tokio::spawn`",
            within: &[],
            except: &["server/controllers/", "server/http/serve.rs", "main.rs"],
            breaks: |code| code.contains("tokio::spawn(") || code.contains("task::spawn("),
            instead: "a background task runs under `controllers::start`, supervised (a queue and a doorbell \
                      on the host, never a `static`); a request's own work runs in the request",
        },
        Rule {
            name: "reads `X-Forwarded-Proto`",
            within: &[],
            except: &["server/http/request.rs"],
            breaks: |code| code.to_ascii_lowercase().contains("x-forwarded-proto"),
            instead: "whether a request came over HTTPS is worked out once, in `RequestFacts` \
                      (server/http/request.rs)",
        },
        Rule {
            name: "defines a second `fn backoff(`",
            within: &[],
            except: &["server/controllers/backoff.rs"],
            breaks: |code| code.contains("fn backoff("),
            instead: "every loop waits by `controllers::backoff::backoff`",
        },
    ]
}

/// `code` names `module::` as a path segment (`crate::server::service::x`,
/// `super::service::x`), not as the tail of another name (`hyper::service::`
/// is another crate's: only this crate's paths count).
fn names_module(code: &str, module: &str) -> bool {
    let segment = format!("{module}::");
    code.match_indices(&segment).any(|(at, _)| {
        let before = &code[..at];
        before.ends_with("server::") || before.ends_with("super::") || before.ends_with("crate::")
    })
}

fn applies(rule: &Rule, path: &str) -> bool {
    (rule.within.is_empty() || rule.within.iter().any(|p| path.starts_with(p)))
        && !rule.except.iter().any(|p| path.starts_with(p))
}

#[test]
fn the_walls_hold() {
    let sources = sources();
    let mut broken = Vec::new();
    for rule in rules() {
        for source in sources.iter().filter(|s| applies(&rule, &s.path)) {
            for (line, code) in &source.code {
                if (rule.breaks)(code) {
                    broken.push(format!("src/{}:{line} {}: {}", source.path, rule.name, rule.instead));
                }
            }
        }
    }
    assert!(broken.is_empty(), "{} walls broken:\n{}", broken.len(), broken.join("\n"));
}

/// Comments say what the code does and why, not which issue asked for it
/// (the history is in git and in the issues' notes).
#[test]
fn comments_name_no_issue_numbers() {
    let mut found = Vec::new();
    for source in sources() {
        for (line, comment) in &source.comments {
            if names_an_issue(comment) {
                found.push(format!("src/{}:{line} {}", source.path, comment.trim()));
            }
        }
    }
    assert!(found.is_empty(), "comments naming issues (say what the code does instead):\n{}", found.join("\n"));
}

/// "issue 42", "Issue #42", "issues 42 and 55".
fn names_an_issue(comment: &str) -> bool {
    let lower = comment.to_ascii_lowercase();
    lower.match_indices("issue").any(|(at, word)| {
        if lower[..at].ends_with(|c: char| c.is_ascii_alphabetic()) {
            return false;
        }
        let rest = lower[at + word.len()..].trim_start_matches('s').trim_start_matches(' ').trim_start_matches('#');
        rest.starts_with(|c: char| c.is_ascii_digit())
    })
}

/// The rules' own readers, as a table: each rule catches what it names and
/// lets the rest through (a rule that matched nothing could never fail).
#[test]
fn each_rule_catches_what_it_names() {
    let rules = rules();
    let rule = |name: &str| rules.iter().find(|r| r.name.contains(name)).unwrap();
    for (name, path, code, broken) in [
        ("controllers", "server/http/telemetry.rs", "let d = crate::server::controllers::supervise::down();", true),
        ("controllers", "server/controllers/mod.rs", "use crate::server::controllers::x;", false),
        ("controllers", "server/push.rs", "crate::server::controllers::live_updates(&hub);", false),
        ("from below", "server/host/mod.rs", "&crate::server::service::call_budget::UserCalls", true),
        ("from below", "server/host/https.rs", "hyper::service::service_fn(handle)", false),
        ("from below", "server/service/join.rs", "use crate::server::service::x;", false),
        ("from a worker", "server/controllers/access_sync.rs", "use crate::server::service::credentials;", true),
        ("from a worker", "server/controllers/access_sync.rs", "use crate::server::tenant::access;", false),
        ("auth", "server/db/shared.rs", "use crate::server::auth::rate_limit::MAX_FAILURES;", true),
        ("auth", "server/db/shared.rs", "use crate::domain::sign_in::MAX_FAILURES;", false),
        ("AppState", "server/controllers/mod.rs", "pub fn start(state: &AppState)", true),
        ("AppState", "server/http/live.rs", "State(st): State<AppState>", false),
        ("tokio::spawn", "server/service/credentials.rs", "let task = tokio::spawn(async move {", true),
        ("tokio::spawn", "server/auth/password.rs", "tokio::task::spawn_blocking(move || {", false),
        ("tokio::spawn", "server/controllers/mod.rs", "tokio::spawn(supervise(\"x\", f));", false),
        ("X-Forwarded-Proto", "server/auth/origin.rs", "headers.get(\"X-Forwarded-Proto\")", true),
        ("X-Forwarded-Proto", "server/http/request.rs", "text(\"x-forwarded-proto\")", false),
        ("backoff", "server/host/probe.rs", "fn backoff(n: u32) -> Duration {", true),
        ("backoff", "server/controllers/backoff.rs", "pub(crate) fn backoff(base: Duration) {", false),
    ] {
        let r = rule(name);
        assert_eq!(applies(r, path) && (r.breaks)(code), broken, "{name} in {path}: {code}");
    }
    for (comment, names) in [
        ("// Sharing (issue 42): who may", true),
        ("/// as Issue #55 asked", true),
        ("//! issues 42 and 55", true),
        ("// the issue is that a pool", false),
        ("// tissue 3", false),
    ] {
        assert_eq!(names_an_issue(comment), names, "{comment}");
    }
}

/// The module a file is (`server::db::shared`; `lib.rs` and `main.rs` are the root).
fn module_of(path: &str) -> Vec<String> {
    let bare = path.trim_end_matches(".rs");
    let mut parts: Vec<String> = bare.split('/').map(str::to_owned).collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib" | "main")) {
        parts.pop();
    }
    parts
}

/// The modules `source` names in its production code (`crate::…`,
/// `super::…`, `self::…`, and each item of a `{…}` group), each the longest
/// prefix of the path that is a module of the tree.
fn imports(
    source: &Source,
    modules: &std::collections::BTreeSet<Vec<String>>,
) -> std::collections::BTreeSet<Vec<String>> {
    let here = module_of(&source.path);
    let code: String = source.code.iter().map(|(_, c)| c.as_str()).collect::<Vec<_>>().join("\n");
    let bytes = code.as_bytes();
    let is_ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mut out = std::collections::BTreeSet::new();
    for start in ["crate::", "super::", "self::"] {
        for (at, _) in code.match_indices(start) {
            if at > 0 && (is_ident(bytes[at - 1]) || bytes[at - 1] == b':') {
                continue;
            }
            // The path: identifiers and `::`, then perhaps a `{…}` group.
            let mut end = at;
            while end < bytes.len() && (is_ident(bytes[end]) || bytes[end] == b':') {
                end += 1;
            }
            let path = code[at..end].trim_end_matches(':');
            let mut paths = vec![path.to_owned()];
            if code[end..].starts_with('{') {
                let close = code[end..].find('}').map_or(code.len(), |c| end + c);
                for item in code[end + 1..close].split(',') {
                    let first = item.trim().split("::").next().unwrap_or_default().split_whitespace().next();
                    if let Some(first) = first.filter(|f| !f.is_empty() && *f != "self") {
                        paths.push(format!("{path}::{first}"));
                    }
                }
            }
            for path in paths {
                let from_root = path.starts_with("crate");
                let mut base = if from_root { Vec::new() } else { here.clone() };
                let mut rest: Vec<String> = Vec::new();
                for seg in path.split("::").skip(usize::from(from_root)) {
                    match seg {
                        "super" if rest.is_empty() => {
                            base.pop();
                        }
                        "self" if rest.is_empty() => {}
                        s => rest.push(s.to_owned()),
                    }
                }
                let found = (1..=rest.len())
                    .rev()
                    .map(|k| [base.clone(), rest[..k].to_vec()].concat())
                    .find(|m| modules.contains(m));
                if let Some(m) = found
                    && m != here
                    && !here.starts_with(&m)
                {
                    out.insert(m);
                }
            }
        }
    }
    out
}

/// No circle among `src/domain/`'s modules, nor among `src/server/`'s (each
/// file or folder directly under them one node): what a module names, it
/// does not depend on for itself.
#[test]
fn no_circles_inside_domain_or_server() {
    let sources = sources();
    let modules: std::collections::BTreeSet<Vec<String>> = sources.iter().map(|s| module_of(&s.path)).collect();
    for area in ["domain", "server"] {
        let node = |m: &[String]| (m.len() >= 2 && m[0] == area).then(|| m[1].clone());
        let mut edges: std::collections::BTreeMap<String, std::collections::BTreeSet<String>> = Default::default();
        for source in &sources {
            let Some(from) = node(&module_of(&source.path)) else { continue };
            for to in imports(source, &modules).iter().filter_map(|m| node(m)) {
                if to != from {
                    edges.entry(from.clone()).or_default().insert(to);
                }
            }
        }
        assert!(edges.len() > 5, "{area}: the imports were read ({} modules)", edges.len());
        if let Some(circle) = find_circle(&edges) {
            panic!("a circle inside src/{area}/: {} (move what both need below both)", circle.join(" → "));
        }
    }
}

/// A circle in `edges`, as the modules along it (the first again at the end).
fn find_circle(edges: &std::collections::BTreeMap<String, std::collections::BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        edges: &std::collections::BTreeMap<String, std::collections::BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut std::collections::BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|p| p == node) {
            let mut circle = path[at..].to_vec();
            circle.push(node.to_owned());
            return Some(circle);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_owned());
        for next in edges.get(node).into_iter().flatten() {
            if let Some(c) = visit(next, edges, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(node.to_owned());
        None
    }
    let mut done = std::collections::BTreeSet::new();
    edges.keys().find_map(|n| visit(n, edges, &mut Vec::new(), &mut done))
}

#[test]
fn the_circle_finder_finds_circles() {
    let graph = |pairs: &[(&str, &str)]| {
        let mut g: std::collections::BTreeMap<String, std::collections::BTreeSet<String>> = Default::default();
        for (a, b) in pairs {
            g.entry((*a).to_owned()).or_default().insert((*b).to_owned());
        }
        g
    };
    assert_eq!(find_circle(&graph(&[("a", "b"), ("b", "c")])), None);
    assert_eq!(
        find_circle(&graph(&[("a", "b"), ("b", "c"), ("c", "a")])),
        Some(vec!["a".into(), "b".into(), "c".into(), "a".into()])
    );
    let modules = [vec!["domain".to_owned(), "settings".to_owned()], vec!["domain".to_owned(), "placement".to_owned()]]
        .into_iter()
        .collect();
    let placement = Source {
        path: "domain/placement.rs".into(),
        code: vec![
            (1, "use super::settings::is_qualified_name;".into()),
            (2, "use super::{AppError, settings};".into()),
        ],
        comments: vec![],
    };
    assert_eq!(imports(&placement, &modules), [vec!["domain".to_owned(), "settings".to_owned()]].into_iter().collect());
}
