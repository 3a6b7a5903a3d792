//! `batchd`: the batch queue daemon. Parses flags and the config file, reads
//! its TLS files and opens its store (a key it cannot read stops it here,
//! before it says anything about listening), binds, writes the bound address
//! to the ready file, and serves until SIGTERM or SIGINT; SIGHUP reloads the
//! TLS files. See [`batchd::config`] for the keys.
//!
//! `batchd migrate --from STORE --to STORE` copies a queue between backends
//! (with every batchd of both stopped) and checks the copy; a STORE is a
//! batchd config file (`*.toml`: its `[store]`), a `postgres://` URL, or a
//! SQLite file.

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

/// `batchd migrate`: copies a queue into an empty one on the other backend.
#[derive(clap::Parser, Debug)]
#[command(name = "batchd migrate")]
struct Migrate {
    /// The queue to copy: a batchd config file (*.toml), a postgres:// URL, or a SQLite file.
    #[arg(long)]
    from: String,
    /// The empty queue to copy into (the same forms).
    #[arg(long)]
    to: String,
}

fn migrate(m: &Migrate) -> anyhow::Result<()> {
    let from = batchd::store::migrate::location(&m.from)?;
    let to = batchd::store::migrate::location(&m.to)?;
    let done = batchd::store::migrate::migrate(&from, &to)?;
    println!(
        "migrated {} jobs ({} arrays), {} output chunks, {} journal debits, {} rank ends; the copy's dump equals the source's",
        done.jobs, done.arrays, done.output, done.debits, done.ranks
    );
    Ok(())
}

fn main() -> ExitCode {
    if std::env::args().nth(1).as_deref() == Some("migrate") {
        let m = Migrate::parse_from(std::env::args().skip(1));
        return match migrate(&m) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("batchd migrate: {e:#}");
                ExitCode::FAILURE
            }
        };
    }
    let flags = Flags::parse();
    daemon::run("batchd", real_main(flags))
}
