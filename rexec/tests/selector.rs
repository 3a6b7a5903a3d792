//! The client's side of node selection, against in-process test peers.
//!
//! The selectors here are test peers, not vexecd: small TLS servers built
//! from the real `proto::select` types, the real framing and real mutual TLS
//! (certificates from `certs::testing::TestPki`), that answer as a script
//! says and record every request. That lets these tests check what only the
//! client decides — failing over from a dead address and from a server
//! whose certificate names another service, staying silent about it without
//! `-v`, stopping at a refusal every selector would repeat, and sending
//! `exclude` after a node's certificate named another node — without
//! depending on a selector's own choices. A "forged" node is likewise a TLS
//! server holding the certificate of another node. Scenarios with the real
//! vexecd and rexecd are in `tests/tests/e2e/select.rs`.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use certs::Role;
use certs::testing::TestPki;
use clients::selector::{AskAnyError, ask_any};
use proto::Framed;
use proto::announce::NodeStatus;
use proto::select::{
    NodeList, NodeView, NodesQuery, SelectorError, SelectorErrorCode, SelectorOp, SelectorReply,
    SelectorRequest, SelectorResponse,
};
use rexec::choose::{ChooseError, ROUNDS, Wanted, choose};
use rexec::config::SelectorEntry;
use rexec::select::ASK_TIMEOUT;
use testhost::net::Channel;
use tokio::net::TcpListener;

type Script = dyn Fn(&SelectorRequest, usize) -> Result<SelectorReply, SelectorError> + Send + Sync;

/// A selector test peer: where it listens and the requests it received.
struct Peer {
    addr: SocketAddr,
    seen: Arc<Mutex<Vec<SelectorRequest>>>,
}

impl Peer {
    fn entry(&self, name: &str) -> SelectorEntry {
        SelectorEntry {
            name: name.into(),
            addr: self.addr.to_string(),
        }
    }

    fn requests(&self) -> Vec<SelectorRequest> {
        self.seen.lock().unwrap().clone()
    }
}

/// Serve the selector protocol with the service certificate `cert_name`,
/// answering the n-th request (from 0) as `script` says.
async fn selector_peer(pki: &TestPki, cert_name: &str, script: Arc<Script>) -> Peer {
    peer_as(pki, Role::Service, cert_name, script).await
}

