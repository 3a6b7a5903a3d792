//! A batch job's life through the live queue with real daemons: it runs on
//! the nodes as its owner, its output is kept (up to the cap, the rest counted),
//! its exit is recorded, and the ledger holds the charge the policy says, keyed
//! by the queue and the job id; `kill -9` of the queue mid-run loses nothing
//! and runs nothing twice.

use std::time::Duration;

use proto::batch::{BatchReply, JobState, Worth};
use proto::node::ExitStatus;
use rexec_tests::batch::{BatchMarket, BatchOptions};
use rexec_tests::cluster::TEST_USER;

const LIMIT: Duration = Duration::from_secs(40);

#[test]
fn a_job_runs_keeps_its_output_exits_and_is_charged_its_bid() {
    if !rexec_tests::can_run("a_job_runs_keeps_its_output_exits_and_is_charged_its_bid") {
        return;
    }
    let m = BatchMarket::start(BatchOptions {
        max_output: 10,
        ..BatchOptions::default()
    });
    // 6 credits per CPU-minute on 2 processors.
    let rate = 6_000_000;
    let script = "echo hello-from-$(id -un); echo oops >&2; sleep 2; exit 3";
    let spec = m.spec(0x51, &["sh", "-c", script], 2, 30, Worth::Rate(rate));
    assert!(matches!(m.submit(&spec), Ok(BatchReply::Submitted(_))));
    let running = m.wait_for(0x51, LIMIT, |e| e.state == JobState::Running);
    assert_eq!(running.nodes.len(), 2, "{running:?}");
    let done = m.wait_for(0x51, LIMIT, |e| e.state == JobState::Finished);
    assert_eq!(done.exit, Some(ExitStatus::Code(3)));
    assert_eq!(done.attempts, 1);
    // Two ranks wrote 2 × 19 bytes of stdout and 2 × 5 of stderr; 10 kept.
    let (out, err) = m.output(0x51);
    assert_eq!(out.len() + err.len(), 10, "{out:?} {err:?}");
    // Which stream's bytes came first is the nodes' timing; each kept part is a
    // prefix of what the ranks wrote.
    let line = format!("hello-from-{TEST_USER}\n");
    assert!(line.as_bytes().starts_with(&out), "{out:?}");
    assert!(b"oops\noops\n".starts_with(&err), "{err:?}");
    let want_total = 2 * format!("hello-from-{TEST_USER}\n").len() + 2 * 5;
    match m.call(proto::batch::BatchOp::Output(proto::batch::OutputQuery {
        job: proto::node::JobId(0x51),
        stdout_from: 0,
        stderr_from: 0,
    })) {
        Ok(BatchReply::Output(c)) => {
            assert_eq!(c.truncated as usize, want_total - 10);
            assert!(c.complete);
        }
        other => panic!("{other:?}"),
    }
    // The ledger holds what the queue charged, under its name and the job id (the
    // queue records a charge before it delivers it: wait for the delivery).
    let queue_debits = || -> Vec<_> {
        m.market
            .accountd
            .history(TEST_USER)
            .into_iter()
            .filter(|e| e.kind == "debit" && e.node == "batchd")
            .collect()
    };
    let delivered = rexec_tests::wait_until(std::time::Duration::from_secs(20), || {
        queue_debits().iter().map(|e| -e.amount).sum::<i64>() == done.charged
    });
    let debits = queue_debits();
    assert!(
        delivered.is_some(),
        "the queue's debits {debits:?} never reached {}",
        done.charged
    );
    assert!(!debits.is_empty(), "no debit from the queue");
    assert!(
        debits.iter().all(|e| e.job == "0000000000000051"),
        "{debits:?}"
    );
    let charged: i64 = debits.iter().map(|e| -e.amount).sum();
    assert_eq!(charged, done.charged, "{debits:?}");
    // Ran about 2 s on 2 processors at 6 credits per CPU-minute: 0.4 credits
    // (whole seconds of start and end: between 1 and 4 s).
    let ran = done.ended_at.unwrap() - done.started_at.unwrap();
    let per_second = rate * 2 / 60;
    assert!(
        charged >= per_second && charged <= per_second * 4,
        "charged {charged} for {ran} s at {per_second}/s"
    );
    let audit = m.market.accountd.admin(&["audit"]);
    assert!(audit.ok().contains("audit passed"), "{}", audit.ok());
}

