//! Runtime configuration from the environment, with embedded defaults:
//! nothing needs to be set to run the console.

use std::path::PathBuf;

use clap::builder::BoolishValueParser;

use super::auth::client::Cidr;

/// Every setting the console reads, from its environment variable or the
/// same-named flag (`--data-dir` for `KUBEBYON_DATA_DIR`), parsed by clap
/// before anything starts ([`crate::server::cli::parse`]): a bad value stops
/// the console with clap's error naming the flag and its variable; a variable
/// set to nothing counts as unset. `kubebyon --help` lists them all; the
/// docs/configuration.md's table is checked against this struct by `tests/docs.rs`.
/// Secrets' values are never shown in help or errors.
/// `Debug` is written out below: the secrets in it print as `<set>`.
#[derive(Clone, Default, clap::Args)]
#[command(next_help_heading = "Settings (flag or environment variable)")]
pub struct Config {
    /// Folder of the SQLite database.
    #[arg(long, env = "KUBEBYON_DATA_DIR", default_value = "data")]
    pub data_dir: PathBuf,
    /// `postgres://…` to use PostgreSQL instead of SQLite.
    #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
    pub database_url: Option<String>,
    /// Public URL, e.g. `https://console.example.com`; `https://…` makes cookies Secure.
    #[arg(long, env = "KUBEBYON_PUBLIC_URL")]
    pub public_url: Option<String>,
    /// Password of the bootstrap admin (and of `kubebyon admin`) instead of a generated one.
    #[arg(long, env = "KUBEBYON_ADMIN_PASSWORD", hide_env_values = true)]
    pub admin_password: Option<String>,
    /// The host cluster is the local simulator (`make run` without KUBECONFIG).
    #[arg(long, env = "KUBEBYON_SIMULATED_HOST", value_parser = BoolishValueParser::new(), default_value_t = false)]
    pub simulated_host: bool,
    /// Reverse proxies (addresses or CIDR blocks, comma-separated) whose
    /// `X-Forwarded-For` names the client for login throttling. Empty: the
    /// header is ignored.
    #[arg(long, env = "KUBEBYON_TRUSTED_PROXIES", value_delimiter = ',', value_parser = cidr)]
    pub trusted_proxies: Vec<Cidr>,
    /// When set, `/metrics` answers only requests with `Authorization: Bearer <token>`.
    #[arg(long, env = "KUBEBYON_METRICS_TOKEN", hide_env_values = true)]
    pub metrics_token: Option<String>,
    /// `text`, or `json` (one object per line).
    #[arg(long, env = "KUBEBYON_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// The memory sign-ins' password checks may use at once, in MiB (each
    /// argon2 check holds ~19 MiB; `auth::rate_limit::check_slots`).
    #[arg(long, env = "KUBEBYON_PASSWORD_MEMORY_MIB", value_parser = positive,
          default_value_t = crate::server::auth::rate_limit::DEFAULT_PASSWORD_MEMORY_MIB)]
    pub password_memory_mib: u64,
    /// Addresses the connection test never reaches besides link-local ones
    /// (comma-separated): the host cluster's Pod and Service ranges.
    #[arg(long, env = "KUBEBYON_PROBE_DENY_CIDRS", value_delimiter = ',', value_parser = cidr,
          default_value = crate::server::host::probe::K3S_CIDRS)]
    pub probe_deny_cidrs: Vec<Cidr>,
    /// The connection test may reach loopback addresses (a host on this
    /// machine); on with the simulated host.
    #[arg(long, env = "KUBEBYON_PROBE_LOOPBACK", value_parser = BoolishValueParser::new(), default_value_t = false)]
    pub probe_loopback: bool,
    /// Ports helm's install Jobs may leave their namespace by besides 443 and
    /// 6443 (comma-separated): the HTTP(S) proxy's, when helm-controller runs
    /// with `HTTPS_PROXY` (k3s copies it into every Job). Learnt from the Jobs
    /// too; set it so the first install does not wait for that.
    #[arg(long, env = "KUBEBYON_HELM_PROXY_PORTS", value_delimiter = ',')]
    pub helm_proxy_ports: Vec<u16>,
    /// The chart repositories (`https://` or `oci://`, comma-separated) admins
    /// may choose; empty: the default repository only.
    #[arg(long, env = "KUBEBYON_CHART_REPOS", value_delimiter = ',')]
    pub chart_repos: Vec<String>,
    /// `on`: each user may create, edit or delete clusters 20 times at once,
    /// then once every 3 s (`service::write_limit`); `off` for load tests.
    #[arg(long, env = "KUBEBYON_SPEC_WRITE_LIMIT", value_parser = BoolishValueParser::new(), default_value = "on",
          action = clap::ArgAction::Set)]
    pub spec_write_limit: bool,
    /// Connections served at once; past it the listener waits for one to close.
    #[arg(long, env = "KUBEBYON_MAX_CONNECTIONS", value_parser = positive_usize, default_value_t = 4096)]
    pub max_connections: usize,
    /// `on`: admins may choose `pod_security: privileged` (tenants' pods
    /// without Pod Security: hostPath, host namespaces, root on the node).
    #[arg(long, env = "KUBEBYON_ALLOW_PRIVILEGED_PODS", value_parser = BoolishValueParser::new(), default_value = "off",
          action = clap::ArgAction::Set)]
    pub allow_privileged_pods: bool,
    /// The one namespace the platform key's Secret may be named in (each
    /// own-nodes control plane is granted `get` on it).
    #[arg(long, env = "KUBEBYON_PLATFORM_KEY_NAMESPACE",
          default_value = crate::domain::operator::DEFAULT_PLATFORM_KEY_NAMESPACE)]
    pub platform_key_namespace: String,
    /// `on`: with a Gateway but no domain suffix, users may claim any DNS
    /// name as their gateway host (first come, first served); `off`: gateway
    /// mode then needs the admin's suffix.
    #[arg(long, env = "KUBEBYON_GATEWAY_ANY_HOST", value_parser = BoolishValueParser::new(), default_value = "off",
          action = clap::ArgAction::Set)]
    pub gateway_any_host: bool,
    /// Connections one client address (an IPv6 client by its /64) may hold
    /// open at once; past it a new one is closed. Trusted proxies are exempt.
    #[arg(long, env = "KUBEBYON_MAX_CONNECTIONS_PER_CLIENT", value_parser = positive_usize, default_value_t = 64)]
    pub max_connections_per_client: usize,
    /// A second address serving only `/healthz` and `/readyz` (e.g.
    /// `0.0.0.0:3001`) for the kubelet's probes, apart from the public
    /// listener's connection caps; unset: none (both are on the main port too).
    #[arg(long, env = "KUBEBYON_HEALTH_ADDR")]
    pub health_addr: Option<std::net::SocketAddr>,
    /// Seconds a request's headers (and a kept-alive connection's next request) may take.
    #[arg(long, env = "KUBEBYON_HEADER_TIMEOUT_SECS", value_parser = positive, default_value_t = 15)]
    pub header_timeout_secs: u64,
    /// Seconds a request's body (at most 64 KiB) may take to arrive after its
    /// headers; past it `408` and the connection closes.
    #[arg(long, env = "KUBEBYON_BODY_TIMEOUT_SECS", value_parser = positive, default_value_t = 10)]
    pub body_timeout_secs: u64,
    /// Seconds a moving cluster may wait for its LoadBalancer address before it fails.
    #[arg(long, env = "KUBEBYON_MOVE_ADDRESS_TIMEOUT_SECS", value_parser = positive,
          default_value_t = crate::server::controllers::move_driver::DEFAULT_ADDRESS_TIMEOUT_SECS as u64)]
    pub move_address_timeout_secs: u64,
    /// Seconds the observer lease lasts (renewed every third of it).
    #[arg(long, env = "KUBEBYON_LEADER_LEASE_SECS", value_parser = positive,
          default_value_t = crate::server::controllers::reconciler::DEFAULT_LEADER_LEASE.as_secs())]
    pub leader_lease_secs: u64,
    /// Seconds a claimed operation stays a crashed replica's before another takes it.
    #[arg(long, env = "KUBEBYON_CLAIM_LEASE_SECS", value_parser = positive,
          default_value_t = crate::server::controllers::reconciler::DEFAULT_CLAIM_LEASE.as_secs())]
    pub claim_lease_secs: u64,
    /// Live pages (event streams) one user may keep open at once.
    #[arg(long, env = "KUBEBYON_LIVE_PER_USER", value_parser = positive_usize,
          default_value_t = crate::server::push::Limits::DEFAULT.per_user)]
    pub live_per_user: usize,
    /// Live pages open at once in this process, everyone's.
    #[arg(long, env = "KUBEBYON_LIVE_TOTAL", value_parser = positive_usize,
          default_value_t = crate::server::push::Limits::DEFAULT.total)]
    pub live_total: usize,
    /// Seconds between a live page's heartbeats.
    #[arg(long, env = "KUBEBYON_LIVE_HEARTBEAT_SECS", value_parser = positive,
          default_value_t = crate::server::push::Limits::DEFAULT.heartbeat.as_secs())]
    pub live_heartbeat_secs: u64,
    /// Password sign-in: `on`, `admins` (console admins only: the way in
    /// while the OpenID provider is down) or `off`.
    #[arg(long, env = "KUBEBYON_LOCAL_SIGN_IN", value_enum, default_value_t = LocalSignIn::On)]
    pub local_sign_in: LocalSignIn,
    /// The OpenID Connect provider's issuer URL (`https://…`; `http://` only
    /// on loopback). Set with the client id and secret to offer sign-in with
    /// the organisation's accounts; needs KUBEBYON_PUBLIC_URL (the redirect
    /// URI is `<public URL>/auth/oidc/callback`).
    #[arg(long, env = "KUBEBYON_OIDC_ISSUER")]
    pub oidc_issuer: Option<String>,
    /// The console's client id at the provider.
    #[arg(long, env = "KUBEBYON_OIDC_CLIENT_ID")]
    pub oidc_client_id: Option<String>,
    /// The console's client secret at the provider (from a Secret).
    #[arg(long, env = "KUBEBYON_OIDC_CLIENT_SECRET", hide_env_values = true)]
    pub oidc_client_secret: Option<String>,
    /// Scopes asked besides `openid` (comma-separated).
    #[arg(long, env = "KUBEBYON_OIDC_SCOPES", value_delimiter = ',', default_value = "profile,email")]
    pub oidc_scopes: Vec<String>,
    /// The ID-token claim that lists the user's groups (mapped to the
    /// console's teams of the same names at each sign-in).
    #[arg(long, env = "KUBEBYON_OIDC_GROUPS_CLAIM", default_value = "groups")]
    pub oidc_groups_claim: String,
    /// The group whose members are console admins (checked at each sign-in);
    /// unset: the provider makes no admins.
    #[arg(long, env = "KUBEBYON_OIDC_ADMIN_GROUP")]
    pub oidc_admin_group: Option<String>,
    /// The prefix of the provider's groups that stand for console teams: a
    /// group `<prefix><team>` puts its members into team `<team>` at each
    /// sign-in. Unset: the provider's groups make no team member (a group
    /// anyone can create at the provider must never name a team).
    #[arg(long, env = "KUBEBYON_OIDC_TEAM_PREFIX")]
    pub oidc_team_prefix: Option<String>,
}

