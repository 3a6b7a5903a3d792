//! The batch queue when things go wrong or a policy preempts: a node lost
//! under a running job (the job is requeued, charged only for the time it
//! ran, and runs again elsewhere), and FIRSTPRICE with preemption suspending a
//! real job for a more urgent one and resuming it after; a finished job
//! replayed from an edited store is refused at the claim and never runs again.

use std::time::Duration;

use proto::batch::{BatchReply, JobState, Worth};
use proto::node::ExitStatus;
use rexec_tests::batch::{BatchMarket, BatchOptions};

const LIMIT: Duration = Duration::from_secs(40);

#[test]
fn a_job_whose_node_is_lost_is_requeued_and_runs_again_elsewhere() {
    if !rexec_tests::can_run("a_job_whose_node_is_lost_is_requeued_and_runs_again_elsewhere") {
        return;
    }
    let mut m = BatchMarket::start(BatchOptions::default());
    let spec = m.spec(0x71, &["sleep", "3"], 2, 10, Worth::Rate(0));
    assert!(matches!(m.submit(&spec), Ok(BatchReply::Submitted(_))));
    let first = m.wait_for(0x71, LIMIT, |e| e.state == JobState::Running);
    // Both ranks fit on the cheapest node; lose it.
    let lost = first.nodes[0].clone();
    let pids = rexec_tests::wait_until(LIMIT, || m.market.marked(&[]).len() >= 2);
    assert!(pids.is_some(), "the ranks never started");
    m.market.crash(&lost);
    let done = m.wait_for(0x71, LIMIT, |e| e.state == JobState::Finished);
    assert_eq!(done.attempts, 2, "{done:?}\n{}", m.batchd.log());
    assert_eq!(done.exit, Some(ExitStatus::Code(0)));
    assert!(m.batchd.log().contains("rank lost"), "{}", m.batchd.log());
    let second: Vec<String> = m
        .batchd
        .log()
        .lines()
        .filter(|l| l.contains("started") && l.contains("attempt=1"))
        .map(str::to_string)
        .collect();
    assert!(
        second.iter().all(|l| !l.contains(&format!("\"{lost}\""))),
        "the second attempt went to the lost node: {second:?}"
    );
    // Back up, the node cleans up what its crash left.
    m.market.restart(&lost);
}

#[test]
fn firstprice_with_preemption_suspends_a_real_job_and_resumes_it() {
    if !rexec_tests::can_run("firstprice_with_preemption_suspends_a_real_job_and_resumes_it") {
        return;
    }
    let m = BatchMarket::start(BatchOptions {
        nodes: 1,
        policy: "firstprice-preempt",
        ..BatchOptions::default()
    });
    // A patient job worth a little whenever it ends...
    let patient = m.spec(0x81, &["sleep", "6"], 2, 10, Worth::Rate(1_000_000));
    assert!(matches!(m.submit(&patient), Ok(BatchReply::Submitted(_))));
    m.wait_for(0x81, LIMIT, |e| e.state == JobState::Running);
    let ranks = rexec_tests::wait_until(LIMIT, || m.market.marked(&[]).len() >= 2);
    assert!(ranks.is_some(), "the patient job's ranks never started");
    // ...and an urgent one worth 10 credits done within 6 s, nothing after 12 s
    // (75 credits per CPU-minute, under the nodes' max_rate of 100).
    let urgent = m.spec(
        0x82,
        &["sleep", "2"],
        2,
        4,
        Worth::Utility(vec![(6, 10_000_000), (12, 0)]),
    );
    assert!(matches!(m.submit(&urgent), Ok(BatchReply::Submitted(_))));
    m.wait_for(0x81, LIMIT, |e| e.state == JobState::Suspended);
    // The patient job's processes are stopped (T), not killed.
    let stopped = rexec_tests::wait_until(LIMIT, || {
        let procs = m.market.marked(&[]);
        procs
            .iter()
            .filter(|p| p.cmd.starts_with("sleep 6") && p.state == 'T')
            .count()
            == 2
    });
    assert!(stopped.is_some(), "{:?}", m.market.marked(&[]));
    let urgent_done = m.wait_for(0x82, LIMIT, |e| e.state == JobState::Finished);
    let patient_done = m.wait_for(0x81, LIMIT, |e| e.state == JobState::Finished);
    assert_eq!(patient_done.exit, Some(ExitStatus::Code(0)));
    assert_eq!(patient_done.attempts, 1, "resumed, not restarted");
    assert!(patient_done.ended_at >= urgent_done.ended_at);
}

