//! The placement simulation, after the Ring Leader paper's: a cluster of
//! desktop machines whose owners use them in weekly patterns ([`desktop`]),
//! a history of past weeks recorded into each node's [`crate::profile::History`],
//! and a test week in which jobs (30 minutes to 24 hours of CPU) arrive in
//! working hours in bursts and are placed by the real policies through a
//! real [`crate::table::NodeTable`] fed with encoded announcements ([`run`]).
//! A job gets, in each ten-minute slot, the idle fraction of its machine
//! times the machine's speed; its completion ratio is wall time over CPU
//! length. Everything is seeded.

pub mod desktop;
pub mod run;

use crate::policy::PolicyName;

/// What to simulate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimConfig {
    /// Machines.
    pub hosts: usize,
    /// Past weeks recorded into each machine's history before the test week.
    pub history_weeks: usize,
    /// Job submissions in the test week (each of 1 to 10 jobs).
    pub submissions: usize,
    /// Independent job sets run over the same machines.
    pub runs: usize,
    /// Seed of the machines; run `i` draws its jobs from `seed + 1 + i`.
    pub seed: u64,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            hosts: 112,
            history_weeks: 4,
            submissions: 120,
            runs: 10,
            seed: 1996,
        }
    }
}

/// The policies compared, with the name the table prints.
pub const COMPARED: [(PolicyName, &str); 3] = [
    (PolicyName::Random, "random"),
    (PolicyName::LeastLoaded, "lowest-load-now"),
    (PolicyName::History, "history"),
];

/// Job length classes reported separately, upper bounds in hours.
pub const LENGTH_CLASSES: [(f64, &str); 3] = [(1.0, "<= 1 h"), (6.0, "1-6 h"), (24.0, "6-24 h")];

/// One policy's outcome over all runs.
#[derive(Debug, Clone, PartialEq)]
pub struct PolicyOutcome {
    /// The policy.
    pub policy: PolicyName,
    /// Its name in the table.
    pub label: &'static str,
    /// Jobs placed over all runs.
    pub jobs: usize,
    /// Jobs that found no free machine.
    pub unplaced: usize,
    /// Mean completion ratio over all placed jobs.
    pub mean_ratio: f64,
    /// Half-width of the 95% confidence interval of the per-run means.
    pub ci95: f64,
    /// Mean ratio per length class (see [`LENGTH_CLASSES`]).
    pub by_length: [f64; 3],
}

/// Run the whole comparison.
pub fn simulate(config: &SimConfig) -> Vec<PolicyOutcome> {
    let cluster = desktop::Cluster::generate(config.hosts, config.history_weeks, config.seed);
    COMPARED
        .iter()
        .map(|&(policy, label)| {
            let mut per_run = Vec::new();
            let mut all = Vec::new();
            let mut unplaced = 0;
            for i in 0..config.runs {
                let jobs = run::jobs(config.submissions, config.seed + 1 + i as u64);
                let out = run::place(&cluster, &jobs, policy, config.seed + 1 + i as u64);
                unplaced += out.unplaced;
                if !out.done.is_empty() {
                    per_run.push(mean(out.done.iter().map(|d| d.ratio)));
                }
                all.extend(out.done);
            }
            let mean_ratio = mean(all.iter().map(|d| d.ratio));
            let m = mean(per_run.iter().copied());
            let var = per_run.iter().map(|x| (x - m).powi(2)).sum::<f64>()
                / (per_run.len().max(2) - 1) as f64;
            let ci95 = 1.96 * (var / per_run.len().max(1) as f64).sqrt();
            let mut by_length = [0.0; 3];
            let mut lower = 0.0;
            for (k, (upper, _)) in LENGTH_CLASSES.iter().enumerate() {
                by_length[k] = mean(
                    all.iter()
                        .filter(|d| d.cpu_hours > lower && d.cpu_hours <= *upper)
                        .map(|d| d.ratio),
                );
                lower = *upper;
            }
            PolicyOutcome {
                policy,
                label,
                jobs: all.len(),
                unplaced,
                mean_ratio,
                ci95,
                by_length,
            }
        })
        .collect()
}

fn mean(xs: impl Iterator<Item = f64>) -> f64 {
    let (n, s) = xs.fold((0usize, 0.0), |(n, s), x| (n + 1, s + x));
    if n == 0 { f64::NAN } else { s / n as f64 }
}

/// The comparison as a plain-text table.
pub fn table(config: &SimConfig, outcomes: &[PolicyOutcome]) -> String {
    let mut s = format!(
        "placement over a synthetic week: {} hosts, {} history weeks, {} submissions x {} runs, seed {}\n",
        config.hosts, config.history_weeks, config.submissions, config.runs, config.seed
    );
    s += &format!(
        "{:<16} {:>6} {:>9} {:>11} {:>8}",
        "policy", "jobs", "unplaced", "mean ratio", "95% ci"
    );
    for (_, label) in LENGTH_CLASSES {
        s += &format!(" {label:>8}");
    }
    s.push('\n');
    for o in outcomes {
        s += &format!(
            "{:<16} {:>6} {:>9} {:>11.3} {:>8.3}",
            o.label, o.jobs, o.unplaced, o.mean_ratio, o.ci95
        );
        for r in o.by_length {
            s += &format!(" {r:>8.3}");
        }
        s.push('\n');
    }
    s += "(ratio: wall time to complete over CPU length on a speed-1.0 machine; Ring Leader paper: random 1.74, fastest 1.29, history 1.15)\n";
    s
}
