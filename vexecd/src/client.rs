//! A client connection to one selector: TCP, the mutual-TLS handshake
//! (checking the server's certificate is the `service` certificate of the
//! selector the caller meant), then framed request/response calls. For
//! tests and tools; the `rexec` client may keep its own.
//!
//! ```no_run
//! # async fn demo(connector: tokio_rustls::TlsConnector) -> Result<(), vexecd::client::ClientError> {
//! use std::time::Duration;
//! use proto::select::SelectQuery;
//! let mut c = vexecd::client::SelectorClient::connect(
//!     "10.0.0.5:7478", &connector, "vexecd", Duration::from_secs(5)).await?;
//! let picked = c.select(SelectQuery::new(4, "lowest-price")).await?;
//! println!("{:?}", picked.iter().map(|n| &n.name).collect::<Vec<_>>());
//! # Ok(()) }
//! ```

use std::time::Duration;

use certs::{DialError, Role};
use proto::select::{
    MAX_SELECTOR_REQUEST, NodeList, NodeView, NodesQuery, SelectQuery, SelectorError, SelectorOp,
    SelectorReply, SelectorRequest, SelectorResponse, SelectorStats, ServiceView,
};
use proto::{FrameError, Framed};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

use crate::daemon::server::MAX_SELECTOR_REPLY;

/// Why a call failed. Each message is complete in itself.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// The TCP connection could not be made.
    #[error("cannot reach selector at {addr}: {cause}")]
    Connect {
        /// The address dialled.
        addr: String,
        /// The cause.
        cause: std::io::Error,
    },
    /// The TLS handshake failed or the server is not the selector meant.
    #[error("TLS with selector at {addr} failed: {cause}")]
    Tls {
        /// The address dialled.
        addr: String,
        /// The cause.
        cause: certs::CertError,
    },
    /// The connection broke or carried garbage.
    #[error("connection to selector at {addr} failed: {detail}")]
    Frame {
        /// The address.
        addr: String,
        /// The cause in one phrase (a refused certificate is explained).
        detail: String,
        /// The cause as it came.
        cause: FrameError,
    },
    /// The server closed the connection (it may have refused our certificate).
    #[error("selector at {addr} closed the connection")]
    Closed {
        /// The address.
        addr: String,
    },
    /// No answer in time.
    #[error("selector at {addr} did not answer within {ms} ms")]
    Timeout {
        /// The address.
        addr: String,
        /// The limit.
        ms: u64,
    },
    /// The answer was for another request, or of the wrong kind.
    #[error("selector at {addr} answered out of step: {what}")]
    Mismatch {
        /// The address.
        addr: String,
        /// What was wrong.
        what: String,
    },
    /// The selector refused the request.
    #[error("{0}")]
    Server(SelectorError),
}

/// An open connection to a selector.
pub struct SelectorClient {
    framed: Framed<TlsStream<TcpStream>>,
    addr: String,
    next_id: u64,
    timeout: Duration,
}

impl SelectorClient {
    /// Connect to `addr` and check the server's certificate is the
    /// `service` certificate named `server_name`.
    pub async fn connect(
        addr: &str,
        connector: &TlsConnector,
        server_name: &str,
        timeout: Duration,
    ) -> Result<SelectorClient, ClientError> {
        let a = addr.to_string();
        let (stream, _peer) = certs::dial(addr, connector, Role::Service, server_name, timeout)
            .await
            .map_err(|e| match e {
                DialError::Timeout(_) => ClientError::Timeout {
                    addr: a.clone(),
                    ms: timeout.as_millis() as u64,
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
        Ok(SelectorClient {
            framed: Framed::with_limits(stream, MAX_SELECTOR_REPLY, MAX_SELECTOR_REQUEST),
            addr: a,
            next_id: 1,
            timeout,
        })
    }

    /// The address this client is connected to.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// Send one request and wait for the response whatever it says.
    pub async fn request(
        &mut self,
        req: &SelectorRequest,
    ) -> Result<SelectorResponse, ClientError> {
        let addr = &self.addr;
        let frame = |cause: FrameError| ClientError::Frame {
            addr: addr.clone(),
            detail: certs::explain_error(&cause),
            cause,
        };
        let exchange = async {
            self.framed.send(req).await.map_err(frame)?;
            self.framed.recv::<SelectorResponse>().await.map_err(frame)
        };
        tokio::time::timeout(self.timeout, exchange)
            .await
            .map_err(|_| ClientError::Timeout {
                addr: addr.clone(),
                ms: self.timeout.as_millis() as u64,
            })??
            .ok_or_else(|| ClientError::Closed { addr: addr.clone() })
    }

    /// Send one operation and return its reply.
    pub async fn call(&mut self, op: SelectorOp) -> Result<SelectorReply, ClientError> {
        let id = self.next_id;
        self.next_id += 1;
        let resp = self.request(&SelectorRequest::new(id, op)).await?;
        if resp.id != id {
            if let Err(e) = resp.result {
                return Err(ClientError::Server(e));
            }
            return Err(self.mismatch(format!("answer to request {} for {id}", resp.id)));
        }
        resp.result.map_err(ClientError::Server)
    }

    fn mismatch(&self, what: String) -> ClientError {
        ClientError::Mismatch {
            addr: self.addr.clone(),
            what,
        }
    }

    /// Choose nodes.
    pub async fn select(&mut self, query: SelectQuery) -> Result<Vec<NodeView>, ClientError> {
        match self.call(SelectorOp::Select(query)).await? {
            SelectorReply::Selected(v) => Ok(v),
            other => Err(self.mismatch(format!("{other:?} to a select"))),
        }
    }

    /// List live nodes.
    pub async fn nodes(&mut self, query: NodesQuery) -> Result<NodeList, ClientError> {
        match self.call(SelectorOp::Nodes(query)).await? {
            SelectorReply::Nodes(v) => Ok(v),
            other => Err(self.mismatch(format!("{other:?} to a node listing"))),
        }
    }

    /// List live selectors and account services.
    pub async fn services(&mut self) -> Result<Vec<ServiceView>, ClientError> {
        match self.call(SelectorOp::Services).await? {
            SelectorReply::Services(v) => Ok(v),
            other => Err(self.mismatch(format!("{other:?} to a service listing"))),
        }
    }

    /// The selector's counters.
    pub async fn stats(&mut self) -> Result<SelectorStats, ClientError> {
        match self.call(SelectorOp::Stats).await? {
            SelectorReply::Stats(v) => Ok(v),
            other => Err(self.mismatch(format!("{other:?} to a stats request"))),
        }
    }

    /// Send raw bytes on the connection (tests: malformed frames).
    pub async fn send_raw(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        use tokio::io::AsyncWriteExt;
        let s = self.framed.get_mut();
        s.write_all(bytes).await?;
        s.flush().await
    }

    /// Read the next response (after [`SelectorClient::send_raw`]).
    pub async fn read_response(&mut self) -> Result<Option<SelectorResponse>, ClientError> {
        let addr = self.addr.clone();
        let ms = self.timeout.as_millis() as u64;
        tokio::time::timeout(self.timeout, self.framed.recv::<SelectorResponse>())
            .await
            .map_err(|_| ClientError::Timeout {
                addr: addr.clone(),
                ms,
            })?
            .map_err(|cause| ClientError::Frame {
                addr,
                detail: certs::explain_error(&cause),
                cause,
            })
    }

    /// Close the connection cleanly.
    pub async fn close(mut self) {
        use tokio::io::AsyncWriteExt;
        let _ = self.framed.get_mut().shutdown().await;
    }
}
