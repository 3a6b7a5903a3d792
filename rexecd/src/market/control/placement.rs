//! Placement of single-threaded jobs on a contended node: which CPU each job's thread
//! may run on, at which point of a short period, so that the kernel has no thread to
//! move by chance.
//!
//! Caps cannot give three single threads 0.889, 0.667 and 0.444 of two CPUs second by
//! second: whenever the job alone on a CPU is throttled, that CPU idles until the load
//! balancer pulls a waiting thread over, and which job that costs is chance (1 s
//! windows 3 to 6 points of one CPU off, docs/BENCHMARKS.md). Placement removes the
//! chance. Largest first, each job is **pinned** whole to the first CPU with room for
//! its allocation (first fit decreasing); the jobs left over are laid end to end over
//! what the CPUs have left, in CPU order (McNaughton's wrap-around rule), and each is
//! **split**: allowed on each CPU it covers, in turn, for the share of every
//! [`PERIOD`] that its part there is of its allocation. Every CPU keeps a runnable
//! pinned thread, so the node's CPU is never idle under the market; only a split job
//! is capped (at its allocation times the caps' reach, a bound), which never idles
//! a CPU since the pinned job there takes what the cap holds back.
//!
//! On each CPU the jobs present divide it by weight, and [`Plan::hints`] gives weights
//! under which the plan is exact when the split jobs on a CPU are not there at the
//! same time (true of Figure 4's): the pinned jobs of a CPU weigh their allocations over the CPU's pinned
//! total (one per CPU in all), and a split job `a / (1 - a)`, so that it runs at its
//! allocation `a` wherever it is. Pinned job `j` then receives
//! `a_j / S_k * (1 - sum of the split parts on k) = a_j` over a period. The weight
//! controller (`control::step`) corrects what the kernel does differently.
//!
//! Two things make the plan hold beside other work, which takes a CPU's time from
//! whichever jobs are on it. [`Slot::rotated`] turns the whole layout around the CPUs
//! within each period, so that every job spends an equal part of its allocation on
//! every CPU and outside work falls on the jobs in proportion. And [`balanced`] moves
//! a split job's time between the CPUs it visits by what the jobs it meets there are
//! owed, read from their cgroups every period: the one lever that moves CPU between
//! jobs that never share a CPU. Beside the load recipe (30 ms of every 100 on a
//! `nice -n 19` process) the worst 1 s window of Figure 4's split interval went from
//! 3.2 to 6.4 points of one CPU in ten runs to 1.7 to 5.0, eight of ten within 3.2;
//! quiet, from 0.9 to 2.3 to 0.6 to 1.3 (docs/BENCHMARKS.md).
//!
//! Placement applies only while every job the model gives CPU is single-threaded (a
//! demand of one runnable thread), there are more of them than CPUs, and their
//! allocations fill the node: a job with more threads is placed by the kernel well
//! enough. Where every job fits whole on a CPU (the plan is [`Plan::packed`]), the
//! layout is placed and turned all the same, and the caps (`control::caps`) hold each
//! job to its allocation: on a CPU shared by two pinned jobs the weights alone gave the
//! lighter one a little more than its weight (0.207 to 0.212 CPU for 0.2 beside 0.8,
//! quiet and loaded), and no split job's weight divides two CPUs there. Left to the
//! kernel under caps, such a layout lost 2 to 8 points of one CPU in single seconds
//! beside the load recipe, other work falling on whichever jobs the kernel kept on its
//! CPU; placed, turned and capped, 1.2 to 3.6 in ten runs, and within 2.9 in ten more
//! once the caps' headroom was cut to 1% (docs/BENCHMARKS.md).

use std::time::Duration;

