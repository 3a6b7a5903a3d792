//! `vexecd`: the selector daemon. Parses flags and the config file, checks
//! the TLS material, binds the TLS listener and the announcement sockets,
//! writes the bound address to the ready file, announces itself, and serves
//! until SIGTERM or SIGINT. SIGHUP reloads the TLS files.

use std::process::ExitCode;

use ::daemon::Signals;
use clap::Parser;
use vexecd::daemon::Daemon;
use vexecd::daemon::config::{Config, Flags};

async fn real_main(flags: Flags) -> anyhow::Result<()> {
    // First, so a signal during start-up is queued, not fatal.
    let signals = Signals::install()?;
    let config = Config::load(flags)?;
    if config.tls.crl.is_none() {
        tracing::warn!(
            "no revocation list configured (--crl or `crl` in the config file): revoked certificates are accepted"
        );
    }
    let ready_file = config.ready_file.clone();
    let daemon = Daemon::start(config).await?;
    daemon::reload_on_sighup(daemon.tls(), signals.hangups);
    tracing::info!("{}", daemon.describe());
    if let Some(path) = ready_file {
        ::daemon::write_ready_file(&path, daemon.addr())?;
    }
    daemon.run(signals.stop.recv()).await;
    Ok(())
}

fn main() -> ExitCode {
    let flags = Flags::parse();
    ::daemon::run("vexecd", real_main(flags))
}
