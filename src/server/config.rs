//! Runtime configuration from the environment, with embedded defaults:
//! nothing needs to be set to run the console.

use std::path::PathBuf;

use super::auth::client::Cidr;

#[derive(Debug, Clone, Default)]
pub struct Config {
    /// Where the SQLite file lives (`KUBEBYON_DATA_DIR`, default `./data`).
    pub data_dir: PathBuf,
    /// `DATABASE_URL`; SQLite in `data_dir` when unset.
    pub database_url: Option<String>,
    /// `KUBEBYON_PUBLIC_URL`, e.g. `https://console.example.com`; decides Secure cookies.
    pub public_url: Option<String>,
    /// `KUBEBYON_ADMIN_PASSWORD`: the bootstrap admin's password instead of a generated one.
    pub admin_password: Option<String>,
    /// `KUBEBYON_SIMULATED_HOST=1`: the host cluster is the local simulator (`make run` without KUBECONFIG).
    pub simulated_host: bool,
    /// `KUBEBYON_TRUSTED_PROXIES`: reverse proxies (addresses or CIDR blocks,
    /// comma-separated) whose `X-Forwarded-For` names the client for login
    /// throttling. Empty: the header is ignored.
    pub trusted_proxies: Vec<Cidr>,
    /// `KUBEBYON_METRICS_TOKEN`: when set, `/metrics` answers only requests
    /// with `Authorization: Bearer <token>`.
    pub metrics_token: Option<String>,
    /// `KUBEBYON_LOG_FORMAT`: `text` (default) or `json` (one object per line).
    pub log_json: bool,
    /// `KUBEBYON_PASSWORD_MEMORY_MIB`: the memory sign-ins' password checks
    /// may use at once (each argon2 check holds ~19 MiB); sizes the check
    /// slots ([`crate::server::auth::rate_limit::check_slots`]). Default
    /// [`crate::server::auth::rate_limit::DEFAULT_PASSWORD_MEMORY_MIB`]: two.
    pub password_memory_mib: u64,
    /// What the probe may connect to: `KUBEBYON_PROBE_DENY_CIDRS` (the host
    /// cluster's Pod and Service ranges; default k3s's), loopback only with
    /// `KUBEBYON_PROBE_LOOPBACK=1` or the simulated host.
    pub probe_targets: crate::server::reconciler::probe::Targets,
    /// `KUBEBYON_CHART_REPOS`: the chart repositories admins may choose
    /// (comma-separated); empty: the default repository only.
    pub chart_repos: Vec<String>,
    /// `KUBEBYON_SPEC_WRITE_LIMIT`: `on` (default) or `off`; spec writes per
    /// user ([`crate::server::service::write_limit`]).
    pub spec_write_limit: bool,
    /// `KUBEBYON_MAX_CONNECTIONS`: connections served at once (default 1024).
    pub max_connections: usize,
    /// `KUBEBYON_HEADER_TIMEOUT_SECS`: how long a request's headers (and a
    /// kept-alive connection's next request) may take (default 15).
    pub header_timeout_secs: u64,
}

/// An environment variable the console cannot use: which, what it holds
/// (never a secret's: only the checked settings below can fail), what it should be.
#[derive(Debug, thiserror::Error)]
#[error("{var}: {value:?} is {expected}")]
pub struct ConfigError {
    pub var: String,
    pub value: String,
    pub expected: &'static str,
}

impl ConfigError {
    fn new(var: &str, value: impl Into<String>, expected: &'static str) -> Self {
        Self { var: var.to_owned(), value: value.into(), expected }
    }
}