/// The placement period: every 1 s window holds 25 whole periods, and a turn
/// (`Slot::rotated`) of 20 ms on two CPUs is shorter than a burst of other work
/// such as the load recipe's 30 ms, so each burst falls on more than one turn's
/// company. Beside that load, the worst 1 s window of Figure 4's split interval was
/// 1.8 to 2.4 points of one CPU in three runs at 40 ms against 2.2 to 3.1 at 100 ms;
/// at 20 ms the seconds were as good but the intervals' errors doubled (0.4 to 0.6
/// points), the moves' own cost showing (docs/BENCHMARKS.md).
pub const PERIOD: Duration = Duration::from_millis(40);
/// A split job's part on a CPU under this share of its allocation is not worth a move
/// (0.8 ms of each period): the job is pinned to its larger side instead.
const SLIVER: f64 = 0.02;
/// Slack in comparing allocations (CPUs): the model's are in milli-CPUs.
const EPS: f64 = 1e-6;
/// Largest allocation a split job's hint is computed for (its weight `a / (1 - a)`).
const MAX_SPLIT: f64 = 0.98;

/// Where one job's thread may run: on each CPU of `parts` (an index into the node's
/// CPUs) in turn, for its share of every period; one part for a pinned job.
#[derive(Debug, Clone, PartialEq)]
pub struct Slot {
    /// `(cpu, share of the period)`, in the order the job visits them; the shares add
    /// up to 1.
    pub parts: Vec<(usize, f64)>,
}

impl Slot {
    /// A job on `cpu` all the time.
    pub fn pinned(cpu: usize) -> Slot {
        Slot {
            parts: vec![(cpu, 1.0)],
        }
    }

    /// Whether the job stays on one CPU.
    pub fn is_pinned(&self) -> bool {
        self.parts.len() == 1
    }

    /// The CPU (an index into the node's CPUs) the job may run on at `phase`, the
    /// elapsed share of the current period (0 to 1).
    pub fn cpu_at(&self, phase: f64) -> usize {
        let mut end = 0.0;
        for &(cpu, share) in &self.parts {
            end += share;
            if phase < end {
                return cpu;
            }
        }
        self.parts.last().map_or(0, |&(cpu, _)| cpu)
    }

    /// The slot turned around the node's `cpus` CPUs: the period is cut into `cpus`
    /// equal turns, and in turn `r` the job follows the whole slot, compressed into the
    /// turn, `r` CPUs on (wrapping). Every CPU then holds the same jobs together as in
    /// the slot, so the weights divide it the same way, but each job receives an equal
    /// part of its allocation on every CPU: other work crowding one CPU takes from
    /// every job in proportion to its allocation, not from the jobs that happen to be
    /// pinned there (a job alone on its CPU could never be paid back, and the kernel
    /// was seen to start new processes on the CPU it sees least loaded, which a fixed
    /// layout keeps the same one).
    pub fn rotated(&self, cpus: usize) -> Slot {
        if cpus < 2 {
            return self.clone();
        }
        let turn = 1.0 / cpus as f64;
        let mut parts: Vec<(usize, f64)> = Vec::new();
        for r in 0..cpus {
            for &(cpu, share) in &self.parts {
                let at = (cpu + r) % cpus;
                match parts.last_mut() {
                    Some(last) if last.0 == at => last.1 += share * turn,
                    _ => parts.push((at, share * turn)),
                }
            }
        }
        Slot { parts }
    }

    /// The shares of a period at which the job moves (empty when pinned).
    pub fn edges(&self) -> Vec<f64> {
        if self.is_pinned() {
            return Vec::new();
        }
        let mut at = 0.0;
        self.parts
            .iter()
            .map(|&(_, share)| {
                let edge = at;
                at += share;
                edge
            })
            .collect()
    }
}

/// How fast [`balanced`] pays back what the pinned jobs of a split job's CPUs are owed:
/// a debt of `x` CPU seconds is moved at `x / BALANCE_SECS` CPUs, so that a burst of
/// other work is mostly paid back within the second it fell in. A move acts a period
/// after the usage it answers was read; with the debt shrinking by
/// `PERIOD / BALANCE_SECS` = `k` = 0.16 of itself per period, the loop's poles are
/// the roots of `z^2 - z + k`: 0.8 and 0.2, real and inside the unit circle, so it
/// settles (to a fifth in about 0.3 s) and cannot ring up. Faster (0.1 s) was
/// measured worse beside the load, at 40 ms and 20 ms periods alike.
pub const BALANCE_SECS: f64 = 0.25;
/// Least share of the period a split job keeps on each of its CPUs when balanced, so
/// that the split never vanishes (the balance moves CPU between a split job's CPUs
/// only while the job visits each of them).
const MIN_PART: f64 = 0.05;

