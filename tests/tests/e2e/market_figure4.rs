//! The paper's Figure 4 in the ledger: four single-threaded CPU-bound jobs bidding
//! 40, 30, 20 and 10 credits a minute arrive on a two-CPU node one interval apart and
//! leave in the same order. Under `contention` a job pays its bid only while three or
//! more of them compete for the two CPUs, so the model says what each owes; the ledger
//! holds, per job, that amount within a metering tick. (The shares themselves are
//! measured in rexecd's own `shares` tests.)

use std::time::{Duration, Instant};

use rexec_tests::cluster::ClusterOptions;
use rexec_tests::market::{MarketCluster, MarketOptions, parse_bills};
use rexec_tests::wait_until;

/// One interval of the schedule.
const INTERVAL: Duration = Duration::from_secs(4);
/// The scenario's metering tick (`MarketOptions::default`).
const TICK: f64 = 0.25;

#[test]
fn figure_4_charges_reach_the_ledger_as_the_model_predicts() {
    if !rexec_tests::can_run("figure_4_charges_reach_the_ledger_as_the_model_predicts") {
        return;
    }
    let m = MarketCluster::start(MarketOptions {
        cluster: ClusterOptions {
            nodes: 1,
            ..ClusterOptions::default()
        },
        policy: "contention",
        ..MarketOptions::default()
    });
    let bids = [40.0, 30.0, 20.0, 10.0];
    let life = 4 * INTERVAL.as_secs();
    // Each job spins for four intervals of its own clock, printing its job id first.
    let script = format!(
        "use Time::HiRes qw(time); $|=1; print \"$ENV{{REXEC_JOB}}\\n\"; \
         $e=time+{life}; 1 while time<$e"
    );
    let start = Instant::now();
    let mut clients = Vec::new();
    let mut arrived = Vec::new();
    for (i, bid) in bids.iter().enumerate() {
        let due = start + INTERVAL * i as u32;
        std::thread::sleep(due.saturating_duration_since(Instant::now()));
        let rate = format!("{bid}");
        clients.push(
            m.rexec()
                .args(["-v", "-r", &rate, "--nodes", "n1", "perl", "-e", &script])
                .spawn(),
        );
        arrived.push(Instant::now());
    }
    let mut left = Vec::new();
    let mut jobs = Vec::new();
    let mut charged = Vec::new();
    for client in clients {
        let out = client.wait(Duration::from_secs(120));
        left.push(Instant::now());
        assert_eq!(out.code, Some(0), "{out:?}");
        let bills = parse_bills(&out.stderr);
        assert_eq!(bills.len(), 1, "{out:?}");
        jobs.push(out.out().trim().to_string());
        charged.push(bills[0].charged);
    }
    // Departures are each job's own four intervals after its arrival (the client
    // may see an exit a little later than it happened).
    let gone: Vec<Instant> = arrived
        .iter()
        .zip(&left)
        .map(|(a, l)| (*a + Duration::from_secs(life)).min(*l))
        .collect();
    let mut events: Vec<Instant> = arrived.iter().chain(&gone).copied().collect();
    events.sort();
    for j in 0..4 {
        let mut owed = 0.0;
        for w in events.windows(2) {
            let (from, to) = (w[0], w[1]);
            let present = |k: usize| arrived[k] <= from && gone[k] >= to;
            if present(j) && (0..4).filter(|&k| present(k)).count() >= 3 {
                owed += bids[j] * 1e6 * to.duration_since(from).as_secs_f64() / 60.0;
            }
        }
        let mut ledger = 0;
        let settled = wait_until(Duration::from_secs(30), || {
            ledger = -m.debits_of(&jobs[j]).iter().map(|e| e.amount).sum::<i64>();
            ledger == charged[j]
        });
        assert!(
            settled.is_some(),
            "job {} bidding {}: the ledger holds {ledger}, its exit said {}",
            jobs[j],
            bids[j],
            charged[j]
        );
        // A metering tick at each end of the paid stretch, plus how long a launch
        // takes to start the program on a busy machine.
        let slack = bids[j] * 1e6 * (2.0 * TICK + 0.5) / 60.0;
        eprintln!(
            "bid {}: ledger {ledger} micro-credits, the model {owed:.0} (slack {slack:.0})",
            bids[j]
        );
        assert!(
            (ledger as f64 - owed).abs() <= slack,
            "job bidding {} paid {ledger} micro-credits; the model says {owed:.0}",
            bids[j]
        );
    }
}

/// The demo's `rexec-figure4` against a real node: it runs the seven
/// intervals, prints a row per job and interval, and the ledger it reads back
/// holds what the model says each job owes within one metering tick and the
/// client's timing of each arrival and departure (the
/// shares themselves are left to the quiet machine of the demo and of
/// rexecd's `shares` tests).
#[test]
fn the_demo_tool_replays_figure_4_and_reads_the_ledger_back() {
    if !rexec_tests::can_run("the_demo_tool_replays_figure_4_and_reads_the_ledger_back") {
        return;
    }
    let m = MarketCluster::start(MarketOptions {
        cluster: ClusterOptions {
            nodes: 1,
            ..ClusterOptions::default()
        },
        ..MarketOptions::default()
    });
    let out = std::process::Command::new(rexec_tests::cluster::bin("rexec-figure4"))
        .args([
            "--node",
            "n1",
            "--interval",
            "3s",
            "--tick",
            "250ms",
            "--rexec",
        ])
        .arg(rexec_tests::cluster::bin("rexec"))
        .arg("--accountctl")
        .arg(rexec_tests::cluster::bin("accountctl"))
        .env("REXEC_CONFIG", &m.config)
        .env("ACCOUNTD_ADDR", &m.accountd.addr)
        .env_remove("XDG_CONFIG_HOME")
        .output()
        .expect("cannot run rexec-figure4");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    // 0: everything matched; 1: a share was off (a busy machine); 2: it failed.
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "{stdout}\n{stderr}\n{}",
        m.logs()
    );
    let rows: Vec<Vec<&str>> = stdout
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .collect();
    // 1 + 2 + 3 + 4 + 3 + 2 + 1 jobs over the seven intervals.
    let share_rows = rows
        .iter()
        .filter(|f| f.len() >= 6 && f[2].starts_with('#') && f[3].ends_with('%'))
        .count();
    assert_eq!(share_rows, 16, "{stdout}");
    let ledger_rows: Vec<&Vec<&str>> = rows
        .iter()
        .filter(|f| f.len() >= 5 && f.iter().take(5).all(|x| x.parse::<f64>().is_ok()))
        .collect();
    assert_eq!(ledger_rows.len(), 4, "{stdout}");
    for f in ledger_rows {
        let [bid, ledger, model, tick, timing]: [f64; 5] =
            std::array::from_fn(|i| f[i].parse().unwrap());
        assert!(model > 0.0, "{stdout}");
        // The timing is what the client's brackets of each arrival and departure
        // allow (tens of milliseconds' worth when quiet, more beside load); an
        // interval's worth would leave even the order of events unknown.
        assert!(
            (0.0..bid * 3.0 / 60.0).contains(&timing),
            "bid {bid}: timing {timing} is not under one 3 s interval's worth\n{stdout}"
        );
        assert!(
            (ledger - model).abs() <= tick + timing,
            "bid {bid}: ledger {ledger}, model {model}, tick {tick}, timing {timing}\n{stdout}"
        );
    }
    eprintln!("{stdout}");
}
