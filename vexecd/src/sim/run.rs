//! One simulated test week: job submissions drawn like the paper's (weekday
//! working hours, 1 to 10 jobs per submission with P(k) proportional to 1/k,
//! 30 minutes to 24 hours of CPU each), placed in time order by one policy
//! through a real node table fed with each machine's announcement at the
//! moment of submission. Machines running a simulated job are excluded, as
//! Ring Leader only bids machines without one.

use std::time::{Duration, Instant};

use proto::announce::{Announcement, Kind, NodeStatus};

use super::desktop::Cluster;
use crate::clock::{Now, WEEK_SECS};
use crate::policy::PolicyName;
use crate::profile::{SLOT_SECS, predict};
use crate::rng::{RandomSource, SeedableRng, SplitMix64};
use crate::select::SelectRequest;
use crate::table::{NodeTable, TableConfig};

/// A job submission: when (seconds into the test week), how many jobs,
/// each of how many CPU seconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Submission {
    /// Seconds since the test week's start.
    pub at: f64,
    /// Jobs submitted together.
    pub count: usize,
    /// CPU seconds of each job on a speed-1.0 machine.
    pub cpu_secs: f64,
}

/// A finished job.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Done {
    /// Its CPU length in hours.
    pub cpu_hours: f64,
    /// Wall time over CPU length.
    pub ratio: f64,
}

/// A policy's week.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    /// Jobs that ran.
    pub done: Vec<Done>,
    /// Jobs that found no free machine.
    pub unplaced: usize,
}

/// `n` submissions drawn from `seed`, in time order.
pub fn jobs(n: usize, seed: u64) -> Vec<Submission> {
    let mut rng = SplitMix64::seed_from_u64(seed ^ 0x005e_ed0f_00b5);
    let day_weights = [0.22, 0.22, 0.21, 0.2, 0.15];
    let count_weights: Vec<f64> = (0..10).map(|x| 1.0 / (x as f64 + 1.0)).collect();
    let pick = |rng: &mut SplitMix64, w: &[f64]| {
        let mut x = rng.unit() * w.iter().sum::<f64>();
        for (i, wi) in w.iter().enumerate() {
            if x < *wi {
                return i;
            }
            x -= wi;
        }
        w.len() - 1
    };
    let mut out: Vec<Submission> = (0..n)
        .map(|_| {
            let day = pick(&mut rng, &day_weights) as f64;
            let hour = 7.0 + 11.0 * rng.unit();
            Submission {
                at: day * 86_400.0 + hour * 3600.0,
                count: pick(&mut rng, &count_weights) + 1,
                cpu_secs: (3 + rng.below(142)) as f64 * SLOT_SECS as f64,
            }
        })
        .collect();
    out.sort_by(|a, b| a.at.total_cmp(&b.at));
    out
}

/// Place `jobs` on `cluster` by `policy` (`seed` drives `random`).
pub fn place(cluster: &Cluster, jobs: &[Submission], policy: PolicyName, seed: u64) -> Outcome {
    let mut table = NodeTable::new(TableConfig::default());
    let mut rng = SplitMix64::seed_from_u64(seed);
    let base = Instant::now();
    let mut busy_until = vec![0.0f64; cluster.hosts.len()];
    let mut out = Outcome::default();
    for (seq, job) in jobs.iter().enumerate() {
        let now = Now {
            instant: base + Duration::from_secs_f64(job.at),
            unix_secs: cluster.test_week_start + job.at as u64,
        };
        let slot = ((job.at % WEEK_SECS as f64) / SLOT_SECS as f64) as usize;
        let mut exclude = Vec::new();
        for (i, h) in cluster.hosts.iter().enumerate() {
            let running = busy_until[i] > job.at;
            if running {
                exclude.push(h.name.clone());
            }
            let a = Announcement {
                cluster: proto::announce::DEFAULT_CLUSTER.into(),
                summary: None,
                name: h.name.clone(),
                addr: format!("10.0.{}.{}:7400", i / 250, 1 + i % 250)
                    .parse()
                    .expect("literal address"),
                incarnation: 1,
                seq: seq as u64,
                period_ms: 2000,
                kind: Kind::Node(NodeStatus {
                    cpus: 1,
                    price: 0,
                    charging: 0,
                    contended: false,
                    running_jobs: running as u32,
                    runnable: running as u32,
                    load_milli: (h.actual[slot] * 1000.0) as u32 + 1000 * running as u32,
                    idle_milli: if !running {
                        ((1.0 - h.actual[slot]).clamp(0.0, 1.0) * 1000.0) as u32
                    } else {
                        0
                    },
                    free_mem_mib: 0,
                }),
            };
            let datagram = a.encode().expect("simulated announcement encodes");
            let _ = table.ingest(&datagram, None, now.instant);
            if seq == 0 {
                table.set_summary(&h.name, std::sync::Arc::new(h.summary.clone()));
            }
        }
        let free = cluster.hosts.len() - exclude.len();
        let count = job.count.min(free);
        out.unplaced += job.count - count;
        if count == 0 {
            continue;
        }
        let mut request = SelectRequest::new(count, policy);
        request.exclude = exclude;
        request.expected_cpu = Some(Duration::from_secs_f64(job.cpu_secs));
        let Ok(picked) = table.select(&request, now, &mut rng) else {
            out.unplaced += count;
            continue;
        };
        for p in picked {
            let i = cluster
                .hosts
                .iter()
                .position(|h| h.name == p.name)
                .expect("picked a simulated host");
            let h = &cluster.hosts[i];
            let wall = predict::walk(&h.actual, SLOT_SECS as f64, job.at, job.cpu_secs, h.speed)
                .unwrap_or(f64::INFINITY);
            busy_until[i] = job.at + wall;
            out.done.push(Done {
                cpu_hours: job.cpu_secs / 3600.0,
                ratio: wall / job.cpu_secs,
            });
        }
    }
    out
}
