//! The vexecd daemon around the library: [`config`] (the TOML file and
//! flags), [`receiver`] (announcements into the node table), [`server`]
//! (the selector protocol over mutual TLS), [`metrics`] (Prometheus, when
//! `[metrics] listen` is set), [`recorder`] (what
//! requests record for the metrics), [`page`] (the live market page served beside the
//! metrics), [`prove`] (a node's move to a
//! new address believed only once its certificate answers there), [`stats`] (the shared table,
//! counters and the periodic summary line). [`Daemon::start`] checks the
//! TLS material and binds every socket, so a daemon that starts is one that
//! serves; [`Daemon::run`] serves until told to stop.

pub mod config;
pub mod metrics;
pub mod page;
pub mod prove;
pub mod receiver;
pub mod recorder;
pub mod server;
pub mod stats;

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use certs::{CertInfo, PeerIdentity, ReloadableAcceptor, Role};
use discovery::net::{Receiver, Sender, announce_loop};
use proto::announce::{Announcement, Kind};
use tokio::net::TcpListener;
use tokio::sync::Notify;

use self::config::Config;
use self::server::ServerLimits;
use self::stats::{SUMMARY_INTERVAL, Shared};
use crate::table::NodeTable;

/// Why the daemon cannot start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    /// The TLS material is unusable.
    #[error(transparent)]
    Tls(#[from] certs::CertError),
    /// The certificate is not the selector's.
    #[error(
        "certificate {path} is for {got}, but this selector is configured as service {name}; issue it with `rexec-certs issue service {name}` or fix `name`"
    )]
    WrongCertificate {
        /// The certificate file.
        path: PathBuf,
        /// The configured name.
        name: String,
        /// What the certificate names.
        got: String,
    },
    /// A socket cannot be set up.
    #[error("{what}: {cause}")]
    Io {
        /// What was being done.
        what: String,
        /// The cause (in the message, so not a `source` too).
        cause: std::io::Error,
    },
    /// An announcement socket cannot be set up (the message says it all,
    /// so the error is not a `source`).
    #[error("{0}")]
    Discovery(discovery::net::NetError),
}

/// A started daemon: TLS checked, every socket bound.
pub struct Daemon {
    config: Config,
    tls: Arc<ReloadableAcceptor>,
    listener: TcpListener,
    receiver: Receiver,
    sender: Sender,
    addr: SocketAddr,
    advertised: SocketAddr,
    shared: Arc<Shared>,
    prover: tokio_rustls::TlsConnector,
    metrics: Option<exposition::Endpoint>,
    /// The ledger panel's client side (`[ledger]`).
    ledger: Option<tokio_rustls::TlsConnector>,
}

impl Daemon {
    /// Check the TLS material and bind the TLS listener, the announcement
    /// listener(s) and the announcement sender. Call inside a tokio runtime.
    pub async fn start(config: Config) -> Result<Daemon, StartError> {
        let tls = Arc::new(ReloadableAcceptor::load(config.tls.clone())?);
        let expected = PeerIdentity::new(Role::Service, &config.name)?;
        let info = CertInfo::load(&config.tls.cert)?;
        if info.identity.as_ref() != Some(&expected) {
            return Err(StartError::WrongCertificate {
                path: config.tls.cert.clone(),
                name: config.name.clone(),
                got: info
                    .identity
                    .map_or_else(|| "no rexec identity".into(), |i| i.to_string()),
            });
        }
        let listener = TcpListener::bind(config.listen)
            .await
            .map_err(|cause| StartError::Io {
                what: format!("cannot listen on {}", config.listen),
                cause,
            })?;
        let addr = listener.local_addr().map_err(|cause| StartError::Io {
            what: "cannot read the bound address".into(),
            cause,
        })?;
        let advertised = match config.advertise {
            Some(a) if a.port() == 0 => SocketAddr::new(a.ip(), addr.port()),
            Some(a) => a,
            None => addr,
        };
        let receiver =
            Receiver::bind(&config.discovery, config.udp_listen).map_err(StartError::Discovery)?;
        let sender = Sender::new(&config.discovery).map_err(StartError::Discovery)?;
        let shared = Arc::new(Shared::new(NodeTable::new(config.table.clone())));
        // The selector's own certificate opens the handshakes that prove nodes' moves.
        let prover = certs::connector(&config.tls)?;
        // The ledger reader's certificate, loaded now so that a bad one stops the start.
        let ledger = match &config.ledger {
            Some(l) => Some(certs::connector(&l.tls)?),
            None => None,
        };
        let metrics =
            match config.metrics {
                Some(addr) => Some(exposition::Endpoint::bind(addr).await.map_err(|cause| {
                    StartError::Io {
                        what: format!("cannot serve metrics on {addr} ([metrics] listen)"),
                        cause,
                    }
                })?),
                None => None,
            };
        Ok(Daemon {
            config,
            tls,
            listener,
            receiver,
            sender,
            addr,
            advertised,
            shared,
            prover,
            metrics,
            ledger,
        })
    }

