//! A project's spending ceiling per job (`accountctl project set chem
//! --max-cost-per-job C`, by the project's admin or an admin), applied to
//! every job charged to the project: an interactive job with no `--max-cost`
//! drops to bid 0 at C (one notice) and the project pays C within one debit
//! interval; a batch job with no `-A` is charged to its owner's default
//! project (each entry "spent by" the owner), refused when its worst case is
//! over the project's ceiling and stopped at it (`COST_LIMIT`). And `rexec
//! estimate` shows the paying project's balance, its 7-day burn and ceiling.

use std::time::Duration;

use proto::batch::JobState;
use rexec_tests::batch::{BatchMarket, BatchOptions};
use rexec_tests::cluster::{ClusterOptions, TEST_USER};
use rexec_tests::market::{MarketCluster, MarketOptions};
use rexec_tests::selectors::{Channel, Vexecd, client_config, selectors_table};
use rexec_tests::wait_until;

const LIMIT: Duration = Duration::from_secs(30);
const START: i64 = 100_000_000;

/// Opens project chem of the test user on `ledger` with 100 credits, as the
/// user's default project.
fn chem_by_default(ledger: &rexec_tests::accountd::Accountd) {
    ledger
        .admin(&["project", "create", "chem", "--members", TEST_USER])
        .ok();
    ledger
        .admin(&["grant", "chem", "100", "--reason", "allocation"])
        .ok();
    ledger
        .admin(&["project", "default", TEST_USER, "chem"])
        .ok();
}

/// The project's debits naming the test user.
fn spent_by_member(ledger: &rexec_tests::accountd::Accountd) -> usize {
    let csv = ledger.admin(&["history", "chem", "--csv"]).ok().to_string();
    csv.lines()
        .filter(|l| l.contains(",debit,") || l.starts_with("debit,"))
        .filter(|l| l.contains(&format!("spent by {TEST_USER}")))
        .count()
}

#[test]
fn an_interactive_job_without_max_cost_stops_at_its_projects_ceiling() {
    if !rexec_tests::can_run("an_interactive_job_without_max_cost_stops_at_its_projects_ceiling") {
        return;
    }
    // Two sleeping ranks on n1 at 6 credits a minute pay 0.1 credits a second each
    // under the paper's policy, debited every second; the project's ceiling of 1
    // credit gives each rank 0.5.
    let m = MarketCluster::start(MarketOptions {
        initial: Some("100"),
        ..MarketOptions::paper_with_one_second_ticks()
    });
    chem_by_default(&m.accountd);
    m.accountd
        .admin(&["project", "set", "chem", "--max-cost-per-job", "1"])
        .ok();
    let ceiling = 1_000_000i64;
    let interval = 200_000i64;
    let client = m
        .rexec()
        .args(["-r", "6", "--nodes", "n1,n1", "sleep", "1000"])
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
    client.wait_for_stderr("spending ceiling", LIMIT);
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(
        client.stderr_now().matches("spending ceiling").count(),
        1,
        "{}",
        client.stderr_now()
    );
    let stopped = m
        .settled_balance("chem", Duration::from_secs(2), LIMIT)
        .expect("chem's balance never settled");
    let charged = START - stopped;
    eprintln!("chem charged {charged} micro-credits under its ceiling of {ceiling}");
    assert!(
        (ceiling - interval..=ceiling + interval).contains(&charged),
        "charged {charged}, not within one debit interval ({interval}) of {ceiling}"
    );
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(
        m.accountd.balance("chem"),
        stopped,
        "charged past the ceiling"
    );
    assert_eq!(m.accountd.balance(TEST_USER), START, "the member paid");
    assert!(spent_by_member(&m.accountd) > 0);

    let kill = m.rexec().args(["kill", &job]).run();
    assert_eq!(kill.code, Some(0), "{kill:?}");
    let out = client.wait(LIMIT);
    assert_eq!(out.code, Some(137), "{out:?}");
}

