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

mod discovery;
mod peers;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use certs::Role;
use certs::testing::TestPki;
use clients::selector::{AskAnyError, Selectors, Services, ask_any};
use proto::select::{NodesQuery, SelectorError, SelectorErrorCode, SelectorOp, SelectorReply};
use rexec::choose::{ChooseError, ROUNDS, Wanted, choose};
use rexec::config::SelectorEntry;
use rexec::select::ASK_TIMEOUT;

use crate::peers::*;

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
async fn the_selector_that_answered_is_asked_again_on_its_connection() {
    let pki = TestPki::new();
    let nodes = vec![view("n1", "127.0.0.1:7001".parse().unwrap(), 0)];
    let v1 = selector_peer(&pki, "v1", listing(nodes.clone())).await;
    let v2 = selector_peer(&pki, "v2", listing(nodes.clone())).await;
    let connector = user_connector(&pki);
    let mut set = Selectors::new(vec![
        SelectorEntry {
            name: "v0".into(),
            addr: dead_addr().await.to_string(),
        },
        v1.entry("v1"),
        v2.entry("v2"),
    ]);
    assert_eq!(
        set.ask(&connector, &Services, ASK_TIMEOUT).await.unwrap().0,
        1
    );
    let (by, list) = set
        .ask(&connector, &NodesQuery::default(), ASK_TIMEOUT)
        .await
        .unwrap();
    assert_eq!((by, list.nodes[0].name.as_str()), (1, "n1"));
    assert_eq!((v1.handshakes(), v1.requests().len()), (1, 2));

    // A new order keeps the connection when its selector is still listed.
    set.set_list(vec![v2.entry("v2"), v1.entry("v1")]);
    assert_eq!(set.connected(), Some(&v1.entry("v1")));
    let (by, _) = set
        .ask(&connector, &NodesQuery::default(), ASK_TIMEOUT)
        .await
        .unwrap();
    assert_eq!((by, v1.handshakes(), v2.handshakes()), (1, 1, 0));
    // Without it, the connection goes and the list is asked in order.
    set.set_list(vec![v2.entry("v2")]);
    assert_eq!(set.connected(), None);
    let (by, _) = set
        .ask(&connector, &NodesQuery::default(), ASK_TIMEOUT)
        .await
        .unwrap();
    assert_eq!((by, v2.handshakes()), (0, 1));

    // A connection the selector closed is dialled again, before the others.
    let once = one_answer_peer(&pki, "v3", listing(nodes)).await;
    let mut set = Selectors::new(vec![once.entry("v3"), v2.entry("v2")]);
    for _ in 0..3 {
        let (by, _) = set
            .ask(&connector, &NodesQuery::default(), ASK_TIMEOUT)
            .await
            .unwrap();
        assert_eq!(by, 0);
    }
    assert_eq!((once.handshakes(), once.requests().len()), (3, 3));
    assert_eq!(v2.requests().len(), 1, "v2 was not asked for v3");
}

