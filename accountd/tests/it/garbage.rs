//! A certificate holder sending garbage: the audit trail of its refusals stays
//! bounded (a few rows per window, the rest summed up), a well-behaved node's
//! debits keep their latency meanwhile, and a peer that keeps at it is cut off.
//! Regression: every malformed frame was a committed, fsynced row of
//! `refusals`, unthrottled (300 garbage frames gave 301 rows).

use std::net::Ipv4Addr;
use std::path::Path;
use std::time::{Duration, Instant};

use certs::Role;
use proto::account::*;
use proto::{DEFAULT_MAX_FRAME, Framed};
use testhost::wait::{eventually_async, until_async_every};
use tokio::io::AsyncWriteExt;

use crate::support::*;

/// A frame whose body decodes as no request.
const GARBAGE: [u8; 7] = [0, 0, 0, 3, 0xff, 0xff, 0xff];

/// Bytes of the ledger on disk: the database and its WAL.
fn ledger_bytes(db: &Path) -> u64 {
    let wal = db.with_extension("db-wal");
    [db, wal.as_path()]
        .iter()
        .map(|p| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0))
        .sum()
}

/// (rows, refusals they stand for) recorded for `name`.
fn refusal_rows(d: &Accountd, name: &str) -> (i64, i64) {
    d.db()
        .query_row(
            "SELECT COUNT(*), COALESCE(SUM(count), 0) FROM refusals WHERE name = ?1",
            [name],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap()
}

/// Starts a flood of `frames` malformed frames from the user mallory, sent in
/// batches, each batch's answers read before the next; the task returns how
/// many were answered.
async fn flood(d: &Accountd, frames: usize) -> tokio::task::JoinHandle<usize> {
    const BATCH: usize = 50;
    let tls = d.tls_from(Role::User, "mallory", Ipv4Addr::LOCALHOST).await;
    tokio::spawn(async move {
        let mut f = Framed::new(tls, DEFAULT_MAX_FRAME);
        let batch: Vec<u8> = GARBAGE.repeat(BATCH);
        let mut answered = 0;
        for _ in 0..frames / BATCH {
            f.get_mut().write_all(&batch).await.unwrap();
            f.get_mut().flush().await.unwrap();
            for _ in 0..BATCH {
                let r: AccountResponse = f.recv().await.unwrap().expect("mallory was cut off");
                assert_eq!(r.result.unwrap_err().code, ErrorCode::Malformed);
                answered += 1;
            }
        }
        answered
    })
}

/// Median of some durations.
fn median(mut v: Vec<Duration>) -> Duration {
    assert!(!v.is_empty());
    v.sort();
    v[v.len() / 2]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_malformed_frames_grow_the_ledger_by_under_1_mb_and_debits_keep_their_pace() {
    const FRAMES: usize = 10_000;
    // The cut-off is out of the way here (see the next test): this is about
    // what the refusals cost while they are being answered.
    let d = Accountd::start_with(&["--max-refusals", "1000000", "--refusal-window", "2"]).await;
    d.admin(&["create", "alice", "--initial", "100000"]).ok();
    let mut node = d.client(Role::Node, "n1").await;
    let mut seq = 0;
    let mut debit_once = async || {
        seq += 1;
        let t = Instant::now();
        node.call(AccountOp::Debit(debit("n1", "steady", seq, "alice", 1_000)))
            .await
            .unwrap();
        t.elapsed()
    };
    // The node's normal pace, in the same run.
    let mut quiet = Vec::new();
    for _ in 0..60 {
        quiet.push(debit_once().await);
    }
    // The flood alone first, for what it costs the ledger file; then again
    // while the node debits, for what it costs the node (the debits' own
    // commits grow the WAL, so they are kept out of the first measure).
    let size_before = ledger_bytes(&d.db);
    let flooding_since = Instant::now();
    let answered = flood(&d, FRAMES).await.await.unwrap();
    assert_eq!(answered, FRAMES, "every malformed frame was answered");
    let grown = ledger_bytes(&d.db).saturating_sub(size_before);
    let flooding = flood(&d, FRAMES).await;
    let mut during = Vec::new();
    while !flooding.is_finished() {
        during.push(debit_once().await);
    }
    assert_eq!(flooding.await.unwrap(), FRAMES);
    let (quiet_median, during_median) = (median(quiet), median(during.clone()));
    eprintln!(
        "{FRAMES} malformed frames: ledger grew {grown} bytes; debit median {quiet_median:?} quiet, \
         {during_median:?} during the flood ({} debits)",
        during.len()
    );
    assert!(
        grown < 1 << 20,
        "the ledger grew by {grown} bytes for {FRAMES} malformed frames"
    );
    assert!(
        during.len() >= 5,
        "only {} debits went through during the flood",
        during.len()
    );
    assert!(
        during_median <= quiet_median * 5 + Duration::from_millis(50),
        "debits slowed from {quiet_median:?} to {during_median:?} during the flood"
    );
    // The trail is complete: a few rows one by one, the rest summed up once the
    // window ends.
    eventually_async(Duration::from_secs(20), || async {
        refusal_rows(&d, "mallory").1 >= 2 * FRAMES as i64
    })
    .await;
    let rows = refusal_rows(&d, "mallory");
    assert_eq!(
        rows.1,
        2 * FRAMES as i64,
        "refusals accounted for: {rows:?}"
    );
    // At most 16 rows one by one and one summary per 2 s window (the floods may
    // span several windows on a slow machine): bounded by time, not by frames.
    let windows = flooding_since.elapsed().as_secs() / 2 + 2;
    assert!(
        rows.0 as u64 <= windows * (16 + 1),
        "{} rows for two floods over {windows} windows",
        rows.0
    );
    let summary: String = d
        .db()
        .query_row(
            "SELECT message FROM refusals WHERE name = 'mallory' AND count > 1 LIMIT 1",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(
        summary.contains("more refused requests from user mallory")
            && summary.contains("malformed"),
        "{summary}"
    );
    assert_eq!(d.entry_count() as usize, 1 + seq as usize);
}

#[tokio::test]
async fn a_peer_that_keeps_sending_garbage_is_cut_off_and_others_are_not() {
    let d = Accountd::start_with(&["--max-refusals", "20", "--refusal-window", "8"]).await;
    d.admin(&["create", "alice", "--initial", "10"]).ok();
    let tls = d.tls_from(Role::User, "mallory", Ipv4Addr::LOCALHOST).await;
    let mut f = Framed::new(tls, DEFAULT_MAX_FRAME);
    let mut answered = 0;
    loop {
        if f.get_mut().write_all(&GARBAGE).await.is_err() {
            break;
        }
        let _ = f.get_mut().flush().await;
        match f.recv::<AccountResponse>().await {
            Ok(Some(r)) => {
                assert_eq!(r.result.unwrap_err().code, ErrorCode::Malformed);
                answered += 1;
            }
            Ok(None) | Err(_) => break,
        }
        assert!(answered <= 100, "mallory was never cut off");
    }
    assert_eq!(answered, 21, "answered up to the refusal that cut it off");

    // Its new connections are turned away with a reason, others are served.
    let (r, mut f) = whoami(d.tls_from(Role::User, "mallory", Ipv4Addr::LOCALHOST).await).await;
    let e = r.unwrap_err();
    assert_eq!(e.code, ErrorCode::Unavailable);
    assert!(e.message.contains("user mallory is cut off"), "{e}");
    assert!(matches!(
        f.recv::<AccountResponse>().await,
        Ok(None) | Err(_)
    ));
    let mut node = d.client(Role::Node, "n1").await;
    node.call(AccountOp::Debit(debit("n1", "j", 1, "alice", C)))
        .await
        .unwrap();
    assert_eq!(
        d.ctl(Role::User, "alice", &["balance"]).ok(),
        "alice 9.000000\n"
    );
    let cut: i64 = d
        .db()
        .query_row(
            "SELECT COUNT(*) FROM refusals WHERE name = 'mallory' AND op = 'cut-off'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(cut, 1);

    // After the window it is served again.
    let last = std::cell::RefCell::new(None);
    let served = until_async_every(
        Duration::from_secs(30),
        Duration::from_millis(250),
        || async {
            let (r, _) = whoami(d.tls_from(Role::User, "mallory", Ipv4Addr::LOCALHOST).await).await;
            let ok = r.is_ok();
            *last.borrow_mut() = Some(r);
            ok.then_some(())
        },
    )
    .await
    .is_some();
    assert!(served, "mallory stayed cut off: {:?}", last.take());
    // 16 refusals one by one, the cut-off, and (once the window closed) the
    // other 5 summed up.
    eventually_async(Duration::from_secs(10), || async {
        refusal_rows(&d, "mallory").1 >= 22
    })
    .await;
    assert_eq!(refusal_rows(&d, "mallory"), (18, 22));
}
