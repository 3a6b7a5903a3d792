//! Putting the queue together: the TLS material, the store read back into the
//! live queue, accountd, the market refresher, the announcer, the server and
//! the decision loop. [`open`] reads and opens everything that can fail
//! before the daemon listens; [`serve`] then takes a bound listener and a
//! shutdown future, so the binary and the tests drive the same code ([`run`]
//! is both at once).

use std::future::Future;
use std::sync::{Arc, Mutex};

use tokio::net::TcpListener;

use crate::config::Config;
use crate::queue::Queue;
use crate::store::{Reader, Store, StoreError};
use crate::{Shared, market};

/// Why the queue could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    /// The store could not be opened.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The TLS material is unusable.
    #[error(transparent)]
    Tls(#[from] certs::CertError),
    /// The certificate carries no rexec identity.
    #[error("{0} carries no rexec identity; issue batchd a service certificate")]
    NoIdentity(String),
    /// The CA or CRL for checking signed jobs is unusable.
    #[error(transparent)]
    Trust(#[from] certs::jobsign::JobSignError),
    /// Announcing failed.
    #[error("cannot announce the queue: {0}")]
    Announce(String),
    /// The metrics address cannot be bound.
    #[error("cannot serve metrics on {addr} ([metrics] listen): {cause}")]
    Metrics {
        /// The address.
        addr: std::net::SocketAddr,
        /// Why.
        cause: std::io::Error,
    },
}

/// Everything the queue reads and opens before it serves: the TLS material,
/// its identity, the store read back, the metrics address bound. Made by
/// [`open`] before the daemon listens, so that a key it cannot read or a
/// store it cannot open stops it before it ever says it is listening.
pub struct Opened {
    shared: Arc<Shared>,
    acceptor: Arc<certs::ReloadableAcceptor>,
    name: String,
    endpoint: Option<exposition::Endpoint>,
    pending_debits: Vec<crate::store::PendingDebit>,
    commands_rx: tokio::sync::mpsc::UnboundedReceiver<crate::sched::Command>,
    journal_rx: tokio::sync::mpsc::UnboundedReceiver<crate::store::PendingDebit>,
}

/// Opens everything and serves `listener` until `shutdown` completes; SIGHUPs
/// from `hangups` (when given) reload the TLS files.
pub async fn run(
    cfg: Config,
    listener: TcpListener,
    hangups: Option<tokio::signal::unix::Signal>,
    shutdown: impl Future,
) -> Result<(), StartError> {
    serve(open(cfg).await?, listener, hangups, shutdown).await
}

/// Reads the TLS files, the identity and the store, and binds the metrics
/// address: everything that can fail before the queue serves.
pub async fn open(cfg: Config) -> Result<Opened, StartError> {
    let acceptor = Arc::new(certs::ReloadableAcceptor::load(cfg.tls.clone())?);
    let connector = certs::connector(&cfg.tls)?;
    let verifier = crate::verify::Verifier::load(&cfg.tls)?;
    let name = certs::CertInfo::load(&cfg.tls.cert)?
        .identity
        .map(|i| i.name)
        .ok_or_else(|| StartError::NoIdentity(cfg.tls.cert.display().to_string()))?;
    let (store, loaded) = Store::open_at(&cfg.location, cfg.max_batch, crate::unix_now_ms())?;
    let reader = Reader::open_at(&cfg.location)?;
    let (queue, pending_debits) = Queue::from_loaded(loaded, cfg.tick);
    tracing::info!(jobs = queue.jobs.len(), store = %cfg.location, policy = %cfg.policy, epoch_ms = queue.epoch_ms, "queue opened");
    let (commands, commands_rx) = tokio::sync::mpsc::unbounded_channel();
    let (journal, journal_rx) = tokio::sync::mpsc::unbounded_channel();
    let ledger = crate::ledger::Ledger::new(
        connector.clone(),
        cfg.accountd_name.clone(),
        cfg.accountd.clone(),
        name.clone(),
    );
    let shared = Arc::new(Shared {
        queue: Mutex::new(queue),
        store,
        reader,
        ledger,
        journal,
        market: Mutex::new(market::Market::default()),
        connector,
        verifier,
        commands,
        metrics: crate::metrics::Recorder::default(),
        lease: crate::lease::start(&cfg.location, &name, cfg.lease)?,
        cfg,
    });
    // Bound before anything is spawned: a queue that cannot serve its metrics does not start.
    let endpoint = match shared.cfg.metrics {
        Some(addr) => Some(
            exposition::Endpoint::bind(addr)
                .await
                .map_err(|cause| StartError::Metrics { addr, cause })?,
        ),
        None => None,
    };
    Ok(Opened {
        shared,
        acceptor,
        name,
        endpoint,
        pending_debits,
        commands_rx,
        journal_rx,
    })
}

/// Serves `listener` with what [`open`] opened until `shutdown` completes;
/// SIGHUPs from `hangups` (when given) reload the TLS files.
pub async fn serve(
    opened: Opened,
    listener: TcpListener,
    hangups: Option<tokio::signal::unix::Signal>,
    shutdown: impl Future,
) -> Result<(), StartError> {
    let shared = opened.shared;
    let acceptor = opened.acceptor;
    if let Some(h) = hangups {
        daemon::reload_on_sighup(acceptor.clone(), h);
    }
    let refresher = tokio::spawn(refresh_market(shared.clone()));
    let deliverer = tokio::spawn(crate::journal::deliver(
        shared.clone(),
        opened.pending_debits,
        opened.journal_rx,
    ));
    let bound = listener
        .local_addr()
        .map_err(|e| StartError::Announce(e.to_string()))?;
    let announcer = match &shared.cfg.discovery {
        Some(d) => {
            let addr = shared.cfg.advertise.unwrap_or(bound);
            let name = opened.name;
            tracing::info!(%addr, %name, cluster = %d.cluster, group = %d.group,
                port = d.port, "announcing the queue");
            let kind = proto::announce::Kind::Batch;
            Some(
                daemon::announce::announce_service(d, kind, name, addr)
                    .map_err(|e| StartError::Announce(e.to_string()))?,
            )
        }
        None => None,
    };
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let stopped = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|s| *s).await;
    };
    let metrics = opened.endpoint.map(|e| {
        let registry = Arc::new(crate::metrics::registry(shared.clone()));
        tokio::spawn(e.serve(registry, stopped(stop_rx.clone())))
    });
    let server = crate::server::serve(shared.clone(), acceptor, listener, stopped(stop_rx.clone()));
    let sched = crate::sched::lead::lead(shared.clone(), opened.commands_rx, stopped(stop_rx));
    let stop = async move {
        shutdown.await;
        let _ = stop_tx.send(true);
    };
    tokio::join!(server, sched, stop);
    refresher.abort();
    deliverer.abort();
    if let Some(m) = metrics {
        let _ = m.await;
    }
    if let Some(a) = announcer {
        a.abort();
    }
    tracing::info!("batchd stopped");
    Ok(())
}

/// Learns the market every tick (and accountd's address when not configured).
async fn refresh_market(shared: Arc<Shared>) {
    let mut tick = tokio::time::interval(shared.cfg.tick);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut failing = false;
    loop {
        tick.tick().await;
        let selectors = market::selectors(&shared.cfg).await;
        match market::learn(&shared.connector, &selectors, shared.cfg.processors).await {
            Ok(learnt) => {
                if let Some(a) = learnt.accountd {
                    shared.ledger.learn(a);
                }
                let mut m = shared.lock_market();
                if m.nodes != learnt.nodes {
                    tracing::info!(
                        nodes = learnt.nodes.len(),
                        procs = learnt.nodes.iter().map(|n| n.procs).sum::<u32>(),
                        "market changed"
                    );
                }
                m.nodes = learnt.nodes;
                m.known = true;
                failing = false;
            }
            Err(e) => {
                if !failing {
                    tracing::warn!(error = %e, "cannot learn the market from the selectors; keeping the last view");
                }
                failing = true;
            }
        }
    }
}
