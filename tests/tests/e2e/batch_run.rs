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
    // The ledger holds what the queue charged, under its name and the job id.
    let debits = delivered_queue_debits(&m, "0000000000000051", done.charged);
    let charged: i64 = debits.iter().map(|e| -e.amount).sum();
    // Rate × width × the time it ran, the spans its debits name (2 processors at 6
    // credits per CPU-minute: 0.2 credits a second of them); it slept 2 s.
    charged_rate_width_time(&debits, charged, (rate, 2), Duration::from_secs(2), &done);
    let audit = m.market.accountd.admin(&["audit"]);
    assert!(audit.ok().contains("audit passed"), "{}", audit.ok());
}

/// The queue's debits of `job` (16 hex digits) in the ledger, once they add up to
/// `charged` (the queue records a charge before it delivers it).
fn delivered_queue_debits(
    m: &BatchMarket,
    job: &str,
    charged: i64,
) -> Vec<rexec_tests::market::Entry> {
    let queue_debits = || -> Vec<_> {
        m.market
            .accountd
            .history(TEST_USER)
            .into_iter()
            .filter(|e| e.kind == "debit" && e.node == "batchd")
            .collect()
    };
    let delivered = rexec_tests::wait_until(LIMIT, || {
        queue_debits().iter().map(|e| -e.amount).sum::<i64>() == charged
    });
    let debits = queue_debits();
    assert!(
        delivered.is_some(),
        "the queue's debits {debits:?} never reached {charged}"
    );
    assert!(!debits.is_empty(), "no debit from the queue");
    assert!(debits.iter().all(|e| e.job == job), "{debits:?}");
    debits
}

/// Asserts the queue charged `rate` (micro-credits per CPU-minute) × `width` × the
/// time the job ran: the seconds its `debits` cover in the ledger (each debit names
/// its span), which in turn lie within the queue's own start and end of the job and
/// last at least `at_least` (what the test saw it run).
fn charged_rate_width_time(
    debits: &[rexec_tests::market::Entry],
    charged: i64,
    (rate, width): (i64, i64),
    at_least: Duration,
    done: &proto::batch::QueueEntry,
) {
    let spans: f64 = debits.iter().map(|e| e.interval_secs()).sum();
    let per_second = (rate * width) as f64 / 60.0;
    let model = per_second * spans;
    // The charge is accrued up to the end and the final debit's span closed a moment
    // later, when it is written: at most 50 ms of the span go unpaid. Whole
    // micro-credits are debited (the remainder, under one, is dropped at the end).
    assert!(
        charged as f64 <= model + 1.0 && charged as f64 >= model - per_second * 0.05 - 1.0,
        "charged {charged} micro-credits; rate × width × {spans:.3} s = {model:.0} ({debits:?})"
    );
    // The spans run from the queue's start of the job to its end (both whole seconds
    // in the queue's answer, so up to a second each way), and a job runs at least
    // as long as it sleeps.
    let ran = done.ended_at.unwrap() - done.started_at.unwrap();
    assert!(
        spans <= ran as f64 + 1.0,
        "debits cover {spans:.3} s of a job the queue ran {ran} s: {debits:?}"
    );
    assert!(
        spans >= at_least.as_secs_f64(),
        "debits cover {spans:.3} s of a job that ran at least {at_least:?}: {debits:?}"
    );
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

/// The kernel weight of a job cgroup (v1 `cpu.shares`, v2 `cpu.weight`).
fn weight(dir: &std::path::Path) -> Option<u64> {
    ["cpu.shares", "cpu.weight"]
        .iter()
        .find_map(|f| std::fs::read_to_string(dir.join(f)).ok())
        .and_then(|t| t.trim().parse().ok())
}

#[test]
fn a_job_bidding_above_a_nodes_max_rate_runs_weighted_at_the_cap() {
    if !rexec_tests::can_run("a_job_bidding_above_a_nodes_max_rate_runs_weighted_at_the_cap") {
        return;
    }
    let m = BatchMarket::start(BatchOptions::default());
    // 150 credits per CPU-minute, above the nodes' max_rate of 100: the node
    // weights the rank at 100 instead of refusing it (the queue charges it).
    let stop = rexec_tests::stop::StopFile::new();
    let rate = 150_000_000;
    let spec = m.spec(
        0x61,
        &["sh", "-c", &stop.sh_idle(60)],
        1,
        90,
        Worth::Rate(rate),
    );
    assert!(matches!(m.submit(&spec), Ok(BatchReply::Submitted(_))));
    let running = m.wait_for(0x61, LIMIT, |e| e.state == JobState::Running);
    let seen_running = std::time::Instant::now();
    let node = running.nodes[0].clone();
    // Beside it on its node, a job bidding exactly the max_rate.
    let beside = m
        .market
        .rexec()
        .args(["-r", "100", "--nodes", &node, "sh", "-c", &stop.sh_idle(60)])
        .spawn();
    // The node's view: both ranks bid 100, the batch rank's 150 capped.
    let mut rows = Vec::new();
    let listed = rexec_tests::wait_until(LIMIT, || {
        rows = m.market.jobs().0;
        rows.iter().filter(|r| r.node == node).count() == 2
    });
    assert!(listed.is_some(), "{node} never listed both ranks: {rows:?}");
    let batch_row = rows
        .iter()
        .find(|r| r.job == "0000000000000061")
        .unwrap_or_else(|| panic!("the batch rank is not listed: {rows:?}"));
    assert_eq!(
        batch_row.bid, "100",
        "the node's bid for the rank: {rows:?}"
    );
    // The kernel's view: the two job cgroups weigh the same.
    let parent = m.market.node(&node).cgroup_parent.clone();
    let mut weights = Vec::new();
    let same = rexec_tests::wait_until(LIMIT, || {
        weights = rexec_tests::procs::job_cgroups(&parent)
            .iter()
            .filter_map(|d| weight(d))
            .collect();
        weights.len() == 2 && weights[0] == weights[1]
    });
    assert!(
        same.is_some(),
        "a rank bidding 150 capped at 100 and one bidding 100 weigh {weights:?}"
    );
    let ran_at_least = seen_running.elapsed();
    stop.stop();
    let out = beside.wait(LIMIT);
    assert_eq!(out.code, Some(0), "{out:?}");
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
    // The queue charges its own bid, uncapped.
    let debits = delivered_queue_debits(&m, "0000000000000061", done.charged);
    charged_rate_width_time(&debits, done.charged, (rate, 1), ran_at_least, &done);
}
