//! `batchd`: the batch queue daemon. Parses flags and the config file, reads
//! its TLS files and opens its store (a key it cannot read stops it here,
//! before it says anything about listening), binds, writes the bound address
//! to the ready file, and serves until SIGTERM or SIGINT; SIGHUP reloads the
//! TLS files. See [`batchd::config`] for the keys.

use std::process::ExitCode;

use batchd::config::{Config, Flags};
use clap::Parser;
use daemon::Signals;

async fn real_main(flags: Flags) -> anyhow::Result<()> {
    let signals = Signals::install()?;
    let cfg = Config::load(&flags)?;
    let (listen, ready_file) = (cfg.listen.clone(), cfg.ready_file.clone());
    let opened = batchd::start::open(cfg).await?;
    let (listener, addr) = daemon::bind(&listen).await?;
    tracing::info!(%addr, "batchd listening");
    if let Some(path) = &ready_file {
        daemon::write_ready_file(path, addr)?;
    }
    batchd::start::serve(opened, listener, Some(signals.hangups), signals.stop.recv()).await?;
    Ok(())
}

fn main() -> ExitCode {
    let flags = Flags::parse();
    daemon::run("batchd", real_main(flags))
}
