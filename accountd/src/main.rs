//! `accountd`: the credit ledger daemon. Parses flags and the config file,
//! opens the ledger and TLS material, binds, writes the bound address to the
//! ready file, and serves until SIGTERM or SIGINT. SIGHUP reloads the TLS files
//! (CA, certificate, key, CRL) without dropping connections. With a `[discovery]`
//! table it announces itself to the cluster (see [`accountd::config`]).

use std::path::PathBuf;
use std::process::ExitCode;

use accountd::config::{
    ConfigError, DEFAULT_LISTEN, DEFAULT_MAX_BATCH, DEFAULT_MAX_ENTRY, Flags, Settings,
};
use accountd::server::{Server, ServerConfig};
use accountd::store::StoreConfig;
use anyhow::Context;
use clap::Parser;
use daemon::Signals;

/// What to announce, when the config has a `[discovery]` table.
struct AnnounceSetup {
    net: discovery::config::DiscoveryConfig,
    advertise: Option<std::net::SocketAddr>,
}

/// The server's config, where to listen, the ready file, what to announce and
/// where to serve metrics.
struct Resolved {
    cfg: ServerConfig,
    listen: String,
    ready_file: Option<PathBuf>,
    announce: Option<AnnounceSetup>,
    metrics: Option<std::net::SocketAddr>,
}

/// The flags over the file over the defaults, each value checked.
fn resolve(flags: Flags) -> Result<Resolved, ConfigError> {
    let s = Settings::load(&flags)?;
    let metrics = s.metrics_addr()?;
    let tls = s.tls.paths().map_err(ConfigError::from)?;
    let peers = s.limits.peer_limits()?;
    let max_entry_text = s
        .limits
        .max_entry
        .clone()
        .unwrap_or_else(|| DEFAULT_MAX_ENTRY.to_string());
    let max_entry = money::parse_credits(&max_entry_text).map_err(|e| ConfigError::Invalid {
        what: "max_entry",
        message: e.to_string(),
    })?;
    if max_entry <= 0 {
        return Err(ConfigError::Invalid {
            what: "max_entry",
            message: "must be positive".into(),
        });
    }
    let max_batch = s.limits.max_batch.unwrap_or(DEFAULT_MAX_BATCH);
    if max_batch == 0 || max_batch > 65_536 {
        return Err(ConfigError::Invalid {
            what: "max_batch",
            message: "must be 1..=65536".into(),
        });
    }
    let postgres = match &s.store {
        Some(store) => store.postgres()?,
        None => None,
    };
    let anchors = match &s.store {
        Some(store) => store.anchors(&tls.key, &tls.cert)?,
        None => None,
    };
    let cfg = ServerConfig {
        tls,
        store: StoreConfig {
            path: match (&s.database, &postgres) {
                (Some(_), Some(_)) => {
                    return Err(ConfigError::Invalid {
                        what: "database",
                        message:
                            "the ledger is either a SQLite database or [store] postgres, not both"
                                .into(),
                    });
                }
                (Some(p), None) => p.clone(),
                (None, Some(_)) => PathBuf::new(),
                (None, None) => return Err(ConfigError::Missing("database (--database)")),
            },
            create: flags.init,
            postgres,
            anchors,
            max_batch,
            max_entry,
        },
        max_connections: s.limits.accept_limits()?.max_connections,
        idle_timeout: s.idle_timeout(&flags),
        max_frame: proto::DEFAULT_MAX_FRAME,
        max_request: proto::limits::MAX_ACCOUNT_REQUEST,
        peers,
    };
    let listen = s.listen.unwrap_or_else(|| DEFAULT_LISTEN.to_string());
    let announce = match s.discovery {
        None => None,
        Some(d) => {
            let net = d.resolve().map_err(|e| ConfigError::Invalid {
                what: "[discovery]",
                message: e.to_string(),
            })?;
            let advertise = daemon::announce::advertised(
                s.advertise.as_deref(),
                &listen,
                "accountd",
                "in the config file",
            )
            .map_err(|e| ConfigError::Invalid {
                what: "advertise",
                message: e.described(),
            })?;
            Some(AnnounceSetup { net, advertise })
        }
    };
    Ok(Resolved {
        cfg,
        listen,
        ready_file: s.ready_file,
        announce,
        metrics,
    })
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
    let net = &setup.net;
    tracing::info!(%addr, %name, cluster = %net.cluster, group = %net.group,
        port = net.port, "announcing accountd");
    daemon::announce::announce_service(net, proto::announce::Kind::Account, name, addr)
        .context("cannot announce accountd")?;
    Ok(())
}

async fn real_main(flags: Flags) -> anyhow::Result<()> {
    // First, so a signal during start-up is queued (SIGHUP for the reload loop,
    // SIGTERM and SIGINT for a clean shutdown), not fatal.
    let signals = Signals::install()?;
    let Resolved {
        cfg,
        listen,
        ready_file,
        announce,
        metrics,
    } = resolve(flags)?;
    let cert = cfg.tls.cert.clone();
    if cfg.tls.crl.is_none() {
        tracing::warn!(
            "no revocation list configured (--crl or `crl` in the config file): revoked certificates are accepted"
        );
    }
    let db = match &cfg.store.postgres {
        Some(pg) => format!("postgres: {}", pg.conninfo),
        None => cfg.store.path.display().to_string(),
    };
    let mut server = Server::open(cfg)?;
    if let Some(addr) = metrics {
        let endpoint = exposition::Endpoint::bind(addr)
            .await
            .with_context(|| format!("cannot serve metrics on {addr} ([metrics] listen)"))?;
        server = server.with_metrics(endpoint);
    }
    daemon::reload_on_sighup(server.tls(), signals.hangups);
    let (listener, addr) = daemon::bind(&listen).await?;
    tracing::info!(%addr, database = %db, "accountd listening");
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
    let flags = Flags::parse();
    daemon::run("accountd", real_main(flags))
}
