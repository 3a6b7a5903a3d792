//! The generic client against real loopback TLS servers (a throwaway CA from
//! `certs::testing::TestPki`) that answer as each test scripts: the right answer,
//! an answer to another request, silence, a closed connection, or the wrong
//! certificate. The selector protocol stands for any.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use certs::Role;
use certs::testing::TestPki;
use proto::Framed;
use proto::select::{
    MAX_SELECTOR_REQUEST, NodeList, SelectorError, SelectorErrorCode, SelectorReply,
    SelectorRequest, SelectorResponse, SelectorStats,
};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;

use super::RpcError;
use crate::selector::SelectorClient;

/// What the test server does with one request.
enum Action {
    Answer(SelectorResponse),
    Silent,
    Close,
}

type Script = dyn Fn(&SelectorRequest) -> Action + Send + Sync;

/// A selector-protocol server holding the certificate `role` `name`; returns its
/// address and the ids of the requests it read.
async fn server(
    pki: &TestPki,
    role: Role,
    name: &str,
    script: Arc<Script>,
) -> (SocketAddr, Arc<Mutex<Vec<u64>>>) {
    let acceptor = pki.acceptor(role, name).unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let (acceptor, record, script) = (acceptor.clone(), record.clone(), script.clone());
            tokio::spawn(async move {
                let Ok((stream, _)) = certs::accept(&acceptor, tcp).await else {
                    return;
                };
                let mut framed = Framed::new(stream, MAX_SELECTOR_REQUEST);
                while let Ok(Some(req)) = framed.recv::<SelectorRequest>().await {
                    record.lock().unwrap().push(req.id);
                    match script(&req) {
                        Action::Answer(resp) => {
                            if framed.send(&resp).await.is_err() {
                                return;
                            }
                        }
                        Action::Silent => tokio::time::sleep(Duration::from_secs(30)).await,
                        Action::Close => {
                            let _ = framed.get_mut().shutdown().await;
                            return;
                        }
                    }
                }
            });
        }
    });
    (addr, seen)
}

fn answer(id: u64, reply: SelectorReply) -> Action {
    Action::Answer(SelectorResponse {
        id,
        result: Ok(reply),
    })
}

fn stats(id: u64) -> Action {
    answer(id, SelectorReply::Stats(SelectorStats::default()))
}

const PATIENCE: Duration = Duration::from_secs(5);

async fn connect(pki: &TestPki, addr: SocketAddr, limit: Duration) -> SelectorClient {
    let connector = pki.connector(Role::User, "alice").unwrap();
    SelectorClient::connect(&addr.to_string(), &connector, "v1", limit)
        .await
        .unwrap()
}

/// A server of service certificate v1 answering as `script` says, and the error of
/// one `stats` call to it.
async fn failed_call(script: Arc<Script>) -> (SocketAddr, RpcError<SelectorError>) {
    let pki = TestPki::new();
    let (addr, _) = server(&pki, Role::Service, "v1", script).await;
    let e = connect(&pki, addr, PATIENCE).await.stats().await;
    (addr, e.expect_err("the call must fail"))
}

#[tokio::test]
async fn each_call_has_a_fresh_id_and_gets_its_typed_answer() {
    let pki = TestPki::new();
    let (addr, seen) = server(&pki, Role::Service, "v1", Arc::new(|r| stats(r.id))).await;
    let mut c = connect(&pki, addr, PATIENCE).await;
    c.stats().await.unwrap();
    c.stats().await.unwrap();
    assert_eq!(*seen.lock().unwrap(), [1, 2]);
    assert_eq!(c.addr(), addr.to_string());
    c.close().await;
}

#[tokio::test]
async fn an_answer_to_another_request_is_a_mismatch() {
    let (addr, e) = failed_call(Arc::new(|r| stats(r.id + 7))).await;
    assert!(
        matches!(
            e,
            RpcError::Mismatch {
                want: 1,
                got: 8,
                ..
            }
        ),
        "{e:?}"
    );
    assert_eq!(
        e.to_string(),
        format!("selector at {addr} answered request 8 while 1 was expected")
    );
}

