//! The accountd server: accepts TCP connections, runs the mutual-TLS
//! handshake, reads framed [`AccountRequest`]s, checks each against the
//! caller's role ([`crate::authz`]) and hands it to the [`Store`]. One task
//! per connection, requests on a connection answered in order.
//!
//! Limits on what one peer can take: at most `max_connections` connections in
//! all, [`PeerLimits::per_address`] from one remote address (counted from
//! accept, so unfinished handshakes count) and [`PeerLimits::per_identity`]
//! for one certificate (counted after the handshake); requests are read with
//! their own small frame limit, [`ServerConfig::max_request`] (answers may use
//! the full `max_frame`), so a connection buffers at most that much. Refused
//! requests are recorded and counted per peer by a [`RefusalBook`]: a bounded
//! number of rows per window, and a peer that keeps sending garbage is cut off.
//!
//! Shutdown: when the shutdown future completes the server stops accepting,
//! lets every connection finish the request it is serving, closes them, writes
//! the pending refusal summaries, and closes the store (which commits what is
//! queued and checkpoints the WAL).

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use certs::{PeerIdentity, ReloadableAcceptor, TlsPaths};
use daemon::ConnectionCaps;
use daemon::admit::{Admitted, FrameLimits, Incoming, admit, next_request};
use daemon::serve::{AcceptLimits, Gate};
use proto::FrameError;
use proto::account::{
    ACCOUNT_PROTOCOL_VERSION, AccountError, AccountOp, AccountReply, AccountRequest,
    AccountResponse, ChargeOutcome, Debit, ErrorCode, Identity,
};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;

use crate::authz::{Route, actor, authorize, debit_allowed};
use crate::metrics::ServerMeters;
use crate::refusals::{RefusalBook, RefusalPolicy};
use crate::store::{Store, StoreConfig, StoreError};

/// Default most connections from one remote address.
pub const DEFAULT_MAX_CONNECTIONS_PER_ADDRESS: usize = 256;
/// Default most connections of one certificate identity.
pub const DEFAULT_MAX_CONNECTIONS_PER_IDENTITY: usize = 64;

/// How often windows of refusal counts are closed (their summaries written).
const REFUSAL_TICK: Duration = Duration::from_secs(1);

/// What one peer may take, below the global connection limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerLimits {
    /// Most connections from one remote address (TLS handshakes included).
    pub per_address: usize,
    /// Most connections of one certificate identity.
    pub per_identity: usize,
    /// How refused requests are recorded, and when a peer is cut off.
    pub refusals: RefusalPolicy,
}

impl Default for PeerLimits {
    fn default() -> Self {
        PeerLimits {
            per_address: DEFAULT_MAX_CONNECTIONS_PER_ADDRESS,
            per_identity: DEFAULT_MAX_CONNECTIONS_PER_IDENTITY,
            refusals: RefusalPolicy::default(),
        }
    }
}

