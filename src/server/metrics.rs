//! What `/metrics` reports, in the Prometheus text format: HTTP requests by
//! route and status, reconcile outcomes and durations, host API errors by
//! kind, probe outcomes, and the operation queue's depth and age (read from
//! the database when scraped, so every replica reports the shared queue).
//!
//! One registry per process ([`global`]): the reconciler and the HTTP layer
//! record into it without carrying it around.

use std::sync::LazyLock;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

/// Every label of every family takes its value from a bounded set, so no
/// caller can grow the registry: routes are the router's own patterns
/// (`MatchedPath`, else `unmatched`), methods one of [`method_label`]'s,
/// statuses the handlers' own codes, the rest `&'static str` constants.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct HttpLabels {
    /// The route's pattern (`/api/console/clusters/{id}`), never the raw path.
    pub route: String,
    pub method: &'static str,
    pub status: u16,
}

/// A request's method as a label or log field: the methods the router
/// serves or a client commonly sends, else `other` (a made-up method is
/// any token up to hyper's head limit; each would be a new series).
pub(crate) fn method_label(method: &http::Method) -> &'static str {
    use http::Method as M;
    match *method {
        M::GET => "GET",
        M::HEAD => "HEAD",
        M::POST => "POST",
        M::PUT => "PUT",
        M::PATCH => "PATCH",
        M::DELETE => "DELETE",
        M::OPTIONS => "OPTIONS",
        _ => "other",
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct RouteLabel {
    pub route: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct WorkerLabel {
    pub worker: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct OutcomeLabel {
    pub outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct WatchLabel {
    pub watch: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct KindLabel {
    pub kind: &'static str,
}

pub(crate) struct Metrics {
    registry: Registry,
    pub http_requests: Family<HttpLabels, Counter>,
    pub http_duration: Family<RouteLabel, Histogram>,
    pub reconciles: Family<OutcomeLabel, Counter>,
    pub reconcile_duration: Family<OutcomeLabel, Histogram>,
    pub host_api_errors: Family<KindLabel, Counter>,
    pub probes: Family<OutcomeLabel, Counter>,
    pub access_repairs: Family<OutcomeLabel, Counter>,
    pub queue_depth: Gauge,
    pub queue_oldest_age: Gauge,
    pub workers_up: Family<WorkerLabel, Gauge>,
    pub worker_restarts: Family<WorkerLabel, Counter>,
    pub cache_objects: Family<WatchLabel, Gauge>,
    pub cache_bytes: Family<WatchLabel, Gauge>,
    /// The background workers restarting now, by name (`/readyz` names them).
    down: std::sync::Mutex<std::collections::BTreeSet<&'static str>>,
}

fn seconds_buckets() -> impl Iterator<Item = f64> {
    [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0].into_iter()
}

impl Metrics {
    fn new() -> Self {
        let mut registry = Registry::with_prefix("kubebyon");
        let http_requests = Family::<HttpLabels, Counter>::default();
        let http_duration =
            Family::<RouteLabel, Histogram>::new_with_constructor(|| Histogram::new(seconds_buckets()) as Histogram);
        let reconciles = Family::<OutcomeLabel, Counter>::default();
        let reconcile_duration =
            Family::<OutcomeLabel, Histogram>::new_with_constructor(|| Histogram::new(seconds_buckets()) as Histogram);
        let host_api_errors = Family::<KindLabel, Counter>::default();
        let probes = Family::<OutcomeLabel, Counter>::default();
        let access_repairs = Family::<OutcomeLabel, Counter>::default();
        let queue_depth = Gauge::default();
        let queue_oldest_age = Gauge::default();
        let workers_up = Family::<WorkerLabel, Gauge>::default();
        let worker_restarts = Family::<WorkerLabel, Counter>::default();
        let cache_objects = Family::<WatchLabel, Gauge>::default();
        let cache_bytes = Family::<WatchLabel, Gauge>::default();
        registry.register(
            "watch_cache_objects",
            "Host objects kept by the observer's watch caches",
            cache_objects.clone(),
        );
        registry.register(
            "watch_cache_bytes",
            "Bytes of the slim JSON (and keys) the observer's watch caches keep",
            cache_bytes.clone(),
        );
        registry.register(
            "worker_up",
            "1 while a background worker (reconciler, move driver, session expiry) runs, 0 while it restarts",
            workers_up.clone(),
        );
        registry.register("worker_restarts", "Background workers restarted after a panic", worker_restarts.clone());
        registry.register("http_requests", "HTTP requests by route pattern, method and status", http_requests.clone());
        registry.register(
            "http_request_duration_seconds",
            "HTTP request duration by route pattern",
            http_duration.clone(),
        );
        registry.register(
            "reconciles",
            "Operations the reconciler ran, by outcome (done, failed, retried)",
            reconciles.clone(),
        );
        registry.register(
            "reconcile_duration_seconds",
            "Time to apply one operation, by outcome",
            reconcile_duration.clone(),
        );
        registry.register("host_api_errors", "Failed host cluster calls, by kind", host_api_errors.clone());
        registry.register("probes", "Public endpoint probes, by outcome", probes.clone());
        registry.register(
            "access_repairs",
            "Access binding repairs inside virtual clusters, by outcome (in_step, out_of_step)",
            access_repairs.clone(),
        );
        registry.register("queue_depth", "Operations waiting or running (all replicas)", queue_depth.clone());
        registry.register(
            "queue_oldest_age_seconds",
            "Age of the oldest operation waiting or running, 0 when none",
            queue_oldest_age.clone(),
        );
        Self {
            registry,
            http_requests,
            http_duration,
            reconciles,
            reconcile_duration,
            host_api_errors,
            probes,
            access_repairs,
            queue_depth,
            queue_oldest_age,
            workers_up,
            worker_restarts,
            cache_objects,
            cache_bytes,
            down: std::sync::Mutex::default(),
        }
    }

    /// A background worker started (`up`) or stopped: its gauge, and the
    /// set [`Self::workers_down`] reads (`controllers::supervise` marks them).
    pub(crate) fn mark_worker(&self, worker: &'static str, up: bool) {
        self.workers_up.get_or_create(&WorkerLabel { worker }).set(i64::from(up));
        if let Ok(mut d) = self.down.lock() {
            if up {
                d.remove(worker);
            } else {
                d.insert(worker);
            }
        }
    }

    /// The workers restarting now, by name (empty when all run).
    pub(crate) fn workers_down(&self) -> Vec<&'static str> {
        self.down.lock().map(|d| d.iter().copied().collect()).unwrap_or_default()
    }

    pub(crate) fn record_reconcile(&self, outcome: &'static str, took: Duration) {
        let l = OutcomeLabel { outcome };
        self.reconciles.get_or_create(&l).inc();
        self.reconcile_duration.get_or_create(&l).observe(took.as_secs_f64());
    }

    pub(crate) fn record_host_error(&self, kind: &'static str) {
        self.host_api_errors.get_or_create(&KindLabel { kind }).inc();
    }

    pub(crate) fn record_probe(&self, outcome: &'static str) {
        self.probes.get_or_create(&OutcomeLabel { outcome }).inc();
    }

    pub(crate) fn record_access_repair(&self, outcome: &'static str) {
        self.access_repairs.get_or_create(&OutcomeLabel { outcome }).inc();
    }

    /// The text exposition (OpenMetrics text, which Prometheus reads).
    pub(crate) fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

pub(crate) fn global() -> &'static Metrics {
    static M: LazyLock<Metrics> = LazyLock::new(Metrics::new);
    &M
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn methods_are_a_fixed_set() {
        for (method, label) in [
            ("GET", "GET"),
            ("POST", "POST"),
            ("DELETE", "DELETE"),
            ("OPTIONS", "OPTIONS"),
            ("TRACE", "other"),
            ("CONNECT", "other"),
            ("get", "other"),
            ("PROPFIND", "other"),
        ] {
            assert_eq!(method_label(&http::Method::from_bytes(method.as_bytes()).unwrap()), label, "{method}");
        }
        let huge = http::Method::from_bytes("X".repeat(4096).as_bytes()).unwrap();
        assert_eq!(method_label(&huge), "other");
    }

    #[test]
    fn exposition_names_and_labels() {
        let m = Metrics::new();
        m.http_requests.get_or_create(&HttpLabels { route: "/api/x/{id}".into(), method: "GET", status: 200 }).inc();
        m.record_reconcile("done", Duration::from_millis(30));
        m.record_host_error("server");
        m.record_probe("ok");
        m.queue_depth.set(3);
        let text = m.encode();
        for line in [
            "kubebyon_http_requests_total{route=\"/api/x/{id}\",method=\"GET\",status=\"200\"} 1",
            "kubebyon_reconciles_total{outcome=\"done\"} 1",
            "kubebyon_reconcile_duration_seconds_bucket{le=\"0.05\",outcome=\"done\"} 1",
            "kubebyon_host_api_errors_total{kind=\"server\"} 1",
            "kubebyon_probes_total{outcome=\"ok\"} 1",
            "kubebyon_queue_depth 3",
            "# EOF",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} not in\n{text}");
        }
    }
}
