//! The server binary's command line: run the console (default) or manage admins.

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(name = "kubebyon", about = "KubeBYON console", version)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    #[command(flatten)]
    pub config: super::config::Config,
}

/// The command line and the settings' environment variables
/// ([`super::config::Config`]). A variable set to nothing (or blanks) counts
/// as unset, as container manifests often leave them; a value is shown as
/// `<ITS_VARIABLE>`, so an error names what to fix. Exits with clap's message
/// on a bad value.
/// Environment variables renamed since a release: (old, new). The old name
/// is still read (the move of NodePort clusters was called "migration").
pub(crate) const RENAMED_ENV: &[(&str, &str)] =
    &[("KUBEBYON_MIGRATION_ADDRESS_TIMEOUT_SECS", "KUBEBYON_MOVE_ADDRESS_TIMEOUT_SECS")];

pub fn parse() -> Cli {
    let mut cmd = Cli::command();
    let settings: Vec<(clap::Id, String, bool)> = cmd
        .get_arguments()
        .filter_map(|a| {
            let env = a.get_env()?.to_str()?.to_owned();
            Some((a.get_id().clone(), env, a.get_action().takes_values()))
        })
        .collect();
    for (id, env, takes_values) in settings {
        // A setting renamed since: its old variable is read while the new one is unset.
        let read = match RENAMED_ENV.iter().find(|(_, new)| *new == env) {
            Some((old, _)) if std::env::var_os(&env).is_none() && std::env::var_os(old).is_some() => {
                eprintln!("kubebyon: {old} is read as {env} (its new name); please rename it");
                (*old).to_owned()
            }
            _ => env.clone(),
        };
        let blank = std::env::var_os(&read).is_some_and(|v| v.to_string_lossy().trim().is_empty());
        cmd = cmd.mut_arg(id, |a| {
            let a = if takes_values { a.value_name(env) } else { a };
            if blank { a.env(None) } else { a.env(read) }
        });
    }
    Cli::from_arg_matches(&cmd.get_matches()).unwrap_or_else(|e| e.exit())
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the web console (the default).
    Serve,
    /// Create an admin account, or reset its password and role if it exists.
    /// The password is read from KUBEBYON_ADMIN_PASSWORD, else generated and printed once.
    Admin {
        /// The admin's username.
        #[arg(long, default_value = "admin")]
        username: String,
    },
    /// Move NodePort clusters to LoadBalancer (docs/runbooks/move-to-loadbalancer.md).
    /// Prints the dry run; without --dry-run starts the move and follows it
    /// until every cluster is done or failed (exit status 1 if any failed or is
    /// blocked). The console applies the changes to the host: keep it running.
    #[command(alias = "migrate")]
    Move(MoveArgs),
}

#[derive(Debug, clap::Args)]
pub struct MoveArgs {
    /// A cluster to move (repeatable).
    #[arg(long = "cluster", value_name = "NAME")]
    pub clusters: Vec<String>,
    /// Every NodePort cluster.
    #[arg(long, conflicts_with = "clusters")]
    pub all: bool,
    /// With --all: also clusters whose public access is off.
    #[arg(long)]
    pub include_disabled: bool,
    /// New hosts from a template, e.g. '{name}.k8s.example.com'.
    #[arg(long, conflicts_with = "range", required_unless_present = "range")]
    pub template: Option<String>,
    /// New hosts from an IPv4 range, handed out in order, e.g. 203.0.113.10-203.0.113.60.
    #[arg(long)]
    pub range: Option<String>,
    /// What the clusters become: `loadbalancer` (NodePort or disabled
    /// clusters) or `gateway` (NodePort, LoadBalancer or disabled ones;
    /// hosts must be DNS names within the admin's gateway domain suffix).
    #[arg(long = "to", default_value = "loadbalancer", value_name = "MODE")]
    pub to: String,
    /// Clusters switched at once.
    #[arg(long, default_value_t = crate::domain::moves::DEFAULT_CONCURRENCY)]
    pub concurrency: i64,
    /// How long old kubeconfigs keep working: 7d, 12h, 30m, 0 (cut over at
    /// once); without it, the console's default (a week).
    #[arg(long)]
    pub grace: Option<String>,
    /// Only print the plan.
    #[arg(long)]
    pub dry_run: bool,
    /// The admin the move is recorded under.
    #[arg(long = "as", default_value = "admin", value_name = "USERNAME")]
    pub admin: String,
}

