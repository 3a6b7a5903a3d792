//! CFS bandwidth caps: while the node is contended, each job the model gives CPU is
//! limited to its allocation times the jobs' [`reach`] (times [`HEADROOM`]), moved by
//! [`PAYBACK`] of its lag a tick, every [`PERIOD_US`] (longer for tiny caps); uncontended (or open loop), no
//! job is limited.
//!
//! Weights alone cannot give a single thread its share on two CPUs: a thread is either
//! on a CPU or not, and which CPU it sits on is the load balancer's choice, so a small
//! change of weight can move a whole thread. A cap bounds what a job receives whatever
//! the balancer does: caps at the model's allocations add up to the node's CPUs, so
//! every job that is not at its cap can only be short, and the weight controller
//! (`control::step`) then only has to decide who gets CPU that a capped job leaves.
//! Caps never raise a job above what the weights would give it; they cannot starve a
//! job the model gives CPU (the smallest cap is the kernel's 1 ms a period).

use crate::cgroup::CpuQuota;

/// Cap on a job, as a multiple of its model allocation, when the jobs receive all the
/// model hands out.
pub const HEADROOM: f64 = 1.0;
/// How much more than they could have received last tick (what they received plus
/// the CPU left idle) the caps let the jobs receive together. Every point of it is CPU
/// that a company of jobs the other work misses may take beyond its share: beside the
/// load recipe, Figure 4 had a second over 3 points of one CPU in 3 of 11 runs at 3%,
/// 1 of 7 at 1%, then none in ten runs in a row (docs/BENCHMARKS.md, "Headroom of 1%").
pub const GROWTH: f64 = 1.01;
/// Smallest reach: caps never fall below this share of the allocations.
pub const MIN_REACH: f64 = 0.5;
/// Share of a job's lag its cap pays back over the next tick (a job ahead of its
/// entitlement is capped below it until it has given the time back): the cap moves by
/// `PAYBACK * lag / dt` CPUs for ticks of `dt` seconds.
///
/// Where a job's cap binds it receives exactly its cap, so its lag follows
/// `L[n+1] = L[n] - PAYBACK * L[n-1]` (the cap is written one tick after the lag is
/// measured): the characteristic roots of `z^2 - z + PAYBACK` are a double root at 0.5
/// for 0.25, the fastest decay without overshoot, at any tick length; the loop stays
/// stable up to 1.
pub const PAYBACK: f64 = 0.25;
/// Furthest a lag moves a cap from `allocation * reach`, as a share of it either way.
pub const LAG_SWING: f64 = 0.5;
/// The CFS period of a cap, microseconds: a 1 s window holds fifty of them. Measured on
/// Figure 4 (docs/BENCHMARKS.md, "The caps' period"): 10 ms kept more 1 s windows
/// within 3 points of one CPU, but the jobs of an interval where caps sum to exactly a
/// CPU (0.667 and 0.333 sharing one) lost up to a tenth of it between their periods,
/// an interval error over a point; 40 and 100 ms were worse in every second, and at
/// 5 ms the throttling itself took CPU from the jobs.
pub const PERIOD_US: u64 = 20_000;

/// The period of a cap of `cpus`: [`PERIOD_US`], lengthened for a cap so small that a
/// period's quota would fall under the kernel's smallest (1 ms), so that a small
/// allocation is capped at itself rather than at 1 ms a period (0.02 CPU gets 50 ms
/// periods, 0.001 CPU one second).
pub fn period_us(cpus: f64) -> u64 {
    if !(cpus.is_finite() && cpus > 0.0) {
        return PERIOD_US;
    }
    let needed = (CpuQuota::MIN_US as f64 / cpus).ceil();
    if needed >= CpuQuota::MAX_PERIOD_US as f64 {
        CpuQuota::MAX_PERIOD_US
    } else {
        (needed as u64).max(PERIOD_US)
    }
}

