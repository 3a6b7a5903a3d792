//! A TLS daemon's connection once the accept loop has let it in ([`crate::serve::Gate`]):
//! the mutual TLS handshake, the framing of the daemon's protocol, and the place of
//! the peer's certificate under the per-identity cap, a peer over it answered once
//! in the daemon's own words and closed ([`admit`]). accountd, vexecd and batchd
//! start every connection so; rexecd's sessions start their own way (a buffered
//! reader, the stop signal during the handshake, the accept time for its metrics).
//! Then each request is read with [`next_request`]: within the idle time, ended
//! by the daemon's stop, and a frame that is not a request told apart from a
//! stream that broke.

use std::sync::Arc;
use std::time::Duration;

use certs::PeerIdentity;
use proto::{FrameError, Framed};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

use crate::caps::{CapExceeded, ConnectionCaps, IdentitySlot};

/// A connection past the handshake and the per-identity cap.
#[derive(Debug)]
pub struct Admitted {
    /// The TLS stream, framed under the daemon's limits.
    pub framed: Framed<TlsStream<TcpStream>>,
    /// Who the certificate says the peer is.
    pub peer: PeerIdentity,
    /// The peer's place under its identity's cap: keep it while the connection lasts.
    pub slot: IdentitySlot,
}

/// The frame limits of a daemon's protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameLimits {
    /// The largest request read.
    pub max_request: usize,
    /// The largest reply written.
    pub max_reply: usize,
}

