//! The spending ceiling, `rexec --max-cost C`: the nodes stop charging a job once
//! its charges reach C (each rank its share), within one debit interval, and the
//! job runs on at bid 0 where it is free; the client says so once.

use std::time::Duration;

use rexec_tests::cluster::TEST_USER;
use rexec_tests::market::{MarketCluster, MarketOptions};
use rexec_tests::wait_until;

const LIMIT: Duration = Duration::from_secs(30);

#[test]
fn an_interactive_job_at_its_spending_ceiling_runs_on_at_bid_zero_within_one_debit_interval() {
    if !rexec_tests::can_run(
        "an_interactive_job_at_its_spending_ceiling_runs_on_at_bid_zero_within_one_debit_interval",
    ) {
        return;
    }
    // Two sleeping ranks on n1 at 6 credits a minute pay 0.1 credits a second each
    // under the paper's policy (no CPU needed: the charge is the bid times the time),
    // metered and debited every second. A ceiling of 1 credit gives each rank 0.5.
    let m = MarketCluster::start(MarketOptions {
        initial: Some("100"),
        ..MarketOptions::paper_with_one_second_ticks()
    });
    let initial = 100_000_000i64;
    let ceiling = 1_000_000i64;
    // What the job pays in one debit interval (1 s) at its bid: 2 × 0.1 credits.
    let interval = 200_000i64;
    let client = m
        .rexec()
        .args([
            "-r",
            "6",
            "--max-cost",
            "1",
            "--nodes",
            "n1,n1",
            "sleep",
            "1000",
        ])
        .spawn();
    let capped = wait_until(LIMIT, || {
        let rows = m.jobs().0;
        rows.len() == 2 && rows.iter().all(|r| r.bid == "6->0")
    });
    assert!(
        capped.is_some(),
        "the ranks never dropped to bid 0: {:?}\n{}",
        m.jobs().0,
        m.logs()
    );
    let job = m.jobs().0[0].job.clone();

    // One notice for the job, though both ranks reached their shares.
    client.wait_for_stderr("spending ceiling", LIMIT);
    std::thread::sleep(Duration::from_secs(1));
    let notices = client.stderr_now().matches("spending ceiling").count();
    assert_eq!(notices, 1, "{}", client.stderr_now());

    // The ledger: charged C within one debit interval, and nothing more after.
    let stopped = m
        .settled_balance(TEST_USER, Duration::from_secs(2), LIMIT)
        .expect("balance never settled");
    let charged = initial - stopped;
    eprintln!("charged {charged} micro-credits under a ceiling of {ceiling}");
    assert!(
        (ceiling - interval..=ceiling + interval).contains(&charged),
        "charged {charged} micro-credits, not within one debit interval ({interval}) of the \
         ceiling {ceiling}"
    );
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(
        m.accountd.balance(TEST_USER),
        stopped,
        "charged past the ceiling"
    );

    // The job still runs, at bid 0.
    let rows = m.jobs().0;
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert!(rows.iter().all(|r| r.bid == "6->0"), "{rows:?}");
    assert!(
        client.stderr_now().lines().count() <= 1,
        "{}",
        client.stderr_now()
    );

    let kill = m.rexec().args(["kill", &job]).run();
    assert_eq!(kill.code, Some(0), "{kill:?}");
    let out = client.wait(LIMIT);
    assert_eq!(out.code, Some(137), "{out:?}");
}
