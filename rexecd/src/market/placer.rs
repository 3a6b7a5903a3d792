//! The placer: a thread of its own that confines the placed jobs' threads to their CPUs
//! on the schedule of `control::placement`, and gives every CPU of the node back to a
//! job when its placement ends. At the start of every [`PERIOD`] it reads the placed
//! jobs' usage, balances the split jobs by what each job is owed
//! (`placement::balanced`) and turns the layout around the CPUs (`Slot::rotated`);
//! then it moves each job at each edge of its slot. The engine hands it each new
//! placement; it keeps time on its own, and runs under `SCHED_FIFO` where rexecd may
//! (`sys::sched`), so that a move lands on its edge whatever the engine and the jobs
//! it moves are doing: at normal priority it waited behind them for the CPU, and the
//! split interval's worst second beside the load recipe was 2.2 to 3.9 points of one
//! CPU in three runs, against 2.2 to 3.1 as a real-time thread (both at 100 ms
//! periods; docs/BENCHMARKS.md).
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

use super::control::placement::{self, PERIOD, Slot};
use crate::cgroup::JobCgroups;
use crate::sys::{affinity, sched};

/// The placer's real-time priority: the lowest, above every ordinary thread and
/// below the kernel's own real-time threads.
const PRIORITY: i32 = 1;

/// Most CPU seconds a placed job can be owed or owe in the balance (see
/// [`Balance`]): a bound on how far a burst of other work can move a split job.
const MAX_OWED: f64 = 0.1;

/// One placed job.
#[derive(Debug, Clone, PartialEq)]
pub struct PlacedJob {
    /// Its job cgroup's id.
    pub cgroup: u64,
    /// Where it runs; CPU indexes name [`Placer::cpus`].
    pub slot: Slot,
    /// The model's allocation, CPUs.
    pub allocation: f64,
}

/// One placement: every placed job.
#[derive(Debug, Clone, PartialEq)]
pub struct Placement {
    /// The placed jobs.
    pub jobs: Vec<PlacedJob>,
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

/// What the placed jobs received against their allocations since the placement began,
/// read from their cgroups at every period, and the slots it moves the split jobs to
/// for the next (`placement::balanced`).
#[derive(Debug, Default)]
struct Balance {
    /// Each placed job's usage at the last period's start.
    usage: HashMap<u64, Duration>,
    /// CPU seconds each placed job is owed (its allocation's share of what the placed
    /// jobs received together, less what it received), within [`MAX_OWED`].
    owed: HashMap<u64, f64>,
}

impl Balance {
    /// Reads the placed jobs' usage at a period's start and returns the slots for the
    /// period.
    fn period(&mut self, cgroups: &JobCgroups, cpus: usize, p: &Placement) -> Vec<(u64, Slot)> {
        let mut got = Vec::with_capacity(p.jobs.len());
        for job in &p.jobs {
            let Ok(now) = cgroups.usage(job.cgroup) else {
                continue;
            };
            if let Some(before) = self.usage.insert(job.cgroup, now) {
                got.push((job, now.saturating_sub(before).as_secs_f64()));
            }
        }
        // Every job read twice, or nothing to judge by.
        if got.len() == p.jobs.len() {
            let received: f64 = got.iter().map(|(_, g)| g).sum();
            let allocated: f64 = p.jobs.iter().map(|j| j.allocation).sum();
            for (job, g) in got {
                let owed = self.owed.entry(job.cgroup).or_default();
                *owed =
                    (*owed + job.allocation / allocated * received - g).clamp(-MAX_OWED, MAX_OWED);
            }
        }
        let mut owed = vec![0.0; cpus];
        let mut visitors = vec![0usize; cpus];
        for job in &p.jobs {
            if job.slot.is_pinned() {
                if let Some(o) = owed.get_mut(job.slot.parts[0].0) {
                    *o += self.owed.get(&job.cgroup).copied().unwrap_or(0.0);
                }
            } else {
                for &(cpu, _) in &job.slot.parts {
                    if let Some(v) = visitors.get_mut(cpu) {
                        *v += 1;
                    }
                }
            }
        }
        let slots: Vec<(u64, Slot)> = p
            .jobs
            .iter()
            .map(|job| {
                let slot = placement::balanced(&job.slot, job.allocation, &owed, &visitors);
                (job.cgroup, slot.rotated(cpus))
            })
            .collect();
        tracing::trace!(owed = ?self.owed, ?slots, "balance");
        slots
    }
}

/// The placer thread: applies the current placement at each edge until the handle is
/// dropped.
fn run(cgroups: &JobCgroups, cpus: &[u32], rx: &Receiver<Option<Placement>>) {
    match sched::make_current_thread_realtime(PRIORITY) {
        Ok(()) => tracing::debug!(priority = PRIORITY, "the placer runs under SCHED_FIFO"),
        Err(e) => tracing::info!(
            error = %e,
            "the placer runs at normal priority: on a busy node its moves may be late"
        ),
    }
    let epoch = Instant::now();
    let mut current: Option<Placement> = None;
    let mut balance = Balance::default();
    // This period's slots, and the period they are for.
    let mut slots: Vec<(u64, Slot)> = Vec::new();
    let mut slots_for: Option<u64> = None;
    // The CPU each placed cgroup was last given (an index), or all of them.
    let mut given: HashMap<u64, usize> = HashMap::new();
    loop {
        let now = Instant::now();
        if let Some(p) = &current {
            let (period, phase) = position(epoch, now);
            let period_start = slots_for != Some(period);
            if period_start {
                slots = balance.period(cgroups, cpus.len(), p);
                slots_for = Some(period);
            }
            for (id, slot) in &slots {
                let cpu = slot.cpu_at(phase);
                if given.get(id) != Some(&cpu) || period_start {
                    confine(cgroups, *id, &[cpus[cpu]]);
                    given.insert(*id, cpu);
                }
            }
        }
        let wait = match &current {
            Some(_) => next_edge(epoch, Instant::now(), &slots),
            None => Duration::from_secs(3600),
        };
        match rx.recv_timeout(wait) {
            Ok(next) => {
                let keep: Vec<u64> = next
                    .iter()
                    .flat_map(|p| p.jobs.iter().map(|j| j.cgroup))
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
                // A new placement starts a new balance, and its slots are made at once,
                // as at a period's start.
                balance = Balance::default();
                slots.clear();
                slots_for = None;
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

/// The period under way at `now` (counted from `epoch`) and its elapsed share (0 at
/// its start; within a millisecond of a period's end counts as the next one's start).
fn position(epoch: Instant, now: Instant) -> (u64, f64) {
    let period = PERIOD.as_secs_f64();
    let t = now.saturating_duration_since(epoch).as_secs_f64() / period + 0.001 / period;
    let n = t.floor();
    let phase = (t - n - 0.001 / period).max(0.0);
    (n as u64, phase)
}

/// How long until the next edge of any split job's slot, or the next period (where
/// the balance moves the slots and every placed job is confined again).
fn next_edge(epoch: Instant, now: Instant, slots: &[(u64, Slot)]) -> Duration {
    let period = PERIOD.as_secs_f64();
    let (_, phase) = position(epoch, now);
    let next = slots
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
