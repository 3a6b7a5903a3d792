//! Discovery with five real rexecd and two real vexecd on loopback
//! multicast (and, with multicast off, unicast): membership follows the
//! nodes within the announcement window; `lowest-price` and `history` choose
//! as their models say and `rexec -n 2` runs where the selector chose;
//! selections go on silently through a selector's death; hostile datagrams
//! are counted and change nothing.
//!
//! Needs the `vexecd` binary (`cargo build --workspace --bins`).

use std::collections::BTreeSet;
use std::net::UdpSocket;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use discovery::clock::WEEK_SECS;
use discovery::profile::{History, SLOT_SECS, SLOTS, file};
use proto::announce::MAX_DATAGRAM;
use rexec_tests::cluster::Cluster;
use rexec_tests::selectors::{
    Channel, Vexecd, announcing_cluster, client_config, fake_node, history, selectors_table,
};
use rexec_tests::wait_until;

/// Wait until both selectors list exactly `want`; return how long it took.
fn both_list(v: &[&Vexecd], want: &[&str], limit: Duration, cluster: &Cluster) -> Duration {
    let want: BTreeSet<String> = want.iter().map(|s| s.to_string()).collect();
    let took = wait_until(limit, || {
        v.iter()
            .all(|v| v.node_names().into_iter().collect::<BTreeSet<_>>() == want)
    });
    took.unwrap_or_else(|| {
        panic!(
            "not every selector listed {want:?} within {limit:?}: {:?}\n{}",
            v.iter().map(|v| v.node_names()).collect::<Vec<_>>(),
            cluster.logs()
        )
    })
}

#[test]
fn membership_follows_the_nodes_within_the_window() {
    if !rexec_tests::can_run("membership_follows_the_nodes_within_the_window") {
        return;
    }
    let channel = Channel::loopback();
    let period = channel.period;
    let mut cluster = announcing_cluster(5, &channel);
    let v1 = Vexecd::start(&cluster.pki, cluster.dir.path(), "v1", &channel, None);
    let v2 = Vexecd::start(&cluster.pki, cluster.dir.path(), "v2", &channel, None);
    let all = ["n1", "n2", "n3", "n4", "n5"];
    // Every node announces once a period (±10%): both selectors know all
    // five within two periods of starting (and the test's polling).
    let took = both_list(
        &[&v1, &v2],
        &all,
        period * 2 + Duration::from_millis(500),
        &cluster,
    );
    eprintln!("five nodes known to both selectors {took:?} after they started");

    // A node killed is forgotten within the window (three periods).
    cluster.crash("n5");
    let killed = Instant::now();
    both_list(
        &[&v1, &v2],
        &all[..4],
        period * 3 + Duration::from_secs(1),
        &cluster,
    );
    let gone = killed.elapsed();
    assert!(gone >= period * 2, "forgotten after only {gone:?}");
    eprintln!(
        "n5 forgotten {gone:?} after it was killed (window {:?})",
        period * 3
    );

    // A node started later appears.
    cluster.restart("n5");
    let back = Instant::now();
    both_list(
        &[&v1, &v2],
        &all,
        period * 2 + Duration::from_millis(500),
        &cluster,
    );
    eprintln!("n5 known again {:?} after it restarted", back.elapsed());
}

/// A bid job spinning on `node` (so the node's price is the bid).
fn load(cluster: &Cluster, node: &str, bid: &str) -> rexec_tests::rexec::Running {
    cluster
        .rexec()
        .args([
            "-r",
            bid,
            "--nodes",
            node,
            "sh",
            "-c",
            "exec timeout 60 sh -c 'while :; do :; done'",
        ])
        .spawn()
}

#[test]
fn lowest_price_picks_the_cheapest_and_the_job_runs_there() {
    if !rexec_tests::can_run("lowest_price_picks_the_cheapest_and_the_job_runs_there") {
        return;
    }
    let channel = Channel::loopback();
    let cluster = announcing_cluster(5, &channel);
    let v1 = Vexecd::start(&cluster.pki, cluster.dir.path(), "v1", &channel, None);
    let v2 = Vexecd::start(&cluster.pki, cluster.dir.path(), "v2", &channel, None);
    let loads = [
        load(&cluster, "n1", "3"),
        load(&cluster, "n2", "2"),
        load(&cluster, "n4", "1"),
    ];
    // Wait until both selectors see the three prices.
    let priced = wait_until(Duration::from_secs(10), || {
        [&v1, &v2].iter().all(|v| {
            let nodes = v.nodes();
            let price = |n: &str| nodes.iter().find(|x| x.name == n).map(|x| x.status.price);
            price("n1") == Some(3_000_000)
                && price("n2") == Some(2_000_000)
                && price("n4") == Some(1_000_000)
                && nodes.len() == 5
        })
    });
    assert!(priced.is_some(), "{:?}\n{}", v1.nodes(), cluster.logs());

    let config = client_config(&cluster, "sel.toml", &selectors_table(&[&v1, &v2]));
    let job = cluster
        .rexec()
        .config(&config)
        .args([
            "-v",
            "-r",
            "1",
            "-n",
            "2",
            "sh",
            "-c",
            "echo started; sleep 3",
        ])
        .spawn();
    job.wait_for_stdout("started", Duration::from_secs(15));
    // The nodes' own job lists say where the job runs.
    let listing = cluster.rexec().args(["jobs"]).run();
    let (rows, _) = rexec_tests::market::parse_jobs(&listing.out());
    let sleeping: BTreeSet<&str> = rows
        .iter()
        .filter(|r| r.rank.ends_with("/2"))
        .map(|r| r.node.as_str())
        .collect();
    let out = job.wait(Duration::from_secs(30));
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(
        sleeping,
        BTreeSet::from(["n3", "n5"]),
        "the two free nodes: {rows:?}\n{out:?}"
    );
    assert!(out.stderr.contains("by lowest-price"), "{out:?}");
    drop(loads);
}

