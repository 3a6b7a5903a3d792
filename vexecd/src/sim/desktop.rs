//! Synthetic desktop availability, shaped like the Ring Leader paper's
//! measurements: each machine has one owner who arrives and leaves around
//! the same time each weekday, lunches, sits in the same weekly meetings,
//! and uses the CPU heavily (power users), moderately or lightly while
//! present; a nightly backup runs at the machine's own hour; weekends are
//! mostly idle. On top of the pattern, week-to-week noise: absent days,
//! shifted arrivals, compile bursts, unpredictable overnight runs. Each slot
//! is the busy fraction of that ten-minute slot.

use crate::clock::WEEK_SECS;
use crate::profile::summary::Summary;
use crate::profile::{History, SLOT_SECS, SLOTS};
use crate::rng::{RandomSource, SeedableRng, SplitMix64};

/// 2024-01-01 00:00 UTC, a Monday: the first simulated week starts here.
pub const EPOCH_MONDAY: u64 = 1_704_067_200;

const PER_DAY: usize = 144;

/// One simulated machine.
#[derive(Debug, Clone)]
pub struct Host {
    /// Its name.
    pub name: String,
    /// Speed relative to the reference machine.
    pub speed: f64,
    /// The summary of its recorded history weeks, as it would announce it.
    pub summary: Summary,
    /// The test week's actual busy fractions, one per slot.
    pub actual: Vec<f64>,
}

/// The simulated cluster.
#[derive(Debug, Clone)]
pub struct Cluster {
    /// The machines.
    pub hosts: Vec<Host>,
    /// Unix time at which the test week starts (a Monday).
    pub test_week_start: u64,
}

struct Owner {
    arrive: f64,
    leave: f64,
    intensity: f64,
    presence: f64,
    meetings: Vec<(usize, usize, usize)>,
    backup: usize,
    night_runs: f64,
}

fn owner(rng: &mut SplitMix64) -> Owner {
    let kind = rng.unit();
    let intensity = if kind < 0.2 {
        0.65 + 0.25 * rng.unit()
    } else if kind < 0.7 {
        0.25 + 0.2 * rng.unit()
    } else {
        0.05 + 0.1 * rng.unit()
    };
    let meetings = (0..1 + rng.below(3))
        .map(|_| (rng.below(5), 9 * 6 + rng.below(8 * 6), 6 + rng.below(7)))
        .collect();
    Owner {
        arrive: 7.0 + 2.5 * rng.unit(),
        leave: 16.0 + 3.0 * rng.unit(),
        intensity,
        presence: 0.85 + 0.13 * rng.unit(),
        meetings,
        backup: 6 * (1 + rng.below(4)) + rng.below(6),
        night_runs: if kind < 0.2 { 0.15 } else { 0.03 },
    }
}

fn week(o: &Owner, rng: &mut SplitMix64) -> Vec<f64> {
    let mut busy = vec![0.0; SLOTS];
    for day in 0..7 {
        let base = day * PER_DAY;
        let weekday = day < 5;
        let present = if weekday {
            rng.unit() < o.presence
        } else {
            rng.unit() < 0.1
        };
        if present {
            let (arrive, leave) = if weekday {
                (
                    o.arrive + (rng.unit() - 0.5) * 0.7,
                    o.leave + (rng.unit() - 0.5) * 1.0,
                )
            } else {
                (10.0 + 2.0 * rng.unit(), 13.0 + 3.0 * rng.unit())
            };
            let lunch = 12.0 + (rng.unit() - 0.5) * 0.5;
            for s in 0..PER_DAY {
                let h = s as f64 / 6.0;
                if h < arrive || h >= leave || (h >= lunch && h < lunch + 0.75) {
                    continue;
                }
                let burst = rng.unit() < 0.08;
                busy[base + s] = if burst {
                    1.0
                } else {
                    (o.intensity * (0.5 + rng.unit())).min(1.0)
                };
            }
            if weekday {
                for &(d, start, len) in &o.meetings {
                    if d == day && rng.unit() < 0.9 {
                        for s in start..(start + len).min(PER_DAY) {
                            busy[base + s] = 0.02;
                        }
                    }
                }
            }
        }
        // The nightly backup, every day at the machine's hour.
        for s in o.backup..o.backup + 3 {
            busy[base + s] = busy[base + s].max(0.9);
        }
        // Unpredictable: an overnight run, and stray blips.
        if rng.unit() < o.night_runs {
            let start = 18 * 6 + rng.below(4 * 6);
            for s in start..(start + 24 + rng.below(24)).min(PER_DAY) {
                busy[base + s] = 1.0;
            }
        }
        for s in 0..PER_DAY {
            if rng.unit() < 0.01 {
                busy[base + s] = busy[base + s].max(0.5 + 0.5 * rng.unit());
            }
        }
    }
    busy
}

impl Cluster {
    /// `hosts` machines, each with `history_weeks` recorded weeks and one
    /// test week, all drawn from `seed`.
    pub fn generate(hosts: usize, history_weeks: usize, seed: u64) -> Cluster {
        let mut rng = SplitMix64::seed_from_u64(seed);
        let test_week_start = EPOCH_MONDAY + history_weeks as u64 * WEEK_SECS;
        let hosts = (0..hosts)
            .map(|i| {
                let r = rng.unit();
                let speed = if r < 0.2 {
                    0.55 + 0.3 * rng.unit()
                } else if r < 0.8 {
                    0.9 + 0.2 * rng.unit()
                } else {
                    1.1 + 0.3 * rng.unit()
                };
                let o = owner(&mut rng);
                let mut history = History::new(history_weeks.max(1));
                for w in 0..history_weeks {
                    for (slot, &b) in week(&o, &mut rng).iter().enumerate() {
                        let at = EPOCH_MONDAY + w as u64 * WEEK_SECS + slot as u64 * SLOT_SECS;
                        history.record(at + SLOT_SECS / 2, b);
                    }
                }
                let summary = Summary::from_busy(&history.busy_fractions(), speed);
                Host {
                    name: format!("host{i:03}"),
                    speed,
                    summary,
                    actual: week(&o, &mut rng),
                }
            })
            .collect();
        Cluster {
            hosts,
            test_week_start,
        }
    }
}
