//! Bids are checked where they are enforced: a node refuses, in one line
//! naming the reason and before it creates any process or cgroup, a bid
//! above its own `max_rate` and a positive bid from a user whose balance is
//! not positive, whoever the client is; a zero bid always runs.

use std::time::Duration;

use money::MICROS_PER_CREDIT as C;
use proto::node::{ErrorCode, FromNode};
use rexec_tests::cluster::{ClusterOptions, TEST_USER};
use rexec_tests::market::{MarketCluster, MarketOptions, RawSession};
use rexec_tests::wait_until;

pub(crate) fn refused(answer: FromNode, code: ErrorCode, needles: &[&str]) -> String {
    let FromNode::Error(e) = answer else {
        panic!("expected a refusal, got {answer:?}");
    };
    assert_eq!(e.code, code, "{e:?}");
    assert!(!e.message.contains('\n'), "one line: {:?}", e.message);
    for n in needles {
        assert!(e.message.contains(n), "{:?} does not say {n:?}", e.message);
    }
    e.message
}

pub(crate) fn nothing_created(m: &MarketCluster, what: &str) {
    assert!(m.marked(&[]).is_empty(), "{what}: a process was started");
    assert!(
        m.job_cgroups().is_empty(),
        "{what}: a cgroup was created: {:?}",
        m.job_cgroups()
    );
}

/// One node accepting bids up to 50, and a test user whose balance is 0.
pub(crate) fn dry_node() -> MarketCluster {
    MarketCluster::start(MarketOptions {
        cluster: ClusterOptions {
            nodes: 1,
            ..ClusterOptions::default()
        },
        max_rate: "50",
        initial: Some("0"),
        ..MarketOptions::default()
    })
}

#[test]
fn a_node_refuses_bids_over_its_max_rate_or_without_credit_and_runs_zero_bids() {
    if !rexec_tests::can_run(
        "a_node_refuses_bids_over_its_max_rate_or_without_credit_and_runs_zero_bids",
    ) {
        return;
    }
    let m = dry_node();
    let sleep = ["sleep", "1000"];

    // A raw client skips rexec's own max_rate check; the node does not.
    let mut s = RawSession::open(&m, "n1", TEST_USER);
    let answer = s.launch(&m, 0xe2e1, 51 * C, &sleep);
    refused(answer, ErrorCode::BadBid, &["max_rate", "50"]);
    nothing_created(&m, "a bid over max_rate");

    // Balance 0: a positive bid is refused, however small.
    let mut s = RawSession::open(&m, "n1", TEST_USER);
    let answer = s.launch(&m, 0xe2e2, 1, &sleep);
    refused(answer, ErrorCode::NoCredit, &["balance is 0", "zero bid"]);
    nothing_created(&m, "a positive bid with balance 0");

    // A negative balance too.
    m.accountd
        .admin(&["adjust", TEST_USER, "-2.5", "--reason", "e2e"])
        .ok();
    let mut s = RawSession::open(&m, "n1", TEST_USER);
    let answer = s.launch(&m, 0xe2e3, 10 * C, &sleep);
    refused(answer, ErrorCode::NoCredit, &["balance is -2.5"]);
    nothing_created(&m, "a positive bid with balance -2.5");

    // The user of rexec sees the same reasons in one line, and the
    // market's own exit status.
    let out = m.rexec().args(["-r", "5", "true"]).run();
    assert_eq!(out.code, Some(254), "{out:?}");
    assert_eq!(out.stderr.lines().count(), 1, "{out:?}");
    assert!(out.stderr.contains("balance is -2.5"), "{}", out.stderr);
    let out = m.rexec().args(["-r", "60", "true"]).run();
    assert_eq!(out.code, Some(254), "{out:?}");
    assert_eq!(out.stderr.lines().count(), 1, "{out:?}");
    assert!(out.stderr.contains("max_rate of 50"), "{}", out.stderr);
    nothing_created(&m, "refused rexec runs");

    // A zero bid runs, balance or not.
    let mut s = RawSession::open(&m, "n1", TEST_USER);
    let answer = s.launch(&m, 0xe2e4, 0, &sleep);
    assert!(matches!(answer, FromNode::Started(_)), "{answer:?}");
    let running = wait_until(Duration::from_secs(10), || {
        !m.marked(&[]).is_empty() && !m.job_cgroups().is_empty()
    });
    assert!(running.is_some(), "{}", m.logs());
    drop(s);
    let gone = wait_until(Duration::from_secs(15), || {
        m.marked(&[]).is_empty() && m.job_cgroups().is_empty()
    });
    assert!(gone.is_some(), "the zero-bid job outlived its client");
    let out = m.rexec().args(["-r", "0", "true"]).run();
    assert_eq!(out.code, Some(0), "{out:?}");
    // Nothing was ever charged.
    assert_eq!(m.accountd.balance(TEST_USER), -2_500_000);

    // `rexec bid` for a job that runs nowhere says so, and fails.
    let job = "00000000000000ff";
    let out = m.rexec().args(["bid", job, "0"]).run();
    assert_eq!(out.code, Some(1), "{out:?}");
    assert_eq!(out.out(), format!("node n1: job {job} does not run here\n"));
    assert!(
        out.stderr.contains("is not running on the nodes asked"),
        "{out:?}"
    );
    // A bid it cannot parse (usage, 2), negative or over the client's own
    // max_rate (refused as the market refuses, 254), never leaves.
    for (rate, code) in [("-1", 254), ("lots", 2), ("100.5", 254)] {
        let out = m.rexec().args(["bid", job, rate]).run();
        assert_eq!(out.code, Some(code), "{rate}: {out:?}");
        assert_eq!(out.stderr.lines().count(), 1, "{rate}: {out:?}");
        assert!(out.stderr.starts_with("rexec: RATE "), "{rate}: {out:?}");
    }
}