/// `slot`, a split job's, with its time moved between its CPUs by what the pinned
/// jobs there are owed: `owed[k]` is the CPU seconds the jobs pinned to CPU `k` are
/// owed together (negative: received more than their share), and `visitors[k]` how
/// many split jobs visit CPU `k`.
///
/// The placement is exact only when every CPU gives the market all of itself. Other
/// work crowding one CPU takes from its pinned jobs alone, and the job pinned to the
/// other CPU gets more than its share; weights cannot pay that back, since the jobs
/// never meet. The split job can: each extra share `d` of the period it spends on a
/// CPU takes about `d * allocation` CPUs from the jobs pinned there and gives it to
/// those of its other CPUs. So each part moves by the CPU's debt below the mean of the
/// job's CPUs, over [`BALANCE_SECS`] and the job's allocation (shared among the split
/// jobs that visit the CPU), and keeps at least [`MIN_PART`] of the period. Applied
/// every period with the debts integrated over the placement, it is an integral
/// controller: the debts settle where the rates are right, whatever the outside work.
///
/// `slot` and `owed` are of the layout as planned, before [`Slot::rotated`] turns it:
/// turning moves each CPU's company of jobs together, so a split job's time with the
/// jobs pinned to CPU `k` is the same either way.
pub fn balanced(slot: &Slot, allocation: f64, owed: &[f64], visitors: &[usize]) -> Slot {
    if slot.is_pinned() || allocation <= EPS {
        return slot.clone();
    }
    let debt = |cpu: usize| owed.get(cpu).copied().unwrap_or(0.0);
    let mean = slot.parts.iter().map(|&(cpu, _)| debt(cpu)).sum::<f64>() / slot.parts.len() as f64;
    let n = slot.parts.len() as f64;
    let least = MIN_PART.min(0.5 / n);
    let shifted: Vec<(usize, f64)> = slot
        .parts
        .iter()
        .map(|&(cpu, share)| {
            let sharing = visitors.get(cpu).copied().unwrap_or(1).max(1) as f64;
            let shift = -(debt(cpu) - mean) / (BALANCE_SECS * allocation * sharing);
            (cpu, share + shift)
        })
        .collect();
    // Scaled to fill the period; where a part fell under the least share, it gets the
    // least, and what is above the least in the others fills the rest.
    let scale = |parts: Vec<(usize, f64)>, floor: f64| {
        let above: f64 = parts.iter().map(|&(_, share)| share - floor).sum();
        let room = 1.0 - n * floor;
        Slot {
            parts: parts
                .into_iter()
                .map(|(cpu, share)| (cpu, floor + (share - floor) / above.max(EPS) * room))
                .collect(),
        }
    };
    if shifted.iter().all(|&(_, share)| share >= least) {
        scale(shifted, 0.0)
    } else {
        let cut = shifted
            .into_iter()
            .map(|(cpu, share)| (cpu, share.max(least)))
            .collect();
        scale(cut, least)
    }
}

/// One job as the placement sees it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Input {
    /// The model's allocation, CPUs.
    pub allocation: f64,
    /// Runnable threads at the last sample.
    pub demand: u32,
}

/// Every job's slot (`None` for jobs the model gives no CPU: they run anywhere, on
/// what the placed jobs leave) and weight hint.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// Per job, in the order given to [`plan`].
    pub slots: Vec<Option<Slot>>,
    /// Per job, the relative weight under which the plan is exact (0 for unplaced).
    pub hints: Vec<f64>,
    /// Every placed job fits whole on one CPU: nothing is split, and the caps hold
    /// each job to its allocation (see the module docs).
    pub packed: bool,
}

