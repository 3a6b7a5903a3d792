//! Prometheus metrics, scraped by a real Prometheus server: a selector's table
//! and counters as PromQL series, the dropped-datagram counter rising after bad
//! datagrams are sent, and the exposition accepted by `promtool check metrics`.
//!
//! Needs Debian's `prometheus` package (`deploy/setup-host` installs it) and the
//! `vexecd` binary.

use std::net::{SocketAddr, UdpSocket};
use std::time::Duration;

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

    // promtool accepts the exposition as it is served.
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
    drop(v1);
}
