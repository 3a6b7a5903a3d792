//! The queue's TLS server: the accept loop under the connection caps
//! (`daemon::serve::Gate`: in all, per address, per certificate), the mutual
//! TLS handshake, and one task per connection reading framed
//! [`BatchRequest`]s and answering each in order through [`crate::ops`].
//! Requests are read under their own frame limit; a connection silent for
//! `idle_timeout` is closed. At shutdown the server stops accepting, lets
//! requests in flight finish, and returns.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use certs::ReloadableAcceptor;
use daemon::ConnectionCaps;
use daemon::admit::{Admitted, FrameLimits, Incoming, admit, next_request};
use daemon::serve::Gate;
use proto::batch::{BatchError, BatchErrorCode, BatchRequest, BatchResponse};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;

use crate::Shared;

/// Serves `listener` until `shutdown` completes.
pub async fn serve(
    shared: Arc<Shared>,
    tls: Arc<ReloadableAcceptor>,
    listener: TcpListener,
    shutdown: impl Future,
) {
    let (stop_tx, stop_rx) = watch::channel(false);
    let gate = Gate::new(shared.cfg.limits);
    let caps = gate.caps();
    let mut tasks = JoinSet::new();
    gate.run(&listener, shutdown, &mut tasks, |tcp, addr| {
        let conn = Connection {
            acceptor: tls.current(),
            shared: shared.clone(),
            caps: caps.clone(),
            stop: stop_rx.clone(),
        };
        conn.serve(tcp, addr.to_string())
    })
    .await;
    drop(listener);
    let _ = stop_tx.send(true);
    if !daemon::serve::drain(&mut tasks, Duration::from_secs(10)).await {
        tracing::warn!("some connections did not finish in 10 s; closing them");
    }
}

struct Connection {
    acceptor: TlsAcceptor,
    shared: Arc<Shared>,
    caps: Arc<ConnectionCaps>,
    stop: watch::Receiver<bool>,
}

fn refused(id: u64, code: BatchErrorCode, message: String) -> BatchResponse {
    BatchResponse {
        id,
        result: Err(BatchError::new(code, message)),
    }
}

impl Connection {
    async fn serve(mut self, tcp: TcpStream, addr: String) {
        let limits = FrameLimits {
            max_request: proto::DEFAULT_MAX_FRAME,
            max_reply: proto::DEFAULT_MAX_FRAME,
        };
        let unavailable = |why| refused(0, BatchErrorCode::Unavailable, why);
        let admitted = daemon::admit_or_return!(
            addr,
            admit(&self.acceptor, tcp, &self.caps, limits, unavailable).await
        );
        let Admitted {
            mut framed,
            peer,
            slot: _slot,
        } = admitted;
        let idle = self.shared.cfg.idle_timeout;
        loop {
            let next = next_request::<BatchRequest, _>(&mut framed, idle, &mut self.stop).await;
            let response = match next {
                Incoming::Idle | Incoming::Closed => break,
                Incoming::Request(req) => BatchResponse {
                    id: req.id,
                    result: crate::ops::handle(&self.shared, &peer, req).await,
                },
                Incoming::Malformed(e) => {
                    let r = refused(
                        0,
                        BatchErrorCode::Malformed,
                        format!("malformed request from {peer}: {e}"),
                    );
                    let _ = framed.send(&r).await;
                    if e.is_recoverable() {
                        continue;
                    }
                    break;
                }
                Incoming::Broken(e) => {
                    tracing::debug!(%addr, %peer, error = %e, "connection ended");
                    break;
                }
            };
            if let Err(e) = framed.send(&response).await {
                tracing::debug!(%addr, %peer, error = %e, "could not answer; closing");
                break;
            }
        }
        let _ = framed.get_mut().shutdown().await;
    }
}
