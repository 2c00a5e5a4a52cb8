//! The requests a kube client sends to the host, counted by a client-side
//! layer, in total and by verb and resource (the benchmarks' "API calls per
//! cluster": every request counts, watches and Events included).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use kube::config::{KubeConfigOptions, Kubeconfig};

pub struct Calls {
    total: AtomicUsize,
    kinds: Mutex<BTreeMap<String, usize>>,
}

impl Calls {
    pub const fn new() -> Self {
        Self { total: AtomicUsize::new(0), kinds: Mutex::new(BTreeMap::new()) }
    }

    pub fn reset(&self) {
        self.total.store(0, Ordering::Relaxed);
        self.kinds.lock().unwrap().clear();
    }

    pub fn total(&self) -> usize {
        self.total.load(Ordering::Relaxed)
    }

    /// `VERB resource N` by kind, e.g. `PATCH helmcharts 1000`.
    pub fn by_kind(&self) -> String {
        let kinds = self.kinds.lock().unwrap();
        kinds.iter().map(|(k, v)| format!("{k} {v}")).collect::<Vec<_>>().join(", ")
    }

    fn count<B>(&self, req: &http::Request<B>) {
        self.total.fetch_add(1, Ordering::Relaxed);
        *self.kinds.lock().unwrap().entry(call_kind(req)).or_default() += 1;
    }
}

/// `VERB resource` of a request (`WATCH` for watches, `LIST` for a GET of a
/// collection, `/sub` for subresources).
fn call_kind<B>(req: &http::Request<B>) -> String {
    let uri = req.uri();
    let parts: Vec<&str> = uri.path().trim_start_matches('/').split('/').collect();
    // /api/v1/<res>[/..] or /apis/<group>/<version>/<res>[/..], with namespaces/<ns>/ after the version.
    let rest = if parts.first() == Some(&"api") { &parts[2.min(parts.len())..] } else { &parts[3.min(parts.len())..] };
    let rest = if rest.len() > 2 && rest[0] == "namespaces" { &rest[2..] } else { rest };
    let resource = rest.first().copied().unwrap_or("?");
    let sub = if rest.len() > 2 { format!("/{}", rest[2]) } else { String::new() };
    let verb = if uri.query().is_some_and(|q| q.contains("watch=true")) {
        "WATCH"
    } else if req.method() == http::Method::GET && rest.len() == 1 {
        "LIST"
    } else {
        req.method().as_str()
    };
    format!("{verb} {resource}{sub}")
}

/// A client for the host's kubeconfig whose every request `calls` counts.
pub async fn counting_client(kubeconfig: &Path, calls: &'static Calls) -> kube::Client {
    let kc = Kubeconfig::read_from(kubeconfig).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).await.unwrap();
    let layer = tower::util::MapRequestLayer::new(move |req: http::Request<kube::client::Body>| {
        calls.count(&req);
        req
    });
    kube::client::ClientBuilder::try_from(config).unwrap().with_layer(&layer).build()
}
