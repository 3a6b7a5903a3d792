//! One framed request/response connection to a daemon over mutual TLS, written once
//! for every protocol: [`Client::connect`] dials with a time limit and checks the
//! server's certificate; [`Client::call`] sends a request with a fresh id, waits for
//! the answer within the time limit and checks it answers that request. A
//! [`Protocol`] says what differs between daemons: the request and response types,
//! the frame limits, and the service's name in messages ("selector", "accountd").
//!
//! Every failure is an [`RpcError`] naming the service and the address, one line
//! each; a refusal by the server is [`RpcError::Server`] with the protocol's own
//! error inside.

use std::fmt;
use std::marker::PhantomData;
use std::time::Duration;

use certs::{CertError, Role};
use proto::{FrameError, Framed};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

use crate::dial::{DialError, dial};

#[cfg(test)]
mod tests;

/// What one protocol brings to a [`Client`].
pub trait Protocol {
    /// The service's name in messages ("selector", "accountd").
    const SERVICE: &'static str;
    /// Largest response frame accepted.
    const MAX_REPLY: usize;
    /// Largest request frame sent.
    const MAX_REQUEST: usize;
    /// What is asked ("select 4 nodes").
    type Op;
    /// The envelope of a request on the wire (the op and its id).
    type Request: Serialize + Sync;
    /// The envelope of a response on the wire (an id and a result).
    type Response: DeserializeOwned;
    /// A successful answer.
    type Reply;
    /// The server's refusal.
    type Refusal: fmt::Display + fmt::Debug;

    /// The request for `op` with id `id`.
    fn request(id: u64, op: Self::Op) -> Self::Request;

    /// The id a response answers and its result.
    fn response(response: Self::Response) -> (u64, Result<Self::Reply, Self::Refusal>);
}

/// Why a call failed. Each message is complete in itself and names the service and
/// its address; the underlying error is kept but is not the `source`, so a printed
/// chain does not say the cause twice.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RpcError<R> {
    /// The TCP connection could not be made.
    #[error("cannot reach {service} at {addr}: {cause}; is it running and is the address right?")]
    Connect {
        /// The service ([`Protocol::SERVICE`]).
        service: &'static str,
        /// The address dialled.
        addr: String,
        /// The cause.
        cause: std::io::Error,
    },
    /// The TLS handshake failed or the server is not who it should be.
    #[error("TLS with {service} at {addr} failed: {cause}")]
    Tls {
        /// The service.
        service: &'static str,
        /// The address dialled.
        addr: String,
        /// The cause (boxed: it is large, and errors are passed by value).
        cause: Box<CertError>,
    },
    /// The connection broke or carried garbage.
    #[error("connection to {service} at {addr} failed: {detail}")]
    Frame {
        /// The service.
        service: &'static str,
        /// The address.
        addr: String,
        /// The cause in one phrase (a refused certificate is explained).
        detail: String,
        /// The cause as it came (boxed: it is large).
        cause: Box<FrameError>,
    },
    /// The server closed the connection without answering (it may have refused our
    /// certificate).
    #[error(
        "{service} at {addr} closed the connection; check that your certificate is valid for this cluster"
    )]
    Closed {
        /// The service.
        service: &'static str,
        /// The address.
        addr: String,
    },
    /// No connection or no answer in time.
    #[error("{service} at {addr} did not answer within {}", Limit(*.limit))]
    Timeout {
        /// The service.
        service: &'static str,
        /// The address.
        addr: String,
        /// The limit.
        limit: Duration,
    },
    /// The answer was for another request.
    #[error("{service} at {addr} answered request {got} while {want} was expected")]
    Mismatch {
        /// The service.
        service: &'static str,
        /// The address.
        addr: String,
        /// The id sent.
        want: u64,
        /// The id received.
        got: u64,
    },
    /// The answer is of the wrong kind for the question.
    #[error("{service} at {addr} answered {got} to a {asked}")]
    WrongReply {
        /// The service.
        service: &'static str,
        /// The address.
        addr: String,
        /// The kind of request sent.
        asked: &'static str,
        /// The kind of reply received.
        got: &'static str,
    },
    /// No address is known yet: none is configured and the service has not been heard
    /// announcing itself.
    #[error(
        "no {service} known: none is configured and none has been heard announcing itself \
         on this cluster"
    )]
    NoAddress {
        /// The service.
        service: &'static str,
    },
    /// The server refused or failed the request.
    #[error("{0}")]
    Server(R),
}

/// A time limit as a user reads it: "2 s", or "500 ms" when not whole seconds.
struct Limit(Duration);

impl fmt::Display for Limit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.subsec_millis() == 0 {
            write!(f, "{} s", self.0.as_secs())
        } else {
            write!(f, "{} ms", self.0.as_millis())
        }
    }
}

/// An open connection to one server of protocol `P`.
pub struct Client<P: Protocol> {
    framed: Framed<TlsStream<TcpStream>>,
    addr: String,
    next_id: u64,
    timeout: Duration,
    protocol: PhantomData<fn() -> P>,
}

