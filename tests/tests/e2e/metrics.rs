//! Prometheus metrics, scraped by a real Prometheus server: a selector's table
//! and counters as PromQL series, the dropped-datagram counter rising after bad
//! datagrams are sent; a charging market's node price above 0 while a job bids,
//! and accountd's applied debits rising; and every exposition accepted by
//! `promtool check metrics`. Each fresh daemon lists its labelled counters at 0
//! before their first event, and a node's CPU-seconds counters rise by the CPU a
//! job measured itself using.
//!
//! Needs Debian's `prometheus` package (`deploy/setup-host` installs it) and the
//! `vexecd`, `rexecd` and `accountd` binaries.

use std::net::{SocketAddr, UdpSocket};
use std::time::Duration;

use rexec_tests::market::{MarketCluster, MarketOptions};
use rexec_tests::prometheus::{Prometheus, get};
use rexec_tests::selectors::{Channel, Vexecd, announcing_cluster};

#[test]
fn a_selector_is_scraped_by_prometheus_and_its_output_passes_promtool() {
    if !rexec_tests::can_run("a_selector_is_scraped_by_prometheus_and_its_output_passes_promtool") {
        return;
    }
    assert!(
        Prometheus::installed(),
        "prometheus is not installed: run deploy/setup-host"
    );
    let channel = Channel::loopback();
    let cluster = announcing_cluster(2, &channel);
    let metrics = SocketAddr::from(([127, 0, 0, 1], testhost::net::port()));
    let v1 = Vexecd::start_with(
        &cluster.pki,
        cluster.dir.path(),
        "v1",
        &channel,
        &format!("[metrics]\nlisten = \"{metrics}\"\n"),
    );
    // Fresh: every policy's selects listed at 0 before the first.
    let (code, text) = get(metrics, "/metrics").unwrap();
    assert_eq!(code, 200);
    for want in [
        "rexec_selector_selects_total{policy=\"lowest-price\",result=\"ok\"} 0\n",
        "rexec_selector_selects_total{policy=\"history\",result=\"refused\"} 0\n",
    ] {
        assert!(
            text.contains(want),
            "a fresh selector lacks {want:?}:\n{text}"
        );
    }
    let prom = Prometheus::start(cluster.dir.path(), &[("vexecd", metrics)]);

    // Both nodes, as the table knows them.
    prom.wait_for("rexec_selector_nodes", Duration::from_secs(20), |v| {
        v == 2.0
    });
    let before = prom
        .wait_for(
            "rexec_selector_datagrams_accepted_total",
            Duration::from_secs(10),
            |v| v > 0.0,
        )
        .len();
    assert_eq!(before, 1);

    // Malformed datagrams are counted by reason.
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_multicast_loop_v4(true).unwrap();
    sock.set_multicast_ttl_v4(0).unwrap();
    for _ in 0..5 {
        sock.send_to(
            b"not an announcement",
            (channel.group.as_str(), channel.port),
        )
        .unwrap();
    }
    let malformed = prom.wait_for(
        "rexec_selector_datagrams_dropped_total{reason=\"malformed\"}",
        Duration::from_secs(20),
        |v| v >= 5.0,
    );
    assert_eq!(malformed[0].labels["job"], "vexecd");

    // Selects are counted by policy and result, with their latency.
    let config = rexec_tests::selectors::client_config(
        &cluster,
        "sel.toml",
        &rexec_tests::selectors::selectors_table(&[&v1]),
    );
    let out = cluster
        .rexec()
        .config(&config)
        .args(["-n", "1", "true"])
        .run();
    assert_eq!(out.code, Some(0), "{out:?}");
    prom.wait_for(
        "rexec_selector_selects_total{policy=\"lowest-price\",result=\"ok\"}",
        Duration::from_secs(20),
        |v| v >= 1.0,
    );
    prom.wait_for(
        "rexec_selector_select_seconds_count",
        Duration::from_secs(20),
        |v| v >= 1.0,
    );

    promtool_accepts(metrics);
    drop(v1);
}

/// `promtool check metrics` accepts the exposition `metrics` serves.
fn promtool_accepts(metrics: SocketAddr) {
    let (code, text) = get(metrics, "/metrics").unwrap();
    assert_eq!(code, 200);
    let mut check = std::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("cannot run promtool");
    use std::io::Write;
    check
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let verdict = check.wait_with_output().unwrap();
    assert!(
        verdict.status.success(),
        "promtool check metrics:\n{}{}\n---\n{text}",
        String::from_utf8_lossy(&verdict.stdout),
        String::from_utf8_lossy(&verdict.stderr)
    );
}