/// Everything the server needs, resolved from the config file and flags.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// accountd's TLS material (a `service` certificate named `accountd`).
    pub tls: TlsPaths,
    /// The ledger.
    pub store: StoreConfig,
    /// Most simultaneous connections; more are closed at once.
    pub max_connections: usize,
    /// A connection silent this long is closed.
    pub idle_timeout: Duration,
    /// Largest frame sent (answers).
    pub max_frame: usize,
    /// Largest frame accepted (requests; [`proto::limits::MAX_ACCOUNT_REQUEST`]).
    pub max_request: usize,
    /// Per-peer caps and the refusal policy.
    pub peers: PeerLimits,
}

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServerError {
    /// The ledger could not be opened.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The TLS material is unusable.
    #[error(transparent)]
    Tls(#[from] certs::CertError),
}

/// An opened server, ready to serve a listener.
pub struct Server {
    tls: Arc<ReloadableAcceptor>,
    store: Arc<Store>,
    cfg: ServerConfig,
    metrics: Option<exposition::Endpoint>,
    meters: ServerMeters,
}

/// Opens the server and serves `listener` until `shutdown` completes.
pub async fn run(
    listener: TcpListener,
    cfg: ServerConfig,
    shutdown: impl Future,
) -> Result<(), ServerError> {
    Server::open(cfg)?.run(listener, shutdown).await;
    Ok(())
}

impl Server {
    /// Loads the TLS material and opens the ledger (errors name the file at fault).
    pub fn open(cfg: ServerConfig) -> Result<Server, ServerError> {
        let tls = Arc::new(ReloadableAcceptor::load(cfg.tls.clone())?);
        let store = Arc::new(Store::open(cfg.store.clone())?);
        Ok(Server {
            tls,
            store,
            cfg,
            metrics: None,
            meters: ServerMeters::default(),
        })
    }

    /// Serves Prometheus metrics on `endpoint` while the server runs.
    pub fn with_metrics(mut self, endpoint: exposition::Endpoint) -> Server {
        self.metrics = Some(endpoint);
        self
    }

    /// The bound metrics address, when serving metrics.
    pub fn metrics_addr(&self) -> Option<std::net::SocketAddr> {
        self.metrics.as_ref().and_then(|m| m.addr().ok())
    }

    /// The TLS configuration new connections use; [`ReloadableAcceptor::reload`] (the
    /// binary calls it on SIGHUP) picks up a new CRL or certificate.
    pub fn tls(&self) -> Arc<ReloadableAcceptor> {
        Arc::clone(&self.tls)
    }

    /// Serves `listener` until `shutdown` completes, then shuts down gracefully.
    pub async fn run(self, listener: TcpListener, shutdown: impl Future) {
        let (stop_tx, stop_rx) = watch::channel(false);
        let gate = Gate::new(AcceptLimits {
            max_connections: self.cfg.max_connections,
            per_address: self.cfg.peers.per_address,
            per_identity: self.cfg.peers.per_identity,
        });
        let caps = gate.caps();
        let book = Arc::new(RefusalBook::new(self.cfg.peers.refusals));
        let mut tasks = JoinSet::new();
        if let Some(endpoint) = self.metrics {
            let registry = crate::metrics::registry(&self.meters, self.store.meters());
            let mut stop = stop_rx.clone();
            tasks.spawn(endpoint.serve(Arc::new(registry), async move {
                let _ = stop.wait_for(|s| *s).await;
            }));
        }
        tasks.spawn(close_refusal_windows(
            book.clone(),
            self.store.clone(),
            stop_rx.clone(),
        ));
        tasks.spawn(grant_income(self.store.clone(), stop_rx.clone()));
        gate.run(&listener, shutdown, &mut tasks, |tcp, addr| {
            let conn = Connection {
                acceptor: self.tls.current(),
                store: self.store.clone(),
                stop: stop_rx.clone(),
                idle: self.cfg.idle_timeout,
                max_frame: self.cfg.max_frame,
                max_request: self.cfg.max_request,
                caps: caps.clone(),
                book: book.clone(),
                cut_off: AtomicBool::new(false),
                meters: self.meters.clone(),
            };
            conn.serve(tcp, addr.to_string())
        })
        .await;
        tracing::info!("shutting down: no new connections, finishing requests in flight");
        drop(listener);
        let _ = stop_tx.send(true);
        if !daemon::serve::drain(&mut tasks, Duration::from_secs(10)).await {
            tracing::warn!("some connections did not finish in 10 s; closing them");
        }
        for summary in book.drain() {
            self.store.record_refusal(summary).await;
        }
        match Arc::try_unwrap(self.store) {
            Ok(store) => {
                let _ = tokio::task::spawn_blocking(move || store.close()).await;
            }
            Err(_) => tracing::warn!("store still in use at shutdown"),
        }
        tracing::info!("accountd stopped");
    }
}

/// Every [`REFUSAL_TICK`], writes the summaries of refusal windows that ended.
async fn close_refusal_windows(
    book: Arc<RefusalBook>,
    store: Arc<Store>,
    mut stop: watch::Receiver<bool>,
) {
    let mut tick = tokio::time::interval(REFUSAL_TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.changed() => return,
        }
        for summary in book.tick(tokio::time::Instant::now()) {
            tracing::warn!(peer = %format_args!("{} {}", summary.role, summary.name),
                count = summary.count, "refused requests summarised: {}", summary.message);
            store.record_refusal(summary).await;
        }
    }
}

/// How often accountd grants the project income that is due.
pub const INCOME_TICK: Duration = Duration::from_secs(1);

/// The actor of income grants.
pub const INCOME_ACTOR: &str = "accountd:income";

