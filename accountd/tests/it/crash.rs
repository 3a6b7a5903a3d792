//! kill -9 of accountd in the middle of a stream of debits from several
//! nodes: nothing acknowledged is lost, nothing is applied twice, the node
//! journals deliver the rest, and the audit passes.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use accountd::debit::{DebitClient, DebitClientConfig, Settlement};
use accountd::journal::Charge;
use certs::Role;
use proto::account::*;
use tokio::sync::mpsc;

use crate::support::*;

const NODES: u64 = 4;
const PER_NODE: u64 = 300;
/// accountd is killed once this many charges are acknowledged ...
const KILL_AFTER: usize = 200;
/// ... and no later than this sequence number: a slow machine waits here for
/// the acknowledgements, so the kill always leaves a long stream behind it.
const LATEST_KILL: u64 = 150;
/// Sequence numbers sent while accountd is down.
const DOWN_FOR: u64 = 60;

fn amount(n: u64, seq: u64) -> i64 {
    1_000 + ((n * 31 + seq * 17) % 997) as i64
}

async fn node(d: &Accountd, n: u64) -> (DebitClient, mpsc::UnboundedReceiver<Settlement>) {
    let mut cfg = DebitClientConfig::new(
        d.dir.path().join(format!("n{n}.journal")),
        d.addr.clone(),
        d.connector(Role::Node, &format!("n{n}")),
    );
    cfg.backoff_min = Duration::from_millis(20);
    cfg.backoff_max = Duration::from_millis(200);
    cfg.timeout = Duration::from_secs(5);
    DebitClient::start(cfg).await.unwrap()
}

fn drain(
    rx: &mut mpsc::UnboundedReceiver<Settlement>,
    into: &mut HashMap<DebitKey, Vec<ChargeReceipt>>,
) {
    while let Ok(s) = rx.try_recv() {
        match s {
            Settlement::Applied { charge, receipt } => {
                into.entry(charge.key().clone()).or_default().push(receipt)
            }
            Settlement::Refused {
                charge, message, ..
            } => panic!("{} refused: {message}", charge.key()),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill9_mid_stream_loses_no_acknowledged_debit_and_doubles_none() {
    let mut d = Accountd::start();
    for u in ["a", "b", "c"] {
        d.admin(&["create", u, "--initial", "100000"]).ok();
    }
    let mut clients = Vec::new();
    for n in 0..NODES {
        clients.push(node(&d, n).await);
    }
    let mut settled: HashMap<DebitKey, Vec<ChargeReceipt>> = HashMap::new();
    let mut sent = 0u64;
    let mut acked_before_kill: BTreeMap<DebitKey, i64> = BTreeMap::new();
    let mut killed_at = None;
    for seq in 0..PER_NODE {
        for (n, (c, _)) in clients.iter().enumerate() {
            let n = n as u64;
            let user = ["a", "b", "c"][((seq + n) % 3) as usize];
            c.charge(Charge::Debit(debit(
                &format!("n{n}"),
                "stream",
                seq,
                user,
                amount(n, seq),
            )))
            .await
            .unwrap();
            sent += 1;
        }
        for (_, rx) in clients.iter_mut() {
            drain(rx, &mut settled);
        }
        if killed_at.is_none() && seq >= LATEST_KILL {
            let deadline = std::time::Instant::now() + Duration::from_secs(60);
            while settled.len() < KILL_AFTER {
                assert!(
                    std::time::Instant::now() < deadline,
                    "only {} of {sent} charges acknowledged in 60 s",
                    settled.len()
                );
                tokio::time::sleep(Duration::from_millis(5)).await;
                for (_, rx) in clients.iter_mut() {
                    drain(rx, &mut settled);
                }
            }
        }
        if killed_at.is_none() && settled.len() >= KILL_AFTER {
            // Everything acknowledged so far must survive the crash.
            acked_before_kill = settled
                .iter()
                .map(|(k, r)| (k.clone(), r[0].entry_id))
                .collect();
            d.kill9();
            killed_at = Some(seq);
        }
        if killed_at == Some(seq.saturating_sub(DOWN_FOR)) {
            d.spawn(false).expect("restart after kill -9");
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let killed_at = killed_at.unwrap_or_else(|| {
        panic!(
            "the stream ended before the kill; {} settled",
            settled.len()
        )
    });
    assert!(
        killed_at + DOWN_FOR < PER_NODE,
        "accountd was killed too late (at {killed_at}) to be restarted"
    );
    for (c, _) in &clients {
        assert!(
            c.wait_settled(Duration::from_secs(60)).await,
            "journal still has {} pending",
            c.pending()
        );
    }
    for (_, rx) in clients.iter_mut() {
        drain(rx, &mut settled);
    }
    assert_eq!(sent, NODES * PER_NODE);
    assert_eq!(settled.len() as u64, sent, "every charge settled");
    assert!(
        settled.values().all(|r| r.len() == 1),
        "each charge settled once"
    );

    // The ledger: every debit exactly once, acknowledged ones unchanged.
    let db = d.db();
    let mut stmt = db
        .prepare("SELECT node, seq, id FROM entries WHERE kind = 'debit'")
        .unwrap();
    let rows: Vec<(String, i64, i64)> = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(
        rows.len() as u64,
        sent,
        "exactly one ledger entry per charge"
    );
    let by_key: HashMap<(String, i64), i64> =
        rows.into_iter().map(|(n, s, id)| ((n, s), id)).collect();
    assert_eq!(by_key.len() as u64, sent);
    for (k, id) in &acked_before_kill {
        assert_eq!(
            by_key.get(&(k.node.clone(), k.seq as i64)),
            Some(id),
            "acknowledged {k} lost or moved"
        );
    }
    let mut expect: HashMap<&str, i64> =
        ["a", "b", "c"].iter().map(|u| (*u, 100_000 * C)).collect();
    for seq in 0..PER_NODE {
        for n in 0..NODES {
            *expect
                .get_mut(["a", "b", "c"][((seq + n) % 3) as usize])
                .unwrap() -= amount(n, seq);
        }
    }
    for (u, v) in &expect {
        assert_eq!(d.balance(u), *v, "balance of {u}");
    }
    let dups = settled.values().filter(|r| r[0].duplicate).count();
    eprintln!(
        "{} acknowledged before the kill, {dups} replays answered as duplicates",
        acked_before_kill.len()
    );
    assert!(d.admin(&["audit"]).ok().starts_with("audit passed"));
    for (c, _) in clients {
        c.shutdown().await;
    }
}
