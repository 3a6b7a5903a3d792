//! Unit tests of the node's metrics: the book's figures, refusal reasons, and the
//! exposition of a node with 100 running ranks (small, and accepted by `promtool`).

use std::io::Write;
use std::time::{Duration, Instant};

use money::Bid;
use proto::node::JobId;
use tokio::sync::mpsc;

use super::*;
use crate::market::book::RankSample;

/// A market over fake cgroups on 2 CPUs with `jobs` jobs of two ranks, each rank
/// bidding 1 credit a minute, after one tick in which every rank used `cpus` CPUs.
async fn busy_market(dir: &std::path::Path, jobs: u64, cpus: f64) -> Arc<Market> {
    let cgroups = crate::registry::tests::fake_cgroups(dir);
    let cfg = crate::config::MarketConfig {
        share_control: crate::config::ShareControl::Open,
        cpus: 2,
        ..Default::default()
    };
    let market = Market::start("n1", cfg, cgroups, None).await.unwrap();
    let mut keys = Vec::new();
    for job in 1..=jobs {
        for rank in 0..2 {
            let (tx, _rx) = mpsc::channel(1);
            let key = (JobId(job), rank);
            market.join(
                key,
                "ann",
                None,
                job * 2 + u64::from(rank),
                Bid::from_credits(1),
                tx,
                false,
            );
            keys.push(key);
        }
    }
    let at = Instant::now() + Duration::from_secs(1);
    let samples: Vec<_> = keys
        .iter()
        .map(|k| {
            let sample = RankSample {
                usage_ns: (cpus * 1e9) as u64,
                runnable: 1,
                throttled_ns: None,
                at,
            };
            (*k, sample)
        })
        .collect();
    market.book().tick(&samples, false, None);
    market
}

fn scrape(market: &Arc<Market>, sessions: &SessionMeters) -> String {
    exposition::render(&registry(Arc::clone(market), sessions))
}

fn line<'a>(text: &'a str, name: &str) -> &'a str {
    text.lines()
        .find(|l| l.starts_with(name) && l[name.len()..].starts_with(' '))
        .unwrap_or_else(|| panic!("no {name} in\n{text}"))
}

#[tokio::test]
async fn a_busy_node_shows_its_ranks_price_contention_and_share_error() {
    let dir = tempfile::tempdir().unwrap();
    // 4 ranks on 2 CPUs, equal bids: the model gives each 0.5 CPU; each used 0.2.
    let market = busy_market(dir.path(), 2, 0.2).await;
    let text = scrape(&market, &SessionMeters::default());
    assert_eq!(line(&text, "rexec_node_jobs"), "rexec_node_jobs 2");
    assert_eq!(line(&text, "rexec_node_ranks"), "rexec_node_ranks 4");
    assert_eq!(line(&text, "rexec_node_cpus"), "rexec_node_cpus 2");
    assert_eq!(
        line(&text, "rexec_node_price_credits_per_minute"),
        "rexec_node_price_credits_per_minute 4.0"
    );
    // Four runnable ranks on two CPUs compete: each pays its bid.
    assert_eq!(
        line(&text, "rexec_node_charging_credits_per_minute"),
        "rexec_node_charging_credits_per_minute 4.0"
    );
    assert_eq!(
        line(&text, "rexec_node_contended"),
        "rexec_node_contended 1"
    );
    let max = line(&text, "rexec_node_share_error_max_cpus");
    let err: f64 = max.rsplit(' ').next().unwrap().parse().unwrap();
    assert!((err - 0.3).abs() < 0.01, "{max}");
    assert_eq!(
        line(&text, "rexec_node_debits_pending"),
        "rexec_node_debits_pending 0"
    );
    market.shutdown(Duration::ZERO).await;
}

#[tokio::test]
async fn refusals_are_counted_by_reason_and_launches_only_inside_a_connection() {
    let dir = tempfile::tempdir().unwrap();
    let market = busy_market(dir.path(), 0, 0.0).await;
    let sessions = SessionMeters::default();
    sessions.refused(ErrorCode::NoCredit);
    sessions.refused(ErrorCode::NoCredit);
    sessions.refused(ErrorCode::Unknown(99));
    sessions.launched();
    ACCEPTED
        .scope(Instant::now(), async { sessions.launched() })
        .await;
    let text = scrape(&market, &sessions);
    assert!(
        text.contains("\nrexec_node_refusals_total{reason=\"no_credit\"} 2\n"),
        "{text}"
    );
    assert!(
        text.contains("\nrexec_node_refusals_total{reason=\"other\"} 1\n"),
        "{text}"
    );
    assert_eq!(
        line(&text, "rexec_node_launch_seconds_count"),
        "rexec_node_launch_seconds_count 1"
    );
    assert_eq!(line(&text, "rexec_node_ranks"), "rexec_node_ranks 0");
    assert_eq!(
        line(&text, "rexec_node_contended"),
        "rexec_node_contended 0"
    );
    market.shutdown(Duration::ZERO).await;
}