/// Why a connection was not admitted.
#[derive(Debug, thiserror::Error)]
pub enum NotAdmitted {
    /// The TLS handshake failed (the daemon logs it, in its own log target).
    #[error("TLS handshake refused")]
    Handshake(#[source] certs::CertError),
    /// The peer's certificate holds all its places: it was told so, and closed.
    #[error(transparent)]
    OverCap(CapExceeded),
}

/// Runs the handshake on `tcp` and takes the peer's place under `caps`; a peer
/// over its cap is sent `refusal(why)` and closed. Logs nothing: the daemons log a
/// refusal under their own targets ([`admit_or_return!`]).
pub async fn admit<R: Serialize>(
    acceptor: &TlsAcceptor,
    tcp: TcpStream,
    caps: &Arc<ConnectionCaps>,
    limits: FrameLimits,
    refusal: impl FnOnce(String) -> R,
) -> Result<Admitted, NotAdmitted> {
    let (stream, peer) = certs::accept(acceptor, tcp)
        .await
        .map_err(NotAdmitted::Handshake)?;
    let mut framed = Framed::with_limits(stream, limits.max_request, limits.max_reply);
    match caps.admit_identity(&peer) {
        Ok(slot) => Ok(Admitted { framed, peer, slot }),
        Err(e) => {
            let _ = framed.send(&refusal(e.to_string())).await;
            let _ = framed.get_mut().shutdown().await;
            Err(NotAdmitted::OverCap(e))
        }
    }
}

/// Logs why a connection was not admitted, under the calling daemon's own log
/// target (a macro, so that each daemon's `RUST_LOG` filter keeps applying): a
/// refused handshake and a peer over its cap, each one line at `info` naming the
/// remote address `addr`. rexecd, whose sessions start their own way, logs its
/// refusals with it too.
///
/// ```
/// use daemon::admit::NotAdmitted;
/// fn refused(addr: std::net::SocketAddr, why: NotAdmitted) {
///     daemon::log_not_admitted!(addr, why);
/// }
/// ```
#[macro_export]
macro_rules! log_not_admitted {
    ($addr:expr, $why:expr) => {
        match $why {
            $crate::admit::NotAdmitted::Handshake(e) => {
                $crate::__tracing::info!(addr = %$addr, error = %e, "TLS handshake refused")
            }
            $crate::admit::NotAdmitted::OverCap(e) => {
                $crate::__tracing::info!(addr = %$addr, "{e}")
            }
        }
    };
}

/// Admits a connection with [`admit`], or logs why not ([`log_not_admitted!`]) and
/// returns from the calling function (a connection task returning `()`).
#[macro_export]
macro_rules! admit_or_return {
    ($addr:expr, $admission:expr) => {
        match $admission {
            Ok(admitted) => admitted,
            Err(why) => {
                $crate::log_not_admitted!($addr, why);
                return;
            }
        }
    };
}

/// What the next read of an admitted connection brought ([`next_request`]).
#[derive(Debug)]
pub enum Incoming<T> {
    /// A request.
    Request(T),
    /// A frame that is not a request: the daemon answers it with a refusal, then
    /// reads on when the stream is still in step ([`FrameError::is_recoverable`]:
    /// a decode error) and closes otherwise (too large).
    Malformed(FrameError),
    /// Nothing arrived within the idle time.
    Idle,
    /// The peer closed between requests, or the daemon is stopping.
    Closed,
    /// The stream broke (the daemon logs why and closes).
    Broken(FrameError),
}

/// Reads the next request from `framed`, waiting at most `idle`, and giving up
/// as soon as `stop` changes (or its sender is gone).
pub async fn next_request<T, S>(
    framed: &mut Framed<S>,
    idle: Duration,
    stop: &mut watch::Receiver<bool>,
) -> Incoming<T>
where
    T: DeserializeOwned,
    S: AsyncRead + AsyncWrite + Unpin,
{
    let next = tokio::select! {
        r = tokio::time::timeout(idle, framed.recv::<T>()) => r,
        _ = stop.changed() => return Incoming::Closed,
    };
    match next {
        Err(_) => Incoming::Idle,
        Ok(Ok(None)) => Incoming::Closed,
        Ok(Ok(Some(request))) => Incoming::Request(request),
        Ok(Err(e @ (FrameError::Decode(_) | FrameError::TooLarge { .. }))) => {
            Incoming::Malformed(e)
        }
        Ok(Err(e)) => Incoming::Broken(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use certs::Role;
    use certs::testing::TestPki;
    use tokio::net::TcpListener;

    #[tokio::test]
    async fn next_request_tells_requests_bad_frames_silence_stops_and_breaks_apart() {
        use tokio::io::AsyncWriteExt as _;
        let idle = Duration::from_millis(50);
        let (_stop_tx, mut stop) = watch::channel(false);
        let (ours, theirs) = tokio::io::duplex(1024);
        let mut framed = Framed::new(ours, 64);
        let mut raw = theirs;
        let mut next = async |framed: &mut Framed<_>| {
            next_request::<(u8, String), _>(framed, idle, &mut stop).await
        };

        raw.write_all(&proto::encode_frame(&(7u8, "hi"), 64).unwrap())
            .await
            .unwrap();
        assert!(matches!(next(&mut framed).await, Incoming::Request((7, s)) if s == "hi"));

        // A whole frame that is no request: the stream stays in step.
        raw.write_all(&[0, 0, 0, 1, 0xff]).await.unwrap();
        let got = next(&mut framed).await;
        assert!(
            matches!(&got, Incoming::Malformed(e) if e.is_recoverable()),
            "{got:?}"
        );

        assert!(matches!(next(&mut framed).await, Incoming::Idle));

        // Over the limit: out of step.
        raw.write_all(&[0, 0, 1, 0]).await.unwrap();
        let got = next(&mut framed).await;
        assert!(
            matches!(&got, Incoming::Malformed(e) if !e.is_recoverable()),
            "{got:?}"
        );

        // Cut in the middle of a frame: broken.
        let (ours, mut raw) = tokio::io::duplex(1024);
        let mut framed = Framed::new(ours, 64);
        raw.write_all(&[0, 0, 0, 9, 1]).await.unwrap();
        drop(raw);
        let got = next(&mut framed).await;
        assert!(matches!(got, Incoming::Broken(_)), "{got:?}");

        // Closed between frames, and a stop while waiting.
        let (ours, raw) = tokio::io::duplex(1024);
        let mut framed = Framed::new(ours, 64);
        drop(raw);
        assert!(matches!(next(&mut framed).await, Incoming::Closed));
        let (_raw, ours) = tokio::io::duplex(1024);
        let mut framed = Framed::new(ours, 64);
        let (stop_tx, mut stop) = watch::channel(false);
        let waiting =
            next_request::<(u8, String), _>(&mut framed, Duration::from_secs(60), &mut stop);
        let (got, _) = tokio::join!(waiting, async { stop_tx.send(true).unwrap() });
        assert!(matches!(got, Incoming::Closed), "{got:?}");
    }

    /// What a `tracing` subscriber writes, kept for the test to read.
    #[derive(Clone, Default)]
    struct Log(Arc<std::sync::Mutex<Vec<u8>>>);

    impl std::io::Write for Log {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    mod caller {
        /// A daemon's connection task refused over its cap.
        pub(super) fn refused(why: super::NotAdmitted) {
            let addr: std::net::SocketAddr = "192.0.2.7:4000".parse().unwrap();
            crate::admit_or_return!(addr, Err::<(), _>(why));
            unreachable!("a refusal returns");
        }
    }

    #[test]
    fn a_refusal_is_logged_once_under_the_callers_target_naming_the_address() {
        let log = Log::default();
        let writer = log.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .with_max_level(tracing::Level::INFO)
            .finish();
        let caps = ConnectionCaps::new(1, 8);
        let ip = "192.0.2.7".parse().unwrap();
        let _slot = caps.admit_address(ip).unwrap();
        let over = caps.admit_address(ip).unwrap_err();
        tracing::subscriber::with_default(subscriber, || {
            caller::refused(NotAdmitted::OverCap(over))
        });
        let said = String::from_utf8(log.0.lock().unwrap().clone()).unwrap();
        assert_eq!(said.lines().count(), 1, "{said}");
        assert!(
            said.contains(" INFO daemon::admit::tests::caller:"),
            "{said}"
        );
        assert!(said.contains("addr=192.0.2.7:4000"), "{said}");
        assert!(
            said.contains("address 192.0.2.7 already holds 1 connections"),
            "{said}"
        );
    }

    #[tokio::test]
    async fn a_peer_over_its_cap_is_told_why_and_a_stranger_is_not_admitted() {
        let pki = TestPki::new();
        let acceptor = pki.acceptor(Role::Service, "d").unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let caps = ConnectionCaps::new(8, 1);
        let limits = FrameLimits {
            max_request: 1024,
            max_reply: 1024,
        };
        let dial = |connector: tokio_rustls::TlsConnector| async move {
            let tcp = TcpStream::connect(addr).await.unwrap();
            certs::connect(&connector, tcp, Role::Service, "d").await
        };
        let alice = pki.connector(Role::User, "alice").unwrap();

        let first = tokio::spawn(dial(alice.clone()));
        let (tcp, _) = listener.accept().await.unwrap();
        let admitted = admit(&acceptor, tcp, &caps, limits, |why| why)
            .await
            .unwrap();
        assert_eq!(admitted.peer.to_string(), "user alice");
        let _first = first.await.unwrap().unwrap();

        let second = tokio::spawn(dial(alice));
        let (tcp, _) = listener.accept().await.unwrap();
        let refused = admit(&acceptor, tcp, &caps, limits, |why| why).await;
        assert!(
            matches!(refused, Err(NotAdmitted::OverCap(_))),
            "{refused:?}"
        );
        let (stream, _) = second.await.unwrap().unwrap();
        let mut framed = Framed::new(stream, 1024);
        let said: String = framed.recv().await.unwrap().unwrap();
        assert!(
            said.starts_with("user alice already holds 1 connections"),
            "{said}"
        );

        let stranger = TestPki::new().connector(Role::User, "alice").unwrap();
        let third = tokio::spawn(dial(stranger));
        let (tcp, _) = listener.accept().await.unwrap();
        let refused = admit(&acceptor, tcp, &caps, limits, |why| why).await;
        assert!(
            matches!(refused, Err(NotAdmitted::Handshake(_))),
            "{refused:?}"
        );
        assert!(third.await.unwrap().is_err());
    }
}