#[tokio::test]
async fn a_refusal_under_another_id_is_the_servers_refusal() {
    let script: Arc<Script> = Arc::new(|_| {
        Action::Answer(SelectorResponse {
            id: 0,
            result: Err(SelectorError::new(
                SelectorErrorCode::BadRequest,
                "unreadable",
            )),
        })
    });
    let (_, e) = failed_call(script).await;
    assert!(matches!(e, RpcError::Server(ref r) if r.code == SelectorErrorCode::BadRequest));
    assert_eq!(e.to_string(), "unreadable");
}

#[tokio::test]
async fn an_answer_of_the_wrong_kind_is_an_error_not_a_panic() {
    let script: Arc<Script> = Arc::new(|r| {
        answer(
            r.id,
            SelectorReply::Nodes(NodeList {
                total: 0,
                nodes: Vec::new(),
            }),
        )
    });
    let (addr, e) = failed_call(script).await;
    assert_eq!(
        e.to_string(),
        format!("selector at {addr} answered Nodes to a Stats")
    );
}

#[tokio::test]
async fn a_silent_server_times_out_within_the_limit() {
    let pki = TestPki::new();
    let (addr, seen) = server(&pki, Role::Service, "v1", Arc::new(|_| Action::Silent)).await;
    let limit = Duration::from_millis(300);
    let mut c = connect(&pki, addr, limit).await;
    let started = std::time::Instant::now();
    let e = c.stats().await.unwrap_err();
    let took = started.elapsed();
    assert!(matches!(e, RpcError::Timeout { .. }), "{e:?}");
    assert!(took >= limit && took < limit * 10, "gave up after {took:?}");
    assert_eq!(
        e.to_string(),
        format!("selector at {addr} did not answer within 300 ms")
    );
    assert_eq!(seen.lock().unwrap().len(), 1, "the request was sent");
}

#[tokio::test]
async fn a_server_closing_without_answering_is_closed() {
    let (addr, e) = failed_call(Arc::new(|_| Action::Close)).await;
    assert!(matches!(e, RpcError::Closed { .. }), "{e:?}");
    assert_eq!(
        e.to_string(),
        format!(
            "selector at {addr} closed the connection; check that your certificate is valid \
             for this cluster"
        )
    );
}

#[tokio::test]
async fn a_server_with_another_certificate_is_refused_before_any_request() {
    let pki = TestPki::new();
    let connector = pki.connector(Role::User, "alice").unwrap();
    // The right name with the wrong role, and the right role with the wrong name.
    for (role, name) in [(Role::Node, "v1"), (Role::Service, "v9")] {
        let (addr, seen) = server(&pki, role, name, Arc::new(|r| stats(r.id))).await;
        let e = SelectorClient::connect(&addr.to_string(), &connector, "v1", PATIENCE)
            .await
            .err()
            .expect("the handshake must fail");
        assert!(matches!(e, RpcError::Tls { .. }), "{e:?}");
        let text = e.to_string();
        assert!(
            text.starts_with(&format!("TLS with selector at {addr} failed: ")),
            "{text}"
        );
        assert!(!text.contains('\n'), "one line: {text}");
        assert!(seen.lock().unwrap().is_empty());
    }
}

#[tokio::test]
async fn nothing_listening_is_a_connect_error_naming_the_address() {
    let pki = TestPki::new();
    let addr = TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap()
        .local_addr()
        .unwrap();
    let connector = pki.connector(Role::User, "alice").unwrap();
    let e = SelectorClient::connect(&addr.to_string(), &connector, "v1", PATIENCE)
        .await
        .err()
        .expect("nothing listens");
    assert!(
        e.to_string()
            .starts_with(&format!("cannot reach selector at {addr}: ")),
        "{e}"
    );
}