/// Every [`INCOME_TICK`], grants the income that is due (at most once per
/// period and project, see [`crate::store::projects`]).
async fn grant_income(store: Arc<Store>, mut stop: watch::Receiver<bool>) {
    let mut tick = tokio::time::interval(INCOME_TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.changed() => return,
        }
        let op = AccountOp::Project(proto::project::ProjectOp::Tick);
        match store.write(INCOME_ACTOR.into(), op).await {
            Ok(AccountReply::Project(proto::project::ProjectReply::Granted(granted))) => {
                for e in granted {
                    tracing::info!(project = %e.user, entry = e.id,
                        amount = %money::format_credits(e.amount), "granted income");
                }
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "could not grant income; trying again"),
        }
    }
}

struct Connection {
    acceptor: TlsAcceptor,
    store: Arc<Store>,
    stop: watch::Receiver<bool>,
    idle: Duration,
    max_frame: usize,
    max_request: usize,
    caps: Arc<ConnectionCaps>,
    book: Arc<RefusalBook>,
    /// Set when the peer has been cut off: answer, then close.
    cut_off: AtomicBool,
    meters: ServerMeters,
}

/// The answer to a connection turned away before its first request.
fn turned_away(message: String) -> AccountResponse {
    AccountResponse {
        id: 0,
        result: Err(AccountError::new(ErrorCode::Unavailable, message)),
    }
}

impl Connection {
    async fn serve(mut self, tcp: TcpStream, addr: String) {
        let limits = FrameLimits {
            max_request: self.max_request,
            max_reply: self.max_frame,
        };
        let admitted = daemon::admit_or_return!(
            addr,
            admit(&self.acceptor, tcp, &self.caps, limits, turned_away).await
        );
        let Admitted {
            mut framed,
            peer,
            slot: _identity_slot,
        } = admitted;
        tracing::debug!(%addr, %peer, "connected");
        loop {
            if let Some(message) = self.cut_off_message(&peer) {
                let _ = framed.send(&turned_away(message)).await;
                break;
            }
            let next =
                next_request::<AccountRequest, _>(&mut framed, self.idle, &mut self.stop).await;
            let response = match next {
                Incoming::Idle => {
                    tracing::debug!(%addr, %peer, "idle connection closed");
                    break;
                }
                Incoming::Closed => break,
                Incoming::Request(req) => AccountResponse {
                    id: req.id,
                    result: self.handle(&peer, req).await,
                },
                Incoming::Malformed(e) => {
                    let err = AccountError::new(
                        ErrorCode::Malformed,
                        format!("malformed request from {peer}: {e}"),
                    );
                    self.refuse(&peer, "decode", &err).await;
                    let _ = framed
                        .send(&AccountResponse {
                            id: 0,
                            result: Err(err),
                        })
                        .await;
                    if e.is_recoverable() && !self.cut_off.load(Ordering::Relaxed) {
                        continue;
                    }
                    break;
                }
                Incoming::Broken(e) => {
                    tracing::debug!(%addr, %peer, error = %e, "connection ended");
                    break;
                }
            };
            let id = response.id;
            match framed.send(&response).await {
                Ok(()) => {}
                Err(FrameError::TooLarge { len, max }) => {
                    // Nothing was written; say why instead of the answer.
                    let err = AccountError::new(
                        ErrorCode::TooLarge,
                        format!(
                            "the answer ({len} bytes) exceeds the {max}-byte message limit; ask for less, e.g. a narrower --since/--until window"
                        ),
                    );
                    if framed
                        .send(&AccountResponse {
                            id,
                            result: Err(err),
                        })
                        .await
                        .is_err()
                    {
                        break;
                    }
                }
                Err(e) => {
                    tracing::debug!(%addr, %peer, error = %e, "could not answer; closing");
                    break;
                }
            }
            if self.cut_off.load(Ordering::Relaxed) {
                break;
            }
        }
        let _ = framed.get_mut().shutdown().await;
    }

    /// Why `peer` is not served now, when it has been cut off.
    fn cut_off_message(&self, peer: &PeerIdentity) -> Option<String> {
        let now = tokio::time::Instant::now();
        let until = self.book.cut_off_until(peer, now)?;
        Some(format!(
            "{peer} is cut off for another {} s after too many refused requests; fix the client, then retry",
            until.duration_since(now).as_secs() + 1
        ))
    }

    /// Answers one request and counts it by operation and result.
    async fn handle(
        &self,
        peer: &PeerIdentity,
        req: AccountRequest,
    ) -> Result<AccountReply, AccountError> {
        let name = req.op.name();
        let result = self.answer(peer, req).await;
        self.meters.answered(name, result.is_ok());
        result
    }

