//! The KubeBYON server: `kubebyon [serve]` runs the console, `kubebyon admin`
//! creates or resets an admin account.

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, bail};
use kubebyon::server::cli::Command;
use kubebyon::server::config::{Config, LogFormat};
use kubebyon::server::host;
use kubebyon::server::service::accounts;
use kubebyon::server::state::AppState;
use kubebyon::server::{auth, db, http};
use leptos::config::get_configuration;
use sqlx::AnyPool;

/// mimalloc instead of glibc's malloc: a page render makes thousands of small
/// allocations (views, strings, reactive owners), and each sign-in's argon2
/// hash takes 19 MiB that glibc keeps once its mmap threshold has grown
/// (RSS after four sign-ins: 102 MB with glibc, 56 MB with mimalloc; list
/// page faster kept alive; figures in docs/performance.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> ExitCode {
    let cli = kubebyon::server::cli::parse();
    let config = cli.config;
    // Logs on standard error; `KUBEBYON_LOG_FORMAT=json`: one JSON object per
    // line, with the request's span fields (request_id, route, cluster).
    let logs = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info,sqlx=warn".into()),
        )
        .with_writer(std::io::stderr);
    if config.log_format == LogFormat::Json {
        logs.json().flatten_event(true).with_current_span(true).with_span_list(false).init();
        // A panic is one JSON error event too (the default hook writes plain
        // text, which breaks a JSON log's readers). Seen: leptos_i18n 0.6.2's
        // server-side language effect (context.rs:213) reading its signal
        // after the request's reactive owner was disposed, under load; tokio
        // ends only that task (docs/architecture.md, Observability).
        std::panic::set_hook(Box::new(|info| {
            let backtrace = std::backtrace::Backtrace::capture().to_string();
            tracing::error!(panic = %info, backtrace, "a task panicked");
        }));
    } else {
        logs.init();
    }
    match run(cli.command.unwrap_or(Command::Serve), config).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("kubebyon: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn open_database(config: &Config) -> anyhow::Result<(AnyPool, String)> {
    let (url, shown) = match &config.database_url {
        Some(url) => (url.clone(), "DATABASE_URL".to_owned()),
        None => {
            let url = db::sqlite_url(&config.data_dir)
                .with_context(|| format!("preparing the data folder {}", config.data_dir.display()))?;
            (url, config.data_dir.join("kubebyon.db").display().to_string())
        }
    };
    let pool = db::connect(&url).await.with_context(|| format!("opening the database ({shown})"))?;
    Ok((pool, shown))
}

/// The password to set: from the environment, else freshly generated.
fn admin_password(config: &Config) -> (String, bool) {
    match &config.admin_password {
        Some(p) => (p.clone(), false),
        None => (auth::password::generate_password(), true),
    }
}

/// Writes a new file only this process's user may read (mode 0600).
fn write_private(path: &std::path::Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let mut f = std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(path)?;
    f.write_all(format!("{text}\n").as_bytes())
}

async fn run(command: Command, config: Config) -> anyhow::Result<()> {
    let (pool, db_shown) = open_database(&config).await?;
    match command {
        Command::Admin { username } => {
            let (password, generated) = admin_password(&config);
            let created = accounts::upsert_admin(&pool, &username, &password)
                .await
                .with_context(|| format!("could not set up admin {username:?}"))?;
            println!("{} admin {username:?}.", if created { "Created" } else { "Reset the password and role of" });
            if generated {
                println!("Password (shown once): {password}");
            }
            Ok(())
        }
        Command::Move(args) => {
            match kubebyon::server::cli::move_clusters(&pool, args, config.move_address_timeout_secs as i64).await? {
                true => Ok(()),
                false => bail!("some clusters are blocked or failed (see above)"),
            }
        }
        Command::Access(args) => kubebyon::server::cli::access(&pool, args).await,
        Command::Serve => serve(pool, db_shown, config).await,
    }
}

