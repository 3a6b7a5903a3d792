//! The `rexecd` binary: parses flags, loads the config, binds the listener, prepares the
//! server (TLS, cgroups, stale-job sweep), writes the ready file, and serves until
//! SIGTERM or SIGINT, after which every job is destroyed and rexecd exits. SIGHUP
//! reloads the TLS files (CA, certificate, key, CRL) without touching running jobs.

use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;
use clap::Parser;
use rexecd::config::{Config, Flags};
use rexecd::server::Server;
use tokio::signal::unix::{SignalKind, signal};

fn main() -> ExitCode {
    let flags = Flags::parse();
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    match run(flags) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rexecd: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(flags: Flags) -> anyhow::Result<()> {
    let config = Config::load(&flags)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async move {
        let mut term = signal(SignalKind::terminate()).context("cannot handle SIGTERM")?;
        let mut int = signal(SignalKind::interrupt()).context("cannot handle SIGINT")?;
        let hangups = signal(SignalKind::hangup()).context("cannot handle SIGHUP")?;
        let listener = tokio::net::TcpListener::bind(&config.listen)
            .await
            .with_context(|| format!("cannot listen on {}", config.listen))?;
        let addr = listener
            .local_addr()
            .context("cannot read the bound address")?;
        let mut server = Server::new(config).await?;
        server.start_announcing(addr).await?;
        certs::reload_on_sighup(server.tls(), hangups);
        if let Some(path) = &flags.ready_file {
            write_ready(path, &addr.to_string())?;
        }
        server
            .serve(listener, async move {
                tokio::select! {
                    _ = term.recv() => tracing::info!("SIGTERM received"),
                    _ = int.recv() => tracing::info!("SIGINT received"),
                }
            })
            .await;
        Ok(())
    })
}

/// Writes `addr` and a newline to `path` atomically (temporary file, then rename).
fn write_ready(path: &Path, addr: &str) -> anyhow::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(".tmp.{}", std::process::id()));
    std::fs::write(&tmp, format!("{addr}\n"))
        .with_context(|| format!("cannot write ready file {}", Path::new(&tmp).display()))?;
    std::fs::rename(&tmp, path)
        .with_context(|| format!("cannot write ready file {}", path.display()))?;
    Ok(())
}