#[test]
fn a_debit_accountd_missed_is_delivered_after_kill_9_of_the_queue() {
    if !rexec_tests::can_run("a_debit_accountd_missed_is_delivered_after_kill_9_of_the_queue") {
        return;
    }
    let mut m = BatchMarket::start(BatchOptions::default());
    // 60 credits per CPU-minute on one processor for about 2 s.
    let spec = m.spec(0x91, &["sleep", "2"], 1, 10, Worth::Rate(60_000_000));
    assert!(matches!(m.submit(&spec), Ok(BatchReply::Submitted(_))));
    m.wait_for(0x91, LIMIT, |e| e.state == JobState::Running);
    // Its rank claimed and started (a node claims a signed rank at accountd).
    let started = rexec_tests::wait_until(LIMIT, || !m.market.marked(&[]).is_empty());
    assert!(started.is_some(), "the job's rank never started");
    // accountd dies while the job runs: the debit at its end cannot be
    // delivered; then the queue is killed before it could retry.
    m.market.accountd.kill9();
    let done = m.wait_for(0x91, LIMIT, |e| e.state == JobState::Finished);
    assert!(done.charged > 0, "{done:?}");
    let recorded =
        rexec_tests::wait_until(LIMIT, || m.batchd.log().contains("debit not delivered yet"));
    assert!(
        recorded.is_some(),
        "the queue never tried the debit:\n{}",
        m.batchd.log()
    );
    m.batchd.kill9();
    m.batchd.restart();
    m.market.accountd.restart();
    // The restarted queue delivers what its journal holds, exactly once.
    let debits = || -> Vec<_> {
        m.market
            .accountd
            .history(rexec_tests::cluster::TEST_USER)
            .into_iter()
            .filter(|e| e.kind == "debit" && e.node == "batchd" && e.job == "0000000000000091")
            .collect()
    };
    let delivered = rexec_tests::wait_until(LIMIT, || {
        debits().iter().map(|e| -e.amount).sum::<i64>() == done.charged
    });
    assert!(
        delivered.is_some(),
        "the journal's debit never reached the ledger: {:?} against {}\n{}",
        debits(),
        done.charged,
        m.batchd.log()
    );
    let keys: std::collections::HashSet<_> = debits().iter().map(|e| e.key()).collect();
    assert_eq!(keys.len(), debits().len(), "a key twice: {:?}", debits());
    let audit = m.market.accountd.admin(&["audit"]);
    assert!(audit.ok().contains("audit passed"), "{}", audit.ok());
}

/// `kill -9` of the queue while a job runs: the restarted queue asks the job's
/// nodes for the ranks it started (rexecd lets a configured queue list and kill its
/// own ranks), finds them gone and requeues the job within two ticks of being
/// back, instead of waiting out the 12 s kept for a node it cannot ask.
#[test]
fn a_restarted_queue_requeues_its_last_run_within_two_ticks() {
    if !rexec_tests::can_run("a_restarted_queue_requeues_its_last_run_within_two_ticks") {
        return;
    }
    let mut m = BatchMarket::start(BatchOptions::default());
    let spec = m.spec(0xa1, &["sleep", "3"], 2, 10, Worth::Rate(0));
    assert!(matches!(m.submit(&spec), Ok(BatchReply::Submitted(_))));
    m.wait_for(0xa1, LIMIT, |e| e.state == JobState::Running);
    let ranks = rexec_tests::wait_until(LIMIT, || m.market.marked(&[]).len() >= 2);
    assert!(ranks.is_some(), "the ranks never started");
    m.batchd.kill9();
    m.batchd.restart();
    let back = std::time::Instant::now();
    let requeued = m.wait_for(0xa1, LIMIT, |e| {
        e.attempts >= 2 || e.state == JobState::Queued
    });
    let took = back.elapsed();
    eprintln!("requeued {took:?} after the queue was back");
    // Two 500 ms ticks, and the time to learn the market again on a loaded machine.
    assert!(
        took < Duration::from_secs(5),
        "requeued {took:?} after the restart: {requeued:?}\n{}",
        m.batchd.log()
    );
    assert!(
        m.batchd.log().contains("ranks of the last run are gone"),
        "{}",
        m.batchd.log()
    );
    let done = m.wait_for(0xa1, LIMIT, |e| e.state == JobState::Finished);
    assert_eq!(done.attempts, 2, "{done:?}");
    assert_eq!(done.exit, Some(ExitStatus::Code(0)), "{done:?}");
}