/// The share of their allocations the caps give the jobs next tick, from what the
/// model handed out (`model_sum`), what they received together (`measured_sum`) and
/// the node's CPU that stood idle meanwhile (`idle_cpus`): `GROWTH` times what they
/// could have received, at most all of it, at least `MIN_REACH`.
///
/// Other work that takes CPU from some jobs leaves the others at their caps, above
/// their share of what the jobs receive together; scaling every cap down to what the
/// jobs can reach keeps them in proportion. Idle time says when that is too tight:
/// once the other work leaves, the CPU it freed stands idle under the caps, and the
/// next tick's caps take it back whole. So the caps can follow the jobs closely
/// (`GROWTH` of 1%: a job the balancer leaves alone on a CPU cannot run far ahead of
/// its share) without ever holding CPU idle for more than one tick.
pub fn reach(model_sum: f64, measured_sum: f64, idle_cpus: f64) -> f64 {
    if !(model_sum > 0.0 && measured_sum.is_finite()) {
        return 1.0;
    }
    let idle = if idle_cpus.is_finite() {
        idle_cpus.max(0.0)
    } else {
        0.0
    };
    (GROWTH * (measured_sum + idle) / model_sum).clamp(MIN_REACH, 1.0)
}

/// What the caps' reach is computed from, over one tick (every figure in CPUs, on
/// average over the tick, summed over the jobs the model gives CPU).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Tick {
    /// What the model handed out.
    pub model: f64,
    /// What the jobs received.
    pub measured: f64,
    /// How long their run queues stood throttled by their caps (`cpu.stat`): CPU they
    /// wanted and their caps held back.
    pub throttled: f64,
    /// The node's CPU that stood idle.
    pub idle: f64,
    /// The node's CPU that ran anything, the jobs included (`None`: not known).
    pub busy: Option<f64>,
}

impl Tick {
    /// CPU that other work took while the jobs were throttled: what ran that was not
    /// the jobs, up to what the caps held back from them and did not leave idle (the
    /// idle part counts in the reach already). With no throttling it is nothing,
    /// however busy other work was (the jobs wanted no more: sleeping jobs do not
    /// stretch their caps); with no other work it is nothing, however often the caps
    /// bound (a quiet node's caps are as before).
    pub fn taken_from_jobs(&self) -> f64 {
        let Some(busy) = self.busy.filter(|b| b.is_finite()) else {
            return 0.0;
        };
        let other = (busy - self.measured.max(0.0)).max(0.0);
        let throttled = if self.throttled.is_finite() {
            self.throttled.max(0.0)
        } else {
            0.0
        };
        let idle = if self.idle.is_finite() {
            self.idle.max(0.0)
        } else {
            0.0
        };
        other.min((throttled - idle).max(0.0))
    }
}

/// The share of their allocations the caps give the jobs next tick, from one tick's
/// [`Tick`]: [`reach`] over what the jobs could have received, which counts beside
/// what they received and the idle CPU the CPU other work took while their caps held
/// them back ([`Tick::taken_from_jobs`]).
///
/// Without that, other work that takes what the caps free leaves nothing idle, and
/// the reach only follows what the jobs received: any total short of the node, less
/// than `GROWTH` below what the jobs could take, is a fixed point (beside a `nice -n
/// 19` process busy all the time, Figure 4's jobs held at 1.43 of 2 CPUs, issue 41).
/// With it the caps are back at the model within a tick, whatever else runs.
///
/// ```
/// use rexecd::market::control::caps::{Tick, reach_over};
/// // Other work took 0.57 CPU the throttled jobs wanted: the caps give it back.
/// let t = Tick { model: 2.0, measured: 1.43, throttled: 1.5, idle: 0.0, busy: Some(2.0) };
/// assert_eq!(reach_over(&t), 1.0);
/// // The same other work beside jobs that were never throttled: no more than before.
/// let sleepy = Tick { throttled: 0.0, ..t };
/// assert!(reach_over(&sleepy) < 0.73);
/// ```
pub fn reach_over(t: &Tick) -> f64 {
    reach(t.model, t.measured + t.taken_from_jobs(), t.idle)
}