    async fn answer(
        &self,
        peer: &PeerIdentity,
        req: AccountRequest,
    ) -> Result<AccountReply, AccountError> {
        let name = req.op.name();
        if req.version != ACCOUNT_PROTOCOL_VERSION {
            let err = AccountError::new(
                ErrorCode::UnsupportedVersion,
                format!(
                    "protocol version {} is not supported (this accountd speaks {ACCOUNT_PROTOCOL_VERSION}); upgrade the older side",
                    req.version
                ),
            );
            self.refuse(peer, name, &err).await;
            return Err(err);
        }
        let route = match authorize(peer, req.op) {
            Ok(r) => r,
            Err(err) => {
                self.refuse(peer, name, &err).await;
                return Err(err);
            }
        };
        let result = match route {
            Route::WhoAmI => Ok(AccountReply::WhoAmI(Identity {
                role: peer.role.to_string(),
                name: peer.name.clone(),
            })),
            Route::Head => Ok(AccountReply::Head(self.store.signed_head())),
            Route::Write(op) => self.store.write(actor(peer), op).await,
            Route::Read(op) => self.store.read(op).await,
            Route::Debits(ds) => Ok(AccountReply::Charges(self.debits(peer, ds).await)),
        };
        if let Err(e) = &result {
            tracing::debug!(%peer, op = name, code = ?e.code, error = %e, "request failed");
        }
        result
    }

    /// The debits of one `Debits` frame, each answered as a `Debit` of its own
    /// would be (and counted and refused as one): a debit with another
    /// node's name in its key is refused alone, the others go to the writer
    /// together, so that they share a group commit.
    async fn debits(&self, peer: &PeerIdentity, ds: Vec<Debit>) -> Vec<ChargeOutcome> {
        // Counted and recorded under the single operation's name.
        let single = "Debit";
        let mut refused = Vec::with_capacity(ds.len());
        let mut ops = Vec::with_capacity(ds.len());
        for d in ds {
            match debit_allowed(peer, &d) {
                Ok(()) => {
                    refused.push(None);
                    ops.push(AccountOp::Debit(d));
                }
                Err(err) => {
                    self.refuse(peer, single, &err).await;
                    refused.push(Some(err));
                }
            }
        }
        let mut written = self.store.write_many(&actor(peer), ops).await.into_iter();
        let mut outcomes = Vec::with_capacity(refused.len());
        for before in refused {
            let outcome = match before.map(Err).or_else(|| written.next()) {
                Some(Ok(AccountReply::Charged(receipt))) => Ok(receipt),
                Some(Ok(other)) => Err(AccountError::new(
                    ErrorCode::Storage,
                    format!("the ledger answered a debit with {}", other.name()),
                )),
                Some(Err(e)) => Err(e),
                None => Err(AccountError::new(
                    ErrorCode::Storage,
                    "the ledger gave no answer for a debit; retry",
                )),
            };
            if let Err(e) = &outcome {
                tracing::debug!(%peer, op = single, code = ?e.code, error = %e, "debit of a frame failed");
            }
            self.meters.answered(single, outcome.is_ok());
            outcomes.push(outcome);
        }
        outcomes
    }

    /// Counts a refusal of `peer`, records it as the [`RefusalBook`] decides
    /// (committed before the answer goes out), and marks the connection for
    /// closing when the peer is now cut off.
    async fn refuse(&self, peer: &PeerIdentity, op: &str, err: &AccountError) {
        let now = tokio::time::Instant::now();
        let decision = self.book.refused(peer, op, err.code, &err.message, now);
        self.meters.refused(err.code);
        if decision.write.iter().any(|r| r.count == 1 && r.op == op) {
            tracing::warn!(%peer, op, code = ?err.code, "refused: {err}");
        } else {
            tracing::debug!(%peer, op, code = ?err.code, "refused (counted, not recorded one by one): {err}");
        }
        if decision.cut_off && !self.cut_off.swap(true, Ordering::Relaxed) {
            self.meters.cut_off();
            tracing::warn!(%peer, "peer cut off after too many refused requests");
        }
        for row in decision.write {
            self.store.record_refusal(row).await;
        }
        // A refusal costs the peer a turn: a connection streaming garbage lets
        // every other connection's request go first.
        tokio::task::yield_now().await;
    }
}
