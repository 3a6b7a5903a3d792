//! accountd stopped in the middle of a stream of debits from several nodes,
//! by kill -9 or by SIGTERM: nothing acknowledged is lost, nothing is applied
//! twice, the node journals deliver the rest, and the audit passes.

use std::collections::{BTreeMap, HashMap};
use std::process::ExitStatus;
use std::time::{Duration, Instant};

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

/// Waits up to 60 s until at least `count` charges are acknowledged (collected
/// into `settled`); returns whether they were.
async fn acknowledged(
    clients: &mut [(DebitClient, mpsc::UnboundedReceiver<Settlement>)],
    settled: &mut HashMap<DebitKey, Vec<ChargeReceipt>>,
    count: usize,
) -> bool {
    testhost::wait::eventually_async(Duration::from_secs(60), || {
        for (_, rx) in clients.iter_mut() {
            drain(rx, settled);
        }
        std::future::ready(settled.len() >= count)
    })
    .await
}

/// Waits until every node's journal is empty, then collects what was settled.
async fn settle_all(
    clients: &mut [(DebitClient, mpsc::UnboundedReceiver<Settlement>)],
    settled: &mut HashMap<DebitKey, Vec<ChargeReceipt>>,
) {
    for (c, _) in clients.iter() {
        assert!(
            c.wait_settled(Duration::from_secs(60)).await,
            "journal still has {} pending",
            c.pending()
        );
    }
    for (_, rx) in clients.iter_mut() {
        drain(rx, settled);
    }
}

