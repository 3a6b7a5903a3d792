//! The queue and the simulator agree: one small workload (40 sleep-based jobs
//! of 1 to 4 ranks, 2 to 5 s long, on 3 nodes of 2 CPUs) goes through the live
//! queue and through `batch::sim::simulate_ms` with the same policy (FIFO, EASY,
//! FIRSTPRICE, Vickrey). The queue decides on its ticks and at each job's end
//! (see `batchd::sched::clock`), the simulator at each arrival and each end, to
//! the millisecond. Every start must come at the very instant the simulator
//! starts it (the instant the queue's log names for the decision, `decided_ms`),
//! give or take a few ms, decided no earlier than that instant and within 1 s of
//! it, and in the simulated order. Times are the queue's own (its ticks fall on
//! whole seconds since its epoch): a job of the workload's second `s` is
//! submitted 0.7 s before the queue's tick `s`, which is when the queue first
//! sees it, and the simulator replays each job at the tick the queue's log says
//! it entered the queue (on a loaded machine a submission can miss its tick;
//! both sides then see the same). Each job is `length` seconds from the instant
//! its start was decided: its ranks sleep until `REXEC_JOB_START_MS + length`;
//! its end reaches the queue some ms later, and the simulator replays each job
//! for what it ran, in ms, from the start's decision to the end the queue heard.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use proto::batch::{BatchReply, JobState, Worth};
use rexec_tests::batch::{BatchMarket, BatchOptions, log_field};

/// A planned job: submission second, width, length (seconds), bid (micro-credits
/// per CPU-minute).
#[derive(Debug, Clone, Copy)]
struct Planned {
    submit: i64,
    width: u32,
    length: u64,
    rate: i64,
}

/// A rank that runs `length` seconds of the queue's clock from the instant the
/// job's start was decided (`REXEC_JOB_START_MS`). It sleeps in steps of
/// at most 50 ms; when a suspension stops it (the queue's SIGSTOP to the whole
/// job, then SIGCONT, which the shell traps), the time it was stopped, less
/// half a step for the part of that step it ran, moves its end, as a suspended
/// job's end moves in the simulator.
fn paced(length: u64) -> String {
    format!(
        "trap 'stopped=1' CONT; stopped=0; \
         end=$((${{REXEC_JOB_START_MS:?}} + {})); last=$(date +%s%3N); step=0; \
         while :; do \
           now=$(date +%s%3N); \
           if [ $stopped = 1 ]; then end=$((end + now - last - step / 2)); stopped=0; fi; \
           left=$((end - now)); [ $left -le 0 ] && break; \
           step=$((left < 50 ? left : 50)); last=$now; \
           sleep 0.$(printf %03d $step); \
         done",
        length * 1000
    )
}

