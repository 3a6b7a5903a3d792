//! `accountd`: the credit ledger daemon. Parses flags and the config file,
//! opens the ledger and TLS material, binds, writes the bound address to the
//! ready file, and serves until SIGTERM or SIGINT. SIGHUP reloads the TLS files
//! (CA, certificate, key, CRL) without dropping connections. With a `[discovery]`
//! table it announces itself to the cluster (see [`accountd::config`]).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use accountd::config::{ConfigError, DEFAULT_LISTEN, DEFAULT_MAX_ENTRY, FileConfig, PeerFlags};
use accountd::server::{Server, ServerConfig};
use accountd::store::StoreConfig;
use anyhow::Context;
use daemon::Signals;
use clap::Parser;

/// The rexec market's credit ledger: accounts, grants, idempotent debits, audit.
#[derive(Parser, Debug)]
#[command(name = "accountd", version)]
struct Args {
    /// TOML config file (flags override its values).
    #[arg(long, env = "ACCOUNTD_CONFIG")]
    config: Option<PathBuf>,
    /// Address to listen on [default: 0.0.0.0:7071]; port 0 picks a free port.
    #[arg(long)]
    listen: Option<String>,
    /// The SQLite ledger file.
    #[arg(long)]
    database: Option<PathBuf>,
    /// Create the ledger if it does not exist (otherwise a missing file is an error).
    #[arg(long)]
    init: bool,
    /// Write the bound address to this file once listening.
    #[arg(long)]
    ready_file: Option<PathBuf>,
    /// Cluster CA certificate.
    #[arg(long)]
    ca: Option<PathBuf>,
    /// accountd's certificate (role service, name accountd).
    #[arg(long)]
    cert: Option<PathBuf>,
    /// accountd's private key.
    #[arg(long)]
    key: Option<PathBuf>,
    /// Certificate revocation list.
    #[arg(long)]
    crl: Option<PathBuf>,
    /// Writes per group commit; 1 commits every write on its own [default: 1024].
    #[arg(long)]
    max_batch: Option<usize>,
    /// Largest amount one entry may move, in credits [default: 100000].
    #[arg(long)]
    max_entry: Option<String>,
    /// Most simultaneous connections [default: 1024].
    #[arg(long)]
    max_connections: Option<usize>,
    /// How long a silent connection is kept, e.g. 300 (seconds), 5m or 1.5s [default: 300].
    #[arg(long, value_parser = proto::duration::parse_duration)]
    idle_timeout: Option<Duration>,
    /// Most simultaneous connections from one address, handshakes included [default: 256].
    #[arg(long)]
    max_connections_per_address: Option<usize>,
    /// Most simultaneous connections of one certificate [default: 64].
    #[arg(long)]
    max_connections_per_identity: Option<usize>,
    /// Refused requests of one peer recorded one by one per window [default: 16].
    #[arg(long)]
    refusals_recorded: Option<u32>,
    /// Refused requests of one peer per window before it is cut off [default: 64].
    #[arg(long)]
    max_refusals: Option<u32>,
    /// Seconds of the refusal window, and of a cut-off [default: 60].
    #[arg(long)]
    refusal_window: Option<u64>,
}

/// What to announce, when the config has a `[discovery]` table.
struct AnnounceSetup {
    net: discovery::config::DiscoveryConfig,
    advertise: Option<std::net::SocketAddr>,
}

type Resolved = (ServerConfig, String, Option<PathBuf>, Option<AnnounceSetup>);

