//! The server binary's command line: run the console (default) or manage admins.

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(name = "kubebyon", about = "KubeBYON console", version)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
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
}