#[test]
fn kill_9_of_the_queue_mid_run_requeues_the_job_and_runs_no_attempt_twice() {
    if !rexec_tests::can_run(
        "kill_9_of_the_queue_mid_run_requeues_the_job_and_runs_no_attempt_twice",
    ) {
        return;
    }
    let mut m = BatchMarket::start(BatchOptions::default());
    let spec = m.spec(
        0x52,
        &["sh", "-c", "echo started; sleep 4"],
        2,
        30,
        Worth::Rate(0),
    );
    assert!(matches!(m.submit(&spec), Ok(BatchReply::Submitted(_))));
    m.wait_for(0x52, LIMIT, |e| e.state == JobState::Running);
    let printed = rexec_tests::wait_until(LIMIT, || {
        String::from_utf8_lossy(&m.output(0x52).0)
            .matches("started")
            .count()
            == 2
    });
    assert!(printed.is_some(), "the first attempt's ranks never printed");
    m.batchd.kill9();
    // The nodes kill the ranks of the lost sessions.
    let gone = rexec_tests::wait_until(LIMIT, || m.market.marked(&[]).is_empty());
    assert!(gone.is_some(), "ranks outlived the queue's sessions");
    m.batchd.restart();
    let done = m.wait_for(0x52, Duration::from_secs(60), |e| {
        e.state == JobState::Finished
    });
    assert_eq!(done.attempts, 2, "{done:?}");
    assert_eq!(done.exit, Some(ExitStatus::Code(0)));
    // One "started" per rank per attempt: 2 attempts × 2 ranks, nothing more.
    let (out, _) = m.output(0x52);
    assert_eq!(
        String::from_utf8_lossy(&out).matches("started").count(),
        4,
        "{out:?}"
    );
}

/// A job's end is shown (`Status`, so `rexec batch wait`) only once the queue's store
/// holds it: while another writer holds the store, a job whose process has exited
/// still shows as running; once the store is free, it shows as finished.
#[test]
fn a_jobs_end_is_shown_only_once_it_is_committed() {
    if !rexec_tests::can_run("a_jobs_end_is_shown_only_once_it_is_committed") {
        return;
    }
    let m = BatchMarket::start(BatchOptions::default());
    // Nothing printed and nothing charged: its end is the only write it causes.
    let spec = m.spec(0x53, &["sleep", "1"], 1, 30, Worth::Rate(0));
    assert!(matches!(m.submit(&spec), Ok(BatchReply::Submitted(_))));
    m.wait_for(0x53, LIMIT, |e| e.state == JobState::Running);
    // Another writer takes the store before the job ends (batchd waits up to 5 s
    // for it to be free).
    let other = rusqlite::Connection::open(m.batchd.store()).unwrap();
    other.execute_batch("BEGIN IMMEDIATE").unwrap();
    let began = rexec_tests::wait_until(LIMIT, || !m.market.marked(&[]).is_empty());
    assert!(began.is_some(), "the job's process never appeared");
    let ended = rexec_tests::wait_until(LIMIT, || m.market.marked(&[]).is_empty());
    assert!(ended.is_some(), "the job's process never ended");
    // Its node tells the queue at once; give the queue time to try to record it.
    std::thread::sleep(Duration::from_millis(1500));
    let held = m.status(0x53);
    assert_eq!(
        held.state,
        JobState::Running,
        "the end was shown before its commit: {held:?}"
    );
    other.execute_batch("COMMIT").unwrap();
    let done = m.wait_for(0x53, LIMIT, |e| e.state == JobState::Finished);
    assert_eq!(done.exit, Some(ExitStatus::Code(0)), "{done:?}");
}

#[test]
fn a_job_bidding_above_a_nodes_max_rate_runs_weighted_at_the_cap() {
    if !rexec_tests::can_run("a_job_bidding_above_a_nodes_max_rate_runs_weighted_at_the_cap") {
        return;
    }
    let m = BatchMarket::start(BatchOptions::default());
    // 150 credits per CPU-minute, above the nodes' max_rate of 100: the node
    // weights the rank at 100 instead of refusing it (the queue charges it).
    let spec = m.spec(0x61, &["sleep", "1"], 1, 5, Worth::Rate(150_000_000));
    assert!(matches!(m.submit(&spec), Ok(BatchReply::Submitted(_))));
    let done = m.wait_for(0x61, LIMIT, |e| {
        matches!(
            e.state,
            JobState::Finished | JobState::Failed | JobState::Cancelled
        )
    });
    assert_eq!(
        (done.state, done.exit, done.attempts),
        (JobState::Finished, Some(ExitStatus::Code(0)), 1),
        "{done:?}"
    );
}
