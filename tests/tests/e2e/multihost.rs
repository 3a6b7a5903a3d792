//! Across real network boundaries: hosts in network namespaces on a bridge
//! (see `rexec_tests::netns`), a rexecd on each of three hosts, and accountd,
//! a selector and the client on a fourth. The selector hears the nodes'
//! multicast announcements across the bridge and a parallel job runs on the
//! three hosts it chose; a parallel job runs on all three hosts;
//! cutting one host's link mid-run aborts the job everywhere within the
//! heartbeat timeout, the cut host kills its part on its own, nothing is
//! left after the link returns, and the charges up to the cut reach the
//! ledger exactly once.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ledger_client::journal::Journal;
use rexec_tests::cluster::{Cluster, ClusterOptions};
use rexec_tests::market::{Entry, MarketCluster, MarketOptions};
use rexec_tests::netns::Net;
use rexec_tests::selectors::{Channel, Vexecd, client_config, history, selectors_table};
use rexec_tests::wait_until;

const LIMIT: Duration = Duration::from_secs(60);

/// Three nodes on hosts 1-3, accountd and the client on host 4.
fn three_hosts() -> MarketCluster {
    MarketCluster::start(MarketOptions {
        cluster: ClusterOptions {
            nodes: 3,
            net: Some(Arc::new(Net::create(4))),
            ..ClusterOptions::default()
        },
        // Sleeping ranks pay under the paper's rule, and cost the machine nothing.
        policy: "paper",
        ..MarketOptions::default()
    })
}

#[test]
fn a_parallel_job_runs_on_three_hosts() {
    if !rexec_tests::can_run("a_parallel_job_runs_on_three_hosts") {
        return;
    }
    let m = three_hosts();
    let out = m
        .rexec()
        .args([
            "-n",
            "3",
            "sh",
            "-c",
            "echo rank $REXEC_RANK on $(ip -4 -o addr show dev eth0 | awk '{print $4}')",
        ])
        .run();
    assert_eq!(out.code, Some(0), "{out:?}\n{}", m.logs());
    let lines: BTreeSet<String> = out.out().lines().map(str::to_string).collect();
    let want: BTreeSet<String> = (0..3)
        .map(|r| format!("rank {r} on 10.213.0.{}/24", r + 1))
        .collect();
    assert_eq!(lines, want, "{out:?}");
}

#[test]
fn a_cut_link_aborts_everywhere_and_charges_land_once() {
    if !rexec_tests::can_run("a_cut_link_aborts_everywhere_and_charges_land_once") {
        return;
    }
    let mut m = three_hosts();
    let net = m.options.net.clone().expect("a net");
    let client = m
        .rexec()
        .args([
            "-r",
            "30",
            // Two ranks a node: under the paper's rule they compete for
            // the node's two CPUs, so both pay.
            "--nodes",
            "n1,n1,n2,n2,n3,n3",
            "sh",
            "-c",
            "echo ready-$REXEC_RANK; exec sleep 1000",
        ])
        .spawn();
    for r in 0..6 {
        client.wait_for_stdout(&format!("ready-{r}"), Duration::from_secs(20));
    }
    let job = {
        let rows = m.jobs().0;
        assert_eq!(rows.len(), 6, "{rows:?}");
        rows[0].job.clone()
    };
    std::thread::sleep(Duration::from_secs(2));

    // Cut n3's host off. The client notices within its heartbeat timeout
    // (2 s) and aborts the other ranks; n3 notices within its own and kills
    // its rank with nobody to tell.
    let cut_at = Instant::now();
    net.cut(2);
    let out = client.wait(LIMIT);
    let noticed = cut_at.elapsed();
    assert_eq!(out.code, Some(255), "{out:?}");
    assert!(
        out.stderr.contains("n3"),
        "the client names the lost node: {out:?}"
    );
    // Heartbeat timeout 2 s, heartbeats every second: allow for a loaded machine.
    assert!(
        noticed < Duration::from_secs(6),
        "aborted after {noticed:?}"
    );
    let gone = wait_until(Duration::from_secs(10), || {
        m.marked(&[]).is_empty() && m.job_cgroups().is_empty()
    });
    assert!(
        gone.is_some(),
        "with the link still cut, left: processes {:?}, cgroups {:?}\n{}",
        m.marked(&[]),
        m.job_cgroups(),
        m.logs()
    );
    eprintln!(
        "client aborted {noticed:?} after the cut; every rank gone {:?} after it",
        cut_at.elapsed()
    );
    let before = m.debits_of(&job);

    // The link returns: n3 delivers what it journaled while cut off.
    net.restore(2);
    let n3_delivered = wait_until(LIMIT, || {
        let debits = m.debits_of(&job);
        let n3: Vec<_> = debits.iter().filter(|e| e.node == "n3").collect();
        // n3 charged its ranks for at least the 2 s before the cut.
        !n3.is_empty() && -n3.iter().map(|e| e.amount).sum::<i64>() >= 2_000_000
    });
    assert!(
        n3_delivered.is_some(),
        "n3's charges never reached the ledger: {:?}\n{}",
        m.debits_of(&job),
        m.logs()
    );
    // Stop n3 and read its journal: nothing may be left pending.
    std::thread::sleep(Duration::from_secs(3));
    m.crash("n3");
    let journal = Journal::open(&m.journal("n3")).expect("n3's journal opens");
    let pending: Vec<_> = journal
        .pending()
        .into_iter()
        .filter(|c| c.key().job == job)
        .collect();
    assert!(pending.is_empty(), "still pending on n3: {pending:?}");

    let debits = m.debits_of(&job);
    let keys: BTreeSet<_> = debits.iter().map(Entry::key).collect();
    assert_eq!(keys.len(), debits.len(), "a key applied twice: {debits:?}");
    let before: BTreeSet<_> = before.iter().map(Entry::key).collect();
    assert!(before.is_subset(&keys), "a charge vanished");
    for node in ["n1", "n2", "n3"] {
        let charged: i64 = debits
            .iter()
            .filter(|e| e.node == node)
            .map(|e| -e.amount)
            .sum();
        // Two ranks at 30 credits a minute for roughly 4 to 9 s: 4 to 9 credits.
        assert!(
            (3_000_000..=10_000_000).contains(&charged),
            "{node} charged {charged}: {debits:?}"
        );
        eprintln!("{node}: {charged} micro-credits");
    }
    let audit = m.accountd.admin(&["audit"]);
    assert!(audit.ok().starts_with("audit passed"), "{audit:?}");
}