#[tokio::test]
async fn a_selector_short_of_nodes_on_the_open_connection_passes_to_the_next() {
    let pki = TestPki::new();
    let nodes = vec![view("n1", "127.0.0.1:7001".parse().unwrap(), 0)];
    // v1 answers Services, then is short of nodes for every Select.
    let short: Arc<Script> = Arc::new(|req, _| match req.op {
        SelectorOp::Services => Ok(SelectorReply::Services(Vec::new())),
        _ => Err(SelectorError::new(
            SelectorErrorCode::NotEnoughNodes,
            "knows 0 nodes",
        )),
    });
    let v1 = selector_peer(&pki, "v1", short).await;
    let v2 = selector_peer(&pki, "v2", listing(nodes)).await;
    let connector = user_connector(&pki);
    let mut set = Selectors::new(vec![v1.entry("v1"), v2.entry("v2")]);
    assert_eq!(
        set.ask(&connector, &Services, ASK_TIMEOUT).await.unwrap().0,
        0
    );
    let (by, _) = set
        .ask(&connector, &NodesQuery::default(), ASK_TIMEOUT)
        .await
        .unwrap();
    assert_eq!(by, 1);
    // v1 was asked once on its open connection, not dialled again.
    assert_eq!((v1.handshakes(), v1.requests().len()), (1, 2));
    assert_eq!(set.connected(), Some(&v2.entry("v2")));
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
        &mut Selectors::new(selectors.to_vec()),
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
        &mut Selectors::new(vec![selector.entry("v1")]),
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
    let rows = cells_by_column(&stdout);
    assert_eq!(rows.len(), 2, "{stdout}");
    let shown = |row: usize, columns: &[&str]| -> Vec<String> {
        columns.iter().map(|c| rows[row][*c].clone()).collect()
    };
    let first = ["NODE", "ADDRESS", "PRICE/MIN"];
    assert_eq!(
        shown(0, &first),
        ["n1", "127.0.0.1:7001", "0"],
        "by name: {stdout}"
    );
    assert_eq!(shown(1, &first), ["n2", "127.0.0.1:7002", "2"], "{stdout}");
    assert_eq!(shown(0, &["PREDICTED", "AGE"]), ["-", "1.2s"], "{stdout}");

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

/// The rows of an aligned table (header first), each cell by its column's name.
fn cells_by_column(table: &str) -> Vec<std::collections::HashMap<String, String>> {
    let mut lines = table.lines().map(|l| l.split_whitespace());
    let header: Vec<&str> = lines.next().map(Iterator::collect).unwrap_or_default();
    lines
        .map(|cells| {
            let cells: Vec<&str> = cells.collect();
            assert_eq!(cells.len(), header.len(), "{table}");
            let named = header.iter().zip(cells);
            named.map(|(h, c)| (h.to_string(), c.to_string())).collect()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rexec_nodes_shows_what_each_node_charges_and_whether_it_is_contended() {
    let pki = TestPki::new();
    let dir = tempfile::tempdir().unwrap();
    // n1: two jobs contending, paying 3 together at a price of 3; n2: one job
    // alone bidding 2, paying nothing.
    let mut contended = view("n1", "127.0.0.1:7001".parse().unwrap(), 3_000_000);
    contended.status.charging = 3_000_000;
    contended.status.contended = true;
    let alone = view("n2", "127.0.0.1:7002".parse().unwrap(), 2_000_000);
    let selector = selector_peer(&pki, "v1", listing(vec![alone, contended])).await;
    let config = client_config(&pki, dir.path(), &[selector.entry("v1")]);
    let out = rexec(&config, &["nodes"]).await;
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    let rows = cells_by_column(&stdout);
    let shown: Vec<Vec<&str>> = rows
        .iter()
        .map(|r| {
            ["NODE", "PRICE/MIN", "CHARGING/MIN", "STATE"]
                .iter()
                .map(|c| r.get(*c).map_or("(no column)", String::as_str))
                .collect()
        })
        .collect();
    assert_eq!(
        shown,
        [["n1", "3", "3", "contended"], ["n2", "2", "0", "idle-cpu"],],
        "{stdout}"
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certificate_every_selector_refuses_is_said_once_in_one_line() {
    let pki = TestPki::new();
    let foreign = TestPki::new();
    let dir = tempfile::tempdir().unwrap();
    let nodes = vec![view("n1", "127.0.0.1:7001".parse().unwrap(), 0)];
    let mut selectors = Vec::new();
    for name in ["v1", "v2", "v3"] {
        let peer = selector_peer(&pki, name, listing(nodes.clone())).await;
        selectors.push(peer.entry(name));
    }
    // alice's certificate and key from another cluster, trusting both CAs: every
    // selector refuses her certificate.
    let config = client_config(&foreign, dir.path(), &selectors);
    let both = dir.path().join("both-cas.pem");
    let ca = |p: &TestPki| std::fs::read_to_string(p.tls_paths(Role::User, "alice").ca).unwrap();
    std::fs::write(&both, ca(&foreign) + &ca(&pki)).unwrap();
    let text = std::fs::read_to_string(&config).unwrap().replace(
        &format!("{:?}", foreign.tls_paths(Role::User, "alice").ca),
        &format!("{both:?}"),
    );
    std::fs::write(&config, text).unwrap();
    let out = rexec(&config, &["nodes"]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "one line:\n{stderr}");
    assert_eq!(
        stderr.matches("our certificate").count(),
        1,
        "said once:\n{stderr}"
    );
    assert!(stderr.contains("v1, v2, v3"), "{stderr}");

    // alice's whole configuration from another cluster: she refuses every selector's
    // certificate, and says so once.
    let config = client_config(&foreign, dir.path(), &selectors);
    let out = rexec(&config, &["nodes"]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "one line:\n{stderr}");
    assert_eq!(
        stderr.matches("not issued by our cluster CA").count(),
        1,
        "said once:\n{stderr}"
    );
}
