//! `vexecd`: the selector daemon. Parses flags and the config file, checks
//! the TLS material, binds the TLS listener and the announcement sockets,
//! writes the bound address to the ready file, announces itself, and serves
//! until SIGTERM or SIGINT. SIGHUP reloads the TLS files.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use certs::daemon::Signals;
use clap::Parser;
use vexecd::daemon::Daemon;
use vexecd::daemon::config::{Config, FileConfig, Flags};

/// The rexec market's selector: hears node announcements and answers
/// "select N nodes by POLICY" over mutual TLS.
#[derive(Parser, Debug)]
#[command(name = "vexecd", version)]
struct Args {
    /// TOML config file; it must hold a [discovery] table (flags override its values).
    #[arg(long, env = "VEXECD_CONFIG")]
    config: Option<PathBuf>,
    /// Selector name, as in its service certificate [default: vexecd].
    #[arg(long)]
    name: Option<String>,
    /// TLS address to listen on [default: 0.0.0.0:7478]; port 0 picks a free port.
    #[arg(long)]
    listen: Option<String>,
    /// Address to announce (required when listening on every interface).
    #[arg(long)]
    advertise: Option<String>,
    /// UDP address to hear unicast announcements on (e.g. 0.0.0.0:7478).
    #[arg(long)]
    udp_listen: Option<String>,
    /// Write the bound TLS address to this file once listening.
    #[arg(long)]
    ready_file: Option<PathBuf>,
    /// Cluster CA certificate.
    #[arg(long)]
    ca: Option<PathBuf>,
    /// vexecd's certificate (role service).
    #[arg(long)]
    cert: Option<PathBuf>,
    /// vexecd's private key.
    #[arg(long)]
    key: Option<PathBuf>,
    /// Certificate revocation list.
    #[arg(long)]
    crl: Option<PathBuf>,
    /// Forget a sender after this many of its periods without an announcement [default: 3].
    #[arg(long)]
    window_periods: Option<u32>,
    /// Most senders kept [default: 100000].
    #[arg(long)]
    max_nodes: Option<usize>,
    /// Most simultaneous connections [default: 1024].
    #[arg(long)]
    max_connections: Option<usize>,
    /// How long a silent connection is kept, e.g. 300 (seconds), 5m [default: 5m].
    #[arg(long, value_parser = proto::duration::parse_duration)]
    idle_timeout: Option<Duration>,
}

fn resolve(args: Args) -> anyhow::Result<Config> {
    let file = match &args.config {
        Some(p) => FileConfig::load(p)?,
        None => FileConfig::default(),
    };
    let flags = Flags {
        name: args.name,
        listen: args.listen,
        advertise: args.advertise,
        udp_listen: args.udp_listen,
        ready_file: args.ready_file,
        ca: args.ca,
        cert: args.cert,
        key: args.key,
        crl: args.crl,
        window_periods: args.window_periods,
        max_nodes: args.max_nodes,
        max_connections: args.max_connections,
        idle_timeout: args.idle_timeout,
    };
    Ok(Config::resolve(file, flags)?)
}

async fn real_main(args: Args) -> anyhow::Result<()> {
    // First, so a signal during start-up is queued, not fatal.
    let signals = Signals::install()?;
    let config = resolve(args)?;
    if config.tls.crl.is_none() {
        tracing::warn!(
            "no revocation list configured (--crl or `crl` in the config file): revoked certificates are accepted"
        );
    }
    let ready_file = config.ready_file.clone();
    let daemon = Daemon::start(config).await?;
    certs::reload_on_sighup(daemon.tls(), signals.hangups);
    tracing::info!("{}", daemon.describe());
    if let Some(path) = ready_file {
        certs::daemon::write_ready_file(&path, daemon.addr())?;
    }
    daemon.run(signals.stop.recv()).await;
    Ok(())
}

fn main() -> ExitCode {
    let args = Args::parse();
    certs::daemon::run("vexecd", real_main(args))
}
