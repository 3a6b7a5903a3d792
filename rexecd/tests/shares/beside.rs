//! Figure 4's three jobs (bids 40, 30 and 20 on a node that owns both CPUs) beside one
//! busy loop that the test starts outside the market (issue 41; the loop and the
//! node's weight against it: [`crate::background`]). The market must keep its CPUs:
//! together the jobs receive at least [`MIN_FRACTION`] of the node's two CPUs (the
//! loop's CPU is judged there), and each is within [`GUARD_POINTS`] of one CPU of its
//! model share of what they received together, in every interval (see [`judge`]).
//! The target, [`MAX_POINTS`] in every interval of ten runs in a row, is the
//! benchmark's (below): accuracy targets live in benchmarks on this shared machine.
//! Every interval is judged; none is excused for other work, and the total is short
//! only by what other work than the loop took beyond a quiet node's own (on this
//! shared machine, other helpers' builds; see [`judge`]). The same judge holds
//! the 3:1 jobs on one CPU beside the loop (`one_cpu`).
//!
//! The benchmark (`rexecd/benches/scripts/beside_loop_runs.py`) also runs it beside a
//! `nice -n 0` loop and prints what the jobs and the loop received.

use std::time::{Duration, Instant};

use crate::background::{Loop, market_weight, nice, weighted};
use crate::driving::AtNodesWeight;
use crate::measure::{model, shares};
use crate::util::{Daemon, can_run, cpu_dir};
use crate::{Busy, node_config, serial, start_busy, stop};

/// Least CPU the jobs receive together, as a fraction of the node's CPUs (1.9 of 2).
const MIN_FRACTION: f64 = 0.95;
/// Worst error of a job over an interval, points of one CPU (0.01 CPU), against its
/// model share in CPUs received: the target (issue 41), which the benchmark judges
/// over ten runs in a row, and what the settling waits for.
pub(crate) const MAX_POINTS: f64 = 2.0;
/// What the suite's intervals must meet: a guard that a broken division fails (the
/// split job 4.3 points ahead for whole intervals before it was capped; the jobs'
/// total is judged apart), above the quiet machine's tail (2.4 and 2.7 in two runs of
/// ten, docs/BENCHMARKS.md, "Beside a busy background loop").
const GUARD_POINTS: f64 = 3.0;
/// Intervals judged, and the length of each.
const INTERVALS: usize = 3;
const INTERVAL: Duration = Duration::from_secs(5);
/// Settling before the judged intervals: at least [`SETTLE_MIN`] after the last job
/// started, then until one [`SETTLE_WINDOW`] meets the judge, for at most
/// [`SETTLE_MAX`] (then the intervals are judged all the same, and say so).
const SETTLE_MIN: Duration = Duration::from_secs(2);
const SETTLE_WINDOW: Duration = Duration::from_secs(1);
const SETTLE_MAX: Duration = Duration::from_secs(15);

/// Each job's error (points of one CPU) against its model share of what the jobs
/// received together (the division, as `figure_4_live` judges it), and the worst.
fn division(want: &[f64], used: &[f64]) -> (Vec<f64>, f64) {
    let total: f64 = used.iter().sum();
    let modelled: f64 = want.iter().sum();
    let points: Vec<f64> = used
        .iter()
        .zip(want)
        .map(|(u, w)| (u - w * total / modelled.max(1e-9)).abs() * 100.0)
        .collect();
    let worst = points.iter().copied().fold(0.0, f64::max);
    (points, worst)
}

/// Other work than the loop (CPUs) that a quiet node itself runs beside the jobs:
/// rexecd, the test measuring, kernel threads (0.02 to 0.03 CPU measured quiet,
/// docs/BENCHMARKS.md). Beyond it, what other work took is not the loop's and is
/// not held against the market (see [`judge`]).
const QUIET_OTHER: f64 = 0.05;

/// What one interval measured, and why it failed (`None`: it passed): the jobs
/// together at least [`MIN_FRACTION`] of the CPUs the model divides among them (the
/// node's, when they contend; what the loop took is judged there), and each job
/// within [`MAX_POINTS`] of its model share of what the jobs received together (see
/// [`division`]). Both against the model's CPUs would contradict each other: at 1.9
/// CPU together the bid of 40 is 4.4 points under its 2-CPU share by arithmetic
/// alone, however well divided.
///
/// `others` is the CPU work other than the loop took meanwhile. On a quiet node it is
/// [`QUIET_OTHER`] or less and the bound is the whole [`MIN_FRACTION`]. Beyond it
/// (on this shared machine, other helpers' builds: eight nice-0 autogroups take 0.12
/// to 0.25 CPU from a parent of weight 10000, the kernel's division by weight) it is
/// taken off the bound, so that an interval fails only for CPU the jobs left idle or
/// to the loop, which is what the caps must not do: CPU freed by throttling goes to
/// the loop, always runnable, before anyone else. The loop's CPU is never excused.
fn judge(want: &[f64], used: &[f64], others: f64, max_points: f64) -> Option<String> {
    let total: f64 = used.iter().sum();
    let modelled: f64 = want.iter().sum();
    let excused = (others - QUIET_OTHER).max(0.0);
    let least = MIN_FRACTION * modelled - excused;
    let (points, worst) = division(want, used);
    (total < least || worst > max_points).then(|| {
        format!(
            "jobs received {used:.3?} ({total:.3} CPU together, at least {least:.2}: \
             {MIN_FRACTION} of the node less {excused:.2} other work than the loop took), \
             model {want:.3?} of {modelled:.0} CPUs: {points:.1?} points off the model's \
             division of {total:.3} (at most {max_points})"
        )
    })
}

