//! Bids 3:1 on one CPU: a node pinned to one CPU of the machine (its `cpus`, the
//! cpuset, so the market sells one CPU), two single-threaded CPU-bound jobs bidding 3
//! and 1 through the real rexecd, measured from their cgroups: the model gives them
//! 0.75 and 0.25 CPU. Quiet, each job is within [`MAX_POINTS`] of its model share of
//! what the two received together, in every interval. Beside a busy loop outside the
//! market confined to the node's CPU (issue 41, [`crate::background`]; the node's
//! `cgroup_weight` 10000), the same, and together they keep the node's CPU (the
//! judge of `beside`: at least 0.95 of it, whatever the loop took).

use std::time::Duration;

use crate::background::{Loop, market_weight, nice, weighted};
use crate::beside::{MAX_POINTS, judged_beside};
use crate::driving::AtNodesWeight;
use crate::measure::{errors, model};
use crate::util::{Daemon, can_run, cpu_dir};
use crate::{Busy, node_config, serial, start_busy, stop};

/// The node's one CPU.
const NODE_CPU: &str = "0";
/// The bids, credits a minute.
const BIDS: [u32; 2] = [3, 1];
/// Intervals judged quiet, and the length of each.
const INTERVALS: usize = 3;
const INTERVAL: Duration = Duration::from_secs(5);

/// A node of `parent` pinned to [`NODE_CPU`], selling that one CPU.
fn one_cpu_config(parent: &str) -> String {
    let config = node_config(parent, "closed");
    assert!(config.contains("\ncpus = 2\n"), "{config}");
    format!(
        "cpus = \"{NODE_CPU}\"\n{}",
        config.replace("\ncpus = 2\n", "\ncpus = 1\n")
    )
}

/// Starts the two jobs on `daemon`.
async fn start_jobs(daemon: &Daemon) -> Vec<Busy> {
    let mut jobs = Vec::new();
    for bid in BIDS {
        jobs.push(start_busy(daemon, bid, 1).await);
    }
    jobs
}

#[tokio::test(flavor = "multi_thread")]
async fn bids_3_and_1_on_one_cpu_get_three_quarters_and_a_quarter() {
    if !can_run("shares") {
        return;
    }
    let _serial = serial().await;
    let parent = format!("rexecd-test-{}-one", std::process::id());
    let daemon = Daemon::start_with_config(parent.clone(), &one_cpu_config(&parent));
    let jobs = start_jobs(&daemon).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let live: Vec<&Busy> = jobs.iter().collect();
    let want = model(1, &live);
    let mut failures = Vec::new();
    for k in 0..INTERVALS {
        // Shares of what the two received, scaled to the node's CPU, as the 1:2:3
        // test and figure_4_live judge them.
        let m = tokio::task::block_in_place(|| errors(&live, 1, INTERVAL));
        let (points, got) = (&m.points, &m.got);
        eprintln!(
            "3:1 on one CPU: interval {k}: model {want:.3?} measured {got:.3?} error \
             {points:.1?} points of one CPU (other work {:.3} CPU)",
            m.outside
        );
        if points.iter().any(|p| *p > MAX_POINTS) {
            failures.push(format!(
                "interval {k}: measured {got:.3?}, {points:.1?} points off the model \
                 {want:.3?} (at most {MAX_POINTS})"
            ));
        }
    }
    for j in jobs {
        stop(j).await;
    }
    assert!(failures.is_empty(), "3:1 on one CPU: {failures:#?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn bids_3_and_1_on_one_cpu_keep_it_beside_a_busy_background_loop() {
    if !can_run("shares") {
        return;
    }
    let _serial = serial().await;
    let (nice, weight) = (nice(), market_weight());
    let parent = format!("rexecd-test-{}-onebeside", std::process::id());
    let config = weighted(&one_cpu_config(&parent), &weight);
    eprintln!("3:1 on one CPU beside nice {nice}: the market's cgroup weight {weight}");
    let daemon = Daemon::start_with_config(parent.clone(), &config);
    // The loop on the node's CPU: it contends for nothing but what the market sells.
    // `REXEC_BESIDE_LOOP_CPUS` puts it elsewhere, to measure background work kept off
    // the market's CPUs (OPERATIONS: `AllowedCPUs`, a cpuset).
    let loop_cpus = std::env::var("REXEC_BESIDE_LOOP_CPUS").unwrap_or_else(|_| NODE_CPU.into());
    let background = Loop::start(nice, Some(&loop_cpus));
    // The loop started first stays outside; the test and rexecd go in.
    let driving = AtNodesWeight::enter(
        &format!("{parent}ctl"),
        &cpu_dir(&parent).expect("a cpu hierarchy"),
        &[&daemon],
    );
    let jobs = start_jobs(&daemon).await;
    let live: Vec<&Busy> = jobs.iter().collect();
    let failures = tokio::task::block_in_place(|| {
        judged_beside("3:1 on one CPU", nice, 1, &live, &background)
    });
    drop(background);
    for j in jobs {
        stop(j).await;
    }
    drop(daemon);
    drop(driving);
    assert!(
        failures.is_empty(),
        "3:1 on one CPU beside a nice {nice} busy loop: {failures:#?}"
    );
}