pub use crate::server::auth::LocalSignIn;

/// Shows whether a secret is set, never its value.
struct Redacted<'a>(&'a Option<String>);

impl std::fmt::Debug for Redacted<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() { "Some(<set>)" } else { "None" })
    }
}

/// Every field, the database URL (it may carry a password), the admin
/// password and the metrics token redacted. The destructuring is exhaustive:
/// a new field does not compile until it is placed here.
impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let Self {
            data_dir,
            database_url,
            public_url,
            admin_password,
            simulated_host,
            trusted_proxies,
            metrics_token,
            log_format,
            password_memory_mib,
            probe_deny_cidrs,
            probe_loopback,
            helm_proxy_ports,
            chart_repos,
            spec_write_limit,
            allow_privileged_pods,
            platform_key_namespace,
            gateway_any_host,
            max_connections,
            max_connections_per_client,
            health_addr,
            header_timeout_secs,
            body_timeout_secs,
            move_address_timeout_secs,
            leader_lease_secs,
            claim_lease_secs,
            live_per_user,
            live_total,
            live_heartbeat_secs,
            local_sign_in,
            oidc_issuer,
            oidc_client_id,
            oidc_client_secret,
            oidc_scopes,
            oidc_groups_claim,
            oidc_admin_group,
            oidc_team_prefix,
        } = self;
        f.debug_struct("Config")
            .field("data_dir", data_dir)
            .field("database_url", &Redacted(database_url))
            .field("public_url", public_url)
            .field("admin_password", &Redacted(admin_password))
            .field("simulated_host", simulated_host)
            .field("trusted_proxies", trusted_proxies)
            .field("metrics_token", &Redacted(metrics_token))
            .field("log_format", log_format)
            .field("password_memory_mib", password_memory_mib)
            .field("probe_deny_cidrs", probe_deny_cidrs)
            .field("probe_loopback", probe_loopback)
            .field("helm_proxy_ports", helm_proxy_ports)
            .field("chart_repos", chart_repos)
            .field("spec_write_limit", spec_write_limit)
            .field("allow_privileged_pods", allow_privileged_pods)
            .field("platform_key_namespace", platform_key_namespace)
            .field("gateway_any_host", gateway_any_host)
            .field("max_connections", max_connections)
            .field("max_connections_per_client", max_connections_per_client)
            .field("health_addr", health_addr)
            .field("header_timeout_secs", header_timeout_secs)
            .field("body_timeout_secs", body_timeout_secs)
            .field("move_address_timeout_secs", move_address_timeout_secs)
            .field("leader_lease_secs", leader_lease_secs)
            .field("claim_lease_secs", claim_lease_secs)
            .field("live_per_user", live_per_user)
            .field("live_total", live_total)
            .field("live_heartbeat_secs", live_heartbeat_secs)
            .field("local_sign_in", local_sign_in)
            .field("oidc_issuer", oidc_issuer)
            .field("oidc_client_id", oidc_client_id)
            .field("oidc_client_secret", &Redacted(oidc_client_secret))
            .field("oidc_scopes", oidc_scopes)
            .field("oidc_groups_claim", oidc_groups_claim)
            .field("oidc_admin_group", oidc_admin_group)
            .field("oidc_team_prefix", oidc_team_prefix)
            .finish()
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