impl<P: Protocol> Client<P> {
    /// Connects to `addr` (`host:port`) and checks the server's certificate is the
    /// `service` certificate named `server_name`. `timeout` limits the TCP connection
    /// here and each call's exchange after.
    pub async fn connect(
        addr: &str,
        connector: &TlsConnector,
        server_name: &str,
        timeout: Duration,
    ) -> Result<Self, RpcError<P::Refusal>> {
        let service = P::SERVICE;
        let a = addr.to_string();
        let (stream, _peer) = dial(addr, connector, Role::Service, server_name, timeout)
            .await
            .map_err(|e| match e {
                DialError::Timeout(limit) => RpcError::Timeout {
                    service,
                    addr: a.clone(),
                    limit,
                },
                DialError::Connect(cause) => RpcError::Connect {
                    service,
                    addr: a.clone(),
                    cause,
                },
                DialError::Tls(cause) => RpcError::Tls {
                    service,
                    addr: a.clone(),
                    cause: Box::new(cause),
                },
            })?;
        Ok(Client {
            framed: Framed::with_limits(stream, P::MAX_REPLY, P::MAX_REQUEST),
            addr: a,
            next_id: 1,
            timeout,
            protocol: PhantomData,
        })
    }

    /// Sets the time limit of each call from now on.
    pub fn set_timeout(&mut self, timeout: Duration) {
        self.timeout = timeout;
    }

    /// Sets the connection's TCP keepalive and `TCP_USER_TIMEOUT`
    /// ([`crate::liveness::set_liveness`]): a server whose host vanished is then
    /// noticed within about `user_timeout`, idle or in a call, not at the call's limit.
    pub fn set_liveness(&self, interval: Duration, user_timeout: Duration) -> std::io::Result<()> {
        let (tcp, _) = self.framed.get_ref().get_ref();
        crate::liveness::set_liveness(tcp, interval, user_timeout)
    }

    /// The address this client is connected to.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// Sends `op` with a fresh id and returns the server's reply, or its refusal as
    /// [`RpcError::Server`].
    pub async fn call(&mut self, op: P::Op) -> Result<P::Reply, RpcError<P::Refusal>> {
        let id = self.next_id;
        self.next_id += 1;
        let response = self.request(&P::request(id, op)).await?;
        match P::response(response) {
            (got, result) if got == id => result.map_err(RpcError::Server),
            // A request the server could not read is refused under another id.
            (_, Err(refusal)) => Err(RpcError::Server(refusal)),
            (got, Ok(_)) => Err(RpcError::Mismatch {
                service: P::SERVICE,
                addr: self.addr.clone(),
                want: id,
                got,
            }),
        }
    }

    /// Sends one request as it is (its id unchecked) and waits for the next response,
    /// whatever it says: for tests of the server.
    pub async fn request(
        &mut self,
        request: &P::Request,
    ) -> Result<P::Response, RpcError<P::Refusal>> {
        let addr = &self.addr;
        let framed = &mut self.framed;
        let exchange = async {
            framed
                .send(request)
                .await
                .map_err(|e| frame::<P>(addr, e))?;
            framed
                .recv::<P::Response>()
                .await
                .map_err(|e| frame::<P>(addr, e))
        };
        tokio::time::timeout(self.timeout, exchange)
            .await
            .map_err(|_| timed_out::<P>(addr, self.timeout))??
            .ok_or_else(|| RpcError::Closed {
                service: P::SERVICE,
                addr: self.addr.clone(),
            })
    }

    /// Sends raw bytes on the connection (tests: malformed frames).
    pub async fn send_raw(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        let s = self.framed.get_mut();
        s.write_all(bytes).await?;
        s.flush().await
    }

    /// Reads the next response within the time limit (after [`Client::send_raw`]);
    /// `None` when the server closed the connection.
    pub async fn read_response(&mut self) -> Result<Option<P::Response>, RpcError<P::Refusal>> {
        let addr = &self.addr;
        tokio::time::timeout(self.timeout, self.framed.recv::<P::Response>())
            .await
            .map_err(|_| timed_out::<P>(addr, self.timeout))?
            .map_err(|e| frame::<P>(addr, e))
    }

    /// The error for a reply of kind `got` to a request of kind `asked`.
    pub fn wrong_reply(&self, asked: &'static str, got: &'static str) -> RpcError<P::Refusal> {
        RpcError::WrongReply {
            service: P::SERVICE,
            addr: self.addr.clone(),
            asked,
            got,
        }
    }

    /// Closes the connection cleanly (TLS close_notify).
    pub async fn close(mut self) {
        let _ = self.framed.get_mut().shutdown().await;
    }
}

fn frame<P: Protocol>(addr: &str, cause: FrameError) -> RpcError<P::Refusal> {
    RpcError::Frame {
        service: P::SERVICE,
        addr: addr.to_string(),
        detail: certs::explain_error(&cause),
        cause: Box::new(cause),
    }
}

fn timed_out<P: Protocol>(addr: &str, limit: Duration) -> RpcError<P::Refusal> {
    RpcError::Timeout {
        service: P::SERVICE,
        addr: addr.to_string(),
        limit,
    }
}
