//! A node restarted with a non-empty journal settles it exactly once.

use std::time::Duration;

use accountd::debit::{DebitClient, DebitClientConfig, Settlement};
use accountd::journal::Charge;
use certs::Role;
use proto::account::*;

use crate::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_restarted_with_a_full_journal_settles_it_exactly_once() {
    let d = Accountd::start();
    d.admin(&["create", "alice", "--initial", "50"]).ok();
    d.admin(&["create", "bob", "--initial", "50"]).ok();
    let journal = d.dir.path().join("node.journal");
    let connector = d.connector(Role::Node, "n1");
    // A dead address: nothing is delivered, everything stays journaled.
    let dead = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().to_string()
    };
    let mut cfg = DebitClientConfig::new(journal.clone(), dead, connector.clone());
    cfg.backoff_min = Duration::from_millis(10);
    let (first, _rx) = DebitClient::start(cfg.clone()).await.unwrap();
    let charges: Vec<Charge> = (0..40u64)
        .map(|s| {
            Charge::Debit(debit(
                "n1",
                "j9",
                s,
                if s % 2 == 0 { "alice" } else { "bob" },
                100_000 + s as i64,
            ))
        })
        .collect();
    for c in &charges {
        first.charge(c.clone()).await.unwrap();
    }
    // The same key twice is one charge.
    first.charge(charges[0].clone()).await.unwrap();
    assert_eq!(first.pending(), 40);
    tokio::time::sleep(Duration::from_millis(100)).await;
    first.shutdown().await;

    // Some of them did reach accountd before the node died (the answers were lost).
    let mut direct = d.client(Role::Node, "n1").await;
    for c in &charges[..5] {
        direct.call(c.to_op()).await.unwrap();
    }
    assert_eq!(d.entry_count(), 2 + 5);

    // The node comes back, now able to reach accountd.
    cfg.server = d.addr.clone();
    let (second, mut rx) = DebitClient::start(cfg.clone()).await.unwrap();
    assert_eq!(second.pending(), 40);
    assert!(second.wait_settled(Duration::from_secs(30)).await);
    let mut dup = 0;
    let mut applied = 0;
    while let Ok(s) = rx.try_recv() {
        let Settlement::Applied { receipt, .. } = s else {
            panic!("{s:?}")
        };
        applied += 1;
        dup += receipt.duplicate as usize;
    }
    assert_eq!((applied, dup), (40, 5));
    second.shutdown().await;
    assert_eq!(d.entry_count(), 2 + 40);
    let total: i64 = charges
        .iter()
        .map(|c| {
            if let Charge::Debit(d) = c {
                d.amount
            } else {
                0
            }
        })
        .sum();
    assert_eq!(d.balance("alice") + d.balance("bob"), 100 * C - total);

    // A third start finds nothing to send and sends nothing.
    let (third, _rx) = DebitClient::start(cfg).await.unwrap();
    assert_eq!(third.pending(), 0);
    tokio::time::sleep(Duration::from_millis(100)).await;
    third.shutdown().await;
    assert_eq!(d.entry_count(), 2 + 40);
    assert!(d.admin(&["audit"]).ok().starts_with("audit passed"));
}

#[tokio::test]
async fn a_charge_for_an_unknown_user_is_refused_once_and_leaves_the_journal() {
    let d = Accountd::start();
    let mut cfg = DebitClientConfig::new(
        d.dir.path().join("j"),
        d.addr.clone(),
        d.connector(Role::Node, "n1"),
    );
    cfg.backoff_min = Duration::from_millis(10);
    let (c, mut rx) = DebitClient::start(cfg).await.unwrap();
    c.charge(Charge::Debit(debit("n1", "j", 1, "ghost", C)))
        .await
        .unwrap();
    assert!(c.wait_settled(Duration::from_secs(10)).await);
    match rx.recv().await.unwrap() {
        Settlement::Refused { code, message, .. } => {
            assert_eq!(code, ErrorCode::UnknownUser);
            assert!(message.contains("accountctl create ghost"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    c.shutdown().await;
    assert_eq!(d.entry_count(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_debit_client_outlives_an_idle_timeout_without_delay() {
    let d = Accountd::start_with(&["--idle-timeout", "1"]);
    d.admin(&["create", "alice", "--initial", "5"]).ok();
    let mut cfg = DebitClientConfig::new(
        d.dir.path().join("j"),
        d.addr.clone(),
        d.connector(Role::Node, "n1"),
    );
    // A long backoff would show up as a slow second charge.
    cfg.backoff_min = Duration::from_secs(20);
    let (c, _rx) = DebitClient::start(cfg).await.unwrap();
    c.charge(Charge::Debit(debit("n1", "j", 1, "alice", C)))
        .await
        .unwrap();
    assert!(c.wait_settled(Duration::from_secs(10)).await);
    // accountd closes the idle connection after 1 s.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    c.charge(Charge::Debit(debit("n1", "j", 2, "alice", C)))
        .await
        .unwrap();
    assert!(
        c.wait_settled(Duration::from_secs(5)).await,
        "the charge waited for a backoff"
    );
    c.shutdown().await;
    assert_eq!(d.balance("alice"), 3 * C);
}

#[tokio::test]
async fn shutdown_is_prompt_while_accountd_hangs() {
    let d = Accountd::start();
    // Something that accepts TCP and then says nothing at all.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = silent.local_addr().unwrap().to_string();
    let _hold = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((s, _)) = silent.accept().await {
            held.push(s);
        }
    });
    let journal = d.dir.path().join("j");
    let cfg = DebitClientConfig::new(journal.clone(), addr, d.connector(Role::Node, "n1"));
    let (c, _rx) = DebitClient::start(cfg).await.unwrap();
    c.charge(Charge::Debit(debit("n1", "j", 1, "alice", C)))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let t = std::time::Instant::now();
    c.shutdown().await;
    assert!(
        t.elapsed() < Duration::from_secs(2),
        "shutdown took {:?}",
        t.elapsed()
    );
    assert_eq!(
        accountd::journal::Journal::open(&journal)
            .unwrap()
            .pending_len(),
        1,
        "the charge is kept"
    );
}