/// SplitMix64, so the workload is fixed by its seed.
fn next(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn workload(seed: u64, n: usize) -> Vec<Planned> {
    let mut s = seed;
    let mut t = 0;
    (0..n)
        .map(|_| {
            // Arrivals 0 to 1 s apart (a whole second apart at most), so the
            // queue builds up on the 6 processors.
            t += next(&mut s).is_multiple_of(3) as i64;
            Planned {
                submit: t,
                width: 1 + (next(&mut s) % 4) as u32,
                // 2 to 5 s: a rank has over a second and a half to launch
                // (a signed rank's claim at accountd is a durable write) before
                // a late end would cost its job's successors a tick.
                length: 2 + next(&mut s) % 4,
                rate: 1_000_000 * (1 + (next(&mut s) % 5) as i64),
            }
        })
        .collect()
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// The workload's number of the job a log line names (`job=` 16 hex digits).
fn job_of(line: &str) -> Option<usize> {
    let hex = line.split(" job=").nth(1)?.get(..16)?;
    let id = u64::from_str_radix(hex, 16).ok()?;
    id.checked_sub(0x1000).map(|i| i as usize)
}

/// How many of the 40 jobs may run other than planned (see `ran_ms`): on a quiet
/// machine none does; more than this is not the machine but the queue.
const MAX_OFF_PLAN: usize = 4;

/// How far from its planned length a job may run and still count as planned: an
/// end reaches the queue some ms after the rank's last sleep, more on a loaded
/// machine.
const PLAN_SLACK_MS: i64 = 600;

/// How far a live start's instant may be from the simulated one (the simulation
/// replays the queue's instants; a decision can only move by a ms when news of an
/// earlier instant reached the loop just after a later decision).
const START_SLACK_MS: i64 = 20;

/// Each job's time on processors in ms, from the queue's log: every run from a
/// `started` or `resumed` decision to a `suspended` one (each line names the
/// instant it was decided at, `decided_ms`, however late the decision ran) or to
/// its `ended` (the instant the queue heard it, `at_ms`, when its processors are
/// given out).
fn ran_ms(log: &str, n: usize) -> Vec<Option<i64>> {
    let mut ran = vec![None; n];
    let mut since = vec![None; n];
    for line in log.lines().filter(|l| l.contains("batchd::sched::apply: ")) {
        let (Some(i), Some(at)) = (job_of(line), log_field(line, "at_ms")) else {
            continue;
        };
        if i >= n {
            continue;
        }
        let decided = log_field(line, "decided_ms");
        if line.contains(": started ") || line.contains(": resumed ") {
            since[i] = decided;
        } else if line.contains(": suspended ") || line.contains(": ended ") {
            let end = if line.contains(": ended ") {
                Some(at)
            } else {
                decided
            };
            let Some(end) = end else { continue };
            if let Some(from) = since[i].take() {
                *ran[i].get_or_insert(0) += end - from;
            }
        }
    }
    ran
}

/// Runs the workload under `policy`; the starts must come in the simulated
/// order, each within 1 s of its simulated start.
fn agree(policy: &'static str) {
    let m = BatchMarket::start(BatchOptions {
        nodes: 3,
        cpus: 2,
        policy,
        tick: "1s",
        ..BatchOptions::default()
    });
    let plan = workload(19, 40);
    // Live: second 0 of the workload is a whole second of the queue's clock.
    let epoch = m
        .batchd
        .log()
        .lines()
        .find(|l| l.contains("queue opened"))
        .and_then(|l| log_field(l, "epoch_ms"))
        .expect("the queue logs its epoch");
    let t0 = epoch + ((now_ms() - epoch) / 1000 + 2) * 1000;
    for (i, p) in plan.iter().enumerate() {
        let at = t0 + p.submit * 1000 - 700;
        let wait = at - now_ms();
        if wait > 0 {
            std::thread::sleep(Duration::from_millis(wait as u64));
        }
        let script = paced(p.length);
        let spec = m.spec(
            0x1000 + i as u64,
            &["sh", "-c", &script],
            p.width,
            p.length,
            Worth::Rate(p.rate),
        );
        assert!(
            matches!(m.submit(&spec), Ok(BatchReply::Submitted(_))),
            "job {i}"
        );
    }
    for i in 0..plan.len() {
        m.wait_for(0x1000 + i as u64, Duration::from_secs(120), |e| {
            e.state == JobState::Finished
        });
    }
    // The queue shows a job finished before its record is committed and the end
    // logged (a slow disk's fsync apart): wait for every end in the log.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let log = loop {
        let log = m.batchd.log();
        let ended = log
            .lines()
            .filter(|l| l.contains("batchd::sched::apply: ") && l.contains(": ended "))
            .filter_map(job_of)
            .filter(|&i| i < plan.len())
            .collect::<std::collections::HashSet<_>>();
        if ended.len() == plan.len() || std::time::Instant::now() > deadline {
            break log;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    // The simulator replays the workload as the queue received it: each job
    // submitted at the first tick after it entered the queue (as planned
    // unless a submission took long on a loaded machine).
    let mut seen = vec![None; plan.len()];
    for line in log
        .lines()
        .filter(|l| l.contains("batchd::ops: submitted "))
    {
        if let (Some(i), Some(at)) = (job_of(line), log_field(line, "at_ms")) {
            seen[i] = Some((at - t0 + 999).div_euclid(1000));
        }
    }
    // What each job really ran, in ms: its runs from each start or resume to its
    // suspension, or to its end (when the queue gives its processors out). A rank
    // whose end is slow to reach the queue on a loaded machine, or that the queue's
    // SIGSTOP reaches before its shell has set its CONT trap, runs longer or
    // shorter than planned; the simulator replays what ran, since ends are the
    // programs' and only the decisions are the queue's.
    let ran = ran_ms(&log, plan.len());
    let off: Vec<String> = (0..plan.len())
        .filter(|&i| {
            ran[i].is_none_or(|r| (r - plan[i].length as i64 * 1000).abs() > PLAN_SLACK_MS)
        })
        .map(|i| format!("job {i}: planned {} s, ran {:?} ms", plan[i].length, ran[i]))
        .collect();
    eprintln!(
        "{policy}: {} jobs ran other than planned {off:?}",
        off.len()
    );
    assert!(
        off.len() <= MAX_OFF_PLAN,
        "{policy}: {} jobs ran other than planned (at most {MAX_OFF_PLAN}): {off:?}\n{log}",
        off.len()
    );
    // Simulated: ids are arrival numbers, as the queue's policy sees them.
    // The policy is shown each job as the queue shows it (its length), and the
    // simulator runs it for what it ran.
    let runtime_ms: Vec<i64> = (0..plan.len())
        .map(|i| ran[i].unwrap_or_else(|| panic!("job {i}'s runs are not in the log")))
        .collect();
    let jobs: Vec<batch::job::Job> = plan
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let spec = m.spec(0, &["true"], p.width, p.length, Worth::Rate(p.rate));
            batch::job::Job {
                id: i as u64,
                submit: seen[i].unwrap_or_else(|| panic!("job {i}'s submission is not in the log")),
                width: p.width,
                runtime: p.length as i64,
                estimate: p.length as i64,
                utility: batchd::terms::utility(&spec),
                queue: 0,
                class: 0,
            }
        })
        .collect();
    let mut sim_policy =
        batch::policy::by_name(policy, 1, batch::policy::ga::GaConfig::default()).unwrap();
    let sim = batch::sim::simulate_ms(&jobs, &runtime_ms, 6, sim_policy.as_mut()).unwrap();
    // Each job's first start: when it was decided (ms from t0) and at which instant.
    let mut live = vec![None; plan.len()];
    let mut live_tick = vec![None; plan.len()];
    for line in log
        .lines()
        .filter(|l| l.contains("batchd::sched::apply: ") && l.contains(": started "))
    {
        let (Some(i), Some(at), Some(tick)) = (
            job_of(line),
            log_field(line, "at_ms"),
            log_field(line, "decided_ms"),
        ) else {
            continue;
        };
        if i >= plan.len() || live[i].is_some() {
            continue;
        }
        live[i] = Some(at - t0);
        live_tick[i] = Some(tick - t0);
        // A decision runs at its instant or after it (late on a loaded machine),
        // never before.
        assert!(
            at >= tick,
            "{policy}: job {i} started before its decision's instant: {line}"
        );
    }
    let mut report = String::new();
    let mut worst = 0;
    let mut worst_instant = 0;
    let mut off_tick = Vec::new();
    for (i, o) in sim.outcomes.iter().enumerate() {
        let l = live[i].unwrap_or_else(|| panic!("job {i} never started:\n{log}"));
        let tick = live_tick[i].unwrap();
        worst_instant = worst_instant.max((tick - o.start).abs());
        if (tick - o.start).abs() > START_SLACK_MS {
            off_tick.push(format!("job {i}: at {tick} ms, simulated {} ms", o.start));
        }
        let d = l - o.start;
        worst = worst.max(d.abs());
        let runs: Vec<String> = sim
            .segments
            .iter()
            .filter(|s| s.job == i as u64)
            .map(|s| format!("{}-{}", s.start, s.end))
            .collect();
        report.push_str(&format!(
            "job {i:2} submit {:2} width {} length {} rate {}: sim {:6} ms, live at {tick:6} ms decided {:7.3} s ({d:+} ms); sim runs {}\n",
            jobs[i].submit, plan[i].width, plan[i].length, plan[i].rate / 1_000_000, o.start, l as f64 / 1000.0, runs.join(" ")
        ));
    }
    eprintln!(
        "{policy}: worst start instant {worst_instant} ms off the simulation, \
         worst decision {worst} ms after it\n{report}"
    );
    if !off_tick.is_empty() {
        eprintln!("{log}");
    }
    for a in 0..plan.len() {
        for b in 0..plan.len() {
            if sim.outcomes[a].start + START_SLACK_MS < sim.outcomes[b].start {
                assert!(
                    live[a] < live[b],
                    "{policy}: job {a} starts before job {b} in the simulation, not live\n{report}"
                );
            }
        }
    }
    assert!(
        off_tick.is_empty(),
        "{policy}: starts at other instants than simulated: {off_tick:?}\n{report}"
    );
    assert!(
        worst <= 1000,
        "{policy}: a start is {worst} ms off the simulation\n{report}"
    );
}

#[test]
fn the_live_queue_agrees_with_the_simulator_under_fifo() {
    if !rexec_tests::can_run("the_live_queue_agrees_with_the_simulator_under_fifo") {
        return;
    }
    agree("fifo");
}

#[test]
fn the_live_queue_agrees_with_the_simulator_under_easy() {
    if !rexec_tests::can_run("the_live_queue_agrees_with_the_simulator_under_easy") {
        return;
    }
    agree("easy");
}

#[test]
fn the_live_queue_agrees_with_the_simulator_under_firstprice() {
    if !rexec_tests::can_run("the_live_queue_agrees_with_the_simulator_under_firstprice") {
        return;
    }
    agree("firstprice");
}

#[test]
fn the_live_queue_agrees_with_the_simulator_under_vickrey() {
    if !rexec_tests::can_run("the_live_queue_agrees_with_the_simulator_under_vickrey") {
        return;
    }
    agree("vickrey");
}
