//! The live batch queue with real daemons: submissions refused in one clear
//! line (no credit, too wide, forged, someone else's), submissions that
//! survive `kill -9` of the queue, a queued job cancelled, a job held while its
//! owner cannot pay, waiting jobs listed and started in the policy's order.

use std::time::Duration;

use certs::Role;
use proto::batch::{BatchErrorCode, BatchOp, BatchReply, JobState, QueueQuery, Worth};
use rexec_tests::batch::{BatchMarket, BatchOptions};
use rexec_tests::cluster::TEST_USER;

const LIMIT: Duration = Duration::from_secs(30);

fn refusal(r: Result<BatchReply, clients::batch::ClientError>) -> (BatchErrorCode, String) {
    match r {
        Err(clients::rpc::RpcError::Server(e)) => (e.code, e.message),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn refused_submissions_say_why_in_one_line_and_change_nothing() {
    if !rexec_tests::can_run("refused_submissions_say_why_in_one_line_and_change_nothing") {
        return;
    }
    let m = BatchMarket::start(BatchOptions {
        initial: "10",
        ..BatchOptions::default()
    });
    // 10 credits cannot pay 1 credit per CPU-minute on 2 CPUs for an hour.
    let dear = m.spec(1, &["true"], 2, 3600, Worth::Rate(1_000_000));
    let (code, text) = refusal(m.submit(&dear));
    assert_eq!(code, BatchErrorCode::NoCredit);
    assert_eq!(
        text, "balance 10 credits cannot pay for the job's estimated cost of 120 credits",
        "{text}"
    );
    // 2 nodes of 2 CPUs: 4 processors at most.
    let wide = m.spec(2, &["true"], 5, 10, Worth::Rate(0));
    let (code, text) = refusal(m.submit(&wide));
    assert_eq!(code, BatchErrorCode::TooWide);
    assert!(
        text.contains("needs 5 processors") && text.contains("at most 4"),
        "{text}"
    );
    // Altered after signing: the argv in the signed bytes changed.
    let honest = m.spec(3, &["true"], 1, 10, Worth::Rate(0));
    let mut forged = m.sign(&honest);
    let at = forged.spec.iter().position(|&b| b == b't').unwrap();
    forged.spec[at] = b'T';
    let (code, text) = refusal(m.call(BatchOp::Submit(forged)));
    assert_eq!(code, BatchErrorCode::BadSignature, "{text}");
    assert!(text.contains("bad signature"), "{text}");
    // Someone else's signed job.
    let (code, text) = refusal(m.call_as(Role::User, "mallory", BatchOp::Submit(m.sign(&honest))));
    assert_eq!(code, BatchErrorCode::Forbidden);
    assert!(
        text.contains("mallory may not submit a job of user"),
        "{text}"
    );
    // None of them is in the queue.
    let all = QueueQuery {
        user: None,
        ended: true,
        expand: false,
    };
    match m.call_as(Role::Admin, "ops", BatchOp::Queue(all)) {
        Ok(BatchReply::Queue(list)) => assert!(list.is_empty(), "{list:?}"),
        other => panic!("{other:?}"),
    }
    // The queue announces itself: the selector lists it, so clients find it.
    let listed = rexec_tests::wait_until(LIMIT, || {
        m.services()
            .iter()
            .any(|s| s.kind == proto::select::ServiceKind::Batch && s.name == "batchd")
    });
    assert!(listed.is_some(), "{:?}", m.services());
    // The honest one is accepted once, and refused as a duplicate after.
    assert!(matches!(m.submit(&honest), Ok(BatchReply::Submitted(_))));
    let (code, _) = refusal(m.submit(&honest));
    assert_eq!(code, BatchErrorCode::Duplicate);
}

#[test]
fn acknowledged_submissions_survive_kill_9_of_the_queue() {
    if !rexec_tests::can_run("acknowledged_submissions_survive_kill_9_of_the_queue") {
        return;
    }
    let mut m = BatchMarket::start(BatchOptions::default());
    let ids: Vec<u64> = (100..120).collect();
    for id in &ids {
        let spec = m.spec(*id, &["sleep", "30"], 4, 60, Worth::Rate(0));
        assert!(
            matches!(m.submit(&spec), Ok(BatchReply::Submitted(_))),
            "job {id}"
        );
    }
    m.batchd.kill9();
    m.batchd.restart();
    let list = match m.call(BatchOp::Queue(QueueQuery {
        user: None,
        ended: true,
        expand: false,
    })) {
        Ok(BatchReply::Queue(list)) => list,
        other => panic!("{other:?}"),
    };
    let mut got: Vec<u64> = list.iter().map(|e| e.job.0).collect();
    got.sort();
    assert_eq!(got, ids, "{}", m.batchd.log());
    assert!(list.iter().all(|e| e.user == TEST_USER));
}

#[test]
fn a_queued_job_is_cancelled_by_its_owner_and_not_by_another_user() {
    if !rexec_tests::can_run("a_queued_job_is_cancelled_by_its_owner_and_not_by_another_user") {
        return;
    }
    let m = BatchMarket::start(BatchOptions::default());
    // The first job takes every processor, so the second waits (FIFO).
    let big = m.spec(7, &["sleep", "60"], 4, 60, Worth::Rate(0));
    let small = m.spec(8, &["true"], 1, 5, Worth::Rate(0));
    assert!(matches!(m.submit(&big), Ok(BatchReply::Submitted(_))));
    m.wait_for(7, LIMIT, |e| e.state == JobState::Running);
    match m.submit(&small) {
        Ok(BatchReply::Submitted(s)) => assert_eq!(s.position, 1),
        other => panic!("{other:?}"),
    }
    let (code, _) = refusal(m.call_as(
        Role::User,
        "mallory",
        BatchOp::Cancel(proto::node::JobId(8)),
    ));
    assert_eq!(code, BatchErrorCode::NoSuchJob);
    match m.call(BatchOp::Cancel(proto::node::JobId(8))) {
        Ok(BatchReply::Cancelled(e)) => assert_eq!(e.state, JobState::Cancelled),
        other => panic!("{other:?}"),
    }
    // Cancelling the running one kills its ranks.
    match m.call(BatchOp::Cancel(proto::node::JobId(7))) {
        Ok(BatchReply::Cancelled(e)) => assert_eq!(e.state, JobState::Cancelled),
        other => panic!("{other:?}"),
    }
    let gone = rexec_tests::wait_until(LIMIT, || m.market.marked(&[]).is_empty());
    assert!(
        gone.is_some(),
        "the cancelled job's processes are still there"
    );
}

#[test]
fn a_job_whose_owner_runs_dry_while_queued_is_held_and_released_by_a_grant() {
    if !rexec_tests::can_run(
        "a_job_whose_owner_runs_dry_while_queued_is_held_and_released_by_a_grant",
    ) {
        return;
    }
    let m = BatchMarket::start(BatchOptions {
        initial: "10",
        ..BatchOptions::default()
    });
    // A free job takes every processor for a while; a paid one waits behind it.
    let big = m.spec(0x91, &["sleep", "5"], 4, 5, Worth::Rate(0));
    let paid = m.spec(0x92, &["true"], 1, 10, Worth::Rate(1_000_000));
    assert!(matches!(m.submit(&big), Ok(BatchReply::Submitted(_))));
    m.wait_for(0x91, LIMIT, |e| e.state == JobState::Running);
    assert!(matches!(m.submit(&paid), Ok(BatchReply::Submitted(_))));
    // Its owner's balance goes to 0 while it waits.
    m.market
        .accountd
        .admin(&["adjust", TEST_USER, "-10", "--reason", "e2e"])
        .ok();
    let held = m.wait_for(0x92, LIMIT, |e| e.state == JobState::Held);
    let reason = held.reason.unwrap_or_default();
    assert!(
        reason.contains(&format!("balance of {TEST_USER} is 0")),
        "{reason}"
    );
    assert_eq!(held.attempts, 0, "a held job is not started");
    m.market
        .accountd
        .admin(&["grant", TEST_USER, "5", "--reason", "top-up"])
        .ok();
    let done = m.wait_for(0x92, LIMIT, |e| e.state == JobState::Finished);
    assert_eq!(done.attempts, 1);
}

#[test]
fn the_queue_lists_waiting_jobs_in_the_policys_order_and_starts_them_so() {
    if !rexec_tests::can_run("the_queue_lists_waiting_jobs_in_the_policys_order_and_starts_them_so")
    {
        return;
    }
    let m = BatchMarket::start(BatchOptions {
        policy: "firstprice",
        ..BatchOptions::default()
    });
    // A blocker takes every processor; three jobs wait, bidding 1, 4 and 2
    // credits per CPU-minute.
    let blocker = m.spec(0x70, &["sleep", "3"], 4, 3, Worth::Rate(1_000_000));
    assert!(matches!(m.submit(&blocker), Ok(BatchReply::Submitted(_))));
    m.wait_for(0x70, LIMIT, |e| e.state == JobState::Running);
    for (id, rate) in [(0x71, 1), (0x72, 4), (0x73, 2)] {
        // Each runs over a second, so their starts fall in different seconds.
        let spec = m.spec(id, &["sleep", "1.2"], 4, 2, Worth::Rate(rate * 1_000_000));
        assert!(matches!(m.submit(&spec), Ok(BatchReply::Submitted(_))));
    }
    // Once the queue has decided on them, it lists them highest bid first.
    let listed = rexec_tests::wait_until(LIMIT, || {
        let Ok(BatchReply::Queue(list)) = m.call(BatchOp::Queue(QueueQuery {
            user: None,
            ended: false,
            expand: false,
        })) else {
            return false;
        };
        let waiting: Vec<(u64, Option<u32>)> = list
            .iter()
            .filter(|e| e.state == JobState::Queued)
            .map(|e| (e.job.0, e.position))
            .collect();
        waiting == [(0x72, Some(1)), (0x73, Some(2)), (0x71, Some(3))]
    });
    assert!(
        listed.is_some(),
        "the queue never listed the jobs by bid: {:?}",
        m.call(BatchOp::Queue(QueueQuery {
            user: None,
            ended: false,
            expand: false,
        }))
    );
    // And starts them in that order.
    let started: Vec<(u64, u64)> = [0x71, 0x72, 0x73]
        .iter()
        .map(|&id| {
            let e = m.wait_for(id, LIMIT, |e| e.state == JobState::Finished);
            (e.started_at.expect("a finished job started"), id)
        })
        .collect();
    let mut by_start = started.clone();
    by_start.sort();
    let order: Vec<u64> = by_start.iter().map(|s| s.1).collect();
    assert_eq!(order, [0x72, 0x73, 0x71], "{started:?}");
}
