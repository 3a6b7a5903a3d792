//! `rexec`'s documented exit statuses where this suite had none (the others
//! are proven where their scenario lives: 0 and 1-125 in launch.rs, 1 in
//! admin.rs, 2 in bad_input.rs, 127 in bad_input.rs, 128+N in failures.rs,
//! 130 in interrupt.rs, 141 in streams.rs, 255 in failures.rs): a usage
//! error exits 2 whether the client or the selectors find it, selectors that
//! agree are one line, a market refusal exits 254 in credits per minute
//! naming the node; and what a user asked for while trying it: `-v` prints
//! the job id at start, and `rexec jobs` shows an uncontended node's price
//! as 0.
//!
//! Needs the `vexecd` binary (`cargo build --workspace --bins`).

use std::time::Duration;

use money::MICROS_PER_CREDIT as C;
use proto::node::{ErrorCode, FromNode};
use rexec_tests::cluster::{ClusterOptions, TEST_USER};
use rexec_tests::market::{MarketCluster, MarketOptions, RawSession};
use rexec_tests::selectors::{Channel, Vexecd, announcing_cluster, client_config, selectors_table};
use rexec_tests::wait_until;

/// rexec's exit status when the market refuses the bid.
const REFUSED: i32 = 254;

fn one_line(stderr: &str) {
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr:?}");
    assert!(stderr.starts_with("rexec: "), "{stderr:?}");
}

#[test]
fn usage_errors_exit_2_whether_the_client_or_every_selector_finds_them() {
    if !rexec_tests::can_run("usage_errors_exit_2_whether_the_client_or_every_selector_finds_them")
    {
        return;
    }
    let channel = Channel::loopback();
    let cluster = announcing_cluster(1, &channel);
    let v1 = Vexecd::start(&cluster.pki, cluster.dir.path(), "v1", &channel, None);
    let v2 = Vexecd::start(&cluster.pki, cluster.dir.path(), "v2", &channel, None);
    let heard = wait_until(Duration::from_secs(15), || {
        [&v1, &v2].iter().all(|v| v.node_names() == ["n1"])
    });
    assert!(heard.is_some(), "the selectors never heard n1");
    let config = client_config(&cluster, "sel.toml", &selectors_table(&[&v1, &v2]));
    let rexec = |args: &[&str]| cluster.rexec().config(&config).args(args).run();

    // Caught by the client: nothing is asked.
    let out = rexec(&["--length", "forever", "true"]);
    assert_eq!(out.code, Some(2), "{out:?}");
    one_line(&out.stderr);

    // Caught by a selector: the same status, one line.
    let out = rexec(&["--policy", "cheapest-please", "true"]);
    assert_eq!(out.code, Some(2), "{out:?}");
    one_line(&out.stderr);
    assert!(out.stderr.contains("cheapest-please"), "{out:?}");

    // More nodes than qualify: every selector says so; one line, no names.
    let out = rexec(&["-n", "2", "true"]);
    assert_eq!(out.code, Some(2), "{out:?}");
    one_line(&out.stderr);
    assert!(out.stderr.contains("qualify"), "{out:?}");
    assert!(out.stderr.contains("all 2 selectors said so"), "{out:?}");
    assert!(!out.stderr.contains("selector v1"), "{out:?}");
    // -v names them.
    let out = rexec(&["-v", "-n", "2", "true"]);
    assert_eq!(out.code, Some(2), "{out:?}");
    for v in ["selector v1 at", "selector v2 at"] {
        assert!(out.stderr.contains(v), "{v}: {out:?}");
    }
}

#[test]
fn market_refusals_exit_254_in_credits_per_minute_naming_the_node() {
    if !rexec_tests::can_run("market_refusals_exit_254_in_credits_per_minute_naming_the_node") {
        return;
    }
    let m = crate::market_checks::dry_node();
    let refused = |args: &[&str], needles: &[&str]| {
        let out = m.rexec().args(args).run();
        assert_eq!(out.code, Some(REFUSED), "{args:?}: {out:?}");
        one_line(&out.stderr);
        for n in needles {
            assert!(out.stderr.contains(n), "{args:?}: {n:?} in {}", out.stderr);
        }
    };
    // Over the node's max_rate (the client's own is 100).
    refused(
        &["-r", "60", "true"],
        &[
            "node n1",
            "60 credits per minute",
            "max_rate of 50 credits per minute set in this node's configuration",
        ],
    );
    // No credit.
    refused(
        &["-r", "5", "true"],
        &[
            "node n1",
            "5 credits per minute",
            "CPU that no bidding job wants",
        ],
    );
    // The client's own checks refuse alike, saying where its limit comes from.
    refused(
        &["-r", "-1", "true"],
        &["-1 credits per minute is negative"],
    );
    refused(
        &["-r", "150", "true"],
        &[
            "150 credits per minute",
            "max_rate = 100 credits per minute in",
        ],
    );
    // A negative bid the client would never send: the node's refusal has
    // its own code, names the node and speaks in credits per minute.
    let mut s = RawSession::open(&m, "n1", TEST_USER);
    let answer = s.launch(&m, 0xe2e5, -C, &["true"]);
    let FromNode::Error(e) = answer else {
        panic!("expected a refusal, got {answer:?}");
    };
    assert_eq!(e.code, ErrorCode::BadBid, "{e:?}");
    assert!(
        e.message.starts_with("node n1: ") && e.message.contains("-1 credits per minute"),
        "{e:?}"
    );
    assert!(m.marked(&[]).is_empty() && m.job_cgroups().is_empty());
}

#[test]
fn verbose_prints_the_job_id_and_a_lone_job_does_not_set_the_price() {
    if !rexec_tests::can_run("verbose_prints_the_job_id_and_a_lone_job_does_not_set_the_price") {
        return;
    }
    let m = MarketCluster::start(MarketOptions {
        cluster: ClusterOptions {
            nodes: 2,
            ..ClusterOptions::default()
        },
        ..MarketOptions::default()
    });
    let out = m
        .rexec()
        .args(["-v", "--nodes", "n1,n2", "printenv", "REXEC_JOB"])
        .run();
    assert_eq!(out.code, Some(0), "{out:?}");
    let job = out.out().lines().next().unwrap_or_default().to_string();
    assert_eq!(job.len(), 16, "{out:?}");
    for (rank, node) in ["n1", "n2"].iter().enumerate() {
        let line = format!("rexec: job {job} on {node} (rank {rank})\n");
        assert!(out.stderr.contains(&line), "{line:?} in {}", out.stderr);
    }

    // One job bidding 5 alone on n1's two CPUs, asleep: once a sample has seen it
    // sleep it competes for nothing, so the node's price is 0, not the job's bid
    // (from its start until that sample it is assumed runnable and counts).
    let lone = m
        .rexec()
        .args(["-r", "5", "--nodes", "n1", "sleep", "60"])
        .spawn();
    let mut seen = None;
    let shown = wait_until(Duration::from_secs(15), || {
        let (rows, nodes) = m.jobs();
        let ok = rows.len() == 1 && nodes.iter().any(|n| n.node == "n1" && n.price == 0);
        seen = Some((rows, nodes));
        ok
    });
    let (rows, nodes) = seen.unwrap();
    assert!(
        shown.is_some(),
        "the sleeping job never showed in rexec jobs with n1's price 0: {rows:?} {nodes:?}"
    );
    assert_eq!(rows[0].bid, "5", "{rows:?}");
    let n1 = nodes.iter().find(|n| n.node == "n1").unwrap();
    assert_eq!((n1.price, n1.state.as_str()), (0, "idle-cpu"), "{nodes:?}");
    drop(lone);
}
