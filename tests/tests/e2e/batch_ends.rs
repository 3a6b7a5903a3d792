//! A processor freed by a job's end is given out at that end, not at the queue's
//! next tick (`batchd::sched::clock`): on one processor and a 5 s tick, a chain
//! of four one-second jobs runs back to back. A queue that decided only on ticks
//! starts each next job at the following tick, about 4 s after the end.

use std::time::Duration;

use proto::batch::{BatchReply, JobState, Worth};
use rexec_tests::batch::{BatchMarket, BatchOptions, log_field};

/// The queue's log line for job `id`'s `what` (`started`, `ended`).
fn logged<'a>(log: &'a str, id: u64, what: &str) -> Option<&'a str> {
    let job = format!(" job={}", proto::node::JobId(id));
    log.lines().find(|l| {
        l.contains("batchd::sched::apply: ")
            && l.contains(&format!(": {what} "))
            && l.contains(&job)
    })
}

#[test]
fn a_freed_processor_is_reused_well_before_the_next_tick() {
    let test = "a_freed_processor_is_reused_well_before_the_next_tick";
    if !rexec_tests::can_run(test) {
        return;
    }
    let m = BatchMarket::start(BatchOptions {
        nodes: 1,
        cpus: 1,
        policy: "fifo",
        tick: "5s",
        ..BatchOptions::default()
    });
    // The first job runs past the next tick, so the others, submitted after it,
    // are in the queue (seen at that tick) before it ends.
    let ids: Vec<u64> = (0..4).map(|i| 0x2000 + i).collect();
    for &id in &ids {
        let secs = if id == ids[0] { "6" } else { "1" };
        let spec = m.spec(id, &["sleep", secs], 1, 30, Worth::Rate(1_000_000));
        assert!(
            matches!(m.submit(&spec), Ok(BatchReply::Submitted(_))),
            "job {id:#x}"
        );
    }
    for &id in &ids {
        m.wait_for(id, Duration::from_secs(120), |e| {
            e.state == JobState::Finished
        });
    }
    // Every end is in the log once its record is committed.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let log = loop {
        let log = m.batchd.log();
        if ids.iter().all(|&id| logged(&log, id, "ended").is_some())
            || std::time::Instant::now() > deadline
        {
            break log;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let at = |id: u64, what: &str| {
        logged(&log, id, what)
            .and_then(|l| log_field(l, "at_ms"))
            .unwrap_or_else(|| panic!("no `{what}` of job {id:#x} in the log:\n{log}"))
    };
    let mut gaps = Vec::new();
    for w in ids.windows(2) {
        let (ended, started) = (at(w[0], "ended"), at(w[1], "started"));
        assert!(
            started >= ended,
            "job {:#x} started before the one before ended:\n{log}",
            w[1]
        );
        gaps.push(started - ended);
    }
    let lines: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("batchd::sched::apply: ") || l.contains("batchd::ops: submitted"))
        .collect();
    eprintln!(
        "end to next start, ms: {gaps:?} (tick 5000 ms)\n{}",
        lines.join("\n")
    );
    // A fifth of the tick: a loaded machine's decision and commit, never a tick.
    for (n, g) in gaps.iter().enumerate() {
        assert!(
            *g < 1_000,
            "job {:#x} started {g} ms after its processor was freed (tick 5 s): {gaps:?}\n{log}",
            ids[n + 1]
        );
    }
}
