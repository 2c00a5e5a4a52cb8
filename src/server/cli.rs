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
    /// Sharing, teams, owners and accounts, as the pages and the JSON API
    /// change them (audited under --as; the clusters' bindings follow when
    /// the host is reachable, else the console's slow loop brings them).
    Access(AccessArgs),
}

#[derive(Debug, clap::Args)]
pub struct AccessArgs {
    #[command(subcommand)]
    pub what: AccessCommand,
    /// The admin the changes are recorded under.
    #[arg(long = "as", default_value = "admin", value_name = "USERNAME", global = true)]
    pub admin: String,
}

#[derive(Debug, Subcommand)]
pub enum AccessCommand {
    /// A cluster's owner and members.
    Members { cluster: String },
    /// Shares a cluster with a user (or `team:NAME`) at a role: view, edit or admin.
    Share { cluster: String, member: String, role: String },
    /// Takes a cluster back from a user (or `team:NAME`).
    Unshare { cluster: String, member: String },
    /// Moves a cluster to another owner (whose quota must hold it).
    Owner { cluster: String, username: String },
    /// The teams and their users.
    Teams,
    /// Makes a team.
    TeamCreate { name: String },
    /// Deletes a team (its memberships go with it).
    TeamDelete { name: String },
    /// Puts a user into a team.
    TeamAdd { team: String, username: String },
    /// Takes a user out of a team.
    TeamRemove { team: String, username: String },
    /// Disables an account: its sessions end, it signs in no more, the
    /// clusters' bindings drop it.
    Disable { username: String },
    /// Enables a disabled account again.
    Enable { username: String },
}

/// The admin account a CLI change is recorded under (`--as`).
async fn admin_named(pool: &sqlx::AnyPool, name: &str) -> anyhow::Result<crate::domain::user::CurrentUser> {
    use anyhow::{Context, anyhow};
    crate::server::db::users::by_username(pool, name)
        .await
        .context("reading the admin account")?
        .filter(|u| u.disabled_at.is_none())
        .map(|u| u.current_user())
        .filter(|u| u.is_admin())
        .ok_or_else(|| anyhow!("{name:?} is not an admin account, or is disabled (--as)"))
}

/// `user:NAME`, `team:NAME` or a bare user name.
fn member_of(raw: &str) -> (&str, &str) {
    match raw.split_once(':') {
        Some((kind, name)) => (kind, name),
        None => ("user", raw),
    }
}

