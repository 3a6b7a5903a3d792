//! One TLS session with one node, up to the point where a job runs: resolve
//! and connect, the mutual TLS handshake (`certs::connect` over a
//! read-buffered TCP stream: the peer must be the node we dialled), `Hello`/`Welcome`, and then either
//! `Launch`/`Started` or one admin request. [`SessionError`] says, in one
//! line, why a step failed; callers prefix it with the node and rank.

use std::time::Duration;

use certs::{CertError, LazyBufReader, Role};
use proto::node::{ErrorCode, ErrorReply, FromNode, Hello, Launch, Started, ToNode};
use proto::{FrameError, Framed};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

use crate::exit::Class;

/// The stream of a session: TLS over a read-buffered TCP stream.
pub type Tls = TlsStream<LazyBufReader<TcpStream>>;

/// Bytes read from the socket at a time, at most. rustls asks its transport
/// for 4 KiB per read; serving those from this buffer turns 64 system calls
/// into one when output streams in. The buffer starts at 16 KiB and grows
/// while reads fill it ([`LazyBufReader`]), so a short job's session does
/// not zero and fault in 256 KiB it never uses.
pub const READ_BUFFER: usize = 256 * 1024;

/// How long a TCP connection may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Largest frame accepted from a node (the protocol's default).
pub const MAX_FRAME: usize = proto::DEFAULT_MAX_FRAME;