/// A `paper` market of one-second ticks whose node n1 and accountd serve metrics:
/// the cluster, n1's metrics address and accountd's.
fn market_with_metrics() -> (MarketCluster, SocketAddr, SocketAddr) {
    let node = SocketAddr::from(([127, 0, 0, 1], testhost::net::port()));
    let ledger = SocketAddr::from(([127, 0, 0, 1], testhost::net::port()));
    let table = |addr: SocketAddr| format!("\n[metrics]\nlisten = \"{addr}\"\n");
    let mut options = MarketOptions::paper_with_one_second_ticks();
    options.extra_accountd_config = table(ledger);
    options.extra_node_config.insert("n1".into(), table(node));
    let m = MarketCluster::start(options);
    (m, node, ledger)
}

#[test]
fn a_charging_market_is_scraped_price_and_debits_rise_and_promtool_passes() {
    if !rexec_tests::can_run(
        "a_charging_market_is_scraped_price_and_debits_rise_and_promtool_passes",
    ) {
        return;
    }
    assert!(
        Prometheus::installed(),
        "prometheus is not installed: run deploy/setup-host"
    );
    let (m, node, ledger) = market_with_metrics();
    let prom = Prometheus::start(m.dir.path(), &[("rexecd", node), ("accountd", ledger)]);

    // Idle: no rank, no price.
    prom.wait_for("rexec_node_ranks", Duration::from_secs(20), |v| v == 0.0);
    prom.wait_for(
        "rexec_node_price_credits_per_minute",
        Duration::from_secs(10),
        |v| v == 0.0,
    );

    // Two CPU-bound jobs bidding 20 and 10 a minute: under `paper` both pay while
    // both run (20 s each, so they overlap however slowly the second starts;
    // they end sooner once the scrapes below are checked).
    let stop = rexec_tests::stop::StopFile::new();
    let script = stop.perl_spin(20);
    let spin = |rate: &str| {
        m.rexec()
            .args(["-r", rate, "--nodes", "n1", "perl", "-e", &script])
            .spawn()
    };
    let (a, b) = (spin("20"), spin("10"));
    prom.wait_for("rexec_node_ranks", Duration::from_secs(30), |v| v == 2.0);
    // The price is the sum of the runnable jobs' bids: 20 + 10.
    let price = prom.wait_for(
        "rexec_node_price_credits_per_minute",
        Duration::from_secs(30),
        |v| v == 30.0,
    );
    assert_eq!(price[0].labels["job"], "rexecd");
    assert!(price.iter().all(|s| s.value <= 30.0), "{price:?}");
    prom.wait_for("rexec_node_jobs", Duration::from_secs(10), |v| v == 2.0);
    prom.wait_for(
        "rexec_node_launch_seconds_count",
        Duration::from_secs(10),
        |v| v == 2.0,
    );

    // Debits applied keep rising while the jobs pay (one per rank a second).
    let first = prom.wait_for(
        "rexec_accountd_debits_applied_total",
        Duration::from_secs(30),
        |v| v > 0.0,
    )[0]
    .value;
    prom.wait_for(
        "rexec_accountd_debits_applied_total",
        Duration::from_secs(30),
        |v| v >= first + 2.0,
    );
    prom.wait_for(
        "rexec_accountd_requests_total{op=\"Debit\",result=\"ok\"}",
        Duration::from_secs(10),
        |v| v >= first,
    );
    prom.wait_for(
        "rexec_node_debits_delivered_total",
        Duration::from_secs(10),
        |v| v >= 2.0,
    );
    prom.wait_for(
        "rexec_node_charged_credits_total",
        Duration::from_secs(10),
        |v| v > 0.0,
    );
    // The balances' sum fell below the opening grant of 1000.
    prom.wait_for(
        "rexec_accountd_balances_credits",
        Duration::from_secs(10),
        |v| v > 0.0 && v < 1000.0,
    );
    promtool_accepts(node);
    promtool_accepts(ledger);
    stop.stop();
    // How the jobs end is not this test's subject (two spinning ranks on two busy
    // cores may miss a heartbeat); that they leave the node and settle is.
    for client in [a, b] {
        let out = client.wait(Duration::from_secs(60));
        assert!(out.code.is_some(), "{out:?}");
    }
    prom.wait_for("rexec_node_ranks", Duration::from_secs(20), |v| v == 0.0);
    prom.wait_for("rexec_node_debits_pending", Duration::from_secs(20), |v| {
        v == 0.0
    });
}

