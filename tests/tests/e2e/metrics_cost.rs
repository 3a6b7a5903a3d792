//! What Prometheus costs a node: rexecd with 100 running jobs (one rank each,
//! each bidding 1 credit a minute, from 100 sessions of this process) and
//! `[metrics] listen` set. It prints, and checks against the limits:
//!
//! - the size of the exposition (under 64 KiB);
//! - rexecd's CPU time (`utime + stime` from `/proc/PID/stat`) over alternating
//!   windows without and with a scrape every second (a full HTTP exchange, as
//!   Prometheus makes it), in one run, as a fraction of one CPU: the difference
//!   is the cost of scraping every second (under 1% of one CPU);
//! - the same cost measured more finely: 300 scrapes back to back, less what
//!   the node spends anyway in that time, per scrape, times one scrape a second.
//!
//! A benchmark (the numbers are in docs/BENCHMARKS.md), so ignored by default:
//! `cargo test -p rexec-tests --test e2e metrics_cost -- --ignored --nocapture`.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use rexec_tests::cluster::{ClusterOptions, TEST_USER};
use rexec_tests::market::{MarketCluster, MarketOptions, RawSession};
use rexec_tests::prometheus::get;

const JOBS: u64 = 100;
const WINDOW: Duration = Duration::from_secs(20);
const PAIRS: usize = 3;
const BURST: u32 = 300;

/// rexecd's CPU time so far, seconds (`utime + stime`, in clock ticks of 10 ms).
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("rexecd's stat");
    // The command may hold spaces: count fields after its closing parenthesis.
    let rest = &stat[stat.rfind(')').expect("stat") + 2..];
    let fields: Vec<&str> = rest.split(' ').collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    ticks as f64 / 100.0
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split(' ')
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

/// rexecd's CPU over `window` while `scrape` scrapes every second (or not).
fn window(pid: u32, metrics: SocketAddr, scrape: bool) -> f64 {
    let (start, cpu0) = (Instant::now(), cpu_seconds(pid));
    let mut next = start;
    while start.elapsed() < WINDOW {
        if scrape {
            let (code, _) = get(metrics, "/metrics").expect("scrape");
            assert_eq!(code, 200);
        }
        next += Duration::from_secs(1);
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
    }
    (cpu_seconds(pid) - cpu0) / start.elapsed().as_secs_f64()
}

#[test]
#[ignore = "benchmark: run with --ignored --nocapture (docs/BENCHMARKS.md)"]
fn metrics_cost_of_a_node_with_100_jobs_scraped_every_second() {
    if !rexec_tests::can_run("metrics_cost_of_a_node_with_100_jobs_scraped_every_second") {
        return;
    }
    let metrics = SocketAddr::from(([127, 0, 0, 1], testhost::net::port()));
    let mut options = MarketOptions {
        cluster: ClusterOptions {
            nodes: 1,
            // The sessions do not answer heartbeats while they wait.
            node_heartbeat_timeout: "1h",
            ..ClusterOptions::default()
        },
        meter_interval: "1s",
        ..MarketOptions::default()
    };
    options.extra_node_config.insert(
        "n1".into(),
        format!("\n[metrics]\nlisten = \"{metrics}\"\n"),
    );
    let m = MarketCluster::start(options);
    let pid = m.node("n1").pid().expect("rexecd runs");
    let sessions: Vec<RawSession> = (0..JOBS)
        .map(|i| {
            let mut s = RawSession::open(&m, "n1", TEST_USER);
            let answer = s.launch(&m, 0xc057_0000 + i, 1_000_000, &["sleep", "900"]);
            assert!(
                matches!(answer, proto::node::FromNode::Started(_)),
                "{answer:?}"
            );
            s
        })
        .collect();
    let ranks = testhost::wait::until(Duration::from_secs(60), || {
        let (_, text) = get(metrics, "/metrics").ok()?;
        text.contains(&format!("\nrexec_node_ranks {JOBS}\n"))
            .then_some(text)
    });
    let text = ranks.expect("the node never showed 100 ranks");
    let size = text.len();

    let (mut quiet, mut scraped) = (Vec::new(), Vec::new());
    for _ in 0..PAIRS {
        quiet.push(window(pid, metrics, false));
        scraped.push(window(pid, metrics, true));
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let windowed = mean(&scraped) - mean(&quiet);

    let baseline = mean(&quiet);
    let (start, cpu0) = (Instant::now(), cpu_seconds(pid));
    for _ in 0..BURST {
        let (code, _) = get(metrics, "/metrics").expect("scrape");
        assert_eq!(code, 200);
    }
    let elapsed = start.elapsed().as_secs_f64();
    let per_scrape = ((cpu_seconds(pid) - cpu0) - baseline * elapsed) / f64::from(BURST);

    println!(
        "rexecd with {JOBS} running jobs; load average {}\n\
         exposition: {size} bytes\n\
         CPU without scraping: {:?} (mean {:.4} of one CPU)\n\
         CPU scraped every 1 s: {:?} (mean {:.4})\n\
         cost of scraping every second, windows: {:.4} of one CPU\n\
         cost per scrape, {BURST} back to back: {:.3} ms of CPU, so {:.4} of one CPU at 1 s",
        load_average(),
        quiet.iter().map(|c| format!("{c:.4}")).collect::<Vec<_>>(),
        baseline,
        scraped
            .iter()
            .map(|c| format!("{c:.4}"))
            .collect::<Vec<_>>(),
        mean(&scraped),
        windowed,
        per_scrape * 1000.0,
        per_scrape,
    );
    assert!(size < 64 * 1024, "the exposition is {size} bytes");
    assert!(
        per_scrape < 0.01,
        "a scrape a second costs {per_scrape} of one CPU"
    );
    assert!(
        windowed < 0.01,
        "scraping every second cost {windowed} of one CPU"
    );
    drop(sessions);
}
