//! The simulator's clock: ends to the millisecond, each decided at its own instant,
//! the policy seeing whole seconds; a whole-second trace runs as it always did.

use super::*;
use crate::policy::backfill::Backfill;
use crate::policy::fifo::Fifo;
use crate::utility::Utility;

fn job(id: u64, submit: i64, width: u32, estimate: i64) -> Job {
    Job {
        id,
        submit,
        width,
        runtime: estimate,
        estimate,
        utility: Utility::constant(1_000_000),
        queue: 0,
        class: 0,
    }
}

#[test]
fn a_processor_freed_between_seconds_is_given_out_at_once() {
    // One processor, three jobs queued at 0, each running 1.2 s: each starts
    // when the one before ends, not at the next whole second.
    let jobs: Vec<Job> = (0..3).map(|i| job(i, 0, 1, 2)).collect();
    let res = simulate_ms(&jobs, &[1_200; 3], 1, &mut Fifo::new(Backfill::None)).unwrap();
    let starts: Vec<i64> = res.outcomes.iter().map(|o| o.start).collect();
    let ends: Vec<i64> = res.outcomes.iter().map(|o| o.end).collect();
    assert_eq!(starts, vec![0, 1_200, 2_400]);
    assert_eq!(ends, vec![1_200, 2_400, 3_600]);
    assert_eq!(res.segments.len(), 3);
    assert_eq!(res.decisions, 4);
}

#[test]
fn a_drain_of_short_tasks_takes_its_ideal_time() {
    // 400 one-second tasks on 4 processors: 100 s, every processor busy throughout.
    let jobs: Vec<Job> = (0..400).map(|i| job(i, 0, 1, 2)).collect();
    let res = simulate_ms(&jobs, &[1_000; 400], 4, &mut Fifo::new(Backfill::Easy)).unwrap();
    let last = res.outcomes.iter().map(|o| o.end).max().unwrap();
    assert_eq!(last, 100_000);
    // The same with ends 37 ms late: 100 rounds of 1.037 s.
    let res = simulate_ms(&jobs, &[1_037; 400], 4, &mut Fifo::new(Backfill::Easy)).unwrap();
    let last = res.outcomes.iter().map(|o| o.end).max().unwrap();
    assert_eq!(last, 103_700);
}

#[test]
fn whole_seconds_run_in_milliseconds_as_in_seconds() {
    let jobs: Vec<Job> = (0..12)
        .map(|i| {
            job(
                i,
                (i as i64 * 7) % 5,
                1 + (i as u32 % 3),
                1 + (i as i64 * 5) % 4,
            )
        })
        .collect();
    let ms: Vec<i64> = jobs.iter().map(|j| j.runtime * 1000).collect();
    let a = simulate(&jobs, 4, &mut Fifo::new(Backfill::Easy)).unwrap();
    let b = simulate_ms(&jobs, &ms, 4, &mut Fifo::new(Backfill::Easy)).unwrap();
    for (x, y) in a.outcomes.iter().zip(&b.outcomes) {
        assert_eq!((x.start * 1000, x.end * 1000), (y.start, y.end));
        assert_eq!(x.charge, y.charge);
    }
    assert_eq!(a.decisions, b.decisions);
}

#[test]
fn run_times_must_match_the_jobs_and_be_positive() {
    let jobs = vec![job(1, 0, 1, 1), job(2, 0, 1, 1)];
    let mut p = Fifo::new(Backfill::None);
    assert_eq!(
        simulate_ms(&jobs, &[1], 1, &mut p).unwrap_err(),
        SimError::Runtimes {
            jobs: 2,
            runtimes: 1
        }
    );
    assert!(matches!(
        simulate_ms(&jobs, &[1, 0], 1, &mut p),
        Err(SimError::InvalidJob { id: 2, .. })
    ));
}
