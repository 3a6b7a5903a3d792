//! A daemon's accept loop under its connection limits, shared by the TLS servers
//! (accountd, rexecd, vexecd): at most `max_connections` connections in all (a global
//! semaphore) and at most `per_address` from one remote address ([`ConnectionCaps`],
//! counted from accept, so unfinished TLS handshakes count). A connection over either
//! limit is accepted and closed at once, so the loop never stalls; the warning that
//! says so is rate-limited ([`CAP_LOG_INTERVAL`]), counting the connections closed
//! since the last one ([`Gate::with_refusal_log`] lets a daemon word it its own
//! way). An accept error (out of file descriptors, say) pauses the loop
//! briefly instead of spinning.
//!
//! What a connection does (its TLS handshake, its per-identity cap, its protocol) is
//! the daemon's: [`Gate::run`] hands each admitted connection to the daemon's
//! closure and keeps the connection's places until the future it returns ends.
//! [`drain`] is the shutdown half: wait a grace period for the connections, then
//! cut off the rest.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::caps::{AddressSlot, CapExceeded, ConnectionCaps};

/// At most one warning per this interval about connections closed at a limit.
pub const CAP_LOG_INTERVAL: Duration = Duration::from_secs(10);

/// How long the loop pauses after a failed `accept`.
const ACCEPT_PAUSE: Duration = Duration::from_millis(100);

/// The limits a [`Gate`] enforces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AcceptLimits {
    /// Most simultaneous connections (at least 1 is allowed).
    pub max_connections: usize,
    /// Most from one remote address, TLS handshakes included.
    pub per_address: usize,
    /// Most of one certificate identity (enforced by the daemon after the
    /// handshake, through [`Gate::caps`]).
    pub per_identity: usize,
}

/// An admitted connection's places under the limits; dropping it gives them back.
#[derive(Debug)]
pub struct Admission {
    _permit: OwnedSemaphorePermit,
    _address: AddressSlot,
}

/// Why a connection was closed at once.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    /// `max_connections` (the number) connections were open.
    #[error("connection limit reached (max_connections)")]
    MaxConnections(usize),
    /// Its remote address held all its places.
    #[error(transparent)]
    Address(CapExceeded),
}

/// Writes the rate-limited warning about connections closed at a limit: the last
/// one's remote address, how many were closed since the last warning (this one
/// included), and why the last one was.
pub type RefusalLog = fn(remote: SocketAddr, closed: u64, why: &Refused);

/// The default [`RefusalLog`].
fn warn_closed(addr: SocketAddr, closed: u64, why: &Refused) {
    tracing::warn!(%addr, closed, "{why}; closing new connections at once");
}

/// Admits accepted connections under [`AcceptLimits`].
#[derive(Debug)]
pub struct Gate {
    global: Arc<Semaphore>,
    max_connections: usize,
    caps: Arc<ConnectionCaps>,
    log: CapLog,
}

impl Gate {
    /// A gate enforcing `limits`.
    pub fn new(limits: AcceptLimits) -> Gate {
        let max_connections = limits.max_connections.max(1);
        Gate {
            global: Arc::new(Semaphore::new(max_connections)),
            max_connections,
            caps: ConnectionCaps::new(limits.per_address, limits.per_identity),
            log: CapLog {
                last: None,
                unlogged: 0,
                warn: warn_closed,
            },
        }
    }

    /// Writes the warning about connections closed at a limit with `log` (still at
    /// most one per [`CAP_LOG_INTERVAL`]) instead of the default one.
    pub fn with_refusal_log(mut self, log: RefusalLog) -> Gate {
        self.log.warn = log;
        self
    }

    /// The per-address and per-identity counts; connections take their identity's
    /// place here ([`ConnectionCaps::admit_identity`]) once the handshake names it.
    pub fn caps(&self) -> Arc<ConnectionCaps> {
        Arc::clone(&self.caps)
    }

    /// Accepts the next connection that fits under the limits (closing those that
    /// do not), with `TCP_NODELAY` set. Cancel-safe.
    pub async fn accept(&mut self, listener: &TcpListener) -> (TcpStream, SocketAddr, Admission) {
        loop {
            let (tcp, addr) = match listener.accept().await {
                Ok(x) => x,
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed; pausing briefly");
                    tokio::time::sleep(ACCEPT_PAUSE).await;
                    continue;
                }
            };
            let Ok(permit) = Arc::clone(&self.global).try_acquire_owned() else {
                self.log
                    .closed(addr, &Refused::MaxConnections(self.max_connections));
                continue;
            };
            let address = match self.caps.admit_address(addr.ip()) {
                Ok(slot) => slot,
                Err(e) => {
                    self.log.closed(addr, &Refused::Address(e));
                    continue;
                }
            };
            let _ = tcp.set_nodelay(true);
            let admission = Admission {
                _permit: permit,
                _address: address,
            };
            return (tcp, addr, admission);
        }
    }

    /// Accepts connections on `listener` until `shutdown` completes, spawning
    /// `serve(tcp, addr)` for each admitted one into `tasks` (finished tasks are
    /// reaped as it goes). Each connection keeps its places until its future ends.
    pub async fn run<F, Fut>(
        mut self,
        listener: &TcpListener,
        shutdown: impl Future,
        tasks: &mut JoinSet<()>,
        mut serve: F,
    ) where
        F: FnMut(TcpStream, SocketAddr) -> Fut,
        Fut: Future<Output = ()> + Send + 'static,
    {
        tokio::pin!(shutdown);
        loop {
            let (tcp, addr, admission) = tokio::select! {
                _ = &mut shutdown => break,
                a = self.accept(listener) => a,
            };
            while tasks.try_join_next().is_some() {}
            let connection = serve(tcp, addr);
            tasks.spawn(async move {
                connection.await;
                drop(admission);
            });
        }
    }
}

