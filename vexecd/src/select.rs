//! The select request ("N nodes by POLICY, at most this price, not these
//! nodes, for a job of this CPU length"), its typed errors, and
//! [`NodeTable::select`], which filters the live nodes and lets the policy
//! rank them.

use std::net::SocketAddr;
use std::time::Duration;

use proto::announce::NodeStatus;

use crate::clock::Now;
use crate::policy::{self, Candidate, Context, PolicyName};
use crate::rng::RandomSource;
use crate::table::NodeTable;

/// Most nodes one request may ask for.
pub const MAX_SELECT: usize = 4096;

/// A request for nodes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SelectRequest {
    /// How many nodes.
    pub count: usize,
    /// How to rank them.
    pub policy: PolicyName,
    /// Only nodes whose price (sum of competing bids, micro-credits per
    /// minute) is at most this.
    pub max_price: Option<i64>,
    /// Nodes not to pick (e.g. ones that failed a certificate check).
    pub exclude: Vec<String>,
    /// CPU time the job is expected to need on a speed-1.0 machine
    /// (required by `history`; with other policies, used only to report
    /// each pick's predicted completion).
    pub expected_cpu: Option<Duration>,
}

impl SelectRequest {
    /// `count` nodes by `policy`, no other condition.
    pub fn new(count: usize, policy: PolicyName) -> SelectRequest {
        SelectRequest {
            count,
            policy,
            max_price: None,
            exclude: Vec::new(),
            expected_cpu: None,
        }
    }
}

/// Why a selection cannot be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SelectError {
    /// Asked for no nodes.
    #[error("asked for 0 nodes; ask for at least 1")]
    ZeroCount,
    /// Asked for more than [`MAX_SELECT`].
    #[error("asked for {wanted} nodes; at most {MAX_SELECT} per request")]
    TooMany {
        /// Nodes asked for.
        wanted: usize,
    },
    /// Fewer eligible nodes than asked for.
    #[error("asked for {wanted} nodes but only {eligible} of the {known} known nodes qualify{}", hint(*.priced_out, *.excluded))]
    NotEnoughNodes {
        /// Nodes asked for.
        wanted: usize,
        /// Nodes that qualify.
        eligible: usize,
        /// Nodes heard within the window.
        known: usize,
        /// Left out by the price cap.
        priced_out: usize,
        /// Left out by the exclusion list.
        excluded: usize,
    },
    /// The policy needs the job's expected CPU length.
    #[error("policy `{policy}` needs the job's expected CPU length; give one")]
    NeedsLength {
        /// The policy.
        policy: PolicyName,
    },
}

fn hint(priced_out: usize, excluded: usize) -> String {
    match (priced_out, excluded) {
        (0, 0) => String::new(),
        (p, 0) => format!(" ({p} cost more than the price cap)"),
        (0, x) => format!(" ({x} excluded)"),
        (p, x) => format!(" ({p} cost more than the price cap, {x} excluded)"),
    }
}

/// One chosen node, best first.
#[derive(Debug, Clone, PartialEq)]
pub struct Selected {
    /// Its name (the certificate must name it).
    pub name: String,
    /// Its announced TLS address.
    pub addr: SocketAddr,
    /// Its announced market state.
    pub status: NodeStatus,
    /// Idle CPUs in thousandths, as derived from that state.
    pub idle_milli: u32,
    /// Its speed, when it gave an availability summary.
    pub speed: Option<f64>,
    /// Predicted completion of the expected CPU length, when a length was
    /// given and the node gave a summary (`None` too when never idle).
    pub predicted: Option<Duration>,
    /// Age of its last announcement.
    pub age: Duration,
}

impl NodeTable {
    /// Choose `request.count` live nodes by the request's policy, best first.
    pub fn select(
        &self,
        request: &SelectRequest,
        now: Now,
        rng: &mut dyn RandomSource,
    ) -> Result<Vec<Selected>, SelectError> {
        let policy = policy::for_name(request.policy);
        if request.count == 0 {
            return Err(SelectError::ZeroCount);
        }
        if request.count > MAX_SELECT {
            return Err(SelectError::TooMany {
                wanted: request.count,
            });
        }
        let cpu_secs = request.expected_cpu.map(|d| d.as_secs_f64());
        if policy.needs_length() && cpu_secs.is_none() {
            return Err(SelectError::NeedsLength {
                policy: request.policy,
            });
        }
        let mut excluded_at = Vec::new();
        if !request.exclude.is_empty() {
            excluded_at = vec![false; self.hot_len()];
            for p in request.exclude.iter().filter_map(|n| self.position(n)) {
                excluded_at[p] = true;
            }
        }
        let (mut known, mut priced_out, mut excluded) = (0, 0, 0);
        let mut candidates = Vec::with_capacity(self.hot_len());
        for (position, hot) in self.hot(now.instant) {
            known += 1;
            if request.max_price.is_some_and(|max| hot.price > max) {
                priced_out += 1;
            } else if excluded_at.get(position).copied().unwrap_or(false) {
                excluded += 1;
            } else {
                candidates.push(Candidate {
                    position,
                    hot,
                    key: [0; 2],
                    predicted: None,
                });
            }
        }
        if candidates.len() < request.count {
            return Err(SelectError::NotEnoughNodes {
                wanted: request.count,
                eligible: candidates.len(),
                known,
                priced_out,
                excluded,
            });
        }
        let week_secs = now.week_secs() as f64;
        let mut ctx = Context {
            week_secs,
            expected_cpu_secs: cpu_secs,
            rng,
        };
        policy.rank(&mut candidates, request.count, &mut ctx);
        candidates.truncate(request.count);
        Ok(candidates
            .into_iter()
            .filter_map(|c| {
                let predicted = c.predicted.or_else(|| c.predict(week_secs, cpu_secs?));
                let entry = self.entry(c.position);
                Some(Selected {
                    name: entry.announcement.name.clone(),
                    addr: entry.announcement.addr,
                    status: *entry.status()?,
                    idle_milli: c.hot.idle_milli,
                    speed: c.hot.summary.as_ref().map(|s| s.speed()),
                    predicted: predicted.map(Duration::from_secs_f64),
                    age: entry.age(now.instant),
                })
            })
            .collect())
    }
}
