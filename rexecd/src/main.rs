//! The `rexecd` binary: parses flags, loads the config, binds the listener, prepares the
//! server (TLS, cgroups, stale-job sweep), writes the ready file, and serves until
//! SIGTERM or SIGINT, after which every job is destroyed and rexecd exits. SIGHUP
//! reloads the TLS files (CA, certificate, key, CRL) without touching running jobs.

use std::process::ExitCode;

use clap::Parser;
use daemon::Signals;
use rexecd::config::{Config, Flags};
use rexecd::server::Server;

fn main() -> ExitCode {
    let flags = Flags::parse();
    daemon::run("rexecd", run(flags))
}

async fn run(flags: Flags) -> anyhow::Result<()> {
    let config = Config::load(&flags)?;
    let ready_file = config.ready_file.clone();
    let signals = Signals::install()?;
    let (listener, addr) = daemon::bind(&config.listen).await?;
    let mut server = Server::new(config).await?;
    server.start_announcing(addr).await?;
    daemon::reload_on_sighup(server.tls(), signals.hangups);
    if let Some(path) = &ready_file {
        daemon::write_ready_file(path, addr)?;
    }
    server.serve(listener, signals.stop.recv()).await;
    Ok(())
}
