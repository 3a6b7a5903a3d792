//! Project accounts at the node, `rexec -A PROJECT`: a member's job is charged to
//! the project (its balance, not the member's, is debited, each entry naming the
//! member), a user who is no member is refused at launch with one line and exit
//! 254, and without `-A` a user's default project pays; a batch job submitted
//! with `-A` (signed with the job) is charged to the project by the queue.

use std::time::Duration;

use proto::batch::JobState;
use rexec_tests::batch::{BatchMarket, BatchOptions};
use rexec_tests::cluster::TEST_USER;
use rexec_tests::market::{MarketCluster, MarketOptions};

const LIMIT: Duration = Duration::from_secs(30);
const START: i64 = 100_000_000;

/// A market whose test user holds 100 credits, and project chem of that user,
/// granted 100 credits.
fn market_with_chem() -> MarketCluster {
    let m = MarketCluster::start(MarketOptions {
        initial: Some("100"),
        ..MarketOptions::paper_with_one_second_ticks()
    });
    m.accountd
        .admin(&["project", "create", "chem", "--members", TEST_USER])
        .ok();
    m.accountd
        .admin(&["grant", "chem", "100", "--reason", "allocation"])
        .ok();
    m
}

/// Runs a job of two ranks on n1 bidding 6 credits a minute (0.1 a second each
/// under the paper's policy) for two seconds with `flags`; asserts it ran.
fn run_paid(m: &MarketCluster, flags: &[&str]) {
    let mut args = vec!["-r", "6", "--nodes", "n1,n1"];
    args.extend(flags);
    args.extend(["sleep", "2"]);
    let out = m.rexec().args(&args).run();
    assert_eq!(out.code, Some(0), "{out:?}\n{}", m.logs());
}

/// The project's debits for the test user (the entry reasons name the member),
/// from `accountctl history chem`.
fn spent_by_member(m: &MarketCluster) -> usize {
    let csv = m
        .accountd
        .admin(&["history", "chem", "--csv"])
        .ok()
        .to_string();
    csv.lines()
        .filter(|l| l.starts_with("debit,") || l.contains(",debit,"))
        .filter(|l| l.contains(&format!("spent by {TEST_USER}")))
        .count()
}

#[test]
fn a_member_charges_the_project_named_by_dash_a_and_a_non_member_is_refused() {
    if !rexec_tests::can_run(
        "a_member_charges_the_project_named_by_dash_a_and_a_non_member_is_refused",
    ) {
        return;
    }
    let m = market_with_chem();
    run_paid(&m, &["-A", "chem"]);
    let chem = m
        .settled_balance("chem", Duration::from_secs(2), LIMIT)
        .expect("chem's balance never settled");
    eprintln!("chem paid {} micro-credits", START - chem);
    assert!(
        chem < START,
        "the project was not charged: {chem}\n{}",
        m.logs()
    );
    assert_eq!(
        m.accountd.balance(TEST_USER),
        START,
        "the member's own account was charged"
    );
    assert!(spent_by_member(&m) > 0, "no debit of chem names the member");

    // A project the user is no member of: refused at launch, one line, 254.
    m.accountd
        .admin(&["project", "create", "physics", "--members", "nobody"])
        .ok();
    m.accountd
        .admin(&["grant", "physics", "100", "--reason", "allocation"])
        .ok();
    let out = m
        .rexec()
        .args(["-r", "6", "-A", "physics", "--nodes", "n1", "echo", "ran"])
        .run();
    assert_eq!(out.code, Some(254), "{out:?}");
    assert_eq!(out.stderr.lines().count(), 1, "{out:?}");
    assert!(out.stderr.contains("not a member"), "{out:?}");
    assert!(!out.out().contains("ran"), "{out:?}");
    assert_eq!(m.accountd.balance("physics"), START);
    // Even at bid 0: membership is checked whatever the bid.
    let out = m
        .rexec()
        .args(["-r", "0", "-A", "physics", "--nodes", "n1", "echo", "ran"])
        .run();
    assert_eq!(out.code, Some(254), "{out:?}");
}

#[test]
fn without_dash_a_the_default_project_pays() {
    if !rexec_tests::can_run("without_dash_a_the_default_project_pays") {
        return;
    }
    let m = market_with_chem();
    m.accountd
        .admin(&["project", "default", TEST_USER, "chem"])
        .ok();
    run_paid(&m, &[]);
    let chem = m
        .settled_balance("chem", Duration::from_secs(2), LIMIT)
        .expect("chem's balance never settled");
    assert!(
        chem < START,
        "the default project was not charged\n{}",
        m.logs()
    );
    assert_eq!(m.accountd.balance(TEST_USER), START);
    assert!(spent_by_member(&m) > 0, "no debit of chem names the member");

    // Back to none: the personal account pays, as before projects.
    m.accountd
        .admin(&["project", "default", TEST_USER, "none"])
        .ok();
    run_paid(&m, &[]);
    let mine = m
        .settled_balance(TEST_USER, Duration::from_secs(2), LIMIT)
        .expect("the balance never settled");
    assert!(mine < START, "the personal account was not charged");
    assert_eq!(m.accountd.balance("chem"), chem, "chem was charged again");
}

#[test]
fn a_batch_job_submitted_with_dash_a_charges_the_project() {
    if !rexec_tests::can_run("a_batch_job_submitted_with_dash_a_charges_the_project") {
        return;
    }
    let m = BatchMarket::start(BatchOptions::default());
    let ledger = &m.market.accountd;
    ledger
        .admin(&["project", "create", "chem", "--members", TEST_USER])
        .ok();
    ledger
        .admin(&["grant", "chem", "100", "--reason", "allocation"])
        .ok();
    ledger
        .admin(&["project", "create", "physics", "--members", "nobody"])
        .ok();
    let config = crate::batch_ceiling::batch_config(&m);
    let rexec = |args: &[&str]| m.market.rexec().config(&config).args(args).run();
    let mine = ledger.balance(TEST_USER);

    // No member of physics: refused at submission, one line, 254.
    let refused = rexec(&[
        "submit", "-A", "physics", "-r", "60", "--length", "2s", "sleep", "1",
    ]);
    assert_eq!(refused.code, Some(254), "{refused:?}");
    assert_eq!(refused.stderr.lines().count(), 1, "{refused:?}");
    assert!(refused.stderr.contains("not a member"), "{refused:?}");

    // 60 credits per CPU-minute on 1 processor for about a second: chem pays.
    let ok = rexec(&[
        "submit", "-A", "chem", "-r", "60", "--length", "2s", "sleep", "1",
    ]);
    assert_eq!(ok.code, Some(0), "{ok:?}");
    let id = u64::from_str_radix(ok.out().trim(), 16).expect("a job id");
    let done = m.wait_for(id, LIMIT, |e| e.state == JobState::Finished);
    assert!(done.charged > 0, "{done:?}");
    let delivered =
        rexec_tests::wait_until(LIMIT, || START - ledger.balance("chem") == done.charged);
    assert!(
        delivered.is_some(),
        "chem paid {}, the queue charged {}",
        START - ledger.balance("chem"),
        done.charged
    );
    assert_eq!(ledger.balance(TEST_USER), mine, "the member's account paid");
    let csv = ledger.admin(&["history", "chem", "--csv"]).ok().to_string();
    assert!(csv.contains(&format!("spent by {TEST_USER}")), "{csv}");
}