/// The placement of `jobs` on `cpus` CPUs, or `None` when it does not apply (see the
/// module docs).
pub fn plan(cpus: usize, jobs: &[Input]) -> Option<Plan> {
    let active: Vec<usize> = (0..jobs.len())
        .filter(|&i| jobs[i].allocation > EPS)
        .collect();
    if cpus < 2 || active.len() <= cpus {
        return None;
    }
    if active
        .iter()
        .any(|&i| jobs[i].demand != 1 || jobs[i].allocation > 1.0 + EPS)
    {
        return None;
    }
    let total: f64 = active.iter().map(|&i| jobs[i].allocation).sum();
    if (total - cpus as f64).abs() > 0.01 {
        return None;
    }
    // Largest first (ties by order): each job whole on the first CPU it fits on.
    let mut order = active;
    order.sort_by(|&a, &b| {
        jobs[b]
            .allocation
            .total_cmp(&jobs[a].allocation)
            .then(a.cmp(&b))
    });
    let mut free = vec![1.0_f64; cpus];
    let mut slots: Vec<Option<Slot>> = vec![None; jobs.len()];
    let mut left = Vec::new();
    for &i in &order {
        let a = jobs[i].allocation.min(1.0);
        match free.iter().position(|&f| f + EPS >= a) {
            Some(cpu) => {
                free[cpu] -= a;
                slots[i] = Some(Slot::pinned(cpu));
            }
            None => left.push(i),
        }
    }
    // The rest wrap around what the CPUs have left, in CPU order.
    let mut cpu = 0;
    for &i in &left {
        let a = jobs[i].allocation.min(1.0);
        let mut need = a;
        let mut parts: Vec<(usize, f64)> = Vec::new();
        while need > EPS && cpu < cpus {
            let take = free[cpu].min(need);
            if take > EPS {
                parts.push((cpu, take / a));
                free[cpu] -= take;
                need -= take;
            }
            if free[cpu] <= EPS {
                cpu += 1;
            }
        }
        slots[i] = Some(merge_slivers(parts));
    }
    let packed = slots.iter().flatten().all(Slot::is_pinned);
    let hints = hints(cpus, jobs, &slots);
    Some(Plan {
        slots,
        hints,
        packed,
    })
}

/// A part under [`SLIVER`] of a period is not worth a move: its share goes to the
/// job's largest part.
fn merge_slivers(mut parts: Vec<(usize, f64)>) -> Slot {
    if parts.is_empty() {
        return Slot::pinned(0);
    }
    let largest = (0..parts.len())
        .max_by(|&a, &b| parts[a].1.total_cmp(&parts[b].1))
        .unwrap_or(0);
    let mut moved = 0.0;
    let mut kept = Vec::new();
    for (k, &(cpu, share)) in parts.iter().enumerate() {
        if share < SLIVER && k != largest {
            moved += share;
        } else {
            kept.push((cpu, share));
        }
    }
    if let Some(big) = kept.iter_mut().max_by(|a, b| a.1.total_cmp(&b.1)) {
        big.1 += moved;
    }
    parts = kept;
    Slot { parts }
}

