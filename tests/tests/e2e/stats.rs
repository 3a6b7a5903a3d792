//! `rexec stats` as an admin runs it without Prometheus: two nodes announcing on
//! loopback multicast, a real vexecd hearing them, bad datagrams sent to the
//! group, a rank running on n1; the selectors' table shows the selector's nodes
//! and the malformed datagrams it dropped, the nodes' table each node's CPUs and
//! n1's rank. A selector that cannot be reached is named, the rest still printed,
//! and the exit status is 1.

use std::net::UdpSocket;
use std::time::Duration;

use rexec_tests::selectors::{Channel, Vexecd, announcing_cluster, client_config, selectors_table};

/// The whitespace-split row of `table` starting with `first`.
fn row<'a>(out: &'a str, first: &str) -> Option<Vec<&'a str>> {
    out.lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|cells| cells.first() == Some(&first))
}

#[test]
fn rexec_stats_shows_the_selectors_counters_and_the_nodes_market_state() {
    if !rexec_tests::can_run("rexec_stats_shows_the_selectors_counters_and_the_nodes_market_state")
    {
        return;
    }
    let channel = Channel::loopback();
    let cluster = announcing_cluster(2, &channel);
    let v1 = Vexecd::start(&cluster.pki, cluster.dir.path(), "v1", &channel, None);
    let config = client_config(&cluster, "stats.toml", &selectors_table(&[&v1]));
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_multicast_loop_v4(true).unwrap();
    sock.set_multicast_ttl_v4(0).unwrap();
    for _ in 0..3 {
        sock.send_to(b"junk", (channel.group.as_str(), channel.port))
            .unwrap();
    }
    let stats = |config: &std::path::Path| {
        let out = cluster.rexec().config(config).args(["stats"]).run();
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        (out, text)
    };
    let mut last = String::new();
    let mut until = |ok: &dyn Fn(&str) -> bool| {
        testhost::wait::until(Duration::from_secs(60), || {
            let (out, text) = stats(&config);
            last = format!("{out:?}");
            (out.code == Some(0) && ok(&text)).then_some(text)
        })
        .unwrap_or_else(|| panic!("rexec stats never showed it: {last}"))
    };
    // The selector knows both nodes and dropped the junk.
    until(&|text| row(text, "v1").is_some_and(|r| r[2] == "2" && r[6] == "3"));
    let job = cluster
        .rexec()
        .config(&config)
        .args(["--nodes", "n1", "sleep", "20"])
        .spawn();
    let text = until(&|text| {
        row(text, "n1").is_some_and(|r| r[4] == "1") && row(text, "n2").is_some_and(|r| r[4] == "0")
    });
    let header = row(&text, "SELECTOR").unwrap();
    assert_eq!((header[2], header[6]), ("NODES", "MALFORMED"), "{text}");
    assert_eq!(row(&text, "NODE").unwrap()[4], "RANKS", "{text}");
    // n1: the test cluster's CPUs, the rank bidding 0.
    let n1 = row(&text, "n1").unwrap();
    assert_eq!(n1[5], "0", "{text}");
    assert!(n1[1].parse::<u32>().is_ok_and(|c| c >= 1), "{text}");

    // A selector that is down is named; the rest still printed; status 1.
    let gone = client_config(
        &cluster,
        "stats-gone.toml",
        &format!(
            "{}gone = \"127.0.0.1:{}\"\n",
            selectors_table(&[&v1]),
            testhost::net::port()
        ),
    );
    let out = cluster.rexec().config(&gone).args(["stats"]).run();
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(
        out.stderr.contains("selector gone at 127.0.0.1:"),
        "{out:?}"
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(row(&text, "v1").is_some(), "{out:?}");
    assert!(row(&text, "n2").is_some(), "{out:?}");
    let out = job.wait(Duration::from_secs(60));
    assert_eq!(out.code, Some(0), "{out:?}");
}
