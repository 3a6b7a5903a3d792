//! Figure 4's three jobs (bids 40, 30 and 20 on a node that owns both CPUs) beside one
//! busy loop that the test starts outside the market (issue 41): a `nice -n 19` shell
//! busy all the time, in a session of its own in the cgroup the test runs in (not
//! under rexecd's parent), as a backup or an indexer would be. The market must keep
//! its CPUs: together the jobs receive at least [`MIN_TOTAL`] of the two CPUs (the
//! loop's CPU is judged there), and each is within [`MAX_POINTS`] of one CPU of its
//! model share of what they received together, in every interval (see [`judge`]).
//! Every interval is judged; none is excused for the other work.
//!
//! `REXEC_BESIDE_NICE` sets the loop's nice level (default 19): the benchmark
//! (`rexecd/benches/scripts/beside_loop_runs.py`) also runs it beside a `nice -n 0`
//! loop and prints what the jobs and the loop received. Where the kernel groups
//! each session's processes (`kernel.sched_autogroup_enabled`), a process in the
//! root cgroup weighs as much as its session's autogroup, as at nice 0, whatever its
//! own nice level; `REXEC_BESIDE_AUTOGROUP=1` also sets the autogroup's nice level
//! (`/proc/PID/autogroup`) to the loop's, to measure a session that is at the lowest
//! priority as a whole.

use std::process::{Child, Command};
use std::time::Duration;

use crate::measure::{model, shares};
use crate::util::{Daemon, can_run};
use crate::{Busy, SERIAL, node_config, start_busy, stop};

/// The node's `cgroup_weight` (v2 units): what an admin who sells the whole node
/// gives the market against other work. With the kernel's default (100, v1 1024)
/// an autogrouped session's loop took 0.54 CPU whatever its nice level, and no cap
/// inside the market can win that back: the kernel weighs the market's parent
/// against the loop's session before any job's weight counts (OPERATIONS,
/// "Background work on a market node"). `REXEC_BESIDE_WEIGHT` overrides it
/// (`kernel`: leave the kernel's).
const MARKET_WEIGHT: &str = "10000";
/// Least CPU the three jobs receive together, of the node's two.
const MIN_TOTAL: f64 = 1.9;
/// Worst error of a job over an interval, points of one CPU (0.01 CPU), against its
/// model share in CPUs received.
const MAX_POINTS: f64 = 2.0;
/// Intervals judged, and the length of each.
const INTERVALS: usize = 3;
const INTERVAL: Duration = Duration::from_secs(5);

/// The busy loop outside the market; killed when dropped.
struct Loop {
    child: Child,
}

impl Loop {
    /// Starts `nice -n NICE sh -c 'while :; do :; done'` in a session of its own
    /// (`setsid`), in the test's own cgroup.
    fn start(nice: i32) -> Loop {
        let child = Command::new("setsid")
            .args([
                "nice",
                "-n",
                &nice.to_string(),
                "sh",
                "-c",
                "while :; do :; done",
            ])
            .spawn()
            .expect("start the busy loop (setsid, nice, sh)");
        let busy = Loop { child };
        if std::env::var("REXEC_BESIDE_AUTOGROUP").is_ok_and(|v| v == "1") {
            busy.set_autogroup_nice(nice);
        }
        busy
    }

    /// Sets the nice level of the loop's autogroup, once the loop runs in its own
    /// session (setsid has exec'd nice, and nice the shell).
    fn set_autogroup_nice(&self, nice: i32) {
        let pid = self.child.id();
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default() != "sh\n" {
            assert!(
                std::time::Instant::now() < deadline,
                "the loop never started"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        let path = format!("/proc/{pid}/autogroup");
        std::fs::write(&path, nice.to_string()).unwrap_or_else(|e| panic!("{path}: {e}"));
        eprintln!(
            "the loop's autogroup: {}",
            std::fs::read_to_string(&path).unwrap_or_default().trim()
        );
    }

    /// CPU seconds the loop has used so far (`utime` + `stime` of `/proc/PID/stat`).
    fn cpu_secs(&self) -> f64 {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.child.id()))
            .expect("the busy loop is alive");
        let after = &stat[stat.rfind(')').expect("a stat line") + 2..];
        let fields: Vec<&str> = after.split_whitespace().collect();
        // After the name: state is field 3, utime 14 and stime 15 of the whole line.
        let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
        ticks as f64 / 100.0 // USER_HZ on Linux
    }
}