    /// The bound metrics address, when serving metrics.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics.as_ref().and_then(|m| m.addr().ok())
    }

    /// The bound TLS address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The bound unicast announcement address, when listening on one.
    pub fn udp_addr(&self) -> Option<SocketAddr> {
        self.receiver.unicast_addr()
    }

    /// The TLS configuration (reload it on SIGHUP).
    pub fn tls(&self) -> Arc<ReloadableAcceptor> {
        self.tls.clone()
    }

    /// The one line saying where the daemon listens and what it hears.
    pub fn describe(&self) -> String {
        let d = &self.config.discovery;
        let mut hears = Vec::new();
        if d.multicast {
            hears.push(format!(
                "multicast group {}:{} on interface {} (ttl {})",
                d.group, d.port, d.interface, d.ttl
            ));
        }
        if let Some(u) = self.udp_addr() {
            hears.push(format!("unicast on {u}"));
        }
        let mut line = format!(
            "selector {} listening on {} (announced as {}), cluster {}; hearing {}; announcing every {:?}",
            self.config.name,
            self.addr,
            self.advertised,
            d.cluster,
            hears.join(" and "),
            d.period,
        );
        if !d.unicast.is_empty() {
            let peers: Vec<String> = d.unicast.iter().map(|a| a.to_string()).collect();
            line.push_str(&format!(" (also to {})", peers.join(", ")));
        }
        line
    }

    /// Serve until `shutdown` completes.
    pub async fn run(self, shutdown: impl Future) {
        let Daemon {
            config,
            tls,
            listener,
            receiver,
            sender,
            advertised,
            shared,
            prover,
            metrics,
            ledger,
            ..
        } = self;
        let period = config.discovery.period;
        let mut background = tokio::task::JoinSet::new();
        let (claims, held) = prove::channel();
        background.spawn(prove::run(shared.clone(), prover, held));
        if let Some(endpoint) = metrics {
            let registry = Arc::new(self::metrics::registry(shared.clone(), shared.recorder()));
            let mut market =
                page::Market::new(shared.clone(), &config.name, &config.discovery.cluster);
            if let (Some(l), Some(connector)) = (&config.ledger, ledger) {
                let panel = Arc::new(page::ledger::Ledger::new(&l.accountd));
                background.spawn(page::ledger::poll(panel.clone(), l.clone(), connector));
                market = market.with_ledger(panel);
            }
            let market = Arc::new(market);
            background.spawn(page::sample(market.clone(), period));
            background.spawn(endpoint.serve_routes(
                registry,
                vec![market.route()],
                std::future::pending::<()>(),
            ));
        }
        background.spawn(receiver::run(receiver, shared.clone(), claims, period));
        background.spawn(stats::log_summaries(shared.clone(), SUMMARY_INTERVAL));
        let me = Announcement {
            cluster: config.discovery.cluster.clone(),
            name: config.name.clone(),
            addr: advertised,
            incarnation: 0,
            seq: 0,
            period_ms: 0,
            kind: Kind::Selector,
            summary: None,
        };
        background.spawn(announce_loop(
            sender,
            period,
            Arc::new(Notify::new()),
            move || me.clone(),
        ));
        let limits = ServerLimits {
            max_connections: config.max_connections,
            per_address: config.max_connections_per_address,
            per_identity: config.max_connections_per_identity,
            idle_timeout: config.idle_timeout,
        };
        server::serve(listener, tls, shared.clone(), limits, shutdown).await;
        background.shutdown().await;
        tracing::info!(
            "vexecd stopped: {}",
            stats::summary_line(&shared.stats(std::time::Instant::now()), shared.proofs())
        );
    }
}
