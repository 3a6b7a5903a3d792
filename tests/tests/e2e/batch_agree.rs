//! The queue and the simulator agree: one small workload (40 sleep-based jobs
//! of 1 to 4 ranks, 2 to 5 s long, on 3 nodes of 2 CPUs) goes through the live
//! queue and through `batch::sim` with the same policy (FIFO, EASY,
//! FIRSTPRICE, Vickrey). Every start must come on the very tick the simulator
//! starts it (the tick the queue's log names for the decision), decided no
//! earlier than that tick and within 1 s of it, and in the simulated order. Times are the queue's own seconds (its
//! ticks fall on whole seconds since its epoch, see `batchd::sched::clock`): a
//! job of the workload's second `s` is submitted 0.7 s before the queue's tick
//! `s`, which is when the queue first sees it, and the simulator replays each
//! job at the tick the queue's log says it entered the queue (on a loaded
//! machine a submission can miss its tick; both sides then see the same). Each job is `length` seconds of
//! the queue's clock: its ranks sleep until `REXEC_JOB_START_MS + length`, less
//! 0.6 s for their end to reach the queue before the tick that frees their
//! processors (a loaded machine delays the news of an end by some tenths of a
//! second), so launch latency does not add up along a chain of jobs.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use proto::batch::{BatchReply, JobState, Worth};
use rexec_tests::batch::{BatchMarket, BatchOptions};

/// A planned job: submission second, width, length (seconds), bid (micro-credits
/// per CPU-minute).
#[derive(Debug, Clone, Copy)]
struct Planned {
    submit: i64,
    width: u32,
    length: u64,
    rate: i64,
}