impl Config {
    pub fn from_env() -> Result<Self, ConfigError> {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
        let trusted_proxies = Cidr::parse_list(&var("KUBEBYON_TRUSTED_PROXIES").unwrap_or_default())
            .map_err(|bad| ConfigError::new("KUBEBYON_TRUSTED_PROXIES", bad, "not an IP address or CIDR block"))?;
        let log_json = match var("KUBEBYON_LOG_FORMAT").as_deref() {
            None | Some("text") => false,
            Some("json") => true,
            Some(other) => return Err(ConfigError::new("KUBEBYON_LOG_FORMAT", other, "neither \"text\" nor \"json\"")),
        };
        let mut probe_targets = crate::server::reconciler::probe::Targets::default();
        if let Some(raw) = var("KUBEBYON_PROBE_DENY_CIDRS") {
            probe_targets.deny = Cidr::parse_list(&raw)
                .map_err(|bad| ConfigError::new("KUBEBYON_PROBE_DENY_CIDRS", bad, "not an IP address or CIDR block"))?;
        }
        probe_targets.allow_loopback = var("KUBEBYON_PROBE_LOOPBACK").is_some_and(|v| v == "1")
            || var("KUBEBYON_SIMULATED_HOST").is_some_and(|v| v == "1");
        // A positive whole number from `key`, else `default`.
        let positive = |key: &str, default: u64| match var(key) {
            None => Ok(default),
            Some(v) => v
                .trim()
                .parse::<u64>()
                .ok()
                .filter(|n| *n > 0)
                .ok_or_else(|| ConfigError::new(key, v, "not a positive whole number")),
        };
        let password_memory_mib =
            positive("KUBEBYON_PASSWORD_MEMORY_MIB", crate::server::auth::rate_limit::DEFAULT_PASSWORD_MEMORY_MIB)?;
        let spec_write_limit = match var("KUBEBYON_SPEC_WRITE_LIMIT").as_deref() {
            None | Some("on") => true,
            Some("off") => false,
            Some(other) => {
                return Err(ConfigError::new("KUBEBYON_SPEC_WRITE_LIMIT", other, "neither \"on\" nor \"off\""));
            }
        };
        let limits = crate::server::http::serve::Limits::default();
        let max_connections = positive("KUBEBYON_MAX_CONNECTIONS", limits.max_connections as u64)? as usize;
        let header_timeout_secs = positive("KUBEBYON_HEADER_TIMEOUT_SECS", limits.header_read.as_secs())?;
        Ok(Self {
            data_dir: var("KUBEBYON_DATA_DIR").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("data")),
            database_url: var("DATABASE_URL"),
            public_url: var("KUBEBYON_PUBLIC_URL"),
            admin_password: var("KUBEBYON_ADMIN_PASSWORD"),
            simulated_host: var("KUBEBYON_SIMULATED_HOST").is_some_and(|v| v == "1"),
            trusted_proxies,
            metrics_token: var("KUBEBYON_METRICS_TOKEN"),
            log_json,
            password_memory_mib,
            probe_targets,
            chart_repos: var("KUBEBYON_CHART_REPOS")
                .map(|v| v.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_owned).collect())
                .unwrap_or_default(),
            spec_write_limit,
            max_connections,
            header_timeout_secs,
        })
    }

    /// The throttling key of the client behind a request (`auth::client`).
    pub fn client_key(&self, peer: std::net::IpAddr, headers: &http::HeaderMap) -> String {
        let forwarded: Vec<&str> = headers.get_all("x-forwarded-for").iter().filter_map(|v| v.to_str().ok()).collect();
        super::auth::client::client_key(super::auth::client::client_ip(peer, &forwarded, &self.trusted_proxies))
    }

    /// The chart repositories admins may choose (`KUBEBYON_CHART_REPOS`, else
    /// the default repository).
    pub fn chart_repos(&self) -> Vec<String> {
        if self.chart_repos.is_empty() {
            vec![crate::domain::settings::DEFAULT_CHART_REPO.to_owned()]
        } else {
            self.chart_repos.clone()
        }
    }

    pub fn public_url_is_https(&self) -> bool {
        self.public_url.as_deref().is_some_and(|u| u.starts_with("https://"))
    }
}