/// `kubebyon move`: prints the plan, then (unless `--dry-run`) starts the
/// move and drives and follows it. Ok(false) when a cluster is blocked or failed.
pub async fn move_clusters(pool: &sqlx::AnyPool, args: MoveArgs, address_timeout: i64) -> anyhow::Result<bool> {
    use std::io::{IsTerminal, Write};

    use anyhow::{Context, anyhow, bail};

    use crate::domain::moves::MoveRequest;
    use crate::domain::moves::{HostSource, ItemState, parse_duration};
    use crate::server::service::moves;

    let grace = match &args.grace {
        None => crate::domain::moves::DEFAULT_GRACE_SECS,
        Some(g) => parse_duration(g).ok_or_else(|| anyhow!("--grace {g:?}: use e.g. 7d, 12h, 30m or 0"))?,
    };
    let hosts = match (args.template, args.range) {
        (Some(t), _) => HostSource::Template(t),
        (None, Some(r)) => HostSource::Range(r),
        (None, None) => bail!("give --template or --range"),
    };
    let req = MoveRequest {
        clusters: args.clusters,
        all: args.all,
        include_disabled: args.include_disabled,
        hosts,
        target: args.to.parse().map_err(|_| anyhow!("--to {:?}: loadbalancer or gateway", args.to))?,
        concurrency: Some(args.concurrency),
        grace_secs: Some(grace),
    };
    let admin = crate::server::db::users::by_username(pool, &args.admin)
        .await
        .context("reading the admin account")?
        .map(|u| u.current_user())
        .filter(|u| u.is_admin())
        .ok_or_else(|| anyhow!("{:?} is not an admin account (--as)", args.admin))?;
    // How the host's LoadBalancer provider is asked, as the console sees it.
    let detected = match crate::server::host::connect().await {
        Ok(client) => Some(crate::server::host::detect_address_request(&client).await),
        Err(_) => None,
    };
    let host = crate::server::service::HostLink { detected, host: None };
    let plan = moves::dry_run(pool, &admin, host, &req).await.context("refused")?;
    println!("{:<24} {:<34} {:<34} problems", "cluster", "now", "new endpoint");
    for i in &plan.items {
        let problems: Vec<&str> = i.problems.iter().map(|p| p.as_str()).collect();
        println!(
            "{:<24} {:<34} {:<34} {}",
            i.name,
            i.current_endpoint.as_deref().unwrap_or("-"),
            i.new_endpoint.as_deref().unwrap_or("-"),
            if problems.is_empty() { "-".to_owned() } else { problems.join(",") }
        );
        for c in &i.changes {
            println!(
                "    {}: {} -> {}",
                c.path,
                c.old.as_deref().unwrap_or("(unset)"),
                c.new.as_deref().unwrap_or("(unset)")
            );
        }
    }
    println!(
        "{} clusters, {} blocked; {} at a time; old endpoints answer for {} s after their switch",
        plan.items.len(),
        plan.blocked,
        plan.concurrency,
        plan.grace_secs
    );
    if args.dry_run || plan.blocked > 0 {
        return Ok(plan.blocked == 0);
    }
    let id = moves::start(pool, &admin, host, &req).await.context("refused")?;
    // Users read "migration" (the pages and the CLI say "Migration #N"); the code says "move".
    println!("migration #{id} started");
    let tty = std::io::stdout().is_terminal();
    let mut seen: std::collections::HashMap<i64, String> = std::collections::HashMap::new();
    loop {
        crate::server::controllers::move_driver::advance(pool, address_timeout).await.context("refused")?;
        let view = moves::view(pool, &admin, id).await.context("refused")?;
        for item in &view.items {
            let step = match (item.state, item.step) {
                (ItemState::Switching, Some(step)) => {
                    serde_json::to_value(step).ok().and_then(|v| v.as_str().map(str::to_owned))
                }
                _ => None,
            }
            .unwrap_or_else(|| item.state.as_str().to_owned());
            let line =
                if item.reason == crate::domain::StopReason::None { step } else { format!("{step}: {}", item.reason) };
            if seen.get(&item.cluster_id) != Some(&line) {
                if tty {
                    print!("\r\x1b[2K");
                }
                println!("{:<24} {}", item.name, line);
                seen.insert(item.cluster_id, line);
            }
        }
        let count = |s: ItemState| view.counts.get(&s).copied().unwrap_or(0);
        let (done, failed, total) = (count(ItemState::Done), count(ItemState::Failed), view.items.len());
        if tty {
            let width = 30;
            let filled = (done + failed) * width / total.max(1);
            print!(
                "\r[{}{}] {done}/{total} done, {failed} failed, {} s",
                "#".repeat(filled),
                ".".repeat(width - filled),
                view.elapsed_secs
            );
            let _ = std::io::stdout().flush();
        }
        if view.finished {
            if tty {
                println!();
            }
            println!("migration #{id}: {done} done, {failed} failed in {} s", view.elapsed_secs);
            return Ok(failed == 0);
        }
        tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    }
}