/// [`selector_peer`] with a certificate of any role.
async fn peer_as(pki: &TestPki, role: Role, cert_name: &str, script: Arc<Script>) -> Peer {
    let acceptor = pki.acceptor(role, cert_name).unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            let (acceptor, record, script) = (acceptor.clone(), record.clone(), script.clone());
            tokio::spawn(async move {
                let Ok((stream, _who)) = certs::accept(&acceptor, tcp).await else {
                    return;
                };
                let mut framed = Framed::new(stream, proto::select::MAX_SELECTOR_REQUEST);
                while let Ok(Some(req)) = framed.recv::<SelectorRequest>().await {
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
    Peer { addr, seen }
}

/// A TLS server that completes handshakes with the certificate of node
/// `cert_name` and then says nothing (a forged announcement's address).
async fn node_impostor(pki: &TestPki, cert_name: &str) -> SocketAddr {
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
async fn dead_addr() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    l.local_addr().unwrap()
}

fn view(name: &str, addr: SocketAddr, price: i64) -> NodeView {
    NodeView {
        name: name.into(),
        addr,
        status: NodeStatus {
            cpus: 4,
            price,
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

fn listing(nodes: Vec<NodeView>) -> Arc<Script> {
    Arc::new(move |req, _| match &req.op {
        SelectorOp::Nodes(_) => Ok(SelectorReply::Nodes(NodeList {
            total: nodes.len() as u64,
            nodes: nodes.clone(),
        })),
        SelectorOp::Services => Ok(SelectorReply::Services(Vec::new())),
        _ => Err(SelectorError::new(SelectorErrorCode::Unsupported, "no")),
    })
}

fn user_connector(pki: &TestPki) -> tokio_rustls::TlsConnector {
    certs::connector(&pki.tls_paths(Role::User, "alice")).unwrap()
}

#[tokio::test]
async fn a_dead_selector_and_an_impostor_are_passed_over() {
    let pki = TestPki::new();
    let nodes = vec![view("n1", "127.0.0.1:7001".parse().unwrap(), 0)];
    let impostor = selector_peer(&pki, "v9", listing(nodes.clone())).await;
    // A node's certificate with the selector's name: the right host, the wrong role.
    let node_as_selector = peer_as(&pki, Role::Node, "v4", listing(nodes.clone())).await;
    let good = selector_peer(&pki, "v3", listing(nodes)).await;
    let dead = dead_addr().await;
    let selectors = [
        SelectorEntry {
            name: "v1".into(),
            addr: dead.to_string(),
        },
        impostor.entry("v2"), // its certificate says v9
        node_as_selector.entry("v4"),
        good.entry("v3"),
    ];
    let query = NodesQuery::default();
    let (by, list) = ask_any(&user_connector(&pki), &selectors, &query, ASK_TIMEOUT)
        .await
        .unwrap();
    assert_eq!(by, 3);
    assert_eq!(list.nodes[0].name, "n1");
    assert_eq!(good.requests().len(), 1);
    assert!(
        impostor.requests().is_empty() && node_as_selector.requests().is_empty(),
        "a request went to a server that is not the selector dialled"
    );

    // Without the good one: one error naming each selector and why.
    let e = ask_any(&user_connector(&pki), &selectors[..3], &query, ASK_TIMEOUT)
        .await
        .unwrap_err();
    let text = e.to_string();
    assert!(
        matches!(e, AskAnyError::NoneAnswered(ref a) if a.len() == 3),
        "{text}"
    );
    assert!(
        text.contains(&format!("selector v1 at {dead}: cannot connect")),
        "{text}"
    );
    // rustls refuses it first: the certificate does not name the host dialled.
    assert!(
        text.contains(&format!("selector v2 at {}: ", impostor.addr))
            && text.contains("does not name the host we dialled"),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "selector v4 at {}: {} is node v4, not service v4",
            node_as_selector.addr, node_as_selector.addr
        )),
        "{text}"
    );
}

#[tokio::test]
async fn a_refusal_of_the_request_itself_is_not_asked_again() {
    let pki = TestPki::new();
    let needs_length: Arc<Script> = Arc::new(|_, _| {
        Err(SelectorError::new(
            SelectorErrorCode::NeedsLength,
            "history needs the expected CPU length",
        ))
    });
    let first = selector_peer(&pki, "v1", needs_length).await;
    let second = selector_peer(&pki, "v2", listing(Vec::new())).await;
    let selectors = [first.entry("v1"), second.entry("v2")];
    let wanted = Wanted {
        count: 1,
        policy: "history".into(),
        max_price: None,
        expected_cpu_ms: None,
    };
    let quiet = |_: &str| {};
    let e = choose(
        &user_connector(&pki),
        &selectors,
        &wanted,
        Duration::from_secs(2),
        &quiet,
    )
    .await
    .err()
    .expect("a refused select must fail");
    assert!(
        e.to_string()
            .contains("selector v1 refused: history needs the expected CPU length"),
        "{e}"
    );
    assert_eq!(first.requests().len(), 1);
    assert!(second.requests().is_empty());
}

#[tokio::test]
async fn a_node_whose_certificate_names_another_is_excluded_and_replaced() {
    let pki = TestPki::new();
    // n1's announcement was forged: its address answers with n9's certificate.
    let forged = node_impostor(&pki, "n9").await;
    let dead = dead_addr().await;
    let names = ["n1", "n2", "n3", "n4", "n5", "n6"];
    let script: Arc<Script> = Arc::new(move |req, _| {
        let SelectorOp::Select(q) = &req.op else {
            return Err(SelectorError::new(SelectorErrorCode::Unsupported, "no"));
        };
        let pick = names
            .iter()
            .find(|n| !q.exclude.iter().any(|e| e == *n))
            .unwrap();
        let addr = if *pick == "n1" { forged } else { dead };
        Ok(SelectorReply::Selected(vec![view(pick, addr, 500_000)]))
    });
    let selector = selector_peer(&pki, "v1", script).await;
    let notes = Mutex::new(Vec::<String>::new());
    let note = |m: &str| notes.lock().unwrap().push(m.to_string());
    let wanted = Wanted {
        count: 1,
        policy: "lowest-price".into(),
        max_price: Some(1_000_000),
        expected_cpu_ms: None,
    };
    let e = choose(
        &user_connector(&pki),
        &[selector.entry("v1")],
        &wanted,
        Duration::from_secs(2),
        &note,
    )
    .await
    .err()
    .expect("no node works");
    let excludes: Vec<Vec<String>> = selector
        .requests()
        .into_iter()
        .map(|r| match r.op {
            SelectorOp::Select(q) => {
                assert_eq!((q.count, q.max_price), (1, Some(1_000_000)));
                q.exclude
            }
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(
        excludes,
        [vec![], vec!["n1"], vec!["n1", "n2"], vec!["n1", "n2", "n3"]],
        "bounded to {ROUNDS} selections, each excluding the nodes that failed"
    );
    let ChooseError::Exhausted { rejected, .. } = &e else {
        panic!("{e}")
    };
    assert_eq!(rejected.len(), ROUNDS);
    assert!(
        rejected[0]
            .why
            .contains("does not name the host we dialled"),
        "{e}"
    );
    let notes = notes.into_inner().unwrap();
    assert_eq!(
        notes[0],
        "selected n1 (price 0.5/min, 3 idle CPUs) by lowest-price via v1"
    );
    assert!(
        notes[1].starts_with(&format!("node n1 at {forged}: ")),
        "{notes:?}"
    );
    assert!(notes[1].ends_with("; asking for another"), "{notes:?}");
}

/// A client configuration for alice with a `[selectors]` table.
fn client_config(pki: &TestPki, dir: &Path, selectors: &[SelectorEntry]) -> PathBuf {
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

async fn rexec(config: &Path, args: &[&str]) -> std::process::Output {
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_fails_over_silently_and_says_so_under_v() {
    let pki = TestPki::new();
    let dir = tempfile::tempdir().unwrap();
    let nodes = vec![
        view("n2", "127.0.0.1:7002".parse().unwrap(), 2_000_000),
        view("n1", "127.0.0.1:7001".parse().unwrap(), 0),
    ];
    let good = selector_peer(&pki, "v2", listing(nodes)).await;
    let dead = dead_addr().await;
    let selectors = [
        SelectorEntry {
            name: "v1".into(),
            addr: dead.to_string(),
        },
        good.entry("v2"),
    ];
    let config = client_config(&pki, dir.path(), &selectors);

    let out = rexec(&config, &["nodes"]).await;
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert_eq!(stderr, "", "failing over must be silent without -v");
    let rows: Vec<Vec<&str>> = stdout
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(rows.len(), 3, "{stdout}");
    assert_eq!(
        rows[1][..3],
        ["n1", "127.0.0.1:7001", "0"],
        "by name: {stdout}"
    );
    assert_eq!(rows[2][..3], ["n2", "127.0.0.1:7002", "2"], "{stdout}");
    assert_eq!(rows[1][7..], ["-", "1.2s"], "{stdout}");

    let out = rexec(&config, &["nodes", "-v"]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "selector v2 at {} answered: 2 live nodes",
            good.addr
        )),
        "{stderr}"
    );

    // All selectors down: one error naming each, exit status 1.
    let config = client_config(&pki, dir.path(), &selectors[..1]);
    let out = rexec(&config, &["nodes"]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("no selector could answer"), "{stderr}");
    assert!(
        stderr.contains(&format!("selector v1 at {dead}")),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_run_form_checks_its_selection_options_before_asking() {
    let pki = TestPki::new();
    let dir = tempfile::tempdir().unwrap();
    let good = selector_peer(&pki, "v1", listing(Vec::new())).await;
    let config = client_config(&pki, dir.path(), &[good.entry("v1")]);
    for (args, expect) in [
        (
            &["--policy", "history", "true"][..],
            "--policy history needs --length",
        ),
        (&["--max-price", "-1", "true"][..], "--max-price -1"),
        (&["--max-price", "cheap", "true"][..], "--max-price cheap"),
        (&["--length", "forever", "true"][..], "--length forever"),
    ] {
        let out = rexec(&config, args).await;
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(expect), "{args:?}: {stderr}");
    }
    let out = rexec(&config, &["nodes", "--policy", "history"]).await;
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("needs --length"));
    assert!(
        good.requests().is_empty(),
        "nothing is asked of a bad request"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_run_form_never_launches_on_a_forged_node() {
    let pki = TestPki::new();
    let dir = tempfile::tempdir().unwrap();
    let forged = node_impostor(&pki, "n9").await;
    let script: Arc<Script> = Arc::new(move |req, _| match &req.op {
        SelectorOp::Select(q) if q.exclude.is_empty() => {
            Ok(SelectorReply::Selected(vec![view("n1", forged, 0)]))
        }
        SelectorOp::Select(_) => Err(SelectorError::new(
            SelectorErrorCode::NotEnoughNodes,
            "1 node asked for, 0 qualify",
        )),
        _ => Err(SelectorError::new(SelectorErrorCode::Unsupported, "no")),
    });
    let selector = selector_peer(&pki, "v2", script).await;
    let dead = dead_addr().await;
    let config = client_config(
        &pki,
        dir.path(),
        &[
            SelectorEntry {
                name: "v1".into(),
                addr: dead.to_string(),
            },
            selector.entry("v2"),
        ],
    );
    let out = rexec(&config, &["-n", "1", "true"]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(255), "{stderr}");
    assert!(stderr.contains("1 node asked for, 0 qualify"), "{stderr}");
    assert!(
        stderr.contains(&format!("node n1 at {forged}: "))
            && stderr.contains("does not name the host we dialled"),
        "the failure says which node was given up and why: {stderr}"
    );
    let excludes: Vec<_> = selector
        .requests()
        .into_iter()
        .filter_map(|r| match r.op {
            SelectorOp::Select(q) => Some(q.exclude),
            _ => None,
        })
        .collect();
    assert_eq!(excludes, [vec![], vec!["n1".to_string()]]);
}

/// A client configuration for alice with a `[discovery]` table on loopback.
fn discovery_config(pki: &TestPki, dir: &Path, channel: Channel) -> PathBuf {
    let tls = pki.tls_paths(Role::User, "alice");
    let text = format!(
        "ca = {:?}\ncert = {:?}\nkey = {:?}\n[discovery]\ncluster = \"lab\"\ngroup = \"{}\"\n\
         port = {}\ninterface = \"127.0.0.1\"\nttl = 0\nperiod = \"200ms\"\n",
        tls.ca, tls.cert, tls.key, channel.group, channel.port
    );
    let path = dir.join(format!("client-discovery-{}.toml", channel.port));
    std::fs::write(&path, text).unwrap();
    path
}

/// Announce selector `name` at `addr` on the loopback group of
/// [`discovery_config`] until the task is dropped.
fn announce_selector(
    channel: Channel,
    cluster: &str,
    name: &str,
    addr: SocketAddr,
) -> tokio::task::JoinHandle<()> {
    let cfg = discovery::config::DiscoveryFile {
        cluster: Some(cluster.into()),
        group: Some(channel.group.to_string()),
        port: Some(channel.port),
        interface: Some("127.0.0.1".into()),
        ttl: Some(0),
        period: Some("200ms".into()),
        ..Default::default()
    }
    .resolve()
    .unwrap();
    let sender = discovery::net::Sender::new(&cfg).unwrap();
    let (cluster, name) = (cluster.to_string(), name.to_string());
    tokio::spawn(discovery::net::announce_loop(
        sender,
        cfg.period,
        Arc::new(tokio::sync::Notify::new()),
        move || proto::announce::Announcement {
            cluster: cluster.clone(),
            name: name.clone(),
            addr,
            incarnation: 0,
            seq: 0,
            period_ms: 0,
            kind: proto::announce::Kind::Selector,
            summary: None,
        },
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn selectors_are_found_from_announcements_on_the_group() {
    let pki = TestPki::new();
    let dir = tempfile::tempdir().unwrap();
    let channel = testhost::net::channel();
    let nodes = vec![view("n1", "127.0.0.1:7001".parse().unwrap(), 0)];
    let v1 = selector_peer(&pki, "v1", listing(nodes)).await;
    // Another cluster's selector on the same group is not asked.
    let foreign = selector_peer(&pki, "w1", listing(Vec::new())).await;
    let _a = announce_selector(channel, "lab", "v1", v1.addr);
    let _b = announce_selector(channel, "other", "w1", foreign.addr);
    let config = discovery_config(&pki, dir.path(), channel);
    let out = rexec(&config, &["nodes", "-v"]).await;
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(
        stderr.contains(&format!("heard selector v1 ({})", v1.addr)),
        "{stderr}"
    );
    assert!(
        stdout.lines().nth(1).unwrap_or("").starts_with("n1 "),
        "{stdout}"
    );
    // It asked v1 for the other services, then for the nodes.
    let ops: Vec<_> = v1.requests().into_iter().map(|r| r.op).collect();
    assert!(
        matches!(ops[..], [SelectorOp::Services, SelectorOp::Nodes(_)]),
        "{ops:?}"
    );
    assert!(foreign.requests().is_empty());

    // The next run asks the remembered selector at once, without listening.
    let out = rexec(&config, &["nodes", "-v"]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("asking the selectors remembered in "),
        "{stderr}"
    );
    assert!(!stderr.contains("heard selector"), "{stderr}");
    let ops: Vec<_> = v1.requests().into_iter().map(|r| r.op).collect();
    assert!(
        matches!(ops[..], [_, _, SelectorOp::Services, SelectorOp::Nodes(_)]),
        "{ops:?}"
    );
}

/// A remembered list that cannot be used: the client listens after all, and says
/// nothing about it without `-v`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_misplaced_or_damaged_cache_falls_back_to_listening_silently() {
    let pki = TestPki::new();
    let dir = tempfile::tempdir().unwrap();
    let channel = testhost::net::channel();
    let nodes = vec![view("n1", "127.0.0.1:7001".parse().unwrap(), 0)];
    let v1 = selector_peer(&pki, "v1", listing(nodes)).await;
    // Something else, with a certificate of the cluster but another name.
    let other = selector_peer(&pki, "w1", listing(Vec::new())).await;
    let _a = announce_selector(channel, "lab", "v1", v1.addr);
    let config = discovery_config(&pki, dir.path(), channel);
    let discovery = discovery::config::DiscoveryConfig {
        cluster: "lab".into(),
        group: channel.group,
        port: channel.port,
        ..Default::default()
    };
    let cache = discovery::cache::Cache::new(&dir.path().join("cache"), "selectors", &discovery);
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let header = format!("rexec-market service cache 1\nwritten {secs}\n");
    let cases = [
        ("a dead selector", format!("{header}v1 {closed}\n")),
        (
            "an address held by another",
            format!("{header}v1 {}\n", other.addr),
        ),
        (
            "a damaged file",
            "rexec-market service cache 1\nwritten x\n\u{0}".to_string(),
        ),
    ];
    for (what, text) in cases {
        std::fs::create_dir_all(cache.path().parent().unwrap()).unwrap();
        std::fs::write(cache.path(), text).unwrap();
        let out = rexec(&config, &["nodes"]).await;
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        assert_eq!(out.status.code(), Some(0), "{what}: {stderr}");
        assert_eq!(stderr, "", "{what}: printed without -v");
        assert!(
            stdout.lines().nth(1).unwrap_or("").starts_with("n1 "),
            "{what}: {stdout}"
        );
        // What was heard replaced the bad entry.
        let (kept, _) = cache
            .load(discovery::cache::MAX_AGE, std::time::SystemTime::now())
            .unwrap_or_else(|| panic!("{what}: nothing remembered"));
        assert_eq!(kept.len(), 1, "{what}: {kept:?}");
        assert_eq!(
            (kept[0].name.as_str(), kept[0].addr.clone()),
            ("v1", v1.addr.to_string()),
            "{what}"
        );
    }
    assert!(
        other.requests().is_empty(),
        "the misplaced address was asked"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_selector_heard_is_a_clear_error_after_one_and_a_half_periods() {
    let pki = TestPki::new();
    let dir = tempfile::tempdir().unwrap();
    let channel = testhost::net::channel();
    let config = discovery_config(&pki, dir.path(), channel);
    let out = rexec(&config, &["nodes"]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "no selector heard on {}:{} (cluster lab) within 300ms",
            channel.group, channel.port
        )),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_commands_without_nodes_ask_every_listed_node_by_name() {
    let pki = TestPki::new();
    let dir = tempfile::tempdir().unwrap();
    // n1's address holds another node's certificate; nothing listens at n2's.
    let forged = node_impostor(&pki, "n9").await;
    let dead = dead_addr().await;
    let nodes = vec![view("n2", dead, 0), view("n1", forged, 0)];
    let good = selector_peer(&pki, "v2", listing(nodes)).await;
    let selectors = [
        SelectorEntry {
            name: "v1".into(),
            addr: dead_addr().await.to_string(),
        },
        good.entry("v2"),
    ];
    let config = client_config(&pki, dir.path(), &selectors);

    let out = rexec(&config, &["jobs"]).await;
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(
        stdout.starts_with("NODE "),
        "the table is still printed: {stdout}"
    );
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 2, "one line per node, none about v1: {stderr}");
    assert!(lines[0].starts_with("rexec: node n1: "), "{stderr}");
    assert!(
        lines[0].contains("does not name"),
        "the certificate: {stderr}"
    );
    assert!(lines[1].starts_with("rexec: node n2: "), "{stderr}");
    assert!(lines[1].contains(&dead.to_string()), "{stderr}");
    let asked: Vec<bool> = good
        .requests()
        .iter()
        .map(|r| matches!(r.op, SelectorOp::Nodes(_)))
        .collect();
    assert_eq!(asked, [true], "one Nodes request");

    // --nodes picks among the listed nodes; a name not listed is a usage error.
    let out = rexec(&config, &["kill", "00000000000000ff", "--nodes", "n7"]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("node \"n7\" is not among the live nodes selector v2 knows: n1, n2"),
        "{stderr}"
    );
    let out = rexec(&config, &["bid", "00000000000000ff", "1", "--nodes", "n2"]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "only n2 is asked: {stderr}");
    assert!(stderr.starts_with("rexec: node n2: "), "{stderr}");

    // No selector answers: the selectors are named, exit status 1.
    let config = client_config(&pki, dir.path(), &selectors[..1]);
    let out = rexec(&config, &["jobs"]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("no selector could answer"), "{stderr}");
    assert!(out.stdout.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_config_with_no_way_to_find_nodes_says_what_to_add() {
    let pki = TestPki::new();
    let dir = tempfile::tempdir().unwrap();
    let config = client_config(&pki, dir.path(), &[]);
    for args in [
        &["jobs"][..],
        &["kill", "00000000000000ff"],
        &["bid", "00000000000000ff", "1"],
        &["true"],
    ] {
        let out = rexec(&config, args).await;
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        for what in [
            "has no [nodes], no [selectors] and no [discovery] table",
            "add a [nodes] table",
            "a [selectors] table",
            "a [discovery] table",
        ] {
            assert!(stderr.contains(what), "{args:?}: {what} in {stderr}");
        }
    }
}
