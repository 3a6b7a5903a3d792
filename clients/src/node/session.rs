//! One TLS session with one node, up to the point where a job runs: resolve
//! and connect, the mutual TLS handshake (`certs::connect` over a
//! read-buffered TCP stream: the peer must be the node we dialled), `Hello`/`Welcome`,
//! and then either a launch answered by `Started` or one admin request
//! ([`super::admin`]).

use std::time::Duration;

use certs::{CertError, LazyBufReader, Role};
use proto::Framed;
use proto::batch::SignedLaunch;
use proto::node::{FromNode, Launch, Started, ToNode};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

use super::{Agent, HEARTBEAT_INTERVAL, SessionError};

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

/// A connected, welcomed session with one node.
pub struct Session {
    /// Frames both ways.
    pub framed: Framed<Tls>,
    /// The node's name.
    pub node: String,
    /// How long the node may stay silent.
    pub timeout: Duration,
    /// Who speaks, and where the node's notices go.
    pub agent: &'static Agent,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("node", &self.node)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

/// Where a session goes and who opens it: the node's name (its certificate
/// must name it) and address, the TLS connector, and how long the node may
/// stay silent.
#[derive(Clone, Copy)]
pub struct Dial<'a> {
    /// Who speaks, and where the node's notices go.
    pub agent: &'static Agent,
    /// The client's TLS configuration.
    pub connector: &'a TlsConnector,
    /// The node's name.
    pub node: &'a str,
    /// The node's address, `host:port`.
    pub addr: &'a str,
    /// How long the node may stay silent.
    pub timeout: Duration,
}

impl Session {
    /// Connect to node `node` at `addr`, run the TLS handshake and the
    /// version handshake ([`Dial::open`]).
    pub async fn open(
        agent: &'static Agent,
        connector: &TlsConnector,
        node: &str,
        addr: &str,
        timeout: Duration,
    ) -> Result<Session, SessionError> {
        let dial = Dial {
            agent,
            connector,
            node,
            addr,
            timeout,
        };
        dial.open().await
    }
}

impl Dial<'_> {
    /// Connect, run the TLS handshake and the version handshake.
    pub async fn open(self) -> Result<Session, SessionError> {
        let mut session = self.connect().await?;
        session.framed.send(&self.agent.hello()).await?;
        session.welcomed().await?;
        Ok(session)
    }

    /// [`Dial::open`] and a launch in one flight: `Hello` and the launch
    /// (`ToNode::Launch`, `LaunchPmi` or `LaunchSigned`, see [`launch_msg`]) go
    /// together, then `Welcome` and `Started` are awaited in turn. rexecd reads
    /// frames in order, so this differs from the two steps only by a round trip
    /// saved; a node that refuses the `Hello` still answers with its `Error` (it
    /// reads on until the client closes before it closes itself).
    pub async fn open_and_launch(self, launch: ToNode) -> Result<(Session, Started), SessionError> {
        let mut session = self.connect().await?;
        let sent = session.framed.send_all(&[self.agent.hello(), launch]).await;
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
    async fn connect(self) -> Result<Session, SessionError> {
        let Dial {
            agent,
            connector,
            node,
            addr,
            timeout,
        } = self;
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
            agent,
        })
    }
}

impl Session {
    /// Waits for `Welcome` and checks the version the node chose.
    async fn welcomed(&mut self) -> Result<(), SessionError> {
        match self.next().await? {
            FromNode::Welcome(w) => {
                w.check_version()?;
                Ok(())
            }
            other => Err(SessionError::unexpected("Welcome", &other)),
        }
    }

    /// The next frame that is not a heartbeat, within the silence timeout.
    /// A notice goes to the agent's `on_notice` and is skipped; an `Error`
    /// becomes [`SessionError::Refused`].
    pub async fn next(&mut self) -> Result<FromNode, SessionError> {
        loop {
            let frame = tokio::time::timeout(self.timeout, self.framed.recv::<FromNode>())
                .await
                .map_err(|_| SessionError::Silent(self.timeout))??;
            match frame {
                None => return Err(SessionError::Closed),
                Some(FromNode::Heartbeat(_)) => continue,
                Some(FromNode::Notice(n)) => (self.agent.on_notice)(&self.node, &n),
                Some(FromNode::Error(e)) => return Err(SessionError::Refused(e)),
                Some(other) => return Ok(other),
            }
        }
    }

    /// Send `launch` (as `LaunchPmi` when `pmi`, for `rexec --mpi`) and wait for
    /// `Started`.
    pub async fn launch(&mut self, launch: &Launch, pmi: bool) -> Result<Started, SessionError> {
        self.framed.send(&launch_msg(launch, pmi)).await?;
        self.started().await
    }

    /// Send a launch request as built by [`launch_request`] and wait for `Started`.
    pub async fn launch_request(&mut self, request: ToNode) -> Result<Started, SessionError> {
        self.framed.send(&request).await?;
        self.started().await
    }

    /// Send a queue's signed launch of one rank and wait for `Started`.
    pub async fn launch_signed(&mut self, launch: SignedLaunch) -> Result<Started, SessionError> {
        self.framed.send(&ToNode::LaunchSigned(launch)).await?;
        self.started().await
    }

    /// Waits for `Started`.
    async fn started(&mut self) -> Result<Started, SessionError> {
        match self.next().await? {
            FromNode::Started(s) => Ok(s),
            other => Err(SessionError::unexpected("Started", &other)),
        }
    }

    /// Send a request and return the answer (the typed forms are in
    /// [`super::admin`]).
    pub async fn request(&mut self, msg: &ToNode) -> Result<FromNode, SessionError> {
        self.framed.send(msg).await?;
        self.next().await
    }
}

/// `launch` as sent: `LaunchPmi` for `rexec --mpi`, else `Launch`.
pub fn launch_msg(launch: &Launch, pmi: bool) -> ToNode {
    launch_request(launch, pmi, None, None)
}

/// `launch` as sent: under a spending ceiling of `max_cost` micro-credits for
/// the whole job, or charged to project `account` (`rexec -A`), `LaunchCapped`
/// (which the node enforces); else as [`launch_msg`], so that a node that
/// predates `LaunchCapped` still takes a launch that needs neither.
pub fn launch_request(
    launch: &Launch,
    pmi: bool,
    max_cost: Option<i64>,
    account: Option<&str>,
) -> ToNode {
    if max_cost.is_some() || account.is_some() {
        return ToNode::LaunchCapped(Box::new(proto::node::CappedLaunch {
            launch: launch.clone(),
            pmi,
            max_cost,
            account: account.map(str::to_string),
        }));
    }
    match pmi {
        true => ToNode::LaunchPmi(launch.clone()),
        false => ToNode::Launch(launch.clone()),
    }
}

/// TCP keepalive (probes every heartbeat interval once the connection is
/// idle) and `TCP_USER_TIMEOUT` of twice the heartbeat timeout: data the node
/// does not acknowledge for that long ends the connection.
pub fn set_liveness(tcp: &TcpStream, timeout: Duration) -> std::io::Result<()> {
    crate::liveness::set_liveness(tcp, HEARTBEAT_INTERVAL, timeout * 2)
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