#[test]
fn nodes_on_three_hosts_are_discovered_and_selected_across_the_bridge() {
    if !rexec_tests::can_run("nodes_on_three_hosts_are_discovered_and_selected_across_the_bridge") {
        return;
    }
    let net = Arc::new(Net::create(4));
    let channel = Channel::loopback();
    let hosts = net.clone();
    let cluster = Cluster::start_with_node_config(
        ClusterOptions {
            nodes: 3,
            net: Some(net.clone()),
            ..ClusterOptions::default()
        },
        |_, dir, name| {
            // Node n<i> is on host i - 1 and announces from its own address.
            let i: usize = name[1..].parse().expect("node names are n1, n2, ...");
            Some(format!(
                "{}[announce]\nhistory_file = {:?}\nfind_accountd = false\n",
                channel.on(hosts.host(i - 1).addr).table(),
                history(dir, name).display().to_string()
            ))
        },
    );
    let services = cluster.options.services_host().expect("a services host");
    let v1 = Vexecd::start_on(
        &cluster.pki,
        cluster.dir.path(),
        "v1",
        &channel.on(services.1),
        None,
        Some(services.clone()),
    );
    let by_selector = client_config(&cluster, "sel.toml", &selectors_table(&[&v1]));
    let by_group = client_config(&cluster, "group.toml", &channel.on(services.1).table());

    // The selector on host 4 hears the three nodes over the bridge.
    let mut listing = String::new();
    let heard = wait_until(Duration::from_secs(15), || {
        let out = cluster.rexec().config(&by_selector).args(["nodes"]).run();
        listing = out.out();
        (1..=3).all(|i| listing.contains(&format!("10.213.0.{i}:")))
    });
    assert!(
        heard.is_some(),
        "{listing}\n{}\n{}",
        v1.log(),
        cluster.logs()
    );

    // A parallel job on the three hosts, chosen by the selector, with a
    // client that names it and with one that only knows the group.
    for config in [&by_selector, &by_group] {
        let out = cluster
            .rexec()
            .config(config)
            .args([
                "-n",
                "3",
                "sh",
                "-c",
                "echo rank $REXEC_RANK on $(ip -4 -o addr show dev eth0 | awk '{print $4}')",
            ])
            .run();
        assert_eq!(out.code, Some(0), "{out:?}\n{}", cluster.logs());
        let hosts: BTreeSet<String> = out
            .out()
            .lines()
            .filter_map(|l| l.split(" on ").nth(1).map(str::to_string))
            .collect();
        let want: BTreeSet<String> = (1..=3).map(|i| format!("10.213.0.{i}/24")).collect();
        assert_eq!(hosts, want, "{out:?}");
    }
}