/// Why a session could not be opened or a request failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SessionError {
    /// The address did not resolve.
    #[error("cannot resolve {addr}: {source}")]
    Resolve {
        /// The configured address.
        addr: String,
        /// Why.
        source: std::io::Error,
    },
    /// TCP connection refused or failed.
    #[error("cannot connect to {addr}: {source}; is rexecd running there?")]
    Connect {
        /// The address.
        addr: String,
        /// Why.
        source: std::io::Error,
    },
    /// TCP connection took too long.
    #[error("connecting to {addr} timed out after {}s", CONNECT_TIMEOUT.as_secs())]
    ConnectTimeout {
        /// The address.
        addr: String,
    },
    /// The TLS handshake failed, took too long, or a certificate is unusable.
    #[error("{0}")]
    Tls(#[from] CertError),
    /// The peer's certificate is valid but names someone else.
    #[error("{addr} is {got}, not {expected}; check the address of this node in the configuration")]
    WrongPeer {
        /// The address.
        addr: String,
        /// Who we meant to reach.
        expected: String,
        /// Who answered.
        got: String,
    },
    /// The node refused the request.
    #[error("{0}")]
    Refused(ErrorReply),
    /// Reading or writing frames failed.
    #[error("lost connection: {}", explain_frame(.0))]
    Frame(#[from] FrameError),
    /// The node closed the connection.
    #[error("lost connection: the node closed it")]
    Closed,
    /// The node said nothing for too long.
    #[error("missed heartbeats for {}", crate::clock::show(*.0))]
    Silent(Duration),
    /// The node did not accept a session in time.
    #[error("no session within {}s", .0.as_secs())]
    NoSession(Duration),
    /// The node sent something out of order.
    #[error("protocol error: expected {expected}, got {got}")]
    Unexpected {
        /// What the client waited for.
        expected: &'static str,
        /// What came.
        got: String,
    },
    /// No common protocol version.
    #[error("{0}")]
    Version(#[from] proto::node::VersionMismatch),
}

impl SessionError {
    /// The class of a launch that fails this way: the program could not
    /// be started, the market refused the bid (negative, over the node's
    /// `max_rate`, no credit), or the node failed.
    pub fn class(&self) -> Class {
        match self {
            SessionError::Refused(e) => match e.code {
                ErrorCode::SpawnFailed => Class::NotStarted,
                ErrorCode::NoCredit | ErrorCode::BadBid => Class::Refused,
                _ => Class::Failed,
            },
            _ => Class::Failed,
        }
    }
}

/// One line for a frame error after the TLS handshake: TLS alerts are
/// explained by `certs`; a connection that just ends was closed by the node
/// (or its machine) without ending the session.
pub fn explain_frame(e: &FrameError) -> String {
    match e {
        FrameError::Io(io) if io.kind() == std::io::ErrorKind::UnexpectedEof => {
            "the node closed it without ending the session (did rexecd or its machine stop?)"
                .to_string()
        }
        FrameError::Io(io) => certs::explain_io(io),
        other => other.to_string(),
    }
}

/// A connected, welcomed session with one node.
pub struct Session {
    /// Frames both ways.
    pub framed: Framed<Tls>,
    /// The node's name.
    pub node: String,
    /// How long the node may stay silent.
    pub timeout: Duration,
}

impl Session {
    /// Connect to node `node` at `addr`, run the TLS handshake and the
    /// version handshake.
    pub async fn open(
        connector: &TlsConnector,
        node: &str,
        addr: &str,
        timeout: Duration,
    ) -> Result<Session, SessionError> {
        let mut session = Session::connect(connector, node, addr, timeout).await?;
        session.framed.send(&hello()).await?;
        session.welcomed().await?;
        Ok(session)
    }

    /// [`Session::open`] and [`Session::launch`] in one flight: `Hello` and the
    /// launch go together, then `Welcome` and `Started` are awaited in turn. rexecd
    /// reads frames in order, so this differs from the two steps only by a round
    /// trip saved; a node that refuses the `Hello` still answers with its `Error`
    /// (it reads on until the client closes before it closes itself).
    pub async fn open_and_launch(
        connector: &TlsConnector,
        node: &str,
        addr: &str,
        timeout: Duration,
        launch: &Launch,
        pmi: bool,
    ) -> Result<(Session, Started), SessionError> {
        let mut session = Session::connect(connector, node, addr, timeout).await?;
        let sent = session
            .framed
            .send_all(&[hello(), launch_msg(launch, pmi)])
            .await;
        if let Err(e) = sent {
            // A node that refused may have closed before reading it all: its
            // refusal, if it sent one, says more than the broken connection.
            return Err(match session.next().await {
                Err(refused @ SessionError::Refused(_)) => refused,
                _ => e.into(),
            });
        }
        session.welcomed().await?;
        let started = session.started().await?;
        Ok((session, started))
    }

    /// Resolve, connect and run the TLS handshake.
    async fn connect(
        connector: &TlsConnector,
        node: &str,
        addr: &str,
        timeout: Duration,
    ) -> Result<Session, SessionError> {
        let resolve = |source| SessionError::Resolve {
            addr: addr.to_string(),
            source,
        };
        let addrs: Vec<_> = tokio::net::lookup_host(addr)
            .await
            .map_err(resolve)?
            .collect();
        let mut last = std::io::Error::new(std::io::ErrorKind::NotFound, "no addresses");
        let mut tcp = None;
        for a in addrs {
            match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(a)).await {
                Err(_) => {
                    return Err(SessionError::ConnectTimeout {
                        addr: addr.to_string(),
                    });
                }
                Ok(Ok(s)) => {
                    tcp = Some(s);
                    break;
                }
                Ok(Err(e)) => last = e,
            }
        }
        let tcp = tcp.ok_or_else(|| SessionError::Connect {
            addr: addr.to_string(),
            source: last,
        })?;
        // Small frames (signals, keystrokes) should not wait for Nagle.
        let _ = tcp.set_nodelay(true);
        // A session lasts as long as its job: TCP must give up on a node
        // machine that vanished even while this client is stopped (Ctrl-Z).
        let _ = set_liveness(&tcp, timeout);
        let mut buffered = LazyBufReader::new(tcp);
        buffered.buffer(READ_BUFFER);
        let (stream, _) = certs::connect(connector, buffered, Role::Node, node)
            .await
            .map_err(|e| match e {
                // Keep the hint about where the wrong address comes from.
                CertError::WrongPeer {
                    peer,
                    expected,
                    got,
                } => SessionError::WrongPeer {
                    addr: peer,
                    expected,
                    got,
                },
                other => SessionError::Tls(other),
            })?;
        Ok(Session {
            framed: Framed::new(stream, MAX_FRAME),
            node: node.to_string(),
            timeout,
        })
    }

    /// Waits for `Welcome` and checks the version the node chose.
    async fn welcomed(&mut self) -> Result<(), SessionError> {
        match self.next().await? {
            FromNode::Welcome(w) => {
                w.check_version()?;
                Ok(())
            }
            other => Err(unexpected("Welcome", &other)),
        }
    }

    /// The next frame that is not a heartbeat, within the silence timeout.
    /// A notice is printed to stderr and skipped; an `Error` becomes
    /// [`SessionError::Refused`].
    pub async fn next(&mut self) -> Result<FromNode, SessionError> {
        loop {
            let frame = tokio::time::timeout(self.timeout, self.framed.recv::<FromNode>())
                .await
                .map_err(|_| SessionError::Silent(self.timeout))??;
            match frame {
                None => return Err(SessionError::Closed),
                Some(FromNode::Heartbeat(_)) => continue,
                Some(FromNode::Notice(n)) => {
                    eprintln!("rexec: node {}: {}", self.node, n.text);
                }
                Some(FromNode::Error(e)) => return Err(SessionError::Refused(e)),
                Some(other) => return Ok(other),
            }
        }
    }

    /// Send `launch` (as `LaunchPmi` when `pmi`, for `--mpi`) and wait for `Started`.
    pub async fn launch(&mut self, launch: &Launch, pmi: bool) -> Result<Started, SessionError> {
        self.framed.send(&launch_msg(launch, pmi)).await?;
        self.started().await
    }

    /// Waits for `Started`.
    async fn started(&mut self) -> Result<Started, SessionError> {
        match self.next().await? {
            FromNode::Started(s) => Ok(s),
            other => Err(unexpected("Started", &other)),
        }
    }

    /// Send an admin request and return the answer.
    pub async fn request(&mut self, msg: &ToNode) -> Result<FromNode, SessionError> {
        self.framed.send(msg).await?;
        self.next().await
    }
}

/// This client's `Hello`.
fn hello() -> ToNode {
    ToNode::Hello(Hello::new(concat!("rexec ", env!("CARGO_PKG_VERSION"))))
}

/// `launch` as sent: `LaunchPmi` for `--mpi`.
fn launch_msg(launch: &Launch, pmi: bool) -> ToNode {
    match pmi {
        true => ToNode::LaunchPmi(launch.clone()),
        false => ToNode::Launch(launch.clone()),
    }
}

/// TCP keepalive (probes every heartbeat interval once the connection is
/// idle) and `TCP_USER_TIMEOUT` of twice the heartbeat timeout: data the node
/// does not acknowledge for that long ends the connection.
pub fn set_liveness(tcp: &TcpStream, timeout: Duration) -> std::io::Result<()> {
    let sock = socket2::SockRef::from(tcp);
    let user_timeout = timeout * 2;
    let step = crate::clock::HEARTBEAT_INTERVAL;
    let probes = (user_timeout.as_secs() / step.as_secs().max(1)).clamp(1, 127) as u32;
    let keepalive = socket2::TcpKeepalive::new()
        .with_time(step)
        .with_interval(step)
        .with_retries(probes);
    sock.set_tcp_keepalive(&keepalive)?;
    sock.set_tcp_user_timeout(Some(user_timeout))
}

fn unexpected(expected: &'static str, got: &FromNode) -> SessionError {
    let got = format!("{got:?}").chars().take(80).collect();
    SessionError::Unexpected { expected, got }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_session_socket_gets_keepalive_and_a_user_timeout() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let tcp = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        set_liveness(&tcp, Duration::from_secs(5)).unwrap();
        let sock = socket2::SockRef::from(&tcp);
        assert!(sock.keepalive().unwrap());
        assert_eq!(
            sock.tcp_keepalive_interval().unwrap(),
            Duration::from_secs(1)
        );
        assert_eq!(
            sock.tcp_user_timeout().unwrap(),
            Some(Duration::from_secs(10))
        );
    }
}
