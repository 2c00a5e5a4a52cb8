//! Drives the real axum router in-process (no mocks below it): requests go
//! through the guard, the JSON API and server functions into a real database.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use http::{Request, StatusCode, header};
use kubebyon::server::config::Config;
use kubebyon::server::http::router::router;
use kubebyon::server::state::AppState;
use serde_json::Value;
use sqlx::AnyPool;
use tower::ServiceExt;

pub const HOST: &str = "127.0.0.1:3000";

pub struct Console {
    pub router: Router,
    pub pool: AnyPool,
}

pub struct Reply {
    pub status: StatusCode,
    pub headers: http::HeaderMap,
    pub body: String,
}

impl Reply {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }

    /// `{"code": …}` of an error reply.
    pub fn code(&self) -> String {
        self.json()["code"].as_str().unwrap_or_default().to_owned()
    }

    pub fn session_cookie(&self) -> Option<String> {
        self.headers
            .get_all(header::SET_COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .find(|c| c.starts_with("kubebyon_session=") && !c.starts_with("kubebyon_session=;"))
            .map(|c| c.split(';').next().unwrap_or_default().to_owned())
    }
}

impl Console {
    pub fn new(pool: AnyPool) -> Self {
        Self::with_host(pool, None)
    }

    /// The console with a host cluster connection (its reconciler is not run here).
    pub fn with_host(pool: AnyPool, host: Option<Arc<kubebyon::server::host::Host>>) -> Self {
        Self::with(pool, host, Config { data_dir: "unused".into(), ..Config::default() })
    }

    /// The console with its configuration given.
    pub fn with(pool: AnyPool, host: Option<Arc<kubebyon::server::host::Host>>, config: Config) -> Self {
        let mut conf = leptos::config::get_configuration(Some("Cargo.toml")).expect("leptos options");
        // No built site here: plain asset names (the release build hashes them).
        conf.leptos_options.hash_files = false;
        let oidc =
            kubebyon::server::auth::oidc::Provider::from_settings(config.oidc()).expect("OIDC settings").map(Arc::new);
        let state = AppState {
            oidc,
            leptos_options: conf.leptos_options,
            pool: pool.clone(),
            limiter: Arc::default(),
            spec_writes: Arc::new(kubebyon::server::service::write_limit::SpecWriteLimiter::new(
                config.spec_write_limit,
            )),
            push: kubebyon::server::push::Hub::new(pool.clone(), config.live_limits()),
            config: Arc::new(config),
            host,
        };
        // The live pages' poller and, with a host, the access queue's loop
        // (the console's other loops are the tests' to run).
        kubebyon::server::controllers::live_updates(&state.push);
        if let Some(host) = state.host.clone() {
            tokio::spawn(kubebyon::server::controllers::access_sync::follow_queue(pool.clone(), host));
        }
        Self { router: router(state), pool }
    }

    /// Sends a request as a browser on this site would (same-origin `Origin`).
    pub async fn send(
        &self,
        method: &str,
        path: &str,
        cookie: Option<&str>,
        content_type: Option<&str>,
        body: impl Into<Body>,
    ) -> Reply {
        self.send_with(method, path, cookie, content_type, body, &[("origin", "http://127.0.0.1:3000")]).await
    }

    pub async fn send_with(
        &self,
        method: &str,
        path: &str,
        cookie: Option<&str>,
        content_type: Option<&str>,
        body: impl Into<Body>,
        extra: &[(&str, &str)],
    ) -> Reply {
        let mut req = Request::builder().method(method).uri(path).header(header::HOST, HOST);
        if let Some(c) = cookie {
            req = req.header(header::COOKIE, c);
        }
        if let Some(ct) = content_type {
            req = req.header(header::CONTENT_TYPE, ct);
        }
        for (k, v) in extra {
            req = req.header(*k, *v);
        }
        let mut req = req.body(body.into()).expect("request");
        req.extensions_mut().insert(ConnectInfo(SocketAddr::from(([127, 0, 0, 1], 40000))));
        let res = self.router.clone().oneshot(req).await.expect("router never fails");
        let status = res.status();
        let headers = res.headers().clone();
        // An event stream does not end: its first event is its body here.
        if headers.get(header::CONTENT_TYPE).is_some_and(|v| v == "text/event-stream") {
            use http_body_util::BodyExt;
            let mut body = res.into_body();
            let first = tokio::time::timeout(std::time::Duration::from_secs(5), body.frame()).await;
            let bytes = first.ok().flatten().and_then(|f| f.ok()).and_then(|f| f.into_data().ok()).unwrap_or_default();
            return Reply { status, headers, body: String::from_utf8_lossy(&bytes).into_owned() };
        }
        let bytes = axum::body::to_bytes(res.into_body(), 16 * 1024 * 1024).await.expect("body");
        Reply { status, headers, body: String::from_utf8_lossy(&bytes).into_owned() }
    }

    pub async fn json(&self, method: &str, path: &str, cookie: Option<&str>, body: Value) -> Reply {
        self.send(method, path, cookie, Some("application/json"), body.to_string()).await
    }

    pub async fn get(&self, path: &str, cookie: Option<&str>) -> Reply {
        self.send("GET", path, cookie, None, Body::empty()).await
    }

    /// Signs in through the JSON API and returns the session cookie.
    pub async fn login(&self, username: &str, password: &str) -> String {
        let r = self
            .json("POST", "/api/auth/login", None, serde_json::json!({"username": username, "password": password}))
            .await;
        assert_eq!(r.status, StatusCode::OK, "login {username}: {}", r.body);
        r.session_cookie().expect("session cookie")
    }

    /// Creates a user with a real password hash.
    pub async fn user(&self, username: &str, password: &str, admin: bool) {
        use kubebyon::domain::user::{Role, Username};
        let hash = kubebyon::server::auth::password::hash(password.to_owned()).await.unwrap();
        let role = if admin { Role::Admin } else { Role::User };
        kubebyon::server::db::users::insert(&self.pool, &Username::parse(username).unwrap(), &hash, role)
            .await
            .unwrap();
    }
}

/// The audit log as `GET /api/admin/audit` answers it: (actor, action, target, detail), newest first.
#[allow(dead_code)] // not every test binary reads the audit log
pub fn audit_rows(log: &Value) -> Vec<(String, String, String, String)> {
    log.as_array()
        .into_iter()
        .flatten()
        .map(|e| {
            let s = |k: &str| e[k].as_str().unwrap_or_default().to_owned();
            (s("actor"), s("action"), s("target"), s("detail"))
        })
        .collect()
}
