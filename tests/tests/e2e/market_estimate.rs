//! `rexec estimate` before a run, then the run: on a node of one CPU where one
//! competitor bidding 3 credits a minute spins (the paper's Figure 4 shape, a
//! known competitor), the estimate for a newcomer bidding 6 for 20 s says what
//! the ledger then charges that run, within 5%. Under the `contention` rule the
//! charge is the bid times the time the node is contended, whatever CPU the
//! newcomer receives, so the comparison does not depend on the machine's load.

use std::time::Duration;

use rexec_tests::cluster::{ClusterOptions, TEST_USER};
use rexec_tests::market::{MarketCluster, MarketOptions};
use rexec_tests::selectors::{Channel, Vexecd, client_config, selectors_table};
use rexec_tests::wait_until;

const LIMIT: Duration = Duration::from_secs(60);

/// The amount on the line of `text` that starts with `label`, micro-credits.
fn credits_after(text: &str, label: &str) -> Option<i64> {
    let line = text.lines().find(|l| l.starts_with(label))?;
    let word = line[label.len()..].split_whitespace().next()?;
    money::parse_credits(word).ok()
}

#[test]
fn an_estimate_is_within_five_percent_of_what_the_run_then_costs() {
    if !rexec_tests::can_run("an_estimate_is_within_five_percent_of_what_the_run_then_costs") {
        return;
    }
    let channel = Channel::loopback();
    let m = MarketCluster::start(MarketOptions {
        cluster: ClusterOptions {
            nodes: 1,
            ..ClusterOptions::default()
        },
        cpus: 1,
        policy: "contention",
        discovery: Some(channel.table()),
        ..MarketOptions::default()
    });
    let v = Vexecd::start(&m.pki, m.dir.path(), "v1", &channel, None);
    let selecting = client_config(&m, "estimate.toml", &selectors_table(&[&v]));

    // The node learns accountd's address from its announcements before any launch.
    let found = wait_until(LIMIT, || m.logs().contains("accountd found"));
    assert!(
        found.is_some(),
        "the node never found accountd:\n{}",
        m.logs()
    );

    // The competitor: one spinning rank bidding 3.
    let stop = rexec_tests::stop::StopFile::new();
    let competitor = m
        .rexec()
        .args([
            "-r",
            "3",
            "--nodes",
            "n1",
            "perl",
            "-e",
            &stop.perl_spin(300),
        ])
        .spawn();
    let heard = wait_until(LIMIT, || {
        v.nodes()
            .iter()
            .any(|n| n.name == "n1" && n.status.price == 3_000_000 && n.status.runnable >= 1)
    });
    assert!(
        heard.is_some(),
        "the selector never heard the competitor: {:?}\n{}\n{}",
        v.nodes(),
        competitor.stderr_now(),
        m.logs()
    );

    let length = 20;
    let estimate = m
        .rexec()
        .config(&selecting)
        .env("ACCOUNTD_ADDR", &m.accountd.addr)
        .args([
            "estimate",
            "-r",
            "6",
            "-n",
            "1",
            "--length",
            &format!("{length}s"),
        ])
        .run();
    assert_eq!(estimate.code, Some(0), "{estimate:?}");
    let text = estimate.out();
    eprintln!("{text}");
    // Worst case: 6 credits a minute for 20 s; expected the same, as the node will
    // be contended throughout; the share 6 / (3 + 6) of the one CPU.
    assert_eq!(
        credits_after(&text, "worst case: "),
        Some(2_000_000),
        "{text}"
    );
    let expected = credits_after(&text, "expected: ").expect("an expected cost");
    assert!(text.contains("share 0.667 CPU"), "{text}");
    let balance = m.accountd.balance(TEST_USER);
    assert!(
        text.contains(&format!(
            "balance: {} credits ({TEST_USER}",
            money::format_credits(balance)
        )),
        "{text}"
    );

    // `rexec submit --estimate` quotes the same and queues nothing (no queue is
    // even configured here).
    let submit = m
        .rexec()
        .config(&selecting)
        .args([
            "submit",
            "--estimate",
            "-r",
            "6",
            "--length",
            &format!("{length}s"),
            "true",
        ])
        .run();
    assert_eq!(submit.code, Some(0), "{submit:?}");
    assert_eq!(
        credits_after(&submit.out(), "expected: "),
        Some(expected),
        "{submit:?}"
    );

    // The run, for that length, spinning.
    let spin = format!("use Time::HiRes 'time'; $e=time+{length}; 1 while time<$e");
    let run = m
        .rexec()
        .args(["-v", "-r", "6", "--nodes", "n1", "perl", "-e", &spin])
        .run();
    assert_eq!(run.code, Some(0), "{run:?}");
    let job = run
        .stderr
        .lines()
        .find_map(|l| l.strip_prefix("rexec: job "))
        .and_then(|rest| rest.split_whitespace().next())
        .expect("-v names the job")
        .to_string();
    let billed = run
        .stderr
        .lines()
        .find_map(|l| l.split("charged ").nth(1))
        .and_then(|rest| money::parse_credits(rest.split_whitespace().next()?).ok())
        .expect("-v prints the charge");
    let in_ledger = || -> i64 {
        m.accountd
            .history(TEST_USER)
            .iter()
            .filter(|e| e.kind == "debit" && e.job == job)
            .map(|e| -e.amount)
            .sum()
    };
    let settled = wait_until(LIMIT, || in_ledger() == billed);
    assert!(
        settled.is_some(),
        "the ledger holds {} of {billed}",
        in_ledger()
    );
    let cost = in_ledger();
    eprintln!("estimated {expected} micro-credits; the run cost {cost}");
    let off = (cost - expected).abs() as f64 / expected as f64;
    assert!(
        off <= 0.05,
        "estimated {expected} micro-credits, the run cost {cost} ({:.1}% off)",
        off * 100.0
    );

    stop.stop();
    let out = competitor.wait(LIMIT);
    assert_eq!(out.code, Some(0), "{out:?}");
}
