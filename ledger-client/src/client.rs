//! A client connection to accountd: TCP, the mutual-TLS handshake (checking
//! the server is the `service` certificate named `accountd`, or whatever name
//! is configured), then framed request/response calls. Used by `accountctl`,
//! the node's [`crate::debit::DebitClient`] and the benchmark.

use std::sync::{Arc, RwLock};
use std::time::Duration;

use certs::{DialError, Role};
use proto::account::{AccountError, AccountOp, AccountReply, AccountRequest, AccountResponse};
use proto::{DEFAULT_MAX_FRAME, FrameError, Framed};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

/// The certificate name accountd's server certificate carries by default.
pub const DEFAULT_SERVER_NAME: &str = "accountd";

/// Why a call failed. Each message is complete in itself: the underlying error is
/// kept for `Debug` but is not the `source`, so a printed chain (`{:#}`) does not say
/// the cause twice.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// The TCP connection could not be made.
    #[error("cannot reach accountd at {addr}: {cause}; is it running and is the address right?")]
    Connect {
        /// The address dialled.
        addr: String,
        /// The cause.
        cause: std::io::Error,
    },
    /// The TLS handshake failed or the server is not who it should be.
    #[error("TLS with accountd at {addr} failed: {cause}")]
    Tls {
        /// The address dialled.
        addr: String,
        /// The cause.
        cause: certs::CertError,
    },
    /// The connection broke or carried garbage.
    #[error("connection to accountd at {addr} failed: {detail}")]
    Frame {
        /// The address.
        addr: String,
        /// The cause in one phrase (a refused certificate is explained).
        detail: String,
        /// The cause as it came.
        cause: FrameError,
    },
    /// The server closed the connection (it may have refused our certificate).
    #[error(
        "accountd at {addr} closed the connection; check that your certificate is valid for this cluster"
    )]
    Closed {
        /// The address.
        addr: String,
    },
    /// No answer in time.
    #[error("accountd at {addr} did not answer within {secs} s")]
    Timeout {
        /// The address.
        addr: String,
        /// The limit.
        secs: u64,
    },
    /// The answer was for another request.
    #[error("accountd at {addr} answered request {got} while {want} was expected")]
    Mismatch {
        /// The address.
        addr: String,
        /// The id sent.
        want: u64,
        /// The id received.
        got: u64,
    },
    /// accountd refused or failed the operation.
    #[error("{0}")]
    Server(AccountError),
    /// No address is known yet: none is configured and accountd has not been heard
    /// announcing itself.
    #[error(
        "no accountd known: none is configured and none has been heard announcing itself \
         on this cluster"
    )]
    NoAddress,
}

impl ClientError {
    /// Whether sending the same request again later may succeed.
    pub fn is_retryable(&self) -> bool {
        match self {
            ClientError::Server(e) => e.code.is_retryable(),
            _ => true,
        }
    }
}

/// accountd's address as learnt while running (from its announcements), shared by
/// whoever learns it and the clients that connect: each connection attempt reads
/// the address current at that moment. Clones share one value.
#[derive(Debug, Clone, Default)]
pub struct LearntAddress(Arc<RwLock<Option<String>>>);

impl LearntAddress {
    /// Nothing learnt yet.
    pub fn new() -> LearntAddress {
        LearntAddress::default()
    }

    /// The address to dial now, if one is known.
    pub fn get(&self) -> Option<String> {
        self.0.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Records the address heard last (`None`: forget it); returns whether it changed.
    pub fn set(&self, addr: Option<String>) -> bool {
        let mut current = self.0.write().unwrap_or_else(|e| e.into_inner());
        if *current == addr {
            return false;
        }
        *current = addr;
        true
    }
}

/// An open connection to accountd.
pub struct AccountClient {
    framed: Framed<TlsStream<TcpStream>>,
    addr: String,
    next_id: u64,
    timeout: Duration,
}

impl AccountClient {
    /// Connects to `addr` (`host:port`) and checks the server's certificate is
    /// the `service` certificate named `server_name`.
    pub async fn connect(
        addr: &str,
        connector: &TlsConnector,
        server_name: &str,
        timeout: Duration,
    ) -> Result<AccountClient, ClientError> {
        let a = addr.to_string();
        let (stream, _peer) = certs::dial(addr, connector, Role::Service, server_name, timeout)
            .await
            .map_err(|e| match e {
                DialError::Timeout(_) => ClientError::Timeout {
                    addr: a.clone(),
                    secs: timeout.as_secs(),
                },
                DialError::Connect(cause) => ClientError::Connect {
                    addr: a.clone(),
                    cause,
                },
                DialError::Tls(cause) => ClientError::Tls {
                    addr: a.clone(),
                    cause,
                },
            })?;
        Ok(AccountClient {
            framed: Framed::new(stream, DEFAULT_MAX_FRAME),
            addr: a,
            next_id: 1,
            timeout,
        })
    }

    /// Sends one operation and waits for its answer.
    pub async fn call(&mut self, op: AccountOp) -> Result<AccountReply, ClientError> {
        let id = self.next_id;
        self.next_id += 1;
        let addr = &self.addr;
        let frame = |cause: FrameError| ClientError::Frame {
            addr: addr.clone(),
            detail: certs::explain_error(&cause),
            cause,
        };
        let exchange = async {
            self.framed
                .send(&AccountRequest::new(id, op))
                .await
                .map_err(frame)?;
            self.framed.recv::<AccountResponse>().await.map_err(frame)
        };
        let resp = tokio::time::timeout(self.timeout, exchange)
            .await
            .map_err(|_| ClientError::Timeout {
                addr: addr.clone(),
                secs: self.timeout.as_secs(),
            })??
            .ok_or_else(|| ClientError::Closed { addr: addr.clone() })?;
        if resp.id != id {
            if let Err(e) = resp.result {
                return Err(ClientError::Server(e));
            }
            return Err(ClientError::Mismatch {
                addr: addr.clone(),
                want: id,
                got: resp.id,
            });
        }
        resp.result.map_err(ClientError::Server)
    }

    /// Closes the connection cleanly (TLS close_notify).
    pub async fn close(mut self) {
        use tokio::io::AsyncWriteExt;
        let _ = self.framed.get_mut().shutdown().await;
    }

    /// The address this client is connected to.
    pub fn addr(&self) -> &str {
        &self.addr
    }
}
