//! The test peers: selectors answering as a script says, node impostors, dead
//! addresses, and the client configuration and `rexec` run the binary tests share.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use certs::Role;
use certs::testing::TestPki;
use proto::Framed;
use proto::announce::NodeStatus;
use proto::select::{
    NodeList, NodeView, SelectorError, SelectorErrorCode, SelectorOp, SelectorReply,
    SelectorRequest, SelectorResponse,
};
use rexec::config::SelectorEntry;
use tokio::net::TcpListener;

pub(crate) type Script =
    dyn Fn(&SelectorRequest, usize) -> Result<SelectorReply, SelectorError> + Send + Sync;

/// A selector test peer: where it listens and the requests it received.
pub(crate) struct Peer {
    pub(crate) addr: SocketAddr,
    seen: Arc<Mutex<Vec<SelectorRequest>>>,
    handshakes: Arc<AtomicUsize>,
}

impl Peer {
    pub(crate) fn entry(&self, name: &str) -> SelectorEntry {
        SelectorEntry {
            name: name.into(),
            addr: self.addr.to_string(),
        }
    }

    pub(crate) fn requests(&self) -> Vec<SelectorRequest> {
        self.seen.lock().unwrap().clone()
    }

    /// TLS handshakes completed with clients (one per connection).
    pub(crate) fn handshakes(&self) -> usize {
        self.handshakes.load(Ordering::SeqCst)
    }
}

/// Serve the selector protocol with the service certificate `cert_name`,
/// answering the n-th request (from 0) as `script` says.
pub(crate) async fn selector_peer(pki: &TestPki, cert_name: &str, script: Arc<Script>) -> Peer {
    peer_as(pki, Role::Service, cert_name, script).await
}

/// [`selector_peer`] with a certificate of any role.
pub(crate) async fn peer_as(
    pki: &TestPki,
    role: Role,
    cert_name: &str,
    script: Arc<Script>,
) -> Peer {
    serve_peer(pki, role, cert_name, script, usize::MAX).await
}

/// A selector peer that closes each connection after answering one request.
pub(crate) async fn one_answer_peer(pki: &TestPki, cert_name: &str, script: Arc<Script>) -> Peer {
    serve_peer(pki, Role::Service, cert_name, script, 1).await
}

async fn serve_peer(
    pki: &TestPki,
    role: Role,
    cert_name: &str,
    script: Arc<Script>,
    per_connection: usize,
) -> Peer {
    let acceptor = pki.acceptor(role, cert_name).unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let handshakes = Arc::new(AtomicUsize::new(0));
    let (record, shaken) = (seen.clone(), handshakes.clone());
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            let (acceptor, record, script) = (acceptor.clone(), record.clone(), script.clone());
            let shaken = shaken.clone();
            tokio::spawn(async move {
                let Ok((stream, _who)) = certs::accept(&acceptor, tcp).await else {
                    return;
                };
                shaken.fetch_add(1, Ordering::SeqCst);
                let mut framed = Framed::new(stream, proto::select::MAX_SELECTOR_REQUEST);
                let mut answered = 0;
                while answered < per_connection
                    && let Ok(Some(req)) = framed.recv::<SelectorRequest>().await
                {
                    answered += 1;
                    let n = {
                        let mut r = record.lock().unwrap();
                        r.push(req.clone());
                        r.len() - 1
                    };
                    let result = req.check().and_then(|()| script(&req, n));
                    let reply = SelectorResponse { id: req.id, result };
                    if framed.send(&reply).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    Peer {
        addr,
        seen,
        handshakes,
    }
}

/// A TLS server that completes handshakes with the certificate of node
/// `cert_name` and then says nothing (a forged announcement's address).
pub(crate) async fn node_impostor(pki: &TestPki, cert_name: &str) -> SocketAddr {
    let acceptor = pki.acceptor(Role::Node, cert_name).unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                if let Ok((stream, _)) = certs::accept(&acceptor, tcp).await {
                    tokio::time::sleep(Duration::from_secs(10)).await;
                    drop(stream);
                }
            });
        }
    });
    addr
}

/// An address nothing listens on.
pub(crate) async fn dead_addr() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    l.local_addr().unwrap()
}

pub(crate) fn view(name: &str, addr: SocketAddr, price: i64) -> NodeView {
    NodeView {
        name: name.into(),
        addr,
        status: NodeStatus {
            cpus: 4,
            price,
            charging: 0,
            contended: false,
            running_jobs: 1,
            runnable: 1,
            load_milli: 1_000,
            idle_milli: 3_000,
            free_mem_mib: 1024,
        },
        idle_milli: 3_000,
        speed_milli: None,
        predicted_ms: None,
        age_ms: 1_200,
    }
}

pub(crate) fn listing(nodes: Vec<NodeView>) -> Arc<Script> {
    Arc::new(move |req, _| match &req.op {
        SelectorOp::Nodes(_) => Ok(SelectorReply::Nodes(NodeList {
            total: nodes.len() as u64,
            nodes: nodes.clone(),
        })),
        SelectorOp::Services => Ok(SelectorReply::Services(Vec::new())),
        _ => Err(SelectorError::new(SelectorErrorCode::Unsupported, "no")),
    })
}

pub(crate) fn user_connector(pki: &TestPki) -> tokio_rustls::TlsConnector {
    certs::connector(&pki.tls_paths(Role::User, "alice")).unwrap()
}

/// A client configuration for alice with a `[selectors]` table.
pub(crate) fn client_config(pki: &TestPki, dir: &Path, selectors: &[SelectorEntry]) -> PathBuf {
    let tls = pki.tls_paths(Role::User, "alice");
    let mut text = format!(
        "ca = {:?}\ncert = {:?}\nkey = {:?}\n[selectors]\n",
        tls.ca, tls.cert, tls.key
    );
    for s in selectors {
        text.push_str(&format!("{} = \"{}\"\n", s.name, s.addr));
    }
    let path = dir.join("client.toml");
    std::fs::write(&path, text).unwrap();
    path
}

pub(crate) async fn rexec(config: &Path, args: &[&str]) -> std::process::Output {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_rexec"));
    // Each test's own cache of heard selectors, beside its config.
    let cache = config.parent().unwrap().join("cache");
    cmd.args(args)
        .env("REXEC_CONFIG", config)
        .env("REXEC_CACHE_DIR", cache);
    for var in [
        "REXEC_CA",
        "REXEC_CERT",
        "REXEC_KEY",
        "REXEC_CRL",
        "XDG_CONFIG_HOME",
    ] {
        cmd.env_remove(var);
    }
    let run = tokio::time::timeout(Duration::from_secs(60), cmd.output());
    run.await.expect("rexec hung").expect("cannot run rexec")
}