impl Drop for Loop {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What one interval measured, and why it failed (`None`: it passed): the jobs
/// together at least [`MIN_TOTAL`] CPU (what the loop took is judged there), and
/// each job within [`MAX_POINTS`] of its model share of what the jobs received
/// together (the division, as `figure_4_live` judges it). Both against the model's
/// two CPUs would contradict each other: at 1.9 CPU together the bid of 40 is 4.4
/// points under its 2-CPU share by arithmetic alone, however well divided.
fn judge(want: &[f64], used: &[f64]) -> Option<String> {
    let total: f64 = used.iter().sum();
    let modelled: f64 = want.iter().sum();
    let points: Vec<f64> = used
        .iter()
        .zip(want)
        .map(|(u, w)| (u - w * total / modelled).abs() * 100.0)
        .collect();
    let worst = points.iter().copied().fold(0.0, f64::max);
    (total < MIN_TOTAL || worst > MAX_POINTS).then(|| {
        format!(
            "jobs received {used:.3?} ({total:.3} CPU together, at least {MIN_TOTAL}), model \
             {want:.3?} of 2 CPUs: {points:.1?} points off the model's division of \
             {total:.3} (at most {MAX_POINTS})"
        )
    })
}

#[test]
fn an_interval_fails_short_of_the_node_or_off_the_model() {
    let want = [0.889, 0.667, 0.444];
    assert_eq!(judge(&want, &[0.88, 0.66, 0.44]), None);
    // Issue 41's run: the right ratio, 1.43 CPU together.
    let short = judge(&want, &[0.641, 0.483, 0.309]).expect("1.43 of 2 CPUs fails");
    assert!(short.contains("1.433 CPU together"), "{short}");
    // The whole node, divided wrongly.
    assert!(judge(&want, &[0.92, 0.64, 0.44]).is_some());
    // 1.95 CPU together, divided as the model divides it: passes.
    assert_eq!(judge(&want, &[0.867, 0.650, 0.433]), None);
    // 1.95 together, the bid of 20 given 3 points of the bid of 40's.
    assert!(judge(&want, &[0.837, 0.650, 0.463]).is_some());
}

#[tokio::test(flavor = "multi_thread")]
async fn figure_4_beside_a_busy_background_loop() {
    if !can_run("shares") {
        return;
    }
    let _serial = SERIAL.lock().await;
    let nice: i32 = std::env::var("REXEC_BESIDE_NICE")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(19);
    let parent = format!("rexecd-test-{}-beside", std::process::id());
    let mut config = node_config(&parent, "closed");
    let weight = std::env::var("REXEC_BESIDE_WEIGHT").unwrap_or_else(|_| MARKET_WEIGHT.into());
    if weight != "kernel" {
        config = config.replacen(
            "\n[market]\n",
            &format!("\ncgroup_weight = {weight}\n\n[market]\n"),
            1,
        );
    }
    eprintln!("beside nice {nice}: the market's cgroup weight {weight}");
    let daemon = Daemon::start_with_config(parent.clone(), &config);
    let background = Loop::start(nice);
    let mut jobs: Vec<Busy> = Vec::new();
    for bid in [40, 30, 20] {
        jobs.push(start_busy(&daemon, bid, 1).await);
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let live: Vec<&Busy> = jobs.iter().collect();
    let want = model(2, &live);
    let mut failures = Vec::new();
    for k in 0..INTERVALS {
        let loop_before = background.cpu_secs();
        let started = std::time::Instant::now();
        let (used, outside) = tokio::task::block_in_place(|| shares(&live, INTERVAL));
        let loop_cpus = (background.cpu_secs() - loop_before) / started.elapsed().as_secs_f64();
        let total: f64 = used.iter().sum();
        eprintln!(
            "beside nice {nice}: interval {k}: jobs {used:.3?} total {total:.3} loop \
             {loop_cpus:.3} other work {:.3} model {want:.3?}",
            (outside - loop_cpus).max(0.0)
        );
        if let Some(why) = judge(&want, &used) {
            failures.push(format!("interval {k}: {why}"));
        }
    }
    drop(background);
    for j in jobs {
        stop(j).await;
    }
    assert!(
        failures.is_empty(),
        "beside a nice {nice} busy loop: {failures:#?}"
    );
}
