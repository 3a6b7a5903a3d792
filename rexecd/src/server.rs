//! The daemon's top level: [`Server::new`] loads the TLS material, opens rexecd's
//! parent cgroup and sweeps job cgroups an earlier run left behind (killing their
//! processes), and opens the market (its debit journal resends what an earlier run
//! left unacknowledged); [`Server::serve`] accepts connections until the shutdown
//! future completes, running one session task per connection; then it tells every
//! session to stop (each destroys its job, settles its charge and reports it), waits
//! for them, sweeps once more so that no job cgroup survives rexecd, and gives accountd
//! a moment to acknowledge the last charges. [`run`] does both in one call. With
//! `cpus` set, the parent cgroup is confined to those CPUs before any job starts.
//!
//! At most `max_connections` connections are open at once (a connection holds its slot
//! from accept, through the TLS handshake, to the end of its session); one over the
//! limit is accepted and closed at once, so the accept loop never stalls and a flood of
//! idle handshakes cannot exhaust memory or file descriptors. Below that, one remote
//! address holds at most `max_connections_per_address` (counted from accept, so
//! unfinished handshakes count) and one certificate at most
//! `max_connections_per_identity` (counted after the handshake; one over is answered
//! `Busy` and closed), so no single client or user can take every slot. The accept
//! loop is [`daemon::serve::Gate`]'s, with rexecd's wording of its refusal warning.
//!
//! Once its handshake has succeeded, a connection is read through a buffer of up to
//! [`READ_BUFFER`] bytes under TLS: rustls asks its transport for 4 KiB at a time, and
//! serving those reads from one larger read saves system calls when a client streams
//! stdin in. The buffer is not allocated before ([`certs::LazyBufReader`]), so a
//! connection that never authenticates costs a few KiB, not 256, and it starts at
//! 16 KiB and grows only while reads fill it, so a launch of a short job does not zero
//! and fault in 256 KiB either.
//!
//! The TLS configuration is a [`ReloadableAcceptor`]: each handshake uses the current
//! one, and the binary reloads it on SIGHUP, so a revoked certificate is refused from
//! then on without restarting rexecd (which would kill every job).
//!
//! The binary binds the listener, installs SIGTERM/SIGINT as the shutdown future and
//! writes its ready file between `new` and `serve`; tests can do the same with a
//! listener on port 0.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use certs::{LazyBufReader, ReloadableAcceptor};
use daemon::ConnectionCaps;
use daemon::admit::NotAdmitted;
use daemon::serve::{AcceptLimits, Gate, Refused};
use proto::Framed;
use proto::node::{ErrorCode, ErrorReply, FromNode};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;

use crate::cgroup::{CgroupError, JobCgroups};
use crate::config::Config;
use crate::market::{Market, MarketError};
use crate::registry::Registry;
use crate::session::{self, Shared};

/// Bytes read from a client's socket at a time (as the `rexec` client reads a node's).
/// Every authenticated connection holds one such buffer, so they take at most
/// `max_connections` times this much memory, and one user at most
/// `max_connections_per_identity` times.
pub const READ_BUFFER: usize = 256 * 1024;

/// How long sessions get to wind down at shutdown before they are cut off.
const STOP_GRACE: Duration = Duration::from_secs(15);
/// How long accountd gets at shutdown to acknowledge the last charges (the rest stay
/// in the journal for the next start).
const SETTLE_GRACE: Duration = Duration::from_secs(3);

/// rexecd's wording of the rate-limited warning about connections closed at a limit.
fn log_refusal(remote: SocketAddr, refused: u64, why: &Refused) {
    let why = match why {
        Refused::MaxConnections(limit) => {
            format!("connection limit reached (max_connections = {limit})")
        }
        other => other.to_string(),
    };
    tracing::warn!(%remote, refused, "{why}; closing new connections at once");
}