#[test]
fn an_interval_fails_short_of_the_node_or_off_the_model() {
    let want = [0.889, 0.667, 0.444];
    let quiet = 0.03;
    assert_eq!(judge(&want, &[0.88, 0.66, 0.44], quiet, MAX_POINTS), None);
    // Issue 41's run: the right ratio, 1.43 CPU together.
    let short =
        judge(&want, &[0.641, 0.483, 0.309], quiet, MAX_POINTS).expect("1.43 of 2 CPUs fails");
    assert!(
        short.contains("1.433 CPU together, at least 1.90"),
        "{short}"
    );
    // The whole node, divided wrongly.
    assert!(judge(&want, &[0.92, 0.64, 0.44], quiet, MAX_POINTS).is_some());
    // 1.95 CPU together, divided as the model divides it: passes.
    assert_eq!(
        judge(&want, &[0.867, 0.650, 0.433], quiet, MAX_POINTS),
        None
    );
    // 1.95 together, the bid of 20 given 3 points of the bid of 40's.
    assert!(judge(&want, &[0.837, 0.650, 0.463], quiet, MAX_POINTS).is_some());
    // Other work than the loop up to a quiet node's own is not excused: 1.89 fails.
    assert!(judge(&want, &[0.840, 0.630, 0.420], QUIET_OTHER, MAX_POINTS).is_some());
    // Beside other helpers' builds (0.13 CPU, measured), 1.86 passes...
    assert_eq!(judge(&want, &[0.830, 0.623, 0.412], 0.13, MAX_POINTS), None);
    // ...and 1.80 does not: 0.07 went idle or to the loop.
    assert!(judge(&want, &[0.800, 0.600, 0.400], 0.13, MAX_POINTS).is_some());
    // 2.5 points off: the target missed, within the suite's guard.
    let off = [0.842, 0.650, 0.458];
    assert!(judge(&want, &off, quiet, MAX_POINTS).is_some());
    assert_eq!(judge(&want, &off, quiet, GUARD_POINTS), None);
    // 3:1 on one CPU: 0.95 of it together, and 2 points.
    let one = [0.75, 0.25];
    assert_eq!(judge(&one, &[0.72, 0.24], quiet, MAX_POINTS), None);
    assert!(
        judge(&one, &[0.70, 0.24], quiet, MAX_POINTS).is_some(),
        "0.94 of one CPU"
    );
    assert!(
        judge(&one, &[0.69, 0.29], quiet, MAX_POINTS).is_some(),
        "4.5 points off"
    );
}

/// Jobs of one node beside the busy loop, measured and judged (see the module's
/// comment): waits for their shares to settle (see [`SETTLE_MAX`]), then judges
/// [`INTERVALS`] intervals, printing each as `LABEL beside nice N: interval K: ...`.
/// Returns why intervals failed (empty: all passed).
pub(crate) fn judged_beside(
    label: &str,
    nice: i32,
    cpus: u32,
    jobs: &[&Busy],
    background: &Loop,
) -> Vec<String> {
    let want = model(cpus, jobs);
    let started = Instant::now();
    std::thread::sleep(SETTLE_MIN);
    let settled = loop {
        let ((used, outside), loop_cpus) = background.while_running(|| shares(jobs, SETTLE_WINDOW));
        if judge(&want, &used, outside - loop_cpus, MAX_POINTS).is_none() {
            break true;
        }
        if started.elapsed() >= SETTLE_MAX {
            break false;
        }
    };
    eprintln!(
        "{label} beside nice {nice}: {} after {:.1} s",
        if settled { "settled" } else { "not settled" },
        started.elapsed().as_secs_f64()
    );
    let mut failures = Vec::new();
    for k in 0..INTERVALS {
        let ((used, outside), loop_cpus) = background.while_running(|| shares(jobs, INTERVAL));
        let total: f64 = used.iter().sum();
        let others = (outside - loop_cpus).max(0.0);
        eprintln!(
            "{label} beside nice {nice}: interval {k}: jobs {used:.3?} total {total:.3} loop \
             {loop_cpus:.3} other work {others:.3} model {want:.3?}"
        );
        if let Some(why) = judge(&want, &used, others, GUARD_POINTS) {
            failures.push(format!("interval {k}: {why}"));
        }
    }
    failures
}

#[tokio::test(flavor = "multi_thread")]
async fn figure_4_beside_a_busy_background_loop() {
    if !can_run("shares") {
        return;
    }
    let _serial = serial().await;
    let nice = nice();
    let parent = format!("rexecd-test-{}-beside", std::process::id());
    let weight = market_weight();
    let config = weighted(&node_config(&parent, "closed"), &weight);
    eprintln!("beside nice {nice}: the market's cgroup weight {weight}");
    let daemon = Daemon::start_with_config(parent.clone(), &config);
    let background = Loop::start(nice, None);
    // The loop started first stays outside; the test and rexecd go in.
    let driving = AtNodesWeight::enter(
        &format!("{parent}ctl"),
        &cpu_dir(&parent).expect("a cpu hierarchy"),
        &[&daemon],
    );
    let mut jobs: Vec<Busy> = Vec::new();
    for bid in [40, 30, 20] {
        jobs.push(start_busy(&daemon, bid, 1).await);
    }
    let live: Vec<&Busy> = jobs.iter().collect();
    let failures =
        tokio::task::block_in_place(|| judged_beside("figure 4", nice, 2, &live, &background));
    drop(background);
    for j in jobs {
        stop(j).await;
    }
    drop(daemon);
    drop(driving);
    assert!(
        failures.is_empty(),
        "beside a nice {nice} busy loop: {failures:#?}"
    );
}