/// The ledger's debit entries by (node, sequence), asserting there are exactly `sent`
/// of them and no key appears twice.
fn debit_entries(d: &Accountd, sent: u64) -> HashMap<(String, i64), i64> {
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
    assert_eq!(by_key.len() as u64, sent, "no debit key twice");
    by_key
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill9_mid_stream_loses_no_acknowledged_debit_and_doubles_none() {
    let mut d = Accountd::start().await;
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
            let acked = acknowledged(&mut clients, &mut settled, KILL_AFTER).await;
            assert!(
                acked,
                "only {} of {sent} charges acknowledged in 60 s",
                settled.len()
            );
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
            d.spawn(false).await.expect("restart after kill -9");
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
    settle_all(&mut clients, &mut settled).await;
    assert_eq!(sent, NODES * PER_NODE);
    assert_eq!(settled.len() as u64, sent, "every charge settled");
    assert!(
        settled.values().all(|r| r.len() == 1),
        "each charge settled once"
    );

    // The ledger: every debit exactly once, acknowledged ones unchanged.
    let by_key = debit_entries(&d, sent);
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

/// SIGTERM is sent once this many charges are acknowledged ...
const TERM_AFTER: usize = 200;
/// ... and no later than this sequence number (see [`LATEST_KILL`]).
const LATEST_TERM: u64 = 150;
/// Most sequence numbers streamed while accountd shuts down; then the stream
/// waits for it to exit (a slow machine may take a while to stop).
const STREAM_WHILE_STOPPING: u64 = 100;
/// Sequence numbers streamed after the restart.
const AFTER_RESTART: u64 = 60;

fn user_of(n: u64, seq: u64) -> &'static str {
    ["a", "b", "c"][((seq + n) % 3) as usize]
}

/// Where accountd is in the SIGTERM test.
enum Phase {
    Up(Accountd),
    /// SIGTERM sent after `since` sequence numbers; a task waits for the
    /// exit and hands back the handle, the exit status and how long it took.
    Stopping {
        since: u64,
        waiter: tokio::task::JoinHandle<(Accountd, ExitStatus, Duration)>,
    },
    /// Exited after `since` sequence numbers.
    Down {
        d: Accountd,
        since: u64,
    },
    /// Running again; the stream ends after `until` sequence numbers.
    Restarted {
        d: Accountd,
        until: u64,
    },
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_mid_stream_exits_cleanly_and_the_journals_deliver_the_rest_once() {
    let d = Accountd::start().await;
    for u in ["a", "b", "c"] {
        d.admin(&["create", u, "--initial", "100000"]).ok();
    }
    let mut clients = Vec::new();
    for n in 0..NODES {
        clients.push(node(&d, n).await);
    }
    let wal = std::path::PathBuf::from(format!("{}-wal", d.db.display()));
    let mut settled: HashMap<DebitKey, Vec<ChargeReceipt>> = HashMap::new();
    let mut acked_before_term: BTreeMap<DebitKey, i64> = BTreeMap::new();
    let mut pending_at_restart = 0;
    let mut phase = Phase::Up(d);
    let mut seq = 0u64;
    // The nodes keep charging through the whole shutdown, the time accountd
    // is down, and the restart, as running jobs would.
    let d = loop {
        for (n, (c, _)) in clients.iter().enumerate() {
            let n = n as u64;
            c.charge(Charge::Debit(debit(
                &format!("n{n}"),
                "stream",
                seq,
                user_of(n, seq),
                amount(n, seq),
            )))
            .await
            .unwrap();
        }
        seq += 1;
        for (_, rx) in clients.iter_mut() {
            drain(rx, &mut settled);
        }
        phase = match phase {
            Phase::Up(mut d) => {
                if seq >= LATEST_TERM {
                    let acked = acknowledged(&mut clients, &mut settled, TERM_AFTER).await;
                    assert!(
                        acked,
                        "only {} of {} charges acknowledged in 60 s",
                        settled.len(),
                        seq * NODES
                    );
                }
                if settled.len() >= TERM_AFTER {
                    // Everything acknowledged so far must be in the ledger after the stop.
                    acked_before_term = settled
                        .iter()
                        .map(|(k, r)| (k.clone(), r[0].entry_id))
                        .collect();
                    eprintln!(
                        "SIGTERM with {} of {} charges acknowledged",
                        settled.len(),
                        seq * NODES
                    );
                    let waiter = tokio::spawn(async move {
                        let t = Instant::now();
                        let status = d.terminate().await;
                        (d, status, t.elapsed())
                    });
                    Phase::Stopping { since: seq, waiter }
                } else {
                    Phase::Up(d)
                }
            }
            Phase::Stopping { since, waiter } => {
                if waiter.is_finished() || seq >= since + STREAM_WHILE_STOPPING {
                    // `terminate` itself fails the test if the exit takes over 15 s.
                    let (d, status, took) = waiter
                        .await
                        .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()));
                    assert!(
                        status.success(),
                        "SIGTERM must be a clean shutdown, accountd exited with {status}"
                    );
                    eprintln!("accountd exited {took:?} after SIGTERM");
                    // A clean stop closes the ledger: the WAL is checkpointed
                    // into the database file, which alone holds every entry.
                    let wal_len = std::fs::metadata(&wal).map(|m| m.len()).unwrap_or(0);
                    assert_eq!(
                        wal_len,
                        0,
                        "{} still holds {wal_len} bytes: the ledger was not closed cleanly",
                        wal.display()
                    );
                    Phase::Down { d, since: seq }
                } else {
                    Phase::Stopping { since, waiter }
                }
            }
            Phase::Down { mut d, since } => {
                if seq >= since + DOWN_FOR {
                    // Everything charged since the exit waits in the journals.
                    pending_at_restart = clients.iter().map(|(c, _)| c.pending()).sum::<usize>();
                    assert!(
                        pending_at_restart as u64 >= NODES * DOWN_FOR,
                        "{pending_at_restart} charges pending after {DOWN_FOR} rounds while accountd was down"
                    );
                    d.spawn(false).await.expect("restart after SIGTERM");
                    Phase::Restarted {
                        d,
                        until: seq + AFTER_RESTART,
                    }
                } else {
                    Phase::Down { d, since }
                }
            }
            Phase::Restarted { d, until } if seq >= until => break d,
            restarted @ Phase::Restarted { .. } => restarted,
        };
        tokio::time::sleep(Duration::from_millis(2)).await;
    };
    let sent = seq * NODES;
    settle_all(&mut clients, &mut settled).await;
    assert_eq!(settled.len() as u64, sent, "every charge settled");
    assert!(
        settled.values().all(|r| r.len() == 1),
        "each charge settled once"
    );

    // The ledger: every debit exactly once, under the entry its receipt named.
    let by_key = debit_entries(&d, sent);
    for (k, id) in &acked_before_term {
        assert_eq!(
            by_key.get(&(k.node.clone(), k.seq as i64)),
            Some(id),
            "{k}, acknowledged before the SIGTERM, lost or moved"
        );
    }
    for (k, r) in &settled {
        assert_eq!(
            by_key.get(&(k.node.clone(), k.seq as i64)),
            Some(&r[0].entry_id),
            "{k} is not under the entry its receipt named"
        );
    }
    let mut expect: HashMap<&str, i64> =
        ["a", "b", "c"].iter().map(|u| (*u, 100_000 * C)).collect();
    for s in 0..seq {
        for n in 0..NODES {
            *expect.get_mut(user_of(n, s)).unwrap() -= amount(n, s);
        }
    }
    for (u, v) in &expect {
        assert_eq!(d.balance(u), *v, "balance of {u}");
        assert_eq!(
            d.admin(&["balance", u]).ok(),
            format!("{u} {}\n", money::format_credits_fixed(*v))
        );
    }
    assert_eq!(d.entry_count() as u64, 3 + sent);
    let dups = settled.values().filter(|r| r[0].duplicate).count();
    eprintln!(
        "{sent} charges, {pending_at_restart} replayed from the journals after the restart, \
         {dups} answered as duplicates"
    );
    assert!(d.admin(&["audit"]).ok().starts_with("audit passed"));
    for (c, _) in clients {
        c.shutdown().await;
    }
}
