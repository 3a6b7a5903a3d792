//! A TLS daemon's connection once the accept loop has let it in ([`crate::serve::Gate`]):
//! the mutual TLS handshake, the framing of the daemon's protocol, and the place of
//! the peer's certificate under the per-identity cap, a peer over it answered once
//! in the daemon's own words and closed ([`admit`]). accountd, vexecd and batchd
//! start every connection so; rexecd's sessions start their own way (a buffered
//! reader, the stop signal during the handshake, the accept time for its metrics).

use std::sync::Arc;

use certs::PeerIdentity;
use proto::Framed;
use serde::Serialize;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
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
/// over its cap is sent `refusal(why)` and closed. Logs nothing: each daemon logs
/// what it wants of a refusal under its own target (its `RUST_LOG` filter).
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

#[cfg(test)]
mod tests {
    use super::*;
    use certs::Role;
    use certs::testing::TestPki;
    use tokio::net::TcpListener;

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