/// A history whose every slot of the last four weeks was `busy` busy.
fn prepared_history(busy: f64) -> History {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let mut h = History::new(4);
    for week in (1..=4).rev() {
        let start = now - week * WEEK_SECS;
        for slot in 0..SLOTS as u64 {
            for _ in 0..50 {
                h.record(start + slot * SLOT_SECS, busy);
            }
        }
    }
    h
}

#[test]
fn history_prefers_the_node_predicted_to_finish_first() {
    if !rexec_tests::can_run("history_prefers_the_node_predicted_to_finish_first") {
        return;
    }
    let channel = Channel::loopback();
    // Prepare each node's history before it starts: n4 is idle most of
    // the week, the others mostly busy (n2 the busiest).
    let options = rexec_tests::cluster::ClusterOptions {
        nodes: 5,
        ..Default::default()
    };
    let cluster = Cluster::start_with_node_config(options, |_, dir, name| {
        let busy = match name {
            "n4" => 0.1,
            "n2" => 0.95,
            _ => 0.7,
        };
        file::save(&prepared_history(busy), &history(dir, name)).expect("history saved");
        Some(format!(
            "{}[announce]\nhistory_file = {:?}\nfind_accountd = false\n",
            channel.table(),
            history(dir, name).display().to_string()
        ))
    });
    let v1 = Vexecd::start(&cluster.pki, cluster.dir.path(), "v1", &channel, None);
    let v2 = Vexecd::start(&cluster.pki, cluster.dir.path(), "v2", &channel, None);
    let all = ["n1", "n2", "n3", "n4", "n5"];
    both_list(&[&v1, &v2], &all, Duration::from_secs(5), &cluster);

    let config = client_config(&cluster, "sel.toml", &selectors_table(&[&v1, &v2]));
    let table = cluster
        .rexec()
        .config(&config)
        .args(["nodes", "--policy", "history", "--length", "1h"])
        .run();
    assert_eq!(table.code, Some(0), "{table:?}");
    let text = table.out();
    let order: Vec<&str> = text
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(order.first(), Some(&"n4"), "{text}");
    assert_eq!(order.last(), Some(&"n2"), "{text}");

    let out = cluster
        .rexec()
        .config(&config)
        .args([
            "-v",
            "--policy",
            "history",
            "--length",
            "1h",
            "-n",
            "1",
            "printenv",
            "REXEC_NODES",
        ])
        .run();
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(out.out().trim(), "n4", "{out:?}\n{}", table.out());
}

#[test]
fn selections_go_on_silently_when_a_selector_dies() {
    if !rexec_tests::can_run("selections_go_on_silently_when_a_selector_dies") {
        return;
    }
    let channel = Channel::loopback();
    let cluster = announcing_cluster(5, &channel);
    let mut v1 = Vexecd::start(&cluster.pki, cluster.dir.path(), "v1", &channel, None);
    let v2 = Vexecd::start(&cluster.pki, cluster.dir.path(), "v2", &channel, None);
    both_list(
        &[&v1, &v2],
        &["n1", "n2", "n3", "n4", "n5"],
        Duration::from_secs(5),
        &cluster,
    );
    let config = client_config(&cluster, "sel.toml", &selectors_table(&[&v1, &v2]));
    for i in 0..8 {
        if i == 3 {
            v1.kill();
        }
        let out = cluster
            .rexec()
            .config(&config)
            .args(["-n", "2", "true"])
            .run();
        assert_eq!(out.code, Some(0), "run {i}: {out:?}");
        assert_eq!(out.stderr, "", "run {i} printed something: {out:?}");
    }
}

