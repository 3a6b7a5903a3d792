//! [`Client`]: a raw node-protocol client over real mutual TLS, and the [`Outcome`]
//! of a job session.

use certs::Role;
use proto::Framed;
use proto::node::{Chunk, ExitStatus, FromNode, Launch, Notice, Started, ToNode};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

use super::{NODE, PATIENCE, pki};

/// A raw protocol client over real mutual TLS.
pub struct Client {
    pub framed: Framed<TlsStream<TcpStream>>,
}

/// What a job session delivered up to its end.
#[derive(Debug, Default)]
pub struct Outcome {
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub exit: Option<proto::node::Exit>,
    pub error: Option<proto::node::ErrorReply>,
    pub notices: Vec<Notice>,
}

impl Outcome {
    /// The exit status; panics with everything received when there was none.
    pub fn status(&self) -> ExitStatus {
        self.exit
            .as_ref()
            .unwrap_or_else(|| panic!("no Exit received: {self:?}"))
            .status
    }
}

impl Client {
    /// TCP and TLS to the daemon, checking its certificate names node `n1`.
    pub async fn connect(addr: &str, role: Role, name: &str) -> Client {
        let tls = pki().tls_paths(role, name);
        Client::connect_with(addr, &certs::connector(&tls).unwrap()).await
    }

    /// Like [`Self::connect`], but `None` when the daemon closes the connection or the
    /// handshake fails (a connection over `max_connections` is closed at once).
    pub async fn try_connect(addr: &str, role: Role, name: &str) -> Option<Client> {
        let tls = pki().tls_paths(role, name);
        let connector = certs::connector(&tls).unwrap();
        let connected = tokio::time::timeout(PATIENCE, async {
            let tcp = TcpStream::connect(addr).await.ok()?;
            tcp.set_nodelay(true).unwrap();
            certs::connect(&connector, tcp, Role::Node, NODE).await.ok()
        });
        let (stream, _) = connected.await.unwrap_or_else(|_| {
            panic!("no TLS session with rexecd at {addr} within {PATIENCE:?}")
        })?;
        Some(Client {
            framed: Framed::new(stream, proto::DEFAULT_MAX_FRAME),
        })
    }

    /// TCP and TLS to the daemon with a prepared connector.
    pub async fn connect_with(addr: &str, connector: &tokio_rustls::TlsConnector) -> Client {
        // Bounded, like every wait of the harness: a daemon that accepts but never
        // answers fails the test with a message instead of hanging it.
        let connected = tokio::time::timeout(PATIENCE, async {
            let tcp = TcpStream::connect(addr).await.unwrap();
            // Without it, the TLS Finished and the first frame meet Nagle and delayed
            // ACKs (40 ms).
            tcp.set_nodelay(true).unwrap();
            certs::connect(connector, tcp, Role::Node, NODE)
                .await
                .unwrap()
        });
        let (stream, _) = connected
            .await
            .unwrap_or_else(|_| panic!("no TLS session with rexecd at {addr} within {PATIENCE:?}"));
        Client {
            framed: Framed::new(stream, proto::DEFAULT_MAX_FRAME),
        }
    }

    /// Sends one message.
    pub async fn send(&mut self, msg: ToNode) {
        tokio::time::timeout(PATIENCE, self.framed.send(&msg))
            .await
            .unwrap_or_else(|_| panic!("rexecd read nothing more within {PATIENCE:?}"))
            .unwrap();
    }

    /// The next message other than a heartbeat (`None` at end of stream or on a
    /// connection error).
    pub async fn recv(&mut self) -> Option<FromNode> {
        // One deadline for the whole call: rexecd's heartbeats keep coming while a
        // job hangs, and must not keep a waiting test alive forever.
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            let got = tokio::time::timeout_at(deadline, self.framed.recv::<FromNode>())
                .await
                .expect("no message other than heartbeats from rexecd in time");
            match got {
                Ok(Some(FromNode::Heartbeat(_))) => continue,
                Ok(other) => return other,
                Err(_) => return None,
            }
        }
    }

    /// Sends `msg` and returns the answer.
    pub async fn recv_after(&mut self, msg: ToNode) -> Option<FromNode> {
        self.send(msg).await;
        self.recv().await
    }

    /// Launches and expects `Started`.
    pub async fn start(&mut self, request: Launch) -> Started {
        match self.recv_after(ToNode::Launch(request)).await {
            Some(FromNode::Started(s)) => s,
            other => panic!("expected Started, got {other:?}"),
        }
    }

    /// Reads stdout chunks until `needle` has appeared; returns what was read.
    pub async fn read_until(&mut self, needle: &str) -> String {
        let mut seen = Vec::new();
        while !String::from_utf8_lossy(&seen).contains(needle) {
            match self.recv().await {
                Some(FromNode::Stdout(Chunk(bytes))) => seen.extend(bytes),
                Some(FromNode::Stderr(_) | FromNode::Notice(_)) => {}
                other => panic!(
                    "expected output {needle:?}, got {other:?} after {:?}",
                    String::from_utf8_lossy(&seen)
                ),
            }
        }
        String::from_utf8_lossy(&seen).into_owned()
    }

    /// Reads everything up to `Exit` (or an error, or the end of the stream).
    pub async fn outcome(&mut self) -> Outcome {
        let mut out = Outcome::default();
        loop {
            match self.recv().await {
                Some(FromNode::Stdout(c)) => out.stdout.extend(c.0),
                Some(FromNode::Stderr(c)) => out.stderr.extend(c.0),
                Some(FromNode::Notice(n)) => out.notices.push(n),
                // Flow control: a count of the stdin the job took, each quarter window
                // (`stdin_window.rs` checks those).
                Some(FromNode::StdinTaken(_)) => {}
                Some(FromNode::Exit(e)) => {
                    out.exit = Some(e);
                    // Exit is the last message: the node closes the connection after it.
                    assert!(self.recv().await.is_none(), "message after Exit");
                    return out;
                }
                Some(FromNode::Error(e)) => {
                    out.error = Some(e);
                    return out;
                }
                None => return out,
                Some(other) => panic!("unexpected message {other:?}"),
            }
        }
    }

    /// Launches `request` and expects an `Error` answer.
    pub async fn refused(&mut self, request: Launch) -> proto::node::ErrorReply {
        match self.recv_after(ToNode::Launch(request)).await {
            Some(FromNode::Error(e)) => {
                assert!(
                    self.recv().await.is_none(),
                    "session stayed open after Error"
                );
                e
            }
            other => panic!("expected Error, got {other:?}"),
        }
    }
}
