//! Running dry: when the ledger says a user's balance is gone, that user's
//! ranks keep running at bid 0 on every node, the client says so once for
//! the whole job, and nothing more is charged; after a grant, `rexec bid`
//! restores the bid and the charges resume.

use std::time::Duration;

use rexec_tests::cluster::{ClusterOptions, TEST_USER};
use rexec_tests::market::{JobRow, MarketCluster, MarketOptions};
use rexec_tests::wait_until;

const LIMIT: Duration = Duration::from_secs(30);

fn rows_of(m: &MarketCluster, job: &str) -> Vec<JobRow> {
    m.jobs().0.into_iter().filter(|r| r.job == job).collect()
}

#[test]
fn a_user_running_dry_drops_to_bid_zero_until_a_grant_and_a_rebid() {
    if !rexec_tests::can_run("a_user_running_dry_drops_to_bid_zero_until_a_grant_and_a_rebid") {
        return;
    }
    // Under the paper's policy every rank pays while another is present: four
    // sleeping ranks at 60 credits a minute spend 4 credits a second.
    let m = MarketCluster::start(MarketOptions {
        cluster: ClusterOptions {
            nodes: 2,
            ..ClusterOptions::default()
        },
        policy: "paper",
        initial: Some("1"),
        ..MarketOptions::default()
    });
    let client = m
        .rexec()
        .args(["-r", "60", "--nodes", "n1,n1,n2,n2", "sleep", "1000"])
        .spawn();
    let mut job = String::new();
    let dry = wait_until(LIMIT, || {
        let rows: Vec<JobRow> = m.jobs().0;
        if let Some(r) = rows.first() {
            job = r.job.clone();
        }
        rows.len() == 4 && rows.iter().all(|r| r.bid == "60->0")
    });
    assert!(
        dry.is_some(),
        "the ranks never dropped to bid 0: {:?}\n{}",
        m.jobs().0,
        m.logs()
    );

    // One notice for four ranks on two nodes.
    client.wait_for_stderr("out of credit", LIMIT);
    std::thread::sleep(Duration::from_secs(1));
    let notices = client.stderr_now().matches("out of credit").count();
    assert_eq!(notices, 1, "{}", client.stderr_now());

    // Charges stop: the balance, at or below zero, stays put.
    let stopped = m
        .settled_balance(TEST_USER, Duration::from_secs(2), LIMIT)
        .expect("balance never settled");
    assert!(stopped <= 0, "dry with a balance of {stopped}");
    eprintln!("charges stopped at a balance of {stopped} micro-credits");
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(m.accountd.balance(TEST_USER), stopped, "charged while dry");
    let charged_dry: i64 = rows_of(&m, &job).iter().map(|r| r.charged).sum();

    // Re-bidding without credit is refused by both nodes, each in one line,
    // with the market's own exit status.
    let out = m.rexec().args(["bid", &job, "60"]).run();
    assert_eq!(out.code, Some(254), "{out:?}");
    assert_eq!(out.stderr.lines().count(), 2, "{out:?}");
    for node in ["n1", "n2"] {
        assert!(
            out.stderr
                .lines()
                .any(|l| l.starts_with(&format!("rexec: node {node}: ")) && l.contains("balance")),
            "{out:?}"
        );
    }

    // A grant, then a re-bid, restore the bid on every rank.
    m.accountd
        .admin(&["grant", TEST_USER, "100", "--reason", "top-up"])
        .ok();
    let out = m.rexec().args(["bid", &job, "60"]).run();
    assert_eq!(out.code, Some(0), "{out:?}");
    for node in ["n1", "n2"] {
        let line = format!("node {node}: 2 rank(s) of job {job} now bid 60 credits per minute");
        assert!(out.out().contains(&line), "{out:?}");
    }
    let rows = rows_of(&m, &job);
    assert_eq!(rows.len(), 4, "{rows:?}");
    assert!(rows.iter().all(|r| r.bid == "60"), "{rows:?}");
    client.wait_for_stderr("credit restored", LIMIT);
    std::thread::sleep(Duration::from_secs(1));
    let restored = client.stderr_now().matches("credit restored").count();
    assert_eq!(restored, 1, "{}", client.stderr_now());

    // And the charges resume.
    let granted = stopped + 100_000_000;
    let resumed = wait_until(LIMIT, || m.accountd.balance(TEST_USER) < granted);
    assert!(resumed.is_some(), "nothing charged after the re-bid");
    let charged_now: i64 = rows_of(&m, &job).iter().map(|r| r.charged).sum();
    assert!(charged_now > charged_dry, "{charged_now} <= {charged_dry}");

    let kill = m.rexec().args(["kill", &job]).run();
    assert_eq!(kill.code, Some(0), "{kill:?}");
    let out = client.wait(LIMIT);
    assert_eq!(out.code, Some(137), "{out:?}");
}

#[test]
fn a_user_running_dry_overdraws_by_at_most_one_debit_interval_at_the_bid() {
    if !rexec_tests::can_run(
        "a_user_running_dry_overdraws_by_at_most_one_debit_interval_at_the_bid",
    ) {
        return;
    }
    // Two sleeping ranks on n1 at 6 credits a minute pay 0.1 credits a second each
    // under the paper's policy; the node sends a debit a second (on its one-second
    // tick) and learns the balance from its receipts. A debit is never a tick late, so
    // the user's balance, 0.25 credits at the start, ends at most one interval's worth
    // per rank below zero (0.2 credits), plus what accrues while the receipt that says
    // "dry" is on its way (allowed: a quarter of a second).
    let m = MarketCluster::start(MarketOptions {
        initial: Some("0.25"),
        ..MarketOptions::paper_with_one_second_ticks()
    });
    let client = m
        .rexec()
        .args(["-r", "6", "--nodes", "n1,n1", "sleep", "1000"])
        .spawn();
    let dry = wait_until(LIMIT, || {
        let rows = m.jobs().0;
        rows.len() == 2 && rows.iter().all(|r| r.bid == "6->0")
    });
    assert!(
        dry.is_some(),
        "never ran dry: {:?}\n{}",
        m.jobs().0,
        m.logs()
    );
    let job = m.jobs().0[0].job.clone();
    let stopped = m
        .settled_balance(TEST_USER, Duration::from_secs(2), LIMIT)
        .expect("balance never settled");
    eprintln!("ran dry at a balance of {stopped} micro-credits");
    let per_rank_second = 100_000;
    let bound = -(2 * per_rank_second + 2 * per_rank_second / 4);
    assert!(
        stopped >= bound,
        "overdrawn to {stopped} micro-credits, more than one interval at the bid ({bound})"
    );
    let kill = m.rexec().args(["kill", &job]).run();
    assert_eq!(kill.code, Some(0), "{kill:?}");
    let out = client.wait(LIMIT);
    assert_eq!(out.code, Some(137), "{out:?}");
}