fn cidr(raw: &str) -> Result<Cidr, String> {
    Cidr::parse(raw).ok_or_else(|| "not an IP address or CIDR block".to_owned())
}

fn positive(raw: &str) -> Result<u64, String> {
    raw.trim().parse::<u64>().ok().filter(|n| *n > 0).ok_or_else(|| "not a positive whole number".to_owned())
}

fn positive_usize(raw: &str) -> Result<usize, String> {
    positive(raw).and_then(|n| usize::try_from(n).map_err(|e| e.to_string()))
}

impl Config {
    /// The live pages' bounds (a value left 0, as `Config::default()` leaves
    /// it, is the default).
    pub fn live_limits(&self) -> crate::server::push::Limits {
        let d = crate::server::push::Limits::DEFAULT;
        let or = |v: usize, d: usize| if v == 0 { d } else { v };
        crate::server::push::Limits {
            per_user: or(self.live_per_user, d.per_user),
            total: or(self.live_total, d.total),
            heartbeat: match self.live_heartbeat_secs {
                0 => d.heartbeat,
                s => std::time::Duration::from_secs(s),
            },
            lifetime: d.lifetime,
        }
    }

    /// What the probe may connect to.
    /// What the background loops take from here (`controllers::start`).
    pub fn workers(&self) -> crate::server::controllers::Options {
        crate::server::controllers::Options {
            leader_lease: std::time::Duration::from_secs(self.leader_lease_secs),
            claim_lease: std::time::Duration::from_secs(self.claim_lease_secs),
            operator: self.operator_limits(),
            helm_proxy_ports: self.helm_proxy_ports.clone(),
            move_address_timeout_secs: self.move_address_timeout_secs,
        }
    }