/// Why the server could not start. Each variant chains its cause as its `source`
/// and does not repeat it in its message, so `daemon::run` (or anyhow's `{:#}`)
/// prints every cause once.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServerError {
    /// The certificate, key, CA or CRL could not be loaded.
    #[error("cannot load the TLS configuration")]
    Tls(#[from] certs::CertError),
    /// The job cgroups could not be set up.
    #[error("cannot set up job cgroups")]
    Cgroup(#[from] CgroupError),
    /// A blocking set-up task failed.
    #[error("start-up task failed")]
    Task(#[from] tokio::task::JoinError),
    /// The market (its debit journal) could not be opened.
    #[error("cannot open the market")]
    Market(#[from] MarketError),
    /// Announcing (a `[discovery]` table is given) could not start.
    #[error(transparent)]
    Announce(#[from] crate::announce::AnnounceError),
    /// The record of started signed batch ranks could not be opened.
    #[error("cannot open the record of started batch ranks")]
    Started(#[from] crate::signed::MarkerError),
    /// The metrics address (`[metrics] listen`) could not be bound.
    #[error("cannot serve metrics on {addr} ([metrics] listen)")]
    Metrics {
        /// The address.
        addr: SocketAddr,
        /// What the OS said.
        source: std::io::Error,
    },
}

/// A prepared server: TLS loaded, cgroups opened and swept.
pub struct Server {
    tls: Arc<ReloadableAcceptor>,
    started: crate::signed::StartedRanks,
    fences: crate::signed::fence::Fences,
    config: Config,
    cgroups: JobCgroups,
    market: Arc<Market>,
    announcer: Option<crate::announce::Announcer>,
    metrics: Option<exposition::Endpoint>,
    meters: crate::metrics::SessionMeters,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Server {
    /// Loads TLS, opens the parent cgroup and removes every job cgroup under it.
    pub async fn new(config: Config) -> Result<Server, ServerError> {
        let tls = Arc::new(ReloadableAcceptor::load(config.tls.clone())?);
        if config.tls.crl.is_none() {
            tracing::warn!(
                "no CRL configured: revoked certificates will be accepted; set `crl` in the \
                 config file or pass --crl"
            );
        }
        // Before anything is created, so a metrics address in use stops rexecd bare.
        let metrics = match config.metrics {
            Some(addr) => Some(
                exposition::Endpoint::bind(addr)
                    .await
                    .map_err(|source| ServerError::Metrics { addr, source })?,
            ),
            None => None,
        };
        let parent = config.cgroup_parent.clone();
        let cpus = config.cpus.clone();
        let weight = config.cgroup_weight;
        let favor = config.favor_dynmods;
        let cgroups = tokio::task::spawn_blocking(move || -> Result<JobCgroups, CgroupError> {
            if favor {
                favor_dynmods();
            }
            let cgroups = JobCgroups::detect_pinned(&parent, cpus)?;
            if let Some(weight) = weight {
                let written = cgroups.set_parent_weight(weight)?;
                tracing::info!(weight, written, "parent cgroup weighted against other work");
            }
            let swept = cgroups.sweep_stale()?;
            if !swept.is_empty() {
                tracing::warn!(cgroups = ?swept, "removed job cgroups left by an earlier run");
            }
            Ok(cgroups)
        })
        .await??;
        let pinned = cgroups
            .cpus()
            .map_or_else(|| "all".to_string(), ToString::to_string);
        tracing::info!(node = %config.name, parent = %cgroups.parent_path().display(),
            version = ?cgroups.version(), cpus = %pinned, "job cgroups ready");
        let connector = match config.market.ledger {
            Some(_) => Some(certs::connector(&config.tls)?),
            None => None,
        };
        let market = Market::start(
            &config.name,
            config.market.clone(),
            cgroups.clone(),
            connector,
        )
        .await?;
        let dir = config.batch.started.clone();
        let (started, pruned) = tokio::task::spawn_blocking(move || {
            crate::signed::StartedRanks::open(&dir, std::time::SystemTime::now())
        })
        .await??;
        if pruned > 0 {
            tracing::info!(pruned, "removed markers of expired signed batch ranks");
        }
        let fences = crate::signed::fence::Fences::open(&crate::signed::fence::dir_for(
            &config.batch.started,
        ))?;
        Ok(Server {
            tls,
            started,
            fences,
            config,
            cgroups,
            market,
            announcer: None,
            metrics,
            meters: Default::default(),
        })
    }

    /// With a `[discovery]` table: starts announcing this node, reachable at `bound`
    /// (the listener's address) unless `advertise` says otherwise, and, when no
    /// accountd is configured, listening for accountd's announcements. Without the
    /// table, does nothing. Announcing stops when [`Server::serve`] ends.
    pub async fn start_announcing(
        &mut self,
        bound: std::net::SocketAddr,
    ) -> Result<(), ServerError> {
        let Some(cfg) = &self.config.announce else {
            return Ok(());
        };
        if self.announcer.is_some() {
            return Ok(());
        }
        let accountd_name = self
            .config
            .market
            .ledger
            .as_ref()
            .filter(|l| l.addresses.is_empty())
            .map(|l| l.server_name.clone());
        let announcer = crate::announce::Announcer::start(
            cfg,
            &self.config.name,
            bound,
            Arc::clone(&self.market),
            self.config.cpus.as_ref().map(|set| set.iter().collect()),
            accountd_name,
        )
        .await?;
        self.announcer = Some(announcer);
        Ok(())
    }

    /// The bound metrics address, when serving metrics.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics.as_ref().and_then(|m| m.addr().ok())
    }

    /// The TLS configuration new connections use; [`ReloadableAcceptor::reload`] (the
    /// binary calls it on SIGHUP) picks up a new CRL or certificate.
    pub fn tls(&self) -> Arc<ReloadableAcceptor> {
        Arc::clone(&self.tls)
    }

    /// Accepts connections until `shutdown` completes, then destroys every job and
    /// returns.
    pub async fn serve(self, listener: TcpListener, shutdown: impl Future) {
        let (stop_tx, stop_rx) = watch::channel(false);
        let registry = Arc::new(
            Registry::new(self.cgroups.clone(), Arc::clone(&self.market))
                .with_max_ranks_per_user(self.config.max_ranks_per_user),
        );
        let shared = Arc::new(Shared {
            config: self.config,
            registry,
            stop: stop_rx.clone(),
            started: self.started,
            fences: self.fences,
            meters: self.meters,
        });
        let metrics = self.metrics.map(|endpoint| {
            let registry = crate::metrics::registry(Arc::clone(&self.market), &shared.meters);
            let mut stop = stop_rx;
            tokio::spawn(endpoint.serve(Arc::new(registry), async move {
                let _ = stop.wait_for(|s| *s).await;
            }))
        });
        let ends = tokio::spawn(crate::signed::ends::deliver(
            shared.started.clone(),
            Arc::clone(&self.market),
            shared.stop.clone(),
        ));
        let mut sessions = JoinSet::new();
        let gate = Gate::new(AcceptLimits {
            max_connections: shared.config.max_connections,
            per_address: shared.config.max_connections_per_address,
            per_identity: shared.config.max_connections_per_identity,
        })
        .with_refusal_log(log_refusal);
        let caps = gate.caps();
        if let Ok(addr) = listener.local_addr() {
            tracing::info!(node = %shared.config.name, %addr, "listening");
        }
        gate.run(&listener, shutdown, &mut sessions, |tcp, remote| {
            connection(
                Arc::clone(&shared),
                self.tls.current(),
                Arc::clone(&caps),
                tcp,
                remote,
            )
        })
        .await;
        drop(listener);
        if let Some(announcer) = self.announcer {
            announcer.shutdown().await;
        }
        tracing::info!(
            jobs = shared.registry.len(),
            "shutting down; destroying every job"
        );
        let _ = stop_tx.send(true);
        if !daemon::serve::drain(&mut sessions, STOP_GRACE).await {
            tracing::warn!("sessions did not end in time; cutting them off");
        }
        let _ = ends.await;
        crate::signed::ends::flush(&shared.started, &self.market, SETTLE_GRACE).await;
        let cgroups = self.cgroups;
        let swept = tokio::task::spawn_blocking(move || {
            let swept = cgroups.sweep_stale();
            let removed = cgroups.remove_parent();
            (swept, removed)
        })
        .await;
        match swept {
            Ok((Ok(_), Ok(()))) => tracing::info!("stopped; no job cgroup left"),
            Ok((swept, removed)) => {
                if let Err(e) = swept {
                    tracing::error!(error = %e, "cannot remove every job cgroup at shutdown");
                }
                if let Err(e) = removed {
                    tracing::warn!(error = %e, "cannot remove the parent cgroup");
                }
            }
            Err(e) => tracing::error!(error = %e, "shutdown sweep failed"),
        }
        self.market.shutdown(SETTLE_GRACE).await;
        if let Some(metrics) = metrics {
            let _ = metrics.await;
        }
    }
}

/// One admitted connection: its TLS handshake (given up when rexecd stops), its
/// identity's place, then its session.
async fn connection(
    shared: Arc<Shared>,
    acceptor: TlsAcceptor,
    caps: Arc<ConnectionCaps>,
    tcp: TcpStream,
    remote: SocketAddr,
) {
    crate::metrics::ACCEPTED
        .scope(
            std::time::Instant::now(),
            session_of(shared, acceptor, caps, tcp, remote),
        )
        .await;
}

/// [`connection`]'s work, with its accept time set for the launch latency.
async fn session_of(
    shared: Arc<Shared>,
    acceptor: TlsAcceptor,
    caps: Arc<ConnectionCaps>,
    tcp: TcpStream,
    remote: SocketAddr,
) {
    let remote = remote.to_string();
    let mut stop = shared.stop.clone();
    let handshake = tokio::select! {
        done = certs::accept(&acceptor, LazyBufReader::new(tcp)) => done,
        _ = stop.wait_for(|s| *s) => return,
    };
    let (mut stream, peer) = match handshake {
        Ok(x) => x,
        Err(e) => {
            daemon::log_not_admitted!(remote, NotAdmitted::Handshake(e));
            return;
        }
    };
    let _identity_slot = match caps.admit_identity(&peer) {
        Ok(s) => s,
        Err(e) => {
            shared.meters.refused(ErrorCode::Busy);
            let message = e.to_string();
            daemon::log_not_admitted!(remote, NotAdmitted::OverCap(e));
            return turn_away(stream, message).await;
        }
    };
    stream.get_mut().0.buffer(READ_BUFFER);
    session::serve(shared, stream, peer, remote).await;
}

/// Answers an authenticated connection over its identity's cap with `Busy`, and closes it.
async fn turn_away<S>(stream: S, message: String)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let mut framed = Framed::new(stream, proto::DEFAULT_MAX_FRAME);
    let reply = FromNode::Error(ErrorReply::new(ErrorCode::Busy, message));
    let _ = tokio::time::timeout(Duration::from_secs(5), async {
        let _ = framed.send(&reply).await;
        let _ = framed.get_mut().shutdown().await;
    })
    .await;
}

/// Prepares a server and serves `listener` until `shutdown` completes.
pub async fn run(
    listener: TcpListener,
    config: Config,
    shutdown: impl Future,
) -> Result<(), ServerError> {
    let mut server = Server::new(config).await?;
    if let Ok(bound) = listener.local_addr() {
        server.start_announcing(bound).await?;
    }
    server.serve(listener, shutdown).await;
    Ok(())
}

/// Sets `favordynmods` on the host's cgroup2 mounts (see [`crate::cgroup::dynmods`]);
/// a host that refuses it still runs jobs, each launch waiting for the kernel.
fn favor_dynmods() {
    use crate::cgroup::dynmods::{self, Outcome};
    match dynmods::favor() {
        Ok(done) if done.is_empty() => tracing::info!(
            "no cgroup2 mount to set favordynmods on; each launch waits for an RCU grace period"
        ),
        Ok(done) => {
            for outcome in done {
                match outcome {
                    Outcome::Remounted(path) => tracing::info!(mount = %path.display(),
                        "set favordynmods: moving a job into its cgroup no longer waits"),
                    Outcome::AlreadySet(path) => tracing::debug!(mount = %path.display(),
                        "favordynmods already set"),
                }
            }
        }
        Err(e) => tracing::warn!(error = %e,
            "cannot set favordynmods (set favor_dynmods = false to stop trying); each launch \
             waits for an RCU grace period"),
    }
}