#[test]
fn hostile_datagrams_are_counted_and_change_nothing() {
    if !rexec_tests::can_run("hostile_datagrams_are_counted_and_change_nothing") {
        return;
    }
    let channel = Channel::loopback();
    let cluster = announcing_cluster(5, &channel);
    let v1 = Vexecd::start(&cluster.pki, cluster.dir.path(), "v1", &channel, None);
    let v2 = Vexecd::start(&cluster.pki, cluster.dir.path(), "v2", &channel, None);
    let all = ["n1", "n2", "n3", "n4", "n5"];
    both_list(&[&v1, &v2], &all, Duration::from_secs(5), &cluster);
    let before: Vec<_> = [&v1, &v2].iter().map(|v| v.stats()).collect();

    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_multicast_loop_v4(true).unwrap();
    sock.set_multicast_ttl_v4(0).unwrap();
    let to = format!("{}:{}", channel.group, channel.port);
    let node = |name: &str, cluster_name: &str, seq: u64| {
        fake_node(cluster_name, name, "127.0.0.1:9".parse().unwrap(), 1, seq)
    };
    let malformed: [&[u8]; 3] = [b"GET / HTTP/1.1\r\n\r\n", b"RXMA", b"RXMA\x02\xff\xff\xff"];
    for d in malformed {
        sock.send_to(d, &to).unwrap();
    }
    sock.send_to(&vec![b'R'; MAX_DATAGRAM + 100], &to).unwrap();
    let foreign = node("intruder", "another-cluster", 0).encode().unwrap();
    sock.send_to(&foreign, &to).unwrap();
    // A real node's name, an old incarnation: stale, never replaces n3.
    let stale = node("n3", &channel.cluster, 0).encode().unwrap();
    sock.send_to(&stale, &to).unwrap();

    let counted = wait_until(Duration::from_secs(5), || {
        [&v1, &v2].iter().zip(&before).all(|(v, b)| {
            let s = v.stats();
            s.malformed >= b.malformed + 3
                && s.oversized > b.oversized
                && s.foreign_cluster > b.foreign_cluster
                && s.stale > b.stale
        })
    });
    assert!(
        counted.is_some(),
        "before {before:?}, after {:?}",
        [&v1, &v2].iter().map(|v| v.stats()).collect::<Vec<_>>()
    );
    for v in [&v1, &v2] {
        let nodes = v.nodes();
        let names: Vec<&str> = nodes.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, all, "{nodes:?}");
        let n3 = nodes.iter().find(|n| n.name == "n3").unwrap();
        assert_eq!(n3.addr, cluster.node("n3").addr, "the forgery replaced n3");
    }
    eprintln!("counted by v1: {:?}", v1.stats());
}

#[test]
fn unicast_works_with_multicast_off() {
    if !rexec_tests::can_run("unicast_works_with_multicast_off") {
        return;
    }
    let udp1 = testhost::net::loopback_addr();
    let udp2 = testhost::net::loopback_addr();
    let channel = Channel {
        multicast: false,
        unicast: vec![udp1, udp2],
        ..Channel::loopback()
    };
    let cluster = announcing_cluster(5, &channel);
    let v1 = Vexecd::start(&cluster.pki, cluster.dir.path(), "v1", &channel, Some(udp1));
    let v2 = Vexecd::start(&cluster.pki, cluster.dir.path(), "v2", &channel, Some(udp2));
    both_list(
        &[&v1, &v2],
        &["n1", "n2", "n3", "n4", "n5"],
        Duration::from_secs(5),
        &cluster,
    );
    // Nothing went to the group.
    assert_eq!(v1.stats().malformed, 0);
    let config = client_config(&cluster, "sel.toml", &selectors_table(&[&v1, &v2]));
    let out = cluster
        .rexec()
        .config(&config)
        .args(["-n", "2", "printenv", "REXEC_NODES"])
        .run();
    assert_eq!(out.code, Some(0), "{out:?}");
    let first = out.out().lines().next().unwrap_or_default().to_string();
    assert_eq!(first.split(',').count(), 2, "{out:?}");
}

#[test]
fn nodes_named_with_nodes_are_found_through_the_selectors() {
    if !rexec_tests::can_run("nodes_named_with_nodes_are_found_through_the_selectors") {
        return;
    }
    let channel = Channel::loopback();
    let cluster = announcing_cluster(3, &channel);
    let v1 = Vexecd::start(&cluster.pki, cluster.dir.path(), "v1", &channel, None);
    both_list(
        &[&v1],
        &["n1", "n2", "n3"],
        Duration::from_secs(5),
        &cluster,
    );
    let config = client_config(&cluster, "sel.toml", &selectors_table(&[&v1]));
    // No [nodes] table: the names come from the selector's listing, and a
    // repeated name still gives its node two ranks.
    let out = cluster
        .rexec()
        .config(&config)
        .args(["--nodes", "n2,n3,n2", "printenv", "REXEC_NODES"])
        .run();
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(out.out(), "n2,n3,n2\n".repeat(3), "{out:?}");
    let unknown = cluster
        .rexec()
        .config(&config)
        .args(["--nodes", "n9", "true"])
        .run();
    assert_eq!(unknown.code, Some(2), "{unknown:?}");
    assert!(unknown.stderr.contains("n9"), "{unknown:?}");
}