/// Each job's cap, in the order of `model` (the model's allocations, CPUs) and `owed`
/// (each job's lag over the tick's length, CPUs, positive when behind; see
/// `control::State::lag`): `allocation * reach + PAYBACK * owed`, kept within
/// [`LAG_SWING`] of `allocation * reach`. `None` for every job when `contended` is
/// false, and for a job the model gives nothing.
///
/// The lag term is what makes the caps exact where the reach alone is not: other work
/// that lands on some CPUs leaves a job alone on another CPU at its whole cap (the
/// reach leaves `GROWTH` of headroom so that the jobs can take CPU back), above its
/// share of what the jobs received together. Its lag then falls, its cap with it, and
/// the CPU it leaves goes to the jobs that are behind. Lags add up to zero over the
/// jobs, so the lag terms move CPU between caps without changing their sum.
///
/// ```
/// use rexecd::market::control::caps::caps;
/// let c = caps(&[0.889, 0.667, 0.444, 0.0], &[0.0; 4], true, 1.0);
/// assert_eq!(c[0].unwrap().quota_us, 17_780);
/// assert_eq!(c[3], None);
/// let ahead = caps(&[1.0, 1.0], &[-0.4, 0.4], true, 1.0);
/// assert_eq!(ahead[0].unwrap().quota_us, 18_000);
/// assert!(caps(&[1.0, 1.0], &[0.0; 2], false, 1.0).iter().all(Option::is_none));
/// ```
pub fn caps(model: &[f64], owed: &[f64], contended: bool, reach: f64) -> Vec<Option<CpuQuota>> {
    let reach = reach.clamp(MIN_REACH, 1.0);
    model
        .iter()
        .zip(owed.iter().chain(std::iter::repeat(&0.0)))
        .map(|(&a, &owed)| {
            if !(contended && a > 0.0) {
                return None;
            }
            let base = a * HEADROOM * reach;
            let owed = if owed.is_finite() { owed } else { 0.0 };
            let cpus =
                (base + PAYBACK * owed).clamp(base * (1.0 - LAG_SWING), base * (1.0 + LAG_SWING));
            CpuQuota::for_cpus(cpus, period_us(cpus))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_add_up_to_the_node_and_follow_the_model() {
        let model = [0.8, 0.6, 0.4, 0.2];
        let c = caps(&model, &[0.0; 4], true, 1.0);
        let total: f64 = c.iter().flatten().map(CpuQuota::cpus).sum();
        assert!((total - 2.0 * HEADROOM).abs() < 1e-3, "{c:?}");
        for (q, a) in c.iter().zip(model) {
            assert!((q.unwrap().cpus() - a * HEADROOM).abs() < 1e-3);
        }
    }

    #[test]
    fn caps_follow_what_the_jobs_reach_and_grow_back() {
        // Quiet: the jobs receive nearly all the model hands out; caps at the model.
        assert_eq!(reach(2.0, 1.985, 0.0), 1.0);
        // Other work takes 0.3 CPU (none idle): caps at GROWTH times what the jobs
        // received.
        let r = reach(2.0, 1.7, 0.0);
        assert!((r - 1.7 * GROWTH / 2.0).abs() < 1e-9, "{r}");
        let c = caps(&[1.0, 0.667, 0.333], &[0.0; 3], true, r);
        assert!((c[1].unwrap().cpus() - 0.667 * r).abs() < 1e-3, "{c:?}");
        // The work leaves: the jobs receive their caps and the rest of the node stands
        // idle, so the caps take all of it back at the next tick.
        let back = reach(2.0, 2.0 * r, 2.0 - 2.0 * r);
        assert_eq!(back, 1.0);
        // Without the idle time they would only creep back, GROWTH a tick.
        let mut creep = r;
        let mut ticks = 0;
        while creep < 1.0 {
            creep = reach(2.0, 2.0 * creep, 0.0);
            ticks += 1;
        }
        assert!(ticks > 1, "{ticks}");
        // Idle time the jobs could not have used anyway (other work still running)
        // only loosens the caps by what stood idle.
        let some = reach(2.0, 1.7, 0.1);
        assert!((some - 1.8 * GROWTH / 2.0).abs() < 1e-9, "{some}");
        // Never below MIN_REACH, and nonsense in, no scaling out.
        assert_eq!(reach(2.0, 0.0, 0.0), MIN_REACH);
        assert_eq!(reach(0.0, 1.0, 0.0), 1.0);
        assert_eq!(reach(2.0, f64::NAN, 0.0), 1.0);
        assert_eq!(reach(2.0, 1.7, f64::NAN), r);
        assert_eq!(reach(2.0, 1.7, -1.0), r);
    }

    /// Figure 4's three jobs (bids 40, 30, 20) on two CPUs: the model's allocations.
    const FIGURE_4: [f64; 3] = [0.889, 0.667, 0.444];

    /// What one tick of a two-CPU node shows the engine, given the jobs' caps: each
    /// job's CPU, how long its run queue stood throttled, and the node's busy CPU
    /// (idle is the rest of the two).
    struct Seen {
        got: Vec<f64>,
        throttled: Vec<f64>,
        busy: f64,
    }

    /// Runs `ticks` ticks from `reach0` with the reach computed by `reach_of` from
    /// what `kernel` shows under each tick's caps; returns the reach and the jobs'
    /// total CPU of every tick.
    fn run(
        ticks: usize,
        reach0: f64,
        kernel: impl Fn(&[f64]) -> Seen,
        reach_of: impl Fn(&Tick) -> f64,
    ) -> Vec<(f64, f64)> {
        let mut r = reach0;
        let mut out = Vec::new();
        for _ in 0..ticks {
            let c: Vec<f64> = caps(&FIGURE_4, &[0.0; 3], true, r)
                .iter()
                .map(|q| q.unwrap().cpus())
                .collect();
            let seen = kernel(&c);
            let measured: f64 = seen.got.iter().sum();
            let tick = Tick {
                model: FIGURE_4.iter().sum(),
                measured,
                throttled: seen.throttled.iter().sum(),
                idle: (2.0 - seen.busy).max(0.0),
                busy: Some(seen.busy),
            };
            r = reach_of(&tick);
            out.push((r, measured));
        }
        out
    }

    /// Single-threaded jobs that each want `want` CPU, under caps: each receives its
    /// cap or what it wants, less `loss` of it (what throttling itself costs), and
    /// stands throttled for what its cap held back; `other` is what other work runs,
    /// at most what the jobs leave of the two CPUs.
    fn node(want: [f64; 3], loss: f64, other: f64) -> impl Fn(&[f64]) -> Seen {
        move |c: &[f64]| {
            let got: Vec<f64> = (0..3).map(|i| want[i].min(c[i]) * (1.0 - loss)).collect();
            let throttled = (0..3).map(|i| (want[i] - c[i]).max(0.0)).collect();
            let jobs: f64 = got.iter().sum();
            Seen {
                got,
                throttled,
                busy: jobs + other.min(2.0 - jobs),
            }
        }
    }

    /// The reach before issue 41: what the jobs received and the idle CPU only.
    fn idle_only(t: &Tick) -> f64 {
        reach(t.model, t.measured, t.idle)
    }

    #[test]
    fn a_quiet_node_keeps_the_reach_it_had() {
        // Busy jobs, nothing else running but rexecd itself (0.005 CPU): the caps bind
        // and the jobs stand throttled much of the time, yet nothing else took CPU.
        let quiet = |other| node([1.0; 3], 0.005, other);
        for reach0 in [1.0, 0.8, MIN_REACH] {
            let new = run(10, reach0, quiet(0.0), reach_over);
            let old = run(10, reach0, quiet(0.0), idle_only);
            assert_eq!(new, old, "from {reach0}");
            assert!(new.iter().all(|&(r, _)| r == 1.0), "{new:?}");
            // rexecd's own CPU moves the reach by no more than itself.
            let own = run(10, reach0, quiet(0.005), reach_over);
            for ((a, _), (b, _)) in own.iter().zip(&old) {
                assert!(
                    (a - b).abs() <= 0.005 * GROWTH / 2.0 + 1e-12,
                    "{own:?} {old:?}"
                );
            }
        }
    }

    #[test]
    fn caps_take_back_what_a_busy_background_process_took_within_two_ticks() {
        // Issue 41: beside a `nice -n 19` loop busy all the time, the jobs held at 1.43
        // of 2 CPUs. Throttling costs the jobs 1% of their caps; the loop takes that
        // and whatever else the caps free.
        let busy_loop = node([1.0; 3], 0.01, 2.0);
        let start = GROWTH * 1.43 / 2.0;
        let new = run(10, start, &busy_loop, reach_over);
        assert!(
            new[1..].iter().all(|&(r, jobs)| r == 1.0 && jobs >= 1.9),
            "{new:?}"
        );
        // Before: a fixed point (what throttling costs outweighs GROWTH).
        let old = run(10, start, &busy_loop, idle_only);
        assert!(old.iter().all(|&(r, _)| r < 0.73), "{old:?}");
        // From a quiet node, the loop's arrival costs the jobs nothing beyond
        // throttling's own loss, tick after tick.
        let from_quiet = run(10, 1.0, &busy_loop, reach_over);
        assert!(from_quiet.iter().all(|&(r, _)| r == 1.0), "{from_quiet:?}");
        // Caps are not the only thing that holds jobs short: with the idle time gone
        // too, the reach still grows back within two ticks.
        let half = node([1.0; 3], 0.01, 0.5);
        let back = run(10, MIN_REACH, &half, reach_over);
        assert!(back[1..].iter().all(|&(r, _)| r == 1.0), "{back:?}");
    }

    #[test]
    fn jobs_that_sleep_do_not_stretch_their_caps_beyond_what_they_want() {
        // Jobs that want 0.6, 0.6 and 0.2 CPU (they sleep the rest) beside other work
        // that takes all they leave: the caps follow what they want, no further.
        for want in [[0.6, 0.6, 0.2], [0.3; 3], [0.8, 0.1, 0.1]] {
            let wanted: f64 = want.iter().sum();
            let sleepy = node(want, 0.0, 2.0);
            for reach0 in [1.0, 0.7, MIN_REACH] {
                let new = run(10, reach0, &sleepy, reach_over);
                for &(r, _) in &new[1..] {
                    let total = 2.0 * r;
                    assert!(
                        total <= (GROWTH * wanted).max(2.0 * MIN_REACH) + 1e-9,
                        "{want:?} from {reach0}: {new:?}"
                    );
                }
                // Jobs never throttled: the reach is the one they always had.
                let t = Tick {
                    model: 2.0,
                    measured: wanted,
                    throttled: 0.0,
                    idle: 0.0,
                    busy: Some(2.0),
                };
                assert_eq!(reach_over(&t), idle_only(&t));
            }
        }
    }

    #[test]
    fn what_other_work_took_never_exceeds_what_it_ran_or_what_the_caps_held_back() {
        let t = Tick {
            model: 2.0,
            measured: 1.4,
            throttled: 0.3,
            idle: 0.0,
            busy: Some(2.0),
        };
        assert!((t.taken_from_jobs() - 0.3).abs() < 1e-12);
        let more = Tick {
            throttled: 2.0,
            ..t
        };
        assert!((more.taken_from_jobs() - 0.6).abs() < 1e-12);
        // What the caps held back and left idle is counted as idle, not twice.
        let idle = Tick {
            idle: 0.2,
            busy: Some(1.8),
            ..t
        };
        assert!((idle.taken_from_jobs() - 0.1).abs() < 1e-12, "{idle:?}");
        assert!((reach_over(&idle) - GROWTH * 1.7 / 2.0).abs() < 1e-12);
        for bad in [
            Tick { busy: None, ..t },
            Tick {
                busy: Some(f64::NAN),
                ..t
            },
            Tick {
                throttled: f64::NAN,
                ..t
            },
            Tick {
                throttled: -1.0,
                ..t
            },
            Tick {
                busy: Some(1.0),
                ..t
            },
        ] {
            assert_eq!(bad.taken_from_jobs(), 0.0, "{bad:?}");
        }
    }

    #[test]
    fn a_tiny_allocation_gets_the_kernels_smallest_cap_not_none() {
        let c = caps(&[1.99, 0.001], &[0.0; 2], true, 1.0);
        assert_eq!(c[1].unwrap().quota_us, CpuQuota::MIN_US);
        // Over a period long enough that the kernel's smallest quota is the allocation.
        assert!((c[1].unwrap().cpus() - 0.001).abs() < 1e-9, "{c:?}");
        assert_eq!(c[0].unwrap().period_us, PERIOD_US);
    }

    #[test]
    fn small_caps_get_periods_long_enough_to_hold_them() {
        assert_eq!(period_us(0.5), PERIOD_US);
        assert_eq!(period_us(0.05), PERIOD_US);
        assert_eq!(period_us(0.02), 50_000);
        assert_eq!(period_us(0.001), CpuQuota::MAX_PERIOD_US);
        assert_eq!(period_us(1e-9), CpuQuota::MAX_PERIOD_US);
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert_eq!(period_us(bad), PERIOD_US);
        }
        for cpus in [0.003, 0.02, 0.05, 0.07, 0.3, 1.7] {
            let q = CpuQuota::for_cpus(cpus, period_us(cpus)).unwrap();
            assert!(q.quota_us >= CpuQuota::MIN_US);
            assert!((q.cpus() - cpus).abs() / cpus < 0.01, "{cpus}: {q:?}");
        }
    }

    /// CPU split as two CPUs, one job alone on the first, the others and `outside` CPU
    /// of other work on the second, each job under its cap: the second CPU's share of
    /// the jobs goes by weight, and what the first job leaves of its CPU is taken by the
    /// others (the kernel's idle balancing), up to their caps.
    fn placed(w: &[f64; 3], cap: &[f64; 3], outside: f64) -> [f64; 3] {
        let first = cap[0].min(1.0);
        let mut got = [first, 0.0, 0.0];
        let fill = |cpus: f64, got: &mut [f64; 3]| {
            let room = |i: usize, got: &[f64; 3]| (cap[i] - got[i]).max(0.0);
            let total = w[1] + w[2];
            let (a, b) = (cpus * w[1] / total, cpus * w[2] / total);
            let (ra, rb) = (room(1, got), room(2, got));
            let (a, b) = if a > ra {
                (ra, (b + a - ra).min(rb))
            } else if b > rb {
                ((a + b - rb).min(ra), rb)
            } else {
                (a, b)
            };
            got[1] += a;
            got[2] += b;
        };
        fill(1.0 - outside, &mut got);
        fill(1.0 - first, &mut got);
        got
    }

    /// Figure 4's 40/20/10 interval (model 1, 0.667, 0.333) beside 0.3 CPU of other
    /// work that falls on the second CPU only: the bid-40 job is alone on the first.
    /// Returns the worst error over the last half of `ticks`, CPUs, of shares as a
    /// fraction of what the jobs received together, scaled to the node.
    fn whole_cpu_job_beside_outside_work(with_lag: bool) -> f64 {
        let model = [1.0, 0.667, 0.333];
        let tickets = [40.0, 20.0, 10.0];
        let dt = 0.5;
        let mut states = [super::super::State::default(); 3];
        let mut r = 1.0;
        let mut worst: f64 = 0.0;
        let ticks = 60;
        for t in 0..ticks {
            let lags: Vec<f64> = states
                .iter()
                .map(|s| if with_lag { s.lag / dt } else { 0.0 })
                .collect();
            let c: Vec<f64> = caps(&model, &lags, true, r)
                .iter()
                .map(|q| q.unwrap().cpus())
                .collect();
            let w = [0, 1, 2].map(|i| tickets[i] * states[i].gain);
            let got = placed(&w, &[c[0], c[1], c[2]], 0.3);
            let samples: Vec<_> = (0..3)
                .map(|i| super::super::Sample {
                    model: model[i],
                    measured: got[i],
                    dt,
                })
                .collect();
            super::super::step(&mut states, &samples);
            let sum: f64 = got.iter().sum();
            r = reach(2.0, sum, (2.0 - sum - 0.3).max(0.0));
            if t >= ticks / 2 {
                for i in 0..3 {
                    worst = worst.max((got[i] * 2.0 / sum - model[i]).abs());
                }
            }
        }
        worst
    }

    #[test]
    fn a_job_alone_on_a_cpu_gives_back_what_other_work_cost_the_others() {
        // The reach alone leaves the lone job its GROWTH of headroom: a point of one
        // CPU above its share of what the jobs received.
        let without = whole_cpu_job_beside_outside_work(false);
        assert!(without > 0.9 * (GROWTH - 1.0), "{without}");
        // With the lag term the caps settle within a point of one CPU.
        let with = whole_cpu_job_beside_outside_work(true);
        eprintln!("lone job: {without:.4} CPU off without the lag term, {with:.4} with");
        assert!(
            with < 0.01 && with < without / 4.0,
            "{with} (without the lag term: {without})"
        );
    }
}