    /// Sign-in with the organisation's provider, as the operator set it.
    pub fn oidc(&self) -> crate::server::auth::oidc::OidcSettings<'_> {
        crate::server::auth::oidc::OidcSettings {
            issuer: self.oidc_issuer.as_deref(),
            client_id: self.oidc_client_id.as_deref(),
            client_secret: self.oidc_client_secret.as_deref(),
            public_url: self.public_url.as_deref(),
            scopes: &self.oidc_scopes,
            groups_claim: &self.oidc_groups_claim,
            admin_group: self.oidc_admin_group.as_deref(),
            team_prefix: self.oidc_team_prefix.as_deref(),
        }
    }

    pub fn probe_targets(&self) -> crate::server::host::probe::Targets {
        crate::server::host::probe::Targets {
            deny: self.probe_deny_cidrs.clone(),
            allow_loopback: self.probe_loopback || self.simulated_host,
        }
    }

    /// The throttling key of the client behind a request (`auth::client`).
    pub(crate) fn client_key(&self, peer: std::net::IpAddr, headers: &http::HeaderMap) -> String {
        let forwarded: Vec<&str> = headers.get_all("x-forwarded-for").iter().filter_map(|v| v.to_str().ok()).collect();
        super::auth::client::client_key(super::auth::client::client_ip(peer, &forwarded, &self.trusted_proxies))
    }

    /// The chart repositories admins may choose (`KUBEBYON_CHART_REPOS`, else
    /// the default repository).
    pub(crate) fn chart_repos(&self) -> Vec<String> {
        if self.chart_repos.is_empty() {
            vec![crate::domain::settings::DEFAULT_CHART_REPO.to_owned()]
        } else {
            self.chart_repos.clone()
        }
    }

    /// What the operator decides of the admins' settings.
    pub fn operator_limits(&self) -> crate::domain::operator::OperatorLimits {
        crate::domain::operator::OperatorLimits {
            chart_repos: self.chart_repos(),
            privileged_pods: self.allow_privileged_pods,
            platform_key_namespace: match self.platform_key_namespace.trim() {
                "" => crate::domain::operator::DEFAULT_PLATFORM_KEY_NAMESPACE.to_owned(),
                ns => ns.to_owned(),
            },
        }
    }

    /// The operator's gateway host policy: `KUBEBYON_GATEWAY_ANY_HOST`, and
    /// the console's own host (from `KUBEBYON_PUBLIC_URL`) reserved.
    pub(crate) fn host_policy(&self) -> crate::domain::gateway::HostPolicy {
        let own = self
            .public_url
            .as_deref()
            .and_then(|u| u.parse::<http::Uri>().ok())
            .and_then(|u| u.host().and_then(|h| crate::domain::Host::parse(h.trim_matches(['[', ']'])).ok()));
        crate::domain::gateway::HostPolicy {
            any_host: self.gateway_any_host,
            reserved: own.into_iter().collect(),
            helm_unsupported: false,
        }
    }

    pub(crate) fn public_url_is_https(&self) -> bool {
        self.public_url.as_deref().is_some_and(|u| u.starts_with("https://"))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_consoles_own_host_is_reserved() {
        use crate::domain::Host;
        for (url, want) in [
            (Some("https://Console.Example.com:8443/"), vec![Host::parse("console.example.com").unwrap()]),
            (Some("http://[2001:db8::1]:3000"), vec![Host::parse("2001:db8::1").unwrap()]),
            (Some("http://10.0.0.5"), vec![Host::parse("10.0.0.5").unwrap()]),
            (None, vec![]),
        ] {
            let config = Config { public_url: url.map(str::to_owned), gateway_any_host: true, ..Config::default() };
            let policy = config.host_policy();
            assert_eq!((policy.reserved, policy.any_host), (want, true), "{url:?}");
        }
    }

    use super::*;

    /// Secrets never reach a `{:?}` (a log line, a panic message).
    #[test]
    fn debug_shows_no_secret() {
        let config = Config {
            database_url: Some("postgres://kubebyon:db-s3cret@db:5432/kubebyon".into()),
            admin_password: Some("admin-s3cret".into()),
            metrics_token: Some("metrics-s3cret".into()),
            oidc_client_secret: Some("oidc-s3cret".into()),
            public_url: Some("https://console.example.com".into()),
            ..Config::default()
        };
        let shown = format!("{config:?} {config:#?}");
        for secret in ["db-s3cret", "admin-s3cret", "metrics-s3cret", "oidc-s3cret", "postgres://"] {
            assert!(!shown.contains(secret), "{secret} in {shown}");
        }
        assert!(
            shown.contains("admin_password: Some(<set>)") && shown.contains("https://console.example.com"),
            "{shown}"
        );
        assert!(format!("{:?}", Config::default()).contains("metrics_token: None"));
    }
}
