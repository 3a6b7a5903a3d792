//! The accountd server: accepts TCP connections, runs the mutual-TLS
//! handshake, reads framed [`AccountRequest`]s, checks each against the
//! caller's role ([`crate::authz`]) and hands it to the [`Store`]. One task
//! per connection, requests on a connection answered in order.
//!
//! Shutdown: when the shutdown future completes the server stops accepting,
//! lets every connection finish the request it is serving, closes them, and
//! closes the store (which commits what is queued and checkpoints the WAL).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use certs::ReloadableAcceptor;
use certs::{PeerIdentity, TlsPaths};
use proto::account::{
    ACCOUNT_PROTOCOL_VERSION, AccountError, AccountReply, AccountRequest, AccountResponse,
    ErrorCode, Identity,
};
use proto::{FrameError, Framed};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;

use crate::authz::{Route, actor, authorize};
use crate::store::{Refusal, Store, StoreConfig, StoreError};

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
    /// Largest frame accepted.
    pub max_frame: usize,
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
        Ok(Server { tls, store, cfg })
    }

    /// The TLS configuration new connections use; [`ReloadableAcceptor::reload`] (the
    /// binary calls it on SIGHUP) picks up a new CRL or certificate.
    pub fn tls(&self) -> Arc<ReloadableAcceptor> {
        Arc::clone(&self.tls)
    }

    /// Serves `listener` until `shutdown` completes, then shuts down gracefully.
    pub async fn run(self, listener: TcpListener, shutdown: impl Future) {
        let (stop_tx, stop_rx) = watch::channel(false);
        let limit = Arc::new(Semaphore::new(self.cfg.max_connections.max(1)));
        let mut tasks = JoinSet::new();
        tokio::pin!(shutdown);
        loop {
            let accepted = tokio::select! {
                _ = &mut shutdown => break,
                a = listener.accept() => a,
            };
            let (tcp, addr) = match accepted {
                Ok(x) => x,
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed; pausing briefly");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            while tasks.try_join_next().is_some() {}
            let Ok(permit) = limit.clone().try_acquire_owned() else {
                tracing::warn!(%addr, "connection limit reached; closing new connection");
                continue;
            };
            let _ = tcp.set_nodelay(true);
            let conn = Connection {
                acceptor: self.tls.current(),
                store: self.store.clone(),
                stop: stop_rx.clone(),
                idle: self.cfg.idle_timeout,
                max_frame: self.cfg.max_frame,
            };
            tasks.spawn(async move {
                conn.serve(tcp, addr.to_string()).await;
                drop(permit);
            });
        }
        tracing::info!("shutting down: no new connections, finishing requests in flight");
        drop(listener);
        let _ = stop_tx.send(true);
        let drained = tokio::time::timeout(Duration::from_secs(10), async {
            while tasks.join_next().await.is_some() {}
        })
        .await;
        if drained.is_err() {
            tracing::warn!("some connections did not finish in 10 s; closing them");
            tasks.shutdown().await;
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

struct Connection {
    acceptor: TlsAcceptor,
    store: Arc<Store>,
    stop: watch::Receiver<bool>,
    idle: Duration,
    max_frame: usize,
}

impl Connection {
    async fn serve(mut self, tcp: TcpStream, addr: String) {
        let (stream, peer) = match certs::accept(&self.acceptor, tcp).await {
            Ok(x) => x,
            Err(e) => {
                tracing::warn!(%addr, error = %e, "TLS handshake refused");
                return;
            }
        };
        tracing::debug!(%addr, %peer, "connected");
        let mut framed = Framed::new(stream, self.max_frame);
        loop {
            let next = tokio::select! {
                r = tokio::time::timeout(self.idle, framed.recv::<AccountRequest>()) => r,
                _ = self.stop.changed() => break,
            };
            let response = match next {
                Err(_) => {
                    tracing::debug!(%addr, %peer, "idle connection closed");
                    break;
                }
                Ok(Ok(None)) => break,
                Ok(Ok(Some(req))) => AccountResponse {
                    id: req.id,
                    result: self.handle(&peer, req).await,
                },
                Ok(Err(e)) if e.is_recoverable() || matches!(e, FrameError::TooLarge { .. }) => {
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
                    if e.is_recoverable() {
                        continue;
                    }
                    break;
                }
                Ok(Err(e)) => {
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
        }
        let _ = framed.get_mut().shutdown().await;
    }

    async fn handle(
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
            Route::Write(op) => self.store.write(actor(peer), op).await,
            Route::Read(op) => self.store.read(op).await,
        };
        if let Err(e) = &result {
            tracing::debug!(%peer, op = name, code = ?e.code, error = %e, "request failed");
        }
        result
    }

    async fn refuse(&self, peer: &PeerIdentity, op: &str, err: &AccountError) {
        tracing::warn!(%peer, op, code = ?err.code, "refused: {err}");
        self.store
            .record_refusal(Refusal {
                role: peer.role.to_string(),
                name: peer.name.clone(),
                op: op.to_string(),
                code: err.code,
                message: err.message.clone(),
            })
            .await;
    }
}