#[test]
fn a_batch_job_without_dash_a_charges_the_default_project_up_to_its_ceiling() {
    if !rexec_tests::can_run(
        "a_batch_job_without_dash_a_charges_the_default_project_up_to_its_ceiling",
    ) {
        return;
    }
    let m = BatchMarket::start(BatchOptions::default());
    let ledger = &m.market.accountd;
    chem_by_default(ledger);
    ledger
        .admin(&["project", "set", "chem", "--max-cost-per-job", "1.5"])
        .ok();
    let config = crate::batch_ceiling::batch_config(&m);
    let rexec = |args: &[&str]| m.market.rexec().config(&config).args(args).run();
    let mine = ledger.balance(TEST_USER);
    let submit = |length: &str| rexec(&["submit", "-r", "60", "--length", length, "sleep", "1000"]);
    // A worst case of 2 credits is over chem's ceiling of 1.5: refused, one line.
    let over = submit("2s");
    assert_eq!(over.code, Some(254), "{over:?}");
    assert_eq!(over.stderr.lines().count(), 1, "{over:?}");
    assert!(
        over.stderr.contains("worst case, 2 credits")
            && over
                .stderr
                .contains("project chem's ceiling per job of 1.5 credits"),
        "{over:?}"
    );

    // A worst case of 1 credit: it sleeps on past its length and is stopped when
    // its charges reach 1.5 credits, all of them chem's.
    let ok = submit("1s");
    assert_eq!(ok.code, Some(0), "{ok:?}");
    let id = u64::from_str_radix(ok.out().trim(), 16).expect("a job id");
    let done = m.wait_for(id, LIMIT, |e| e.state == JobState::CostLimit);
    let ceiling = 1_500_000i64;
    let period = 500_000i64;
    assert!(
        (ceiling - period..=ceiling).contains(&done.charged),
        "charged {} under chem's ceiling of {ceiling}: {done:?}",
        done.charged
    );
    let delivered = wait_until(LIMIT, || START - ledger.balance("chem") == done.charged);
    assert!(
        delivered.is_some(),
        "chem paid {}, the queue charged {}",
        START - ledger.balance("chem"),
        done.charged
    );
    assert_eq!(ledger.balance(TEST_USER), mine, "the member's account paid");
    assert!(
        spent_by_member(ledger) > 0,
        "no debit of chem names the member"
    );
}

#[test]
fn an_estimate_shows_the_paying_projects_balance_burn_and_ceiling() {
    if !rexec_tests::can_run("an_estimate_shows_the_paying_projects_balance_burn_and_ceiling") {
        return;
    }
    let channel = Channel::loopback();
    let m = MarketCluster::start(MarketOptions {
        cluster: ClusterOptions {
            nodes: 1,
            ..ClusterOptions::default()
        },
        initial: Some("100"),
        discovery: Some(channel.table()),
        ..MarketOptions::paper_with_one_second_ticks()
    });
    let v = Vexecd::start(&m.pki, m.dir.path(), "v1", &channel, None);
    let selecting = client_config(&m, "estimate.toml", &selectors_table(&[&v]));
    let found = wait_until(LIMIT, || m.logs().contains("accountd found"));
    assert!(
        found.is_some(),
        "the node never found accountd:\n{}",
        m.logs()
    );
    let heard = wait_until(LIMIT, || v.nodes().iter().any(|n| n.name == "n1"));
    assert!(heard.is_some(), "the selector never heard n1");
    chem_by_default(&m.accountd);
    m.accountd
        .admin(&["project", "set", "chem", "--max-cost-per-job", "5"])
        .ok();
    m.accountd
        .admin(&["project", "create", "physics", "--members", "nobody"])
        .ok();
    // Spend from chem first, so that it burns.
    let run = m
        .rexec()
        .args(["-r", "6", "--nodes", "n1,n1", "sleep", "2"])
        .run();
    assert_eq!(run.code, Some(0), "{run:?}");
    let chem = m
        .settled_balance("chem", Duration::from_secs(2), LIMIT)
        .expect("chem's balance never settled");
    assert!(chem < START, "chem was not charged");
    let burn = (START - chem) / 7;

    let estimate = |extra: &[&str]| {
        let mut args = vec!["estimate", "-r", "6", "-n", "1", "--length", "10s"];
        args.extend(extra);
        m.rexec()
            .config(&selecting)
            .env("ACCOUNTD_ADDR", &m.accountd.addr)
            .args(&args)
            .run()
    };
    let out = estimate(&[]);
    assert_eq!(out.code, Some(0), "{out:?}");
    let want = format!(
        "balance: {} credits (project chem, spent by {TEST_USER}); burn {} credits a day over \
         the last 7 days; ceiling per job 5 credits (the project's)",
        money::format_credits(chem),
        money::format_credits(burn)
    );
    assert!(
        out.out().lines().any(|l| l == want),
        "want {want:?} in\n{}",
        out.out()
    );
    // -A: the personal account is not what pays; a project of others is not shown.
    let other = estimate(&["-A", "physics"]);
    assert_eq!(other.code, Some(0), "{other:?}");
    assert!(
        other
            .out()
            .lines()
            .any(|l| l.starts_with("balance: unknown (") && l.contains("not a member")),
        "{other:?}"
    );
    // `rexec submit --estimate` prints the same line and queues nothing.
    let submit = m
        .rexec()
        .config(&selecting)
        .env("ACCOUNTD_ADDR", &m.accountd.addr)
        .args(["submit", "--estimate", "-r", "6", "--length", "10s", "true"])
        .run();
    assert_eq!(submit.code, Some(0), "{submit:?}");
    assert!(submit.out().lines().any(|l| l == want), "{submit:?}");
}
