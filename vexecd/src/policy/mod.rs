//! Selection policies: one trait, one small module each. A policy sees the
//! eligible candidates (live, under the price cap, not excluded) and puts
//! the `count` it picks first, best first. A new policy is a new module, a
//! [`PolicyName`] variant and a line in [`for_name`].

mod history;
mod least_loaded;
mod lowest_price;
mod random;

use std::fmt;
use std::str::FromStr;

use crate::rng::RandomSource;
use crate::table::Hot;

/// A live, eligible node as a policy sees it.
#[derive(Debug, Clone)]
pub struct Candidate<'a> {
    /// Its position in the table.
    pub position: usize,
    /// What selection reads of it.
    pub hot: &'a Hot,
    /// Sort key a policy may fill (smaller is better; see [`top_by_key`]).
    pub key: [u64; 2],
    /// Predicted completion in seconds, when a policy computed it.
    pub predicted: Option<f64>,
}

impl Candidate<'_> {
    /// Predicted seconds to complete `cpu_secs` from `week_secs`, from the
    /// node's summary; `None` without a summary or when never idle.
    pub fn predict(&self, week_secs: f64, cpu_secs: f64) -> Option<f64> {
        self.hot.summary.as_ref()?.predict(week_secs, cpu_secs)
    }

    /// Load per CPU as a fixed-point key (2^-32 resolution).
    pub fn load_key(&self) -> u64 {
        ((self.hot.load_milli as u64) << 32) / self.hot.cpus.max(1) as u64
    }

    /// More idle CPUs first, then the name hash: a secondary key.
    pub fn idle_then_name(&self) -> u64 {
        ((u32::MAX - self.hot.idle_milli) as u64) << 32 | self.hot.name_hash >> 32
    }
}

/// What a policy may use besides the candidates.
pub struct Context<'a> {
    /// Seconds since Monday 00:00 UTC.
    pub week_secs: f64,
    /// The job's expected CPU length in seconds, when given.
    pub expected_cpu_secs: Option<f64>,
    /// The random source (seeded in tests).
    pub rng: &'a mut dyn RandomSource,
}

/// A selection policy.
pub trait Policy: Sync {
    /// True when the policy needs the expected CPU length.
    fn needs_length(&self) -> bool {
        false
    }

    /// Reorder `candidates` (at least `count` of them) so the `count`
    /// picked come first, best first.
    fn rank(&self, candidates: &mut [Candidate<'_>], count: usize, ctx: &mut Context<'_>);
}

/// The policies by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PolicyName {
    /// Cheapest first, ties by more idle CPUs (the REXEC paper's).
    LowestPrice,
    /// Lowest load per CPU first.
    LeastLoaded,
    /// Uniformly at random.
    Random,
    /// Earliest predicted completion of the expected CPU length (Ring Leader).
    History,
}

impl PolicyName {
    /// Every policy.
    pub const ALL: [PolicyName; 4] = [
        PolicyName::LowestPrice,
        PolicyName::LeastLoaded,
        PolicyName::Random,
        PolicyName::History,
    ];

    /// The name used on the command line and the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            PolicyName::LowestPrice => "lowest-price",
            PolicyName::LeastLoaded => "least-loaded",
            PolicyName::Random => "random",
            PolicyName::History => "history",
        }
    }
}

impl fmt::Display for PolicyName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A policy name nobody knows.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown selection policy `{0}`; choose lowest-price, least-loaded, random or history")]
pub struct UnknownPolicy(pub String);

impl FromStr for PolicyName {
    type Err = UnknownPolicy;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        PolicyName::ALL
            .into_iter()
            .find(|p| p.as_str() == s)
            .ok_or_else(|| UnknownPolicy(s.to_string()))
    }
}

/// The policy behind a name.
pub fn for_name(name: PolicyName) -> &'static dyn Policy {
    match name {
        PolicyName::LowestPrice => &lowest_price::LowestPrice,
        PolicyName::LeastLoaded => &least_loaded::LeastLoaded,
        PolicyName::Random => &random::Random,
        PolicyName::History => &history::History,
    }
}

/// Put the `count` candidates with the smallest keys first, sorted: linear
/// time to find them, then `count log count` to sort.
pub fn top_by_key(items: &mut [Candidate<'_>], count: usize) {
    if count == 0 || items.is_empty() {
        return;
    }
    let count = count.min(items.len());
    if count < items.len() {
        items.select_nth_unstable_by_key(count - 1, |c| c.key);
    }
    items[..count].sort_unstable_by_key(|c| c.key);
}