fn resolve(args: Args) -> Result<Resolved, ConfigError> {
    let file = match &args.config {
        Some(p) => FileConfig::load(p)?,
        None => FileConfig::default(),
    };
    let tls = certs::TlsPaths::from_settings(
        args.ca.or(file.ca),
        args.cert.or(file.cert),
        args.key.or(file.key),
        args.crl.or(file.crl),
    )
    .map_err(ConfigError::Missing)?;
    let peers = file.limits.peer_limits(PeerFlags {
        per_address: args.max_connections_per_address,
        per_identity: args.max_connections_per_identity,
        refusals_recorded: args.refusals_recorded,
        max_refusals: args.max_refusals,
        refusal_window_secs: args.refusal_window,
    })?;
    let max_entry_text = args
        .max_entry
        .or(file.limits.max_entry)
        .unwrap_or_else(|| DEFAULT_MAX_ENTRY.to_string());
    let max_entry =
        accountd::amount::parse_credits(&max_entry_text).map_err(|e| ConfigError::Invalid {
            what: "max_entry",
            message: e.to_string(),
        })?;
    if max_entry <= 0 {
        return Err(ConfigError::Invalid {
            what: "max_entry",
            message: "must be positive".into(),
        });
    }
    let max_batch = args.max_batch.or(file.limits.max_batch).unwrap_or(1024);
    if max_batch == 0 || max_batch > 65_536 {
        return Err(ConfigError::Invalid {
            what: "max_batch",
            message: "must be 1..=65536".into(),
        });
    }
    let cfg = ServerConfig {
        tls,
        store: StoreConfig {
            path: args
                .database
                .or(file.database)
                .ok_or(ConfigError::Missing("database (--database)"))?,
            create: args.init,
            max_batch,
            max_entry,
        },
        max_connections: args
            .max_connections
            .or(file.limits.max_connections)
            .unwrap_or(1024),
        idle_timeout: args.idle_timeout.unwrap_or(Duration::from_secs(
            file.limits.idle_timeout_secs.unwrap_or(300),
        )),
        max_frame: proto::DEFAULT_MAX_FRAME,
        max_request: proto::limits::MAX_ACCOUNT_REQUEST,
        peers,
    };
    let listen = args
        .listen
        .or(file.listen)
        .unwrap_or_else(|| DEFAULT_LISTEN.to_string());
    let announce = match file.discovery {
        None => None,
        Some(d) => {
            let net = d.resolve().map_err(|e| ConfigError::Invalid {
                what: "[discovery]",
                message: e.to_string(),
            })?;
            let advertise = match &file.advertise {
                None => None,
                Some(text) => Some(
                    std::net::ToSocketAddrs::to_socket_addrs(text.as_str())
                        .ok()
                        .and_then(|mut a| a.next())
                        .filter(|a| !a.ip().is_unspecified() && a.port() != 0)
                        .ok_or_else(|| ConfigError::Invalid {
                            what: "advertise",
                            message: format!(
                                "{text:?} is not an address clients can dial (host:port)"
                            ),
                        })?,
                ),
            };
            if advertise.is_none()
                && listen
                    .parse::<std::net::SocketAddr>()
                    .is_ok_and(|a| a.ip().is_unspecified())
            {
                return Err(ConfigError::Invalid {
                    what: "advertise",
                    message: format!(
                        "accountd listens on {listen}, an address clients cannot dial, so it \
                         cannot announce it; set `advertise = \"host:port\"` in the config file"
                    ),
                });
            }
            Some(AnnounceSetup { net, advertise })
        }
    };
    Ok((cfg, listen, args.ready_file.or(file.ready_file), announce))
}

/// Starts announcing accountd as `Kind::Account` under the name its certificate
/// carries, at `addr`.
fn start_announcing(
    setup: AnnounceSetup,
    cert: &std::path::Path,
    bound: std::net::SocketAddr,
) -> anyhow::Result<()> {
    let name = certs::CertInfo::load(cert)
        .with_context(|| format!("cannot read {}", cert.display()))?
        .identity
        .map(|i| i.name)
        .with_context(|| format!("{} carries no rexec identity to announce", cert.display()))?;
    let addr = setup.advertise.unwrap_or(bound);
    let sender = discovery::net::Sender::new(&setup.net).context("cannot announce accountd")?;
    let cluster = setup.net.cluster.clone();
    tracing::info!(%addr, %name, cluster = %cluster, group = %setup.net.group,
        port = setup.net.port, "announcing accountd");
    tokio::spawn(discovery::net::announce_loop(
        sender,
        setup.net.period,
        std::sync::Arc::new(tokio::sync::Notify::new()),
        move || proto::announce::Announcement {
            cluster: cluster.clone(),
            name: name.clone(),
            addr,
            incarnation: 0,
            seq: 0,
            period_ms: 0,
            kind: proto::announce::Kind::Account,
            summary: None,
        },
    ));
    Ok(())
}

async fn real_main(args: Args) -> anyhow::Result<()> {
    // First, so a signal during start-up is queued (SIGHUP for the reload loop,
    // SIGTERM and SIGINT for a clean shutdown), not fatal.
    let signals = Signals::install()?;
    let (cfg, listen, ready_file, announce) = resolve(args)?;
    let cert = cfg.tls.cert.clone();
    if cfg.tls.crl.is_none() {
        tracing::warn!(
            "no revocation list configured (--crl or `crl` in the config file): revoked certificates are accepted"
        );
    }
    let db = cfg.store.path.clone();
    let server = Server::open(cfg)?;
    certs::reload_on_sighup(server.tls(), signals.hangups);
    let listener = tokio::net::TcpListener::bind(&listen)
        .await
        .with_context(|| format!("cannot listen on {listen}"))?;
    let addr = listener
        .local_addr()
        .context("cannot read the bound address")?;
    tracing::info!(%addr, database = %db.display(), "accountd listening");
    if let Some(setup) = announce {
        start_announcing(setup, &cert, addr)?;
    }
    if let Some(path) = ready_file {
        daemon::write_ready_file(&path, addr)?;
    }
    server.run(listener, signals.stop.recv()).await;
    Ok(())
}

fn main() -> ExitCode {
    let args = Args::parse();
    daemon::run("accountd", real_main(args))
}