/// Waits up to `grace` for every task in `tasks` to end, then aborts the rest;
/// returns whether all ended in time.
pub async fn drain(tasks: &mut JoinSet<()>, grace: Duration) -> bool {
    let drained =
        tokio::time::timeout(grace, async { while tasks.join_next().await.is_some() {} }).await;
    if drained.is_err() {
        tasks.shutdown().await;
        return false;
    }
    true
}

/// Rate-limits the warning about connections closed at a limit.
#[derive(Debug)]
struct CapLog {
    last: Option<Instant>,
    unlogged: u64,
    warn: RefusalLog,
}

impl CapLog {
    fn closed(&mut self, addr: SocketAddr, why: &Refused) {
        self.unlogged += 1;
        let now = Instant::now();
        if self
            .last
            .is_some_and(|t| now.duration_since(t) < CAP_LOG_INTERVAL)
        {
            return;
        }
        (self.warn)(addr, self.unlogged, why);
        self.last = Some(now);
        self.unlogged = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A listener on a loopback port, its address, and a gate with these limits.
    async fn gate_on_loopback(
        max_connections: usize,
        per_address: usize,
    ) -> (TcpListener, SocketAddr, Gate) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let gate = Gate::new(AcceptLimits {
            max_connections,
            per_address,
            per_identity: 1,
        });
        (listener, addr, gate)
    }

    #[tokio::test]
    async fn connections_over_a_limit_are_closed_and_places_come_back() {
        let (listener, addr, mut gate) = gate_on_loopback(2, 1).await;
        let _c1 = TcpStream::connect(addr).await.unwrap();
        let (_s1, _, first) = gate.accept(&listener).await;
        // Same address: over its cap, so closed; the next one waits for a place.
        let mut c2 = TcpStream::connect(addr).await.unwrap();
        let next = tokio::time::timeout(Duration::from_millis(300), gate.accept(&listener));
        assert!(
            next.await.is_err(),
            "a second connection from one address got in"
        );
        let mut byte = [0u8; 1];
        let n = tokio::io::AsyncReadExt::read(&mut c2, &mut byte).await;
        assert!(
            matches!(n, Ok(0) | Err(_)),
            "the refused connection stayed open"
        );
        drop(first);
        let _c3 = TcpStream::connect(addr).await.unwrap();
        let (_s3, from, _second) = gate.accept(&listener).await;
        assert_eq!(from.ip(), addr.ip());
    }

    #[tokio::test]
    async fn a_refusal_log_hears_the_limit_and_the_count() {
        static HEARD: std::sync::Mutex<Vec<(u64, Refused)>> = std::sync::Mutex::new(Vec::new());
        fn hear(_: SocketAddr, closed: u64, why: &Refused) {
            HEARD.lock().unwrap().push((closed, why.clone()));
        }
        let (listener, addr, gate) = gate_on_loopback(1, 4).await;
        let mut gate = gate.with_refusal_log(hear);
        let _c1 = TcpStream::connect(addr).await.unwrap();
        let (_s1, _, _first) = gate.accept(&listener).await;
        let _c2 = TcpStream::connect(addr).await.unwrap();
        let _c3 = TcpStream::connect(addr).await.unwrap();
        let next = tokio::time::timeout(Duration::from_millis(300), gate.accept(&listener));
        assert!(
            next.await.is_err(),
            "a connection over max_connections got in"
        );
        // Two closed, one warning: the second falls within CAP_LOG_INTERVAL.
        let heard = HEARD.lock().unwrap().clone();
        assert_eq!(heard, vec![(1, Refused::MaxConnections(1))]);
        assert_eq!(
            heard[0].1.to_string(),
            "connection limit reached (max_connections)"
        );
    }

    #[tokio::test]
    async fn drain_cuts_off_what_outlives_the_grace() {
        let mut tasks = JoinSet::new();
        tasks.spawn(async {});
        assert!(drain(&mut tasks, Duration::from_secs(5)).await);
        tasks.spawn(std::future::pending::<()>());
        assert!(!drain(&mut tasks, Duration::from_millis(50)).await);
        assert!(tasks.is_empty());
    }
}