/// `kubebyon access …`: one change (or listing) through the same services
/// as the pages. A refusal is an error naming its code and field.
pub async fn access(pool: &sqlx::AnyPool, args: AccessArgs) -> anyhow::Result<()> {
    use anyhow::{Context, anyhow};

    use crate::domain::AppError;
    use crate::server::service::{accounts, clusters, members};

    let refused = |e: AppError| match e.field {
        Some(f) => anyhow!("refused: {} ({})", e.code.as_str(), f.as_str()),
        None => anyhow!("refused: {}", e.code.as_str()),
    };
    let admin = admin_named(pool, &args.admin).await?;
    let host = match crate::server::host::connect().await {
        Ok(client) => {
            let request = crate::server::host::detect_address_request(&client).await;
            Some(std::sync::Arc::new(crate::server::host::Host::new(client, pool.clone(), request)))
        }
        Err(_) => None,
    };
    let host = host.as_ref();
    let cluster = |name: String| async move {
        let all = crate::server::db::clusters::list(pool, None).await.context("reading the clusters")?;
        all.into_iter().find(|c| c.spec.name.as_str() == name).ok_or_else(|| anyhow!("no cluster {name:?}"))
    };
    let team = |name: String| async move {
        crate::server::db::members::team_id(pool, &name)
            .await
            .context("reading the teams")?
            .ok_or_else(|| anyhow!("no team {name:?}"))
    };
    let user = |name: String| async move {
        crate::server::db::users::by_username(pool, &name)
            .await
            .context("reading the accounts")?
            .ok_or_else(|| anyhow!("no account {name:?}"))
    };
    let print_members = |owner: &str, list: &[crate::domain::membership::Member]| {
        println!("owner: {owner}");
        for m in list {
            println!("{}:{} {}", m.kind.as_str(), m.name, m.role.as_str());
        }
    };
    // Stored, but not in step inside the cluster yet: said on stderr.
    let pending = |reason: Option<&str>| {
        if let Some(reason) = reason {
            eprintln!("pending: the cluster's access is not in step yet ({reason}); the console keeps trying");
        }
    };
    match args.what {
        AccessCommand::Members { cluster: name } => {
            let c = cluster(name).await?;
            print_members(&c.owner, &members::list(pool, &admin, c.id).await.map_err(refused)?);
        }
        AccessCommand::Share { cluster: name, member, role } => {
            let c = cluster(name).await?;
            let (kind, name) = member_of(&member);
            let input = members::MemberInput { kind: Some(kind.to_owned()), name: name.to_owned(), role };
            // The operator's own CLI: not metered.
            let unmetered = crate::server::service::write_limit::SpecWriteLimiter::new(false);
            let changed = members::put(pool, host, &unmetered, &admin, c.id, &input).await.map_err(refused)?;
            print_members(&c.owner, &changed.members);
            pending(changed.pending.as_deref());
        }
        AccessCommand::Unshare { cluster: name, member } => {
            let c = cluster(name).await?;
            let (kind, name) = member_of(&member);
            let id = match kind {
                "team" => team(name.to_owned()).await?,
                _ => user(name.to_owned()).await?.id,
            };
            let unmetered = crate::server::service::write_limit::SpecWriteLimiter::new(false);
            let left = members::remove(pool, host, &unmetered, &admin, c.id, kind, id).await.map_err(refused)?;
            print_members(&c.owner, &left.members);
            pending(left.pending.as_deref());
        }
        AccessCommand::Owner { cluster: name, username } => {
            let c = cluster(name).await?;
            let moved = clusters::transfer(pool, host, &admin, c.id, &username).await.map_err(refused)?;
            println!("{} is {}'s", moved.spec.name.as_str(), moved.owner);
        }
        AccessCommand::Teams => {
            for t in members::teams(pool, &admin).await.map_err(refused)? {
                println!("{}: {}", t.name, t.members.join(", "));
            }
        }
        AccessCommand::TeamCreate { name } => {
            let t = members::create_team(pool, &admin, &name).await.map_err(refused)?;
            println!("team {} made", t.name);
        }
        AccessCommand::TeamDelete { name } => {
            members::delete_team(pool, host, &admin, team(name.clone()).await?).await.map_err(refused)?;
            println!("team {name} deleted");
        }
        AccessCommand::TeamAdd { team: name, username } => {
            let t =
                members::set_in_team(pool, host, &admin, team(name).await?, &username, true).await.map_err(refused)?;
            println!("{}: {}", t.name, t.members.join(", "));
        }
        AccessCommand::TeamRemove { team: name, username } => {
            let t =
                members::set_in_team(pool, host, &admin, team(name).await?, &username, false).await.map_err(refused)?;
            println!("{}: {}", t.name, t.members.join(", "));
        }
        AccessCommand::Disable { username } => {
            accounts::set_disabled(pool, host, &admin, user(username.clone()).await?.id, true)
                .await
                .map_err(refused)?;
            println!("{username} disabled");
        }
        AccessCommand::Enable { username } => {
            accounts::set_disabled(pool, host, &admin, user(username.clone()).await?.id, false)
                .await
                .map_err(refused)?;
            println!("{username} enabled");
        }
    }
    // The bindings of several clusters wait in the host's access queue
    // (the console's loop works it): this process works it before it ends.
    if let Some(host) = host {
        crate::server::tenant::access::drain(pool, host).await;
    }
    Ok(())
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
    let admin = admin_named(pool, &args.admin).await?;
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
