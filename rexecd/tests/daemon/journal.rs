//! The debit journal at start: rexecd says once what it replays (how many debits and
//! refunds accountd has not acknowledged, and their credits), and nothing when the
//! journal holds nothing.

use std::time::Duration;

use ledger_client::journal::{Charge, Journal};
use proto::account::{Debit, DebitKey, MeterInterval, Refund};

use crate::util::*;

const MESSAGE: &str =
    "replaying the debit journal: charges accountd has not acknowledged are sent again";

fn debit(seq: u64, amount: i64) -> Charge {
    Charge::Debit(Debit {
        key: DebitKey {
            node: NODE.into(),
            job: "j1".into(),
            seq,
        },
        user: USER.into(),
        amount,
        rank: 0,
        interval: MeterInterval::default(),
        cpu_us: 1_000_000,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_journal_with_pending_charges_is_replayed_with_one_log_line() {
    if !can_run("journal_replay_log") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("debits.journal");
    {
        let mut j = Journal::open(&journal).unwrap();
        j.record(debit(1, 1_500_000)).unwrap();
        j.record(debit(2, 250_000)).unwrap();
        j.record(Charge::Refund(Refund {
            key: DebitKey {
                node: NODE.into(),
                job: "j1".into(),
                seq: 3,
            },
            user: USER.into(),
            amount: 100_000,
            reason: "over-charge".into(),
        }))
        .unwrap();
    }
    // Nothing listens on this loopback port: the charges stay pending.
    let j = journal.display().to_string();
    let d = Daemon::start(
        "journalreplay",
        &["--accountd", "127.0.0.1:9", "--journal", &j],
    );
    let line = d.wait_for_log_line(Duration::from_secs(10), |l| {
        log_fields(l, MESSAGE).is_some()
    });
    let fields = log_fields(&line, MESSAGE).unwrap();
    assert_eq!(field(&fields, "debits"), Some("2"), "{line}");
    assert_eq!(field(&fields, "credits"), Some("1.75"), "{line}");
    assert_eq!(field(&fields, "refunds"), Some("1"), "{line}");
    assert_eq!(field(&fields, "refunded"), Some("0.1"), "{line}");
    // Once: a job's start and end log nothing more about it.
    let out = run(&d, launch(&["/bin/true"])).await;
    assert_eq!(out.status(), proto::node::ExitStatus::Code(0), "{out:?}");
    assert_eq!(d.log().matches(MESSAGE).count(), 1, "{}", d.log());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_journal_logs_no_replay() {
    if !can_run("journal_replay_empty") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let j = dir.path().join("debits.journal").display().to_string();
    let d = Daemon::start(
        "journalempty",
        &["--accountd", "127.0.0.1:9", "--journal", &j],
    );
    d.wait_for_log_line(Duration::from_secs(10), |l| l.contains("market open"));
    assert!(!d.log().contains(MESSAGE), "{}", d.log());
}
