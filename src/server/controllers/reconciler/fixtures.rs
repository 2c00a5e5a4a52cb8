//! The fast tier of the reconciler's tests, as controller-rs has it
//! (`src/fixtures.rs`): a kube `Client` over `tower_test::mock`, and an
//! [`ApiServerVerifier`] that answers the calls one scenario expects, in
//! order, checks each (method, path, query, body), and fails on any call it
//! was not told about. One scenario per branch of [`super::apply`]: each runs
//! in milliseconds. The real-server tests (`tests/reconciler.rs`, a real
//! kube-apiserver, helm-controller and helm) stay: they prove the calls are
//! the right ones; these prove every branch makes them and nothing else.

use http::{Method, Request, Response};
use kube::Client;
use kube::client::Body;
use serde_json::{Value, json};

/// One call the scenario expects, and the API server's answer.
pub(crate) struct Call {
    pub method: Method,
    /// The path, then `?k=v&…` for query parameters the call must carry
    /// (others may come too).
    pub uri: &'static str,
    pub status: u16,
    pub answer: Value,
    /// Checks the request's body (JSON), when it matters.
    pub check: Option<fn(&Value)>,
}

impl Call {
    pub(crate) fn new(method: Method, uri: &'static str, status: u16, answer: Value) -> Self {
        Self { method, uri, status, answer, check: None }
    }

    pub(crate) fn checked(mut self, check: fn(&Value)) -> Self {
        self.check = Some(check);
        self
    }
}

/// The API server's answer for a missing object.
pub(crate) fn not_found(kind: &str, name: &str) -> Value {
    status(404, "NotFound", &format!("{kind} \"{name}\" not found"))
}

/// A `Status` object (what the API server answers a refused call with).
pub(crate) fn status(code: u16, reason: &str, message: &str) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
           "message": message, "reason": reason, "code": code})
}

pub(crate) struct ApiServerVerifier(tower_test::mock::Handle<Request<Body>, Response<Body>>);

/// A client whose every call goes to the returned verifier.
pub(crate) fn client() -> (Client, ApiServerVerifier) {
    let (service, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    (Client::new(service, "default"), ApiServerVerifier(handle))
}

impl ApiServerVerifier {
    /// Answers `calls` in order, then waits for the client to be dropped:
    /// a call beyond them fails the scenario. Await the handle after
    /// dropping the client.
    pub(crate) fn run(mut self, calls: Vec<Call>) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            for (i, call) in calls.into_iter().enumerate() {
                let (request, send) = self.0.next_request().await.unwrap_or_else(|| {
                    panic!("call {i} ({} {}) never came", call.method, call.uri);
                });
                let uri = request.uri().to_string();
                let (path, params) = call.uri.split_once('?').unwrap_or((call.uri, ""));
                assert_eq!((request.method(), request.uri().path()), (&call.method, path), "call {i}: {uri}");
                let query: Vec<&str> = request.uri().query().unwrap_or_default().split('&').collect();
                for param in params.split('&').filter(|p| !p.is_empty()) {
                    assert!(query.contains(&param), "call {i}: {uri} lacks {param}");
                }
                let body = request.into_body().collect_bytes().await.expect("the request's body");
                if let Some(check) = call.check {
                    check(&serde_json::from_slice(&body).expect("a JSON body"));
                }
                let answer = serde_json::to_vec(&call.answer).expect("JSON");
                send.send_response(Response::builder().status(call.status).body(Body::from(answer)).expect("response"));
            }
            if let Some((request, _)) = self.0.next_request().await {
                panic!("a call the scenario does not expect: {} {}", request.method(), request.uri());
            }
        })
    }
}

/// Runs `scenario` against `calls`: the calls must come in that order and no
/// other; returns what the scenario returned.
pub(crate) async fn expect<T, F>(calls: Vec<Call>, scenario: impl FnOnce(Client) -> F) -> T
where
    F: std::future::Future<Output = T>,
{
    let (client, verifier) = client();
    let verifier = verifier.run(calls);
    let limit = std::time::Duration::from_secs(5);
    let out = tokio::time::timeout(limit, scenario(client)).await.expect("the scenario finished");
    if let Err(e) = tokio::time::timeout(limit, verifier).await.expect("the verifier finished") {
        std::panic::resume_unwind(e.into_panic());
    }
    out
}