async fn serve(pool: AnyPool, db_shown: String, config: Config) -> anyhow::Result<()> {
    let mut conf = get_configuration(None).context("reading the LEPTOS_* settings")?;
    let addr = conf.leptos_options.site_addr;
    // Hashed asset names need cargo-leptos' hash.txt beside this binary; without
    // it the pages would name files that do not exist (and leptos panics).
    let hash_file =
        std::env::current_exe().ok().and_then(|p| p.parent().map(|d| d.join(&*conf.leptos_options.hash_file)));
    if conf.leptos_options.hash_files && !hash_file.as_ref().is_some_and(|f| f.exists()) {
        tracing::warn!(file = ?hash_file, "LEPTOS_HASH_FILES is set but there is no hash file: plain asset names");
        conf.leptos_options.hash_files = false;
    }

    // First start: no admin yet, so make one and say how to sign in. Only
    // the replica whose create made it reports it (two fresh replicas: the
    // other's password was never set). A generated password goes to a file
    // only this user may read, never to the log.
    if db::users::count_admins(&pool).await.context("counting the admins")? == 0 {
        let (password, generated) = admin_password(&config);
        let created = accounts::create_first_admin(&pool, "admin", &password)
            .await
            .context("could not create the first admin")?;
        if created {
            println!("\nFirst start: created the admin account.");
            println!("  username: admin");
            if !generated {
                println!("  password: the value of KUBEBYON_ADMIN_PASSWORD");
            } else {
                let file = config.data_dir.join("initial-admin-password");
                match write_private(&file, &password) {
                    Ok(()) => println!("  password: in {} (readable by this user only)", file.display()),
                    Err(e) => println!(
                        "  password: not shown ({e} writing {}); set one with `kubebyon admin`",
                        file.display()
                    ),
                }
            }
        }
    }

    let state_simulated = config.simulated_host;
    let connected = match host::connect().await {
        Ok(client) => {
            // Start-up never waits long on the host: a host that does not answer
            // within a few seconds is detected again on the first full pass.
            let detect = host::detect_address_request(&client);
            let request = tokio::time::timeout(std::time::Duration::from_secs(3), detect)
                .await
                .unwrap_or(kubebyon::domain::render::AddressRequest::None);
            let mut host = host::Host::new(client, pool.clone(), request);
            host.resolver.targets = config.probe_targets();
            let host = Arc::new(host);
            // What its helm-controller accepts (the first apply reads it
            // when the host did not answer in time).
            let _ = tokio::time::timeout(std::time::Duration::from_secs(3), host.refresh_helm()).await;
            Some(host)
        }
        Err(e) => {
            // Said once; cluster requests stay queued until a host is configured.
            tracing::warn!(reason = %e, "no host cluster configured (KUBECONFIG or in-cluster): cluster changes stay queued");
            None
        }
    };
    let host = connected;
    let host_shown = if host.is_some() { "connected" } else { "NOT CONFIGURED (set KUBECONFIG); changes stay queued" };
    let oidc =
        kubebyon::server::auth::oidc::Provider::from_settings(config.oidc()).map_err(anyhow::Error::msg)?.map(Arc::new);
    // Password sessions the sign-in policy no longer allows end now.
    {
        use kubebyon::server::config::LocalSignIn;
        if config.local_sign_in != LocalSignIn::On {
            let keep_admins = config.local_sign_in == LocalSignIn::Admins;
            let ended = kubebyon::server::db::sessions::end_password_sessions(&pool, keep_admins)
                .await
                .context("ending password sessions")?;
            tracing::info!(ended, "password sessions the sign-in policy no longer allows ended");
        }
    }
    let state = AppState {
        oidc,
        leptos_options: conf.leptos_options,
        pool: pool.clone(),
        limiter: Arc::new(kubebyon::server::auth::rate_limit::LoginLimiter::with_budget(config.password_memory_mib)),
        spec_writes: Arc::new(kubebyon::server::service::write_limit::SpecWriteLimiter::new(config.spec_write_limit)),
        push: kubebyon::server::push::Hub::new(pool.clone(), config.live_limits()),
        config: Arc::new(config),
        host,
    };
    // The reconciler, the move driver, node removals, the access sync, the
    // live pages' poller and housekeeping.
    kubebyon::server::controllers::start(&state.pool, &state.config.workers(), state.host.as_ref(), &state.push);
    let limits = http::serve::Limits {
        max_connections: state.config.max_connections,
        per_client: state.config.max_connections_per_client,
        exempt: state.config.trusted_proxies.clone(),
        header_read: std::time::Duration::from_secs(state.config.header_timeout_secs),
        ..Default::default()
    };
    // Liveness and readiness apart from the public listener's caps.
    if let Some(health) = state.config.health_addr {
        let listener =
            tokio::net::TcpListener::bind(health).await.with_context(|| format!("cannot listen on {health}"))?;
        let health_limits = http::serve::Limits { max_connections: 64, per_client: 64, ..limits.clone() };
        let app = http::router::health_router(state.clone());
        tokio::spawn(http::serve::serve(listener, app, health_limits, shutdown_signal()));
        println!("Health checks: http://{health}/healthz, /readyz");
    }
    let app = http::router::router(state);
    let listener = tokio::net::TcpListener::bind(&addr).await.with_context(|| format!("cannot listen on {addr}"))?;
    println!("\nKubeBYON console: http://{addr}   (database: {db_shown})");
    println!("Host cluster: {host_shown}");
    if state_simulated {
        println!("Host cluster: SIMULATED (scripts/host-up.sh: real kube-apiserver + etcd, simulated k3s parts)");
    }
    println!();
    http::serve::serve(listener, app, limits, shutdown_signal()).await;
    Ok(())
}

/// Ctrl-C, or SIGTERM (what Kubernetes sends a Pod it stops): requests in
/// flight are answered before the process exits.
async fn shutdown_signal() {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term => {}
    }
    tracing::info!("shutting down: finishing requests in flight");
}