/// A rank that runs `length` seconds of the queue's clock from the tick the job
/// started on (`REXEC_JOB_START_MS`), ending 0.6 s early so that its end reaches
/// the queue before the tick that frees its processors. It sleeps in steps of
/// at most 50 ms; when a suspension stops it (the queue's SIGSTOP to the whole
/// job, then SIGCONT, which the shell traps), the time it was stopped, less
/// half a step for the part of that step it ran, moves its end, as a suspended
/// job's end moves in the simulator.
fn paced(length: u64) -> String {
    format!(
        "trap 'stopped=1' CONT; stopped=0; \
         end=$((${{REXEC_JOB_START_MS:?}} + {} - 600)); last=$(date +%s%3N); step=0; \
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

/// `key=INTEGER` in a log line.
fn field(line: &str, key: &str) -> Option<i64> {
    let rest = line.split(&format!(" {key}=")).nth(1)?;
    rest.split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
}

/// The workload's number of the job a log line names (`job=` 16 hex digits).
fn job_of(line: &str) -> Option<usize> {
    let hex = line.split(" job=").nth(1)?.get(..16)?;
    let id = u64::from_str_radix(hex, 16).ok()?;
    id.checked_sub(0x1000).map(|i| i as usize)
}

/// How many of the 40 jobs may run other than planned (see `ran_ticks`): on a quiet
/// machine none does; more than this is not the machine but the queue (ends handed
/// out a tick late, say).
const MAX_OFF_PLAN: usize = 4;

/// The workload's second of the queue's tick at `tick_ms` (second 0 at `t0`).
fn second_of(tick_ms: i64, t0: i64) -> i64 {
    (tick_ms - t0).div_euclid(1000)
}

/// The first tick after `ms`: the one that gives out the processors of a job the
/// queue heard end at `ms` (a tick falling on `ms` itself was decided first).
fn tick_after(ms: i64, t0: i64) -> i64 {
    second_of(ms, t0) + 1
}

/// Each job's ticks on processors, from the queue's log: every run from a `started` or
/// `resumed` tick to a `suspended` tick (each line names the tick it was decided on,
/// `tick_ms`, however late the decision ran) or to the first tick after `ended`.
fn ran_ticks(log: &str, t0: i64, n: usize) -> Vec<Option<i64>> {
    let mut ran = vec![None; n];
    let mut since = vec![None; n];
    for line in log.lines().filter(|l| l.contains("batchd::sched::apply: ")) {
        let (Some(i), Some(at)) = (job_of(line), field(line, "at_ms")) else {
            continue;
        };
        if i >= n {
            continue;
        }
        let decided = field(line, "tick_ms").map(|t| second_of(t, t0));
        if line.contains(": started ") || line.contains(": resumed ") {
            since[i] = decided;
        } else if line.contains(": suspended ") || line.contains(": ended ") {
            let end = if line.contains(": ended ") {
                Some(tick_after(at, t0))
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
        .and_then(|l| field(l, "epoch_ms"))
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
        if let (Some(i), Some(at)) = (job_of(line), field(line, "at_ms")) {
            seen[i] = Some((at - t0 + 999).div_euclid(1000));
        }
    }
    // What each job really ran, in ticks: its runs from each start or resume to its
    // suspension, or to the tick after its end (when the queue gives its processors
    // out). A rank that misses its end by a tick on a loaded machine, or that the
    // queue's SIGSTOP reaches before its shell has set its CONT trap (a launch slower
    // than a tick), runs longer or shorter than planned; the simulator replays what
    // ran, since ends are the programs' and only the decisions are the queue's.
    let ran = ran_ticks(&log, t0, plan.len());
    let off: Vec<String> = (0..plan.len())
        .filter(|&i| ran[i] != Some(plan[i].length as i64))
        .map(|i| format!("job {i}: planned {} s, ran {:?}", plan[i].length, ran[i]))
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
    let jobs: Vec<batch::job::Job> = plan
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let spec = m.spec(0, &["true"], p.width, p.length, Worth::Rate(p.rate));
            batch::job::Job {
                id: i as u64,
                submit: seen[i].unwrap_or_else(|| panic!("job {i}'s submission is not in the log")),
                width: p.width,
                runtime: ran[i].unwrap_or_else(|| panic!("job {i}'s runs are not in the log")),
                estimate: p.length as i64,
                utility: batchd::sched::snapshot::utility(&spec),
                queue: 0,
                class: 0,
            }
        })
        .collect();
    let mut sim_policy =
        batch::policy::by_name(policy, 1, batch::policy::ga::GaConfig::default()).unwrap();
    let sim = batch::sim::simulate(&jobs, 6, sim_policy.as_mut()).unwrap();
    // Each job's first start: when it was decided (ms from t0) and on which tick.
    let mut live = vec![None; plan.len()];
    let mut live_tick = vec![None; plan.len()];
    for line in log
        .lines()
        .filter(|l| l.contains("batchd::sched::apply: ") && l.contains(": started "))
    {
        let (Some(i), Some(at), Some(tick)) =
            (job_of(line), field(line, "at_ms"), field(line, "tick_ms"))
        else {
            continue;
        };
        if i >= plan.len() || live[i].is_some() {
            continue;
        }
        live[i] = Some(at - t0);
        live_tick[i] = Some(second_of(tick, t0));
        // A decision runs on its tick or after it (late on a loaded machine), never
        // before.
        assert!(
            at >= tick,
            "{policy}: job {i} started before its tick: {line}"
        );
    }
    let mut report = String::new();
    let mut worst = 0;
    let mut off_tick = Vec::new();
    for (i, o) in sim.outcomes.iter().enumerate() {
        let l = live[i].unwrap_or_else(|| panic!("job {i} never started:\n{log}"));
        let tick = live_tick[i].unwrap();
        if tick != o.start {
            off_tick.push(format!("job {i}: tick {tick}, simulated {}", o.start));
        }
        let d = l - o.start * 1000;
        worst = worst.max(d.abs());
        let runs: Vec<String> = sim
            .segments
            .iter()
            .filter(|s| s.job == i as u64)
            .map(|s| format!("{}-{}", s.start, s.end))
            .collect();
        report.push_str(&format!(
            "job {i:2} submit {:2} width {} length {} rate {}: sim {:3} s, live tick {tick:3} decided {:7.3} s ({d:+} ms); sim runs {}\n",
            jobs[i].submit, plan[i].width, plan[i].length, plan[i].rate / 1_000_000, o.start, l as f64 / 1000.0, runs.join(" ")
        ));
    }
    eprintln!("{policy}: worst start difference {worst} ms\n{report}");
    if !off_tick.is_empty() {
        eprintln!("{log}");
    }
    for a in 0..plan.len() {
        for b in 0..plan.len() {
            if sim.outcomes[a].start < sim.outcomes[b].start {
                assert!(
                    live[a] < live[b],
                    "{policy}: job {a} starts before job {b} in the simulation, not live\n{report}"
                );
            }
        }
    }
    assert!(
        off_tick.is_empty(),
        "{policy}: starts on other ticks than simulated: {off_tick:?}\n{report}"
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
