//! A node's address is proven before a selector believes it: forged announcements
//! of a live node, 500 a second with ever higher sequence numbers and a fake
//! address, leave it listed at its real address and receiving jobs; when the real
//! node restarts on a new port, the selector lists it there within one announcement
//! period plus the proof (a TLS handshake with the node's certificate).
//!
//! Needs the `vexecd` binary (`cargo build --workspace --bins`).

use std::net::UdpSocket;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rexec_tests::selectors::{
    Channel, Vexecd, announcing_cluster, client_config, fake_node, selectors_table,
};
use rexec_tests::wait_until;

/// Sends forged announcements of `name` at `to`, 500 a second, until `stop`.
fn forge(
    name: &'static str,
    cluster: String,
    to: String,
    stop: Arc<AtomicBool>,
    sent: Arc<AtomicU64>,
) {
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_multicast_loop_v4(true).unwrap();
    sock.set_multicast_ttl_v4(0).unwrap();
    let fake = "127.0.0.1:9".parse().unwrap();
    let start = Instant::now();
    let mut seq = 1_000_000u64;
    while !stop.load(Ordering::Relaxed) {
        // A higher incarnation than any real start, and a higher sequence each time.
        let a = fake_node(&cluster, name, fake, u64::MAX / 2, seq);
        let _ = sock.send_to(&a.encode().unwrap(), &to);
        seq += 1;
        let n = sent.fetch_add(1, Ordering::Relaxed) + 1;
        // Paced at 500 a second from the start, not per send.
        let due = start + Duration::from_millis(n * 2);
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
    }
}

#[test]
fn forged_moves_do_not_move_a_node_and_a_real_restart_does() {
    if !rexec_tests::can_run("forged_moves_do_not_move_a_node_and_a_real_restart_does") {
        return;
    }
    let channel = Channel::loopback();
    let mut cluster = announcing_cluster(2, &channel);
    let v1 = Vexecd::start(&cluster.pki, cluster.dir.path(), "v1", &channel, None);
    let listed = |name: &str| {
        v1.nodes()
            .into_iter()
            .find(|n| n.name == name)
            .map(|n| n.addr)
    };
    let real = cluster.node("n1").addr;
    assert!(
        wait_until(Duration::from_secs(5), || listed("n1") == Some(real)
            && listed("n2").is_some())
        .is_some(),
        "n1 and n2 not listed: {:?}\n{}",
        v1.nodes(),
        cluster.logs()
    );

    let stop = Arc::new(AtomicBool::new(false));
    let sent = Arc::new(AtomicU64::new(0));
    let forger = {
        let (stop, sent) = (stop.clone(), sent.clone());
        let to = format!("{}:{}", channel.group, channel.port);
        let cluster_name = channel.cluster.clone();
        std::thread::spawn(move || forge("n1", cluster_name, to, stop, sent))
    };

    // Throughout the flood: n1 stays at its real address and takes jobs.
    let config = client_config(&cluster, "sel.toml", &selectors_table(&[&v1]));
    let flood = Instant::now();
    let mut runs = 0;
    while flood.elapsed() < Duration::from_secs(3) {
        assert_eq!(listed("n1"), Some(real), "the forgery moved n1");
        let out = cluster
            .rexec()
            .config(&config)
            .args(["-n", "2", "true"])
            .run();
        assert_eq!(out.code, Some(0), "run {runs} during the flood: {out:?}");
        assert_eq!(out.stderr, "", "run {runs} printed something: {out:?}");
        runs += 1;
    }
    assert!(runs >= 3, "only {runs} jobs ran in 3 s");

    // A real restart on a new port: listed there within a period plus the proof.
    cluster.crash("n1");
    cluster.restart("n1");
    let moved = cluster.node("n1").addr;
    assert_ne!(moved, real, "the restarted node kept its port");
    let limit = channel.period + vexecd::daemon::prove::PROBE_TIMEOUT;
    let took = wait_until(limit + Duration::from_secs(1), || {
        listed("n1") == Some(moved)
    });
    stop.store(true, Ordering::Relaxed);
    forger.join().unwrap();
    let took = took.unwrap_or_else(|| {
        panic!(
            "n1 restarted at {moved} was not listed there within {limit:?}: {:?}\n{}",
            v1.nodes(),
            v1.log()
        )
    });
    assert!(took <= limit + Duration::from_millis(500), "{took:?}");
    let out = cluster
        .rexec()
        .config(&config)
        .args(["-n", "2", "true"])
        .run();
    assert_eq!(out.code, Some(0), "after the restart: {out:?}");

    let sent = sent.load(Ordering::Relaxed);
    let log = v1.log();
    assert!(
        log.contains("did not prove it"),
        "no refuted move in the selector's log:\n{log}"
    );
    eprintln!(
        "{sent} forged announcements in {:?}; {runs} jobs ran meanwhile; the restarted n1 listed at its new port {took:?} after it was ready (period {:?})",
        flood.elapsed(),
        channel.period
    );
}
