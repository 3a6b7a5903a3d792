//! Dialling a daemon: a TCP connection within a time limit (`TCP_NODELAY` set), then
//! [`certs::connect`], which checks that the server's certificate names the host and
//! role the caller meant to reach. Each client words a failure its own way
//! ("cannot reach accountd at ..."), so [`DialError`] says only what went wrong.

use std::io;
use std::time::Duration;

use certs::{CertError, PeerIdentity, Role};
use tokio::net::TcpStream;
use tokio_rustls::{TlsConnector, client};

/// Why [`dial`] failed: each client words it its own way ("cannot reach accountd ...").
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DialError {
    /// No TCP connection within the time limit.
    #[error("no connection within {} ms", .0.as_millis())]
    Timeout(Duration),
    /// The TCP connection was refused or failed.
    #[error("{0}")]
    Connect(io::Error),
    /// The TLS handshake failed, or the server is not the one meant.
    #[error("{0}")]
    Tls(CertError),
}

/// Connects over TCP to `addr` (`host:port`) within `timeout`, sets `TCP_NODELAY`, and
/// runs [`certs::connect`] to the server `role` `name`: a client's way into a daemon.
pub async fn dial(
    addr: &str,
    connector: &TlsConnector,
    role: Role,
    name: &str,
    timeout: Duration,
) -> Result<(client::TlsStream<TcpStream>, PeerIdentity), DialError> {
    let tcp = tokio::time::timeout(timeout, TcpStream::connect(addr))
        .await
        .map_err(|_| DialError::Timeout(timeout))?
        .map_err(DialError::Connect)?;
    let _ = tcp.set_nodelay(true);
    certs::connect(connector, tcp, role, name)
        .await
        .map_err(DialError::Tls)
}