/// The queue's store is edited behind its back: a finished job is set back to
/// waiting with its attempts reset. Its rank's end reached accountd (after an
/// accountd outage at the moment it ended), so every attempt the queue then makes
/// is refused at the claim, on every node: the job's side effect (a line appended
/// to a file) happens once, and the queue gives up after the signed max_attempts.
#[test]
fn a_finished_job_replayed_from_an_edited_store_is_refused_and_runs_once() {
    if !rexec_tests::can_run(
        "a_finished_job_replayed_from_an_edited_store_is_refused_and_runs_once",
    ) {
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let mut m = BatchMarket::start(BatchOptions::default());
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let file = dir.path().join("ran");
    let script = format!("echo ran >> {}; sleep 2", file.display());
    let mut spec = m.spec(0x97, &["sh", "-c", &script], 1, 10, Worth::Rate(0));
    spec.max_attempts = 3;
    assert!(matches!(m.submit(&spec), Ok(BatchReply::Submitted(_))));
    m.wait_for(0x97, LIMIT, |e| e.state == JobState::Running);
    let started = rexec_tests::wait_until(LIMIT, || !m.market.marked(&[]).is_empty());
    assert!(started.is_some(), "the job's rank never started");
    // accountd is away when the rank ends: the node keeps the end and sends it later.
    m.market.accountd.kill9();
    let done = m.wait_for(0x97, LIMIT, |e| e.state == JobState::Finished);
    assert_eq!((done.exit, done.attempts), (Some(ExitStatus::Code(0)), 1));
    let lines = || {
        std::fs::read_to_string(&file)
            .unwrap_or_default()
            .lines()
            .count()
    };
    assert_eq!(lines(), 1);
    m.market.accountd.restart();
    let ledger = m.market.accountd.ledger();
    let count = |sql: &str| -> Option<i64> {
        let conn = rusqlite::Connection::open(&ledger).ok()?;
        conn.query_row(sql, ["0000000000000097"], |r| r.get(0)).ok()
    };
    let ends = "SELECT COUNT(*) FROM rank_ends WHERE job = ?1";
    // Not asserted here: on a build without rank ends the replay below shows the harm.
    let delivered = rexec_tests::wait_until(Duration::from_secs(20), || count(ends) == Some(1));
    // The store edited: the finished job waits again, as if it had never started.
    m.batchd.kill9();
    let store = rusqlite::Connection::open(m.batchd.store()).unwrap();
    let edited = store
        .execute(
            "UPDATE jobs SET state = 1, attempts = 0, nodes = '', started_ms = NULL, \
             ended_ms = NULL, exit = NULL, reason = NULL, done_ms = 0 WHERE id = ?1",
            [0x97_i64],
        )
        .unwrap();
    assert_eq!(edited, 1);
    drop(store);
    m.batchd.restart();
    let gave_up = m.wait_for(0x97, Duration::from_secs(120), |e| {
        matches!(
            e.state,
            JobState::Finished | JobState::Failed | JobState::Cancelled
        )
    });
    assert_eq!(
        lines(),
        1,
        "the finished job ran again: {gave_up:?}\n{}",
        m.batchd.log()
    );
    assert!(delivered.is_some(), "the rank's end never reached accountd");
    assert_eq!(gave_up.state, JobState::Failed, "{gave_up:?}");
    assert_eq!(
        gave_up.attempts, 3,
        "at most max_attempts starts: {gave_up:?}"
    );
    // Every attempt after the first was refused at the claim and wrote nothing: the
    // ledger holds the first attempt's claim and end only.
    assert_eq!(count("SELECT COUNT(*) FROM claims WHERE job = ?1"), Some(1));
    assert_eq!(count(ends), Some(1));
    let log = m.batchd.log();
    assert!(
        log.contains("already ran to its end"),
        "no node said why it refused:\n{log}"
    );
}