#[test]
fn a_batch_queue_is_scraped_its_jobs_counted_and_promtool_passes() {
    if !rexec_tests::can_run("a_batch_queue_is_scraped_its_jobs_counted_and_promtool_passes") {
        return;
    }
    assert!(
        Prometheus::installed(),
        "prometheus is not installed: run deploy/setup-host"
    );
    use proto::batch::{BatchReply, JobState, Worth};
    use rexec_tests::batch::{BatchMarket, BatchOptions};
    let queue = SocketAddr::from(([127, 0, 0, 1], testhost::net::port()));
    let m = BatchMarket::start(BatchOptions {
        extra_config: format!("\n[metrics]\nlisten = \"{queue}\"\n"),
        ..BatchOptions::default()
    });
    // Fresh: both submission results listed at 0 before the first.
    let (code, text) = get(queue, "/metrics").unwrap();
    assert_eq!(code, 200);
    for result in ["ok", "refused"] {
        let want = format!("rexec_batch_submissions_total{{result=\"{result}\"}} 0\n");
        assert!(
            text.contains(&want),
            "a fresh queue lacks {want:?}:\n{text}"
        );
    }
    let prom = Prometheus::start(m.market.dir.path(), &[("batchd", queue)]);
    prom.wait_for(
        "rexec_batch_jobs{state=\"queued\"}",
        Duration::from_secs(20),
        |v| v == 0.0,
    );
    prom.wait_for("rexec_batch_processors", Duration::from_secs(20), |v| {
        v == 4.0
    });

    // One job of 2 ranks bidding 60 credits a CPU-minute for 2 s, and one refused
    // (wider than the market).
    let spec = m.spec(0x61, &["sleep", "2"], 2, 30, Worth::Rate(60_000_000));
    assert!(matches!(m.submit(&spec), Ok(BatchReply::Submitted(_))));
    let wide = m.spec(0x62, &["true"], 64, 30, Worth::Rate(1_000_000));
    assert!(m.submit(&wide).is_err());
    m.wait_for(0x61, Duration::from_secs(40), |e| {
        e.state == JobState::Finished
    });
    // Exactly one of each, at least one decision, and a charge.
    for (query, at_least) in [
        ("rexec_batch_submissions_total{result=\"ok\"} == 1", 1.0),
        (
            "rexec_batch_submissions_total{result=\"refused\"} == 1",
            1.0,
        ),
        ("rexec_batch_jobs{state=\"finished\"} == 1", 1.0),
        ("rexec_batch_starts_total == 1", 1.0),
        ("rexec_batch_decisions_total", 1.0),
        ("rexec_batch_decision_seconds_count", 1.0),
        ("rexec_batch_charged_credits_total", 1e-6),
    ] {
        prom.wait_for(query, Duration::from_secs(20), |v| v >= at_least);
    }
    promtool_accepts(queue);
}

/// The value of the one series `series` (name and labels) in an exposition.
fn value(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|v| v.parse().ok())
}

#[test]
fn a_fresh_node_lists_its_counters_at_zero_and_counts_the_cpu_a_job_measured() {
    if !rexec_tests::can_run(
        "a_fresh_node_lists_its_counters_at_zero_and_counts_the_cpu_a_job_measured",
    ) {
        return;
    }
    let (m, node, ledger) = market_with_metrics();

    // Fresh: refusals by every reason, requests by every operation, at 0.
    let (code, text) = get(node, "/metrics").unwrap();
    assert_eq!(code, 200);
    for series in [
        "rexec_node_refusals_total{reason=\"no_credit\"}",
        "rexec_node_refusals_total{reason=\"bad_bid\"}",
        "rexec_node_refusals_total{reason=\"not_authorized\"}",
        "rexec_node_cpu_seconds_total",
    ] {
        assert_eq!(value(&text, series), Some(0.0), "{series} in\n{text}");
    }
    let (code, text) = get(ledger, "/metrics").unwrap();
    assert_eq!(code, 200);
    for series in [
        "rexec_accountd_refusals_total{code=\"Forbidden\"}",
        "rexec_accountd_requests_total{op=\"Grant\",result=\"refused\"}",
    ] {
        assert_eq!(value(&text, series), Some(0.0), "{series} in\n{text}");
    }

    // A job that spins for about 1.5 s and prints the CPU it used (perl's `times`:
    // user and system time of the process, which is all the rank runs).
    let spin = "$e=time+1.5; 1 while time<$e; @t=times; printf(\"%.3f\\n\", $t[0]+$t[1])";
    let out = m
        .rexec()
        .args([
            "-r",
            "1",
            "--nodes",
            "n1",
            "perl",
            "-MTime::HiRes=time",
            "-e",
            spin,
        ])
        .run();
    assert_eq!(out.code, Some(0), "{out:?}");
    let measured: f64 = out.out().trim().parse().expect("the job's CPU seconds");
    assert!(measured > 0.2, "the job hardly ran: {out:?}");
    // The rank has left the book when its `Exit` is sent: the counter holds it all.
    let (_, text) = get(node, "/metrics").unwrap();
    let counted = value(&text, "rexec_node_cpu_seconds_total").expect("the CPU counter");
    let users: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("rexec_node_user_cpu_seconds_total{"))
        .collect();
    assert_eq!(users.len(), 1, "one user ran: {users:?}");
    let by_user: f64 = users[0].rsplit(' ').next().unwrap().parse().unwrap();
    eprintln!("job measured {measured:.3} s of CPU; the node counted {counted:.3} s");
    // The cgroup also holds perl's start (and its exec), which `times` does not see.
    assert!(
        counted >= measured - 0.02 && counted <= measured * 1.1 + 0.1,
        "the node counted {counted} s, the job measured {measured} s"
    );
    assert!(
        (by_user - counted).abs() < 1e-6,
        "{users:?} against {counted}"
    );
}