/// The bound: a node with 100 running ranks exposes under 64 KiB, and the
/// text is valid for Prometheus (checked by `promtool`, where it is installed).
#[tokio::test]
async fn the_exposition_of_100_ranks_is_small_and_valid() {
    let dir = tempfile::tempdir().unwrap();
    let market = busy_market(dir.path(), 50, 0.01).await;
    let sessions = SessionMeters::default();
    for code in [ErrorCode::Busy, ErrorCode::BadBid, ErrorCode::NoCredit] {
        sessions.refused(code);
    }
    let text = scrape(&market, &sessions);
    assert_eq!(line(&text, "rexec_node_ranks"), "rexec_node_ranks 100");
    let registry = registry(Arc::clone(&market), &sessions);
    let started = Instant::now();
    for _ in 0..100 {
        std::hint::black_box(exposition::render(&registry));
    }
    eprintln!(
        "the exposition of 100 ranks: {} bytes, rendered in {:?} (mean of 100)",
        text.len(),
        started.elapsed() / 100
    );
    assert!(text.len() < 64 * 1024, "{} bytes", text.len());
    let Ok(mut promtool) = std::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
    else {
        eprintln!("promtool not installed: the text is not checked by it");
        return market.shutdown(Duration::ZERO).await;
    };
    promtool
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = promtool.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool: {}{}\n{text}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    market.shutdown(Duration::ZERO).await;
}

/// The value of the one series whose line starts with `series` (name and labels).
fn value(text: &str, series: &str) -> f64 {
    line(text, series)
        .rsplit(' ')
        .next()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{series} has no number in\n{text}"))
}

#[tokio::test]
async fn a_fresh_node_shows_every_refusal_reason_and_its_cpu_at_zero() {
    let dir = tempfile::tempdir().unwrap();
    let market = busy_market(dir.path(), 0, 0.0).await;
    let text = scrape(&market, &SessionMeters::default());
    for code in ErrorCode::ALL {
        let series = format!("rexec_node_refusals_total{{reason=\"{}\"}}", reason(*code));
        assert_eq!(value(&text, &series), 0.0, "{series}");
    }
    assert_eq!(
        value(&text, "rexec_node_refusals_total{reason=\"other\"}"),
        0.0
    );
    assert_eq!(value(&text, "rexec_node_cpu_seconds_total"), 0.0);
    // No user has run anything yet: no series by user.
    assert!(
        !text.contains("rexec_node_user_cpu_seconds_total{"),
        "{text}"
    );
    market.shutdown(Duration::ZERO).await;
}

#[tokio::test]
async fn cpu_seconds_count_running_ranks_as_sampled_and_ended_ranks_in_full() {
    let dir = tempfile::tempdir().unwrap();
    // 4 ranks of ann's, each sampled at 0.2 s of CPU.
    let market = busy_market(dir.path(), 2, 0.2).await;
    let sessions = SessionMeters::default();
    let text = scrape(&market, &sessions);
    assert!((value(&text, "rexec_node_cpu_seconds_total") - 0.8).abs() < 1e-9);
    let ann = "rexec_node_user_cpu_seconds_total{user=\"ann\"}";
    assert!((value(&text, ann) - 0.8).abs() < 1e-9, "{text}");
    // One ends having used 0.5 s in all: counted in full, never twice.
    let charged = market
        .leave((JobId(1), 0), Some(Duration::from_millis(500)))
        .await;
    assert!(charged.is_some());
    let text = scrape(&market, &sessions);
    assert_eq!(line(&text, "rexec_node_ranks"), "rexec_node_ranks 3");
    assert!((value(&text, "rexec_node_cpu_seconds_total") - 1.1).abs() < 1e-9);
    assert!((value(&text, ann) - 1.1).abs() < 1e-9, "{text}");
    // Leaving again counts nothing.
    assert!(market.leave((JobId(1), 0), None).await.is_none());
    let text = scrape(&market, &sessions);
    assert!((value(&text, ann) - 1.1).abs() < 1e-9, "{text}");
    market.shutdown(Duration::ZERO).await;
}
