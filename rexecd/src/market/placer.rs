//! The placer: a thread of its own that confines the placed jobs' threads to their CPUs
//! on the schedule of `control::placement` (a split job is moved at each of its edges,
//! every [`PERIOD`]), and gives every CPU of the node back to a job when its placement
//! ends. The engine hands it each new placement; it keeps time on its own, so that a
//! move lands within a millisecond or two of its edge whatever the engine is doing.
//!
//! Affinity (`sched_setaffinity(2)`), not a cpuset cgroup, confines the threads: it
//! works the same on cgroup v1 and v2, pinned node or not. New threads and processes
//! inherit their parent's CPUs; the placer re-applies a placement at every period, so
//! that a thread it missed is confined within a period, and gives the CPUs back in two
//! passes, so that a child forked from a confined parent during the first is freed by
//! the second.

use std::collections::HashMap;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::time::{Duration, Instant};

use super::control::placement::{PERIOD, Slot};
use crate::cgroup::JobCgroups;
use crate::sys::affinity;

/// One placement: each placed job cgroup's slot.
#[derive(Debug, Clone, PartialEq)]
pub struct Placement {
    /// `(job cgroup id, slot)`; slots index [`Placer::cpus`].
    pub jobs: Vec<(u64, Slot)>,
}

/// The handle the engine keeps: dropping it gives every placed job its CPUs back and
/// ends the thread.
#[derive(Debug)]
pub struct Placer {
    tx: Sender<Option<Placement>>,
    cpus: Vec<u32>,
    last: Option<Placement>,
}

impl Placer {
    /// Starts the placer thread for a node whose jobs may run on `cpus` (the node's
    /// cpuset when pinned, else the CPUs rexecd may use).
    pub fn start(cgroups: JobCgroups, cpus: Vec<u32>) -> std::io::Result<Placer> {
        let (tx, rx) = channel();
        let all = cpus.clone();
        std::thread::Builder::new()
            .name("placer".into())
            .spawn(move || run(&cgroups, &all, &rx))?;
        Ok(Placer {
            tx,
            cpus,
            last: None,
        })
    }

    /// The node's CPUs, as the placement's CPU indexes name them.
    pub fn cpus(&self) -> &[u32] {
        &self.cpus
    }

    /// Hands over a new placement (`None`: no job placed); a repeat is not sent.
    pub fn set(&mut self, placement: Option<Placement>) {
        if placement == self.last {
            return;
        }
        match &placement {
            Some(p) => tracing::debug!(jobs = ?p.jobs, "placing single-threaded jobs"),
            None => tracing::debug!("placement ended"),
        }
        self.last = placement.clone();
        let _ = self.tx.send(placement);
    }
}

/// The placer thread: applies the current placement at each edge until the handle is
/// dropped.
fn run(cgroups: &JobCgroups, cpus: &[u32], rx: &Receiver<Option<Placement>>) {
    let epoch = Instant::now();
    let mut current: Option<Placement> = None;
    // The CPU each placed cgroup was last given (an index), or all of them.
    let mut given: HashMap<u64, usize> = HashMap::new();
    loop {
        let now = Instant::now();
        if let Some(p) = &current {
            let phase = phase_at(epoch, now);
            let period_start = phase == 0.0;
            for (id, slot) in &p.jobs {
                let cpu = slot.cpu_at(phase);
                if given.get(id) != Some(&cpu) || period_start {
                    confine(cgroups, *id, &[cpus[cpu]]);
                    given.insert(*id, cpu);
                }
            }
        }
        let wait = match &current {
            Some(p) => next_edge(epoch, Instant::now(), p),
            None => Duration::from_secs(3600),
        };
        match rx.recv_timeout(wait) {
            Ok(next) => {
                let keep: Vec<u64> = next
                    .iter()
                    .flat_map(|p| p.jobs.iter().map(|(id, _)| *id))
                    .collect();
                let freed: Vec<u64> = given
                    .keys()
                    .copied()
                    .filter(|id| !keep.contains(id))
                    .collect();
                for id in freed {
                    release(cgroups, id, cpus);
                    given.remove(&id);
                }
                current = next;
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => {
                for id in given.keys() {
                    release(cgroups, *id, cpus);
                }
                return;
            }
        }
    }
}

/// The elapsed share of the current period at `now` (0 at the period's start, within
/// a millisecond).
fn phase_at(epoch: Instant, now: Instant) -> f64 {
    let period = PERIOD.as_secs_f64();
    let t = now.saturating_duration_since(epoch).as_secs_f64() / period;
    let phase = t.fract();
    if phase * period < 0.001 || (1.0 - phase) * period < 0.001 {
        0.0
    } else {
        phase
    }
}

/// How long until the next edge of any split job, or the next period (where every
/// placement is re-applied).
fn next_edge(epoch: Instant, now: Instant, p: &Placement) -> Duration {
    let period = PERIOD.as_secs_f64();
    let t = now.saturating_duration_since(epoch).as_secs_f64();
    let phase = (t / period).fract();
    let next = p
        .jobs
        .iter()
        .flat_map(|(_, slot)| slot.edges())
        .filter(|&e| e > phase + 1e-6)
        .fold(1.0_f64, f64::min);
    Duration::from_secs_f64(((next - phase) * period).max(0.0005))
}

/// Confines every thread of job cgroup `id` to `cpus` (threads that exit meanwhile are
/// skipped).
fn confine(cgroups: &JobCgroups, id: u64, cpus: &[u32]) {
    let Ok(threads) = cgroups.threads(id) else {
        return;
    };
    for tid in threads {
        if let Err(e) = affinity::set_thread_cpus(tid, cpus)
            && e != nix::Error::ESRCH
        {
            tracing::debug!(cgroup = id, tid = tid.0, error = %e, "cannot set a thread's CPUs");
        }
    }
}

/// Gives job cgroup `id` every CPU of the node back, in two passes (see the module
/// docs).
fn release(cgroups: &JobCgroups, id: u64, cpus: &[u32]) {
    confine(cgroups, id, cpus);
    confine(cgroups, id, cpus);
}
