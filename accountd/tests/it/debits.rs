//! Many debits to a frame (`Debits`): each debit gets exactly the outcome a
//! `Debit` of its own would get, whatever else shares its frame, and a frame
//! with no debits, too many, or from a role that may not charge is refused.
//! A node's journal sends its backlog many to a frame, and falls back to one
//! at a time when the frame is refused whole.

use std::time::Duration;

use accountd::debit::{DebitClient, DebitClientConfig, FRAME, Settlement};
use accountd::journal::Charge;
use certs::Role;
use proto::account::*;

use crate::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_debit_of_a_frame_gets_what_it_would_get_alone() {
    let d = Accountd::start().await;
    d.admin(&["create", "alice", "--initial", "50"]).ok();
    let mut node = d.client(Role::Node, "n1").await;
    let first = debit("n1", "j", 1, "alice", C);
    let AccountReply::Charged(first_receipt) =
        node.call(AccountOp::Debit(first.clone())).await.unwrap()
    else {
        panic!("a debit is answered Charged")
    };
    let mut changed = first.clone();
    changed.amount = 7 * C;
    let frame = vec![
        debit("n1", "j", 2, "alice", 2 * C), // new
        first.clone(),                       // exact repeat of an earlier debit
        changed,                             // changed repeat
        debit("n1", "j", 3, "nobody", C),    // unknown user
        debit("n2", "j", 4, "alice", C),     // another node's key
        debit("n1", "j", 5, "alice", 3 * C), // new
        debit("n1", "j", 2, "alice", 2 * C), // repeat within the frame
        debit("n1", "j", 6, "alice", 0),     // bad amount
    ];
    let outcomes = node.debits(frame.clone()).await.unwrap();
    assert_eq!(outcomes.len(), frame.len());
    let applied = |i: usize| outcomes[i].as_ref().unwrap_or_else(|e| panic!("{i}: {e}"));
    let code = |i: usize| outcomes[i].as_ref().unwrap_err().code;
    assert!(!applied(0).duplicate);
    assert_eq!(applied(0).balance_after, 47 * C);
    assert!(applied(1).duplicate);
    assert_eq!(applied(1).entry_id, first_receipt.entry_id);
    assert_eq!(applied(1).balance_after, 49 * C);
    assert_eq!(code(2), ErrorCode::KeyConflict);
    assert_eq!(code(3), ErrorCode::UnknownUser);
    assert_eq!(code(4), ErrorCode::Forbidden);
    assert!(!applied(5).duplicate);
    assert_eq!(applied(5).balance_after, 44 * C);
    assert!(applied(6).duplicate);
    assert_eq!(applied(6).entry_id, applied(0).entry_id);
    assert_eq!(code(7), ErrorCode::InvalidAmount);

    // Sent again one by one, every debit gets the same answer (the new ones
    // are now repeats of what the frame wrote).
    for (i, d1) in frame.iter().enumerate() {
        match (node.call(AccountOp::Debit(d1.clone())).await, &outcomes[i]) {
            (Ok(AccountReply::Charged(alone)), Ok(framed)) => {
                assert!(alone.duplicate, "{i}");
                assert_eq!(alone.entry_id, framed.entry_id, "{i}");
                assert_eq!(alone.balance_after, framed.balance_after, "{i}");
            }
            (alone, Err(framed)) => assert_eq!(code_of(alone), framed.code, "{i}"),
            (alone, framed) => panic!("{i}: alone {alone:?}, in the frame {framed:?}"),
        }
    }
    // Three debits written: the first alone, two in the frame.
    assert_eq!(d.entry_count(), 1 + 3);
    assert_eq!(d.balance("alice"), 44 * C);
    let audit = d.admin(&["audit"]);
    audit.ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_or_oversized_frame_or_one_from_a_user_is_refused_whole() {
    let d = Accountd::start().await;
    d.admin(&["create", "alice", "--initial", "50"]).ok();
    let mut node = d.client(Role::Node, "n1").await;
    let empty = node.call(AccountOp::Debits(Vec::new())).await;
    assert_eq!(code_of(empty), ErrorCode::Malformed);
    let over: Vec<Debit> = (0..=MAX_DEBITS_PER_FRAME as u64)
        .map(|s| debit("n1", "j", s, "alice", 1))
        .collect();
    match node.call(AccountOp::Debits(over)).await {
        Err(clients::account::ClientError::Server(e)) => {
            assert_eq!(e.code, ErrorCode::Malformed);
            assert!(
                e.message.contains(&format!("1 to {MAX_DEBITS_PER_FRAME}")),
                "{e}"
            );
        }
        other => panic!("{other:?}"),
    }
    let full: Vec<Debit> = (0..MAX_DEBITS_PER_FRAME as u64)
        .map(|s| debit("n1", "j", s, "alice", 1))
        .collect();
    let outcomes = node.debits(full).await.unwrap();
    assert!(outcomes.iter().all(|o| matches!(o, Ok(r) if !r.duplicate)));
    let mut user = d.client(Role::User, "alice").await;
    let refused = user
        .call(AccountOp::Debits(vec![debit("alice", "j", 1, "alice", 1)]))
        .await;
    assert_eq!(code_of(refused), ErrorCode::Forbidden);
    assert_eq!(d.entry_count(), 1 + MAX_DEBITS_PER_FRAME as i64);
    assert_eq!(d.balance("alice"), 50 * C - MAX_DEBITS_PER_FRAME as i64);
}

/// accountd's count of answered requests of `op` with `result` (0 when none).
fn requests(metrics: &str, op: &str, result: &str) -> u64 {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(metrics).unwrap();
    s.write_all(b"GET /metrics HTTP/1.0\r\nHost: accountd\r\n\r\n")
        .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let series = format!("rexec_accountd_requests_total{{op=\"{op}\",result=\"{result}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(series.as_str()))
        .map_or(0, |n| n.trim().parse().unwrap())
}

/// An accountd serving metrics on a free loopback port: (it, the metrics address).
async fn accountd_with_metrics(conf: &tempfile::TempDir) -> (Accountd, String) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let metrics = format!("127.0.0.1:{port}");
    let file = conf.path().join("accountd.toml");
    std::fs::write(&file, format!("[metrics]\nlisten = \"{metrics}\"\n")).unwrap();
    let d = Accountd::start_with(&["--config", file.to_str().unwrap()]).await;
    (d, metrics)
}

/// `count` charges of `node` journaled while accountd was unreachable.
async fn backlog(cfg: &DebitClientConfig, node: &str, count: u64) -> Vec<Charge> {
    let held = unused_port();
    let mut dead = cfg.clone();
    dead.server = held.local_addr().unwrap().to_string();
    let (client, _rx) = DebitClient::start(dead).await.unwrap();
    let charges: Vec<Charge> = (0..count)
        .map(|s| Charge::Debit(debit(node, "j1", s, "alice", 1_000 + s as i64)))
        .collect();
    for c in &charges {
        client.charge(c.clone()).await.unwrap();
    }
    client.shutdown().await;
    charges
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backlog_of_500_charges_goes_many_to_a_frame_and_lands_once() {
    let conf = tempfile::tempdir().unwrap();
    let (d, metrics) = accountd_with_metrics(&conf).await;
    d.admin(&["create", "alice", "--initial", "50"]).ok();
    let mut cfg = DebitClientConfig::new(
        d.dir.path().join("node.journal"),
        d.addr.clone(),
        d.connector(Role::Node, "n1"),
    );
    cfg.backoff_min = Duration::from_millis(10);
    let charges = backlog(&cfg, "n1", 500).await;
    // Some reached accountd before, their answers lost: they come back duplicates.
    let mut direct = d.client(Role::Node, "n1").await;
    for c in &charges[100..110] {
        direct.call(c.to_op()).await.unwrap();
    }
    let (client, mut rx) = DebitClient::start(cfg).await.unwrap();
    assert!(client.wait_settled(Duration::from_secs(60)).await);
    client.shutdown().await;
    let mut settled = Vec::new();
    while let Ok(Settlement::Applied { charge, receipt }) = rx.try_recv() {
        settled.push((charge, receipt.duplicate));
    }
    assert_eq!(settled.len(), 500, "every charge settled, as applied");
    assert!(
        settled.iter().map(|s| &s.0).eq(charges.iter()),
        "in journal order"
    );
    assert_eq!(settled.iter().filter(|s| s.1).count(), 10);
    assert_eq!(d.entry_count(), 1 + 500);
    let total: i64 = (0..500).map(|s| 1_000 + s).sum();
    assert_eq!(d.balance("alice"), 50 * C - total);
    let frames = requests(&metrics, "Debits", "ok");
    let singles = requests(&metrics, "Debit", "ok");
    eprintln!("500 charges: {frames} Debits frames, {singles} debits counted");
    assert!(
        (500usize.div_ceil(FRAME) as u64..=20).contains(&frames),
        "{frames} frames for 500 charges"
    );
    // Each debit of a frame counts as a Debit; the ten sent directly too.
    assert_eq!(singles, 500 + 10);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frame_refused_whole_falls_back_to_one_charge_at_a_time() {
    let conf = tempfile::tempdir().unwrap();
    let (d, metrics) = accountd_with_metrics(&conf).await;
    d.admin(&["create", "alice", "--initial", "50"]).ok();
    // A service that may not charge: its frame is refused whole (as an older
    // accountd refuses an operation it does not know), so the sender falls back
    // to single debits, each refused for good on its own.
    let mut cfg = DebitClientConfig::new(
        d.dir.path().join("svc.journal"),
        d.addr.clone(),
        d.connector(Role::Service, "vexecd"),
    );
    cfg.backoff_min = Duration::from_millis(10);
    backlog(&cfg, "vexecd", 5).await;
    let (client, mut rx) = DebitClient::start(cfg).await.unwrap();
    assert!(client.wait_settled(Duration::from_secs(30)).await);
    client.shutdown().await;
    let mut refused = 0;
    while let Ok(s) = rx.try_recv() {
        assert!(
            matches!(
                s,
                Settlement::Refused {
                    code: ErrorCode::Forbidden,
                    ..
                }
            ),
            "{s:?}"
        );
        refused += 1;
    }
    assert_eq!(refused, 5);
    assert_eq!(
        requests(&metrics, "Debits", "refused"),
        1,
        "one frame, then singles"
    );
    assert_eq!(requests(&metrics, "Debit", "refused"), 5);
    assert_eq!(d.entry_count(), 1);
}