/// The weights under which the plan is exact (see the module docs).
fn hints(cpus: usize, jobs: &[Input], slots: &[Option<Slot>]) -> Vec<f64> {
    let mut pinned_total = vec![0.0; cpus];
    for (job, slot) in jobs.iter().zip(slots) {
        if let Some(slot) = slot.as_ref().filter(|s| s.is_pinned()) {
            pinned_total[slot.parts[0].0] += job.allocation;
        }
    }
    jobs.iter()
        .zip(slots)
        .map(|(job, slot)| match slot {
            None => 0.0,
            Some(slot) if slot.is_pinned() => {
                let total = pinned_total[slot.parts[0].0];
                if total > EPS {
                    job.allocation / total
                } else {
                    1.0
                }
            }
            Some(_) => {
                let a = job.allocation.min(MAX_SPLIT);
                a / (1.0 - a)
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn single(allocations: &[f64]) -> Vec<Input> {
        allocations
            .iter()
            .map(|&allocation| Input {
                allocation,
                demand: 1,
            })
            .collect()
    }

    /// What each job receives over one period when every CPU divides itself by the
    /// hints among the jobs present, integrated over fine steps.
    fn received(cpus: usize, plan: &Plan) -> Vec<f64> {
        let steps = 10_000;
        let mut got = vec![0.0; plan.slots.len()];
        for s in 0..steps {
            let phase = (s as f64 + 0.5) / steps as f64;
            for cpu in 0..cpus {
                let here: Vec<usize> = (0..plan.slots.len())
                    .filter(|&i| {
                        plan.slots[i]
                            .as_ref()
                            .is_some_and(|sl| sl.cpu_at(phase) == cpu)
                    })
                    .collect();
                let weight: f64 = here.iter().map(|&i| plan.hints[i]).sum();
                for &i in &here {
                    got[i] += plan.hints[i] / weight / steps as f64;
                }
            }
        }
        got
    }

    #[test]
    fn figure_4s_three_jobs_on_two_cpus_split_the_smallest() {
        let jobs = single(&[0.889, 0.667, 0.444]);
        let plan = plan(2, &jobs).unwrap();
        assert_eq!(plan.slots[0], Some(Slot::pinned(0)));
        assert_eq!(plan.slots[1], Some(Slot::pinned(1)));
        let parts = &plan.slots[2].as_ref().unwrap().parts;
        assert_eq!(parts.len(), 2, "{plan:?}");
        assert_eq!((parts[0].0, parts[1].0), (0, 1));
        assert!((parts[0].1 - 0.111 / 0.444).abs() < 1e-3, "{parts:?}");
        assert!((plan.hints[0] - 1.0).abs() < 1e-9);
        assert!((plan.hints[1] - 1.0).abs() < 1e-9);
        assert!((plan.hints[2] - 0.444 / 0.556).abs() < 1e-9);
        for (got, want) in received(2, &plan).iter().zip([0.889, 0.667, 0.444]) {
            assert!((got - want).abs() < 1e-3, "{got} against {want}");
        }
    }

    #[test]
    fn the_order_given_does_not_matter_and_zero_allocations_run_anywhere() {
        let jobs = single(&[0.0, 0.444, 0.889, 0.667]);
        let plan = plan(2, &jobs).unwrap();
        assert_eq!(plan.slots[0], None);
        assert_eq!(plan.hints[0], 0.0);
        assert_eq!(plan.slots[2], Some(Slot::pinned(0)));
        assert_eq!(plan.slots[3], Some(Slot::pinned(1)));
        assert!(!plan.slots[1].as_ref().unwrap().is_pinned());
    }

    #[test]
    fn jobs_that_fit_whole_are_packed_whole() {
        // Figure 4's four jobs: 0.8 + 0.2 on CPU 0, 0.6 + 0.4 on CPU 1.
        let four = plan(2, &single(&[0.8, 0.6, 0.4, 0.2])).unwrap();
        assert!(four.packed);
        let cpus: Vec<Option<Slot>> = [0, 1, 1, 0].map(|c| Some(Slot::pinned(c))).into();
        assert_eq!(four.slots, cpus);
        for (got, want) in four.hints.iter().zip([0.8, 0.6, 0.4, 0.2]) {
            assert!((got - want).abs() < 1e-9, "{:?}", four.hints);
        }
        // After the bid-40 job leaves: 1.0 alone, 0.667 + 0.333 together.
        let three = plan(2, &single(&[1.0, 0.667, 0.333])).unwrap();
        assert!(three.packed);
        let cpus: Vec<Option<Slot>> = [0, 1, 1].map(|c| Some(Slot::pinned(c))).into();
        assert_eq!(three.slots, cpus);
        assert_eq!(three.hints[0], 1.0);
        assert!((three.hints[1] / three.hints[2] - 2.0).abs() < 1e-2);
        // Turned, each job visits every CPU, with the same company.
        assert_eq!(
            three.slots[1].as_ref().unwrap().rotated(2),
            Slot {
                parts: vec![(1, 0.5), (0, 0.5)]
            }
        );
        // A layout that must split is not packed.
        assert!(!plan(2, &single(&[0.889, 0.667, 0.444])).unwrap().packed);
    }

    #[test]
    fn every_job_gets_its_allocation_on_more_cpus() {
        // 1.0 + 0.9 + 0.7 + 0.6 + 0.5 + 0.3 = 4 on 4 CPUs: 0.5 is split over what
        // CPUs 1 and 3 have left.
        let allocations = [0.5, 1.0, 0.3, 0.9, 0.7, 0.6];
        let plan = plan(4, &single(&allocations)).unwrap();
        let split: Vec<usize> = (0..allocations.len())
            .filter(|&i| !plan.slots[i].as_ref().unwrap().is_pinned())
            .collect();
        assert_eq!(split, vec![0], "{plan:?}");
        for (got, want) in received(4, &plan).iter().zip(allocations) {
            assert!((got - want).abs() < 1e-3, "{got} against {want}: {plan:?}");
        }
        // Five equal jobs on four CPUs: the fifth visits every CPU.
        let plan = super::plan(4, &single(&[0.8; 5])).unwrap();
        assert_eq!(plan.slots[4].as_ref().unwrap().parts.len(), 4, "{plan:?}");
        for got in received(4, &plan) {
            assert!((got - 0.8).abs() < 1e-3, "{got}: {plan:?}");
        }
    }

    #[test]
    fn it_does_not_apply_without_contention_or_to_threaded_jobs() {
        // No more jobs than CPUs.
        assert_eq!(plan(2, &single(&[1.0, 1.0])), None);
        // The allocations do not fill the node.
        assert_eq!(plan(2, &single(&[0.5, 0.5, 0.5])), None);
        // A job with two runnable threads.
        let mut jobs = single(&[0.889, 0.667, 0.444]);
        jobs[1].demand = 2;
        assert_eq!(plan(2, &jobs), None);
        // One CPU: nothing to place.
        assert_eq!(plan(1, &single(&[0.5, 0.5])), None);
    }

    #[test]
    fn a_sliver_is_not_worth_a_move() {
        // 0.995 + 0.505 + 0.5: the last job would spend 1% of its time on CPU 0, so it
        // stays whole on CPU 1; with no job split, the layout is packed and the caps
        // hold each job to its allocation.
        assert_eq!(merge_slivers(vec![(0, 0.01), (1, 0.99)]), Slot::pinned(1));
        let packed = plan(2, &single(&[0.995, 0.505, 0.5])).unwrap();
        assert!(packed.packed);
        assert_eq!(packed.slots[2], Some(Slot::pinned(1)));
        // Over the sliver's share, the job moves.
        let split = plan(2, &single(&[0.97, 0.53, 0.5])).unwrap();
        assert!(!split.packed);
        assert!(!split.slots[2].as_ref().unwrap().is_pinned());
    }

    #[test]
    fn a_split_job_moves_toward_the_cpu_whose_pinned_jobs_got_too_much() {
        let slot = Slot {
            parts: vec![(0, 0.25), (1, 0.75)],
        };
        let visitors = [1, 1];
        // Nothing owed: the plan stands.
        assert_eq!(balanced(&slot, 0.444, &[0.0, 0.0], &visitors), slot);
        assert_eq!(balanced(&slot, 0.444, &[0.02, 0.02], &visitors), slot);
        // CPU 0's pinned job got 0.01 CPU seconds too much and CPU 1's is owed 0.01:
        // each is 0.01 from their mean, so the split job spends 0.01 / (0.25 * 0.444)
        // = 9% of the period more on CPU 0 (taking 0.04 CPU from its pinned job and
        // giving it to CPU 1's, so the gap of 0.02 CPU seconds closes in a quarter
        // second).
        let moved = balanced(&slot, 0.444, &[-0.01, 0.01], &visitors);
        assert!((moved.parts[0].1 - 0.34).abs() < 0.001, "{moved:?}");
        assert!((moved.parts[1].1 - 0.66).abs() < 0.001, "{moved:?}");
        assert_eq!(moved.edges(), vec![0.0, moved.parts[0].1]);
        // And back the other way; a second split job visiting CPU 1 halves its move.
        let back = balanced(&slot, 0.444, &[0.01, -0.01], &visitors);
        assert!(back.parts[0].1 < 0.25, "{back:?}");
        let shared = balanced(&slot, 0.444, &[0.01, -0.01], &[1, 2]);
        assert!(shared.parts[0].1 > back.parts[0].1, "{shared:?}");
        // However large the debt, the job keeps a part on every CPU.
        for owed in [[1.0, -1.0], [-1.0, 1.0]] {
            let far = balanced(&slot, 0.444, &owed, &visitors);
            assert_eq!(far.parts.len(), 2);
            assert!(far.parts.iter().all(|&(_, s)| s >= 0.05 - 1e-9), "{far:?}");
            let sum: f64 = far.parts.iter().map(|&(_, s)| s).sum();
            assert!((sum - 1.0).abs() < 1e-9);
        }
        // A pinned job stays where it is.
        assert_eq!(
            balanced(&Slot::pinned(1), 0.5, &[1.0, -1.0], &visitors),
            Slot::pinned(1)
        );
    }

    #[test]
    fn turning_the_slots_keeps_the_shares_and_spreads_each_job_over_every_cpu() {
        for (cpus, allocations) in [
            (2, vec![0.889, 0.667, 0.444]),
            (4, vec![0.5, 1.0, 0.3, 0.9, 0.7, 0.6]),
        ] {
            let base = plan(cpus, &single(&allocations)).unwrap();
            let turned = Plan {
                slots: base
                    .slots
                    .iter()
                    .map(|s| s.as_ref().map(|s| s.rotated(cpus)))
                    .collect(),
                hints: base.hints.clone(),
                packed: base.packed,
            };
            for (got, want) in received(cpus, &turned).iter().zip(&allocations) {
                assert!(
                    (got - want).abs() < 1e-3,
                    "{got} against {want}: {turned:?}"
                );
            }
            for slot in turned.slots.iter().flatten() {
                let sum: f64 = slot.parts.iter().map(|&(_, s)| s).sum();
                assert!((sum - 1.0).abs() < 1e-9, "{slot:?}");
                for cpu in 0..cpus {
                    let time: f64 = slot
                        .parts
                        .iter()
                        .filter(|&&(c, _)| c == cpu)
                        .map(|&(_, s)| s)
                        .sum();
                    assert!((time - 1.0 / cpus as f64).abs() < 1e-9, "{slot:?}");
                }
            }
        }
        // On two CPUs: the pinned job changes CPU at half time, the split job at its
        // edges in each half (merged where it stays).
        assert_eq!(Slot::pinned(0).rotated(2).parts, vec![(0, 0.5), (1, 0.5)]);
        let split = Slot {
            parts: vec![(0, 0.25), (1, 0.75)],
        };
        assert_eq!(
            split.rotated(2).parts,
            vec![(0, 0.125), (1, 0.5), (0, 0.375)]
        );
        assert_eq!(split.rotated(1), split);
    }

    #[test]
    fn a_split_job_visits_its_cpus_in_turn() {
        let slot = Slot {
            parts: vec![(1, 0.25), (2, 0.75)],
        };
        assert_eq!(slot.cpu_at(0.0), 1);
        assert_eq!(slot.cpu_at(0.2), 1);
        assert_eq!(slot.cpu_at(0.25), 2);
        assert_eq!(slot.cpu_at(0.99), 2);
        assert_eq!(slot.edges(), vec![0.0, 0.25]);
        assert!(Slot::pinned(0).edges().is_empty());
    }
}
