//! What the router serves, read from the router's own lists (shared by the
//! authorization matrix and the fuzzer).

use std::collections::BTreeSet;

use http::StatusCode;

use super::http::Console;

/// Every (method, route) the router serves, read from the router's own lists.
pub async fn served(c: &Console) -> BTreeSet<(String, String)> {
    let mut out = BTreeSet::new();
    // JSON routes: the methods each path answers, from axum's 405 `Allow`.
    for (path, _) in kubebyon::server::http::router::api_routes() {
        if path == "/api/{*rest}" {
            out.insert(("GET".into(), path.into()));
            continue;
        }
        let concrete =
            path.replace("{id}", "1").replace("{cluster}", "1").replace("{action}", "x").replace("{code}", "en");
        let r = c.send("TRACE", &concrete, None, None, "").await;
        assert_eq!(r.status, StatusCode::METHOD_NOT_ALLOWED, "{path}");
        for m in r.headers["allow"].to_str().unwrap().split(',').map(str::trim) {
            if m != "HEAD" {
                out.insert((m.to_owned(), path.to_owned()));
            }
        }
    }
    for (path, method) in server_fn::axum::server_fn_paths() {
        out.insert((method.to_string(), path.to_owned()));
    }
    for listing in leptos_axum::generate_route_list(kubebyon::app::App) {
        out.insert(("GET".into(), listing.path().to_owned()));
    }
    out
}
