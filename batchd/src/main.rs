//! `batchd`: the batch queue daemon. Parses flags and the config file, binds,
//! writes the bound address to the ready file, and serves until SIGTERM or
//! SIGINT; SIGHUP reloads the TLS files. See [`batchd::config`] for the keys.

use std::process::ExitCode;

use anyhow::Context;
use batchd::config::{Config, Flags};
use clap::Parser;
use daemon::Signals;

async fn real_main(flags: Flags) -> anyhow::Result<()> {
    let signals = Signals::install()?;
    let cfg = Config::load(&flags)?;
    let listener = tokio::net::TcpListener::bind(&cfg.listen)
        .await
        .with_context(|| format!("cannot listen on {}", cfg.listen))?;
    let addr = listener
        .local_addr()
        .context("cannot read the bound address")?;
    tracing::info!(%addr, "batchd listening");
    if let Some(path) = &cfg.ready_file {
        daemon::write_ready_file(path, addr)?;
    }
    batchd::start::run(cfg, listener, Some(signals.hangups), signals.stop.recv()).await?;
    Ok(())
}

fn main() -> ExitCode {
    let flags = Flags::parse();
    daemon::run("batchd", real_main(flags))
}
