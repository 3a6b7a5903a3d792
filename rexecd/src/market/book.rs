//! The node's market state, the one source of truth for it: every rank's bid (asked
//! and in force), measured demand and CPU use, the model's allocation, its meter and
//! what has been billed, the controller's gain; and the node's CPUs, policy, price
//! and contention. Metering, `ListJobs`, the weights and (later) the multicast
//! announcement all read it from here.
//!
//! Everything here is plain computation on numbers handed in (samples, instants), so
//! it is tested without a kernel; the engine does the I/O around it. What it asks of
//! the kernel for its ranks (weights, caps, placement) is in `kernel`; who pays for a
//! rank and running dry are in `payer`; a rank's spending ceiling is in `ceiling`.

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

use money::Bid;
use proto::node::JobId;
use stride::{Claim, Job, Meter, Policy};
use tokio::sync::mpsc;

use super::control;
use super::idle::NodeCpu;
use crate::control::Control;
pub use ceiling::ceiling_notice;
pub use kernel::Placed;
pub use payer::{dry_notice, restored_notice};

/// Samples kept per rank for the "measured over the last window" share.
const WINDOW: usize = 10;

/// A rank's key: job id and rank.
pub type Key = (JobId, u32);

/// One rank as the market sees it.
#[derive(Debug)]
pub struct RankState {
    /// The Unix user who owns (and, without `account`, pays for) it.
    pub owner: String,
    /// The project that pays for it (`rexec -A`, or its owner's default
    /// project), charged for the owner as a member; `None`: its owner's
    /// personal account.
    pub account: Option<String>,
    /// Its cgroup id.
    pub cgroup: u64,
    /// The bid asked for.
    pub bid: Bid,
    /// True while its owner is out of credit: it runs at bid 0.
    pub dry: bool,
    /// The most it may be charged (its share of the job's `--max-cost`), if any.
    pub ceiling: Option<i64>,
    /// True once its charges reached `ceiling`: it runs at bid 0 for good.
    pub capped: bool,
    /// Runnable threads at the last sample (1 until the first sample; 0 once stopped).
    pub demand: u32,
    /// Its first process has exited: it competes no more, whatever its cgroup still
    /// shows, while its session tears it down (see [`Book::stop`]).
    pub stopped: bool,
    /// CPU used so far, nanoseconds, at the last sample.
    pub usage_ns: u64,
    /// When it was last sampled (or joined).
    pub sampled_at: Instant,
    /// Charges are accrued up to here.
    pub accrued_until: Instant,
    /// CPU measured over the last tick, CPUs.
    pub tick_cpus: f64,
    /// Length of the last tick, seconds.
    pub tick_secs: f64,
    /// Time its run queues stood throttled by its cap, at the last sample that said
    /// (nanoseconds).
    pub throttled_ns: Option<u64>,
    /// How long its run queues stood throttled over the last tick, CPUs.
    pub tick_throttled: f64,
    /// (instant, usage) of the last samples, for the windowed share.
    window: VecDeque<(Instant, u64)>,
    /// The model's allocation, milli-CPUs.
    pub model_milli: u64,
    /// The rate it pays now (its bid in force, or zero when charging does not apply).
    pub rate: Bid,
    /// Everything charged so far.
    pub meter: Meter,
    /// What of the meter has gone into debits.
    pub billed: i64,
    /// CPU time covered by debits so far, nanoseconds.
    pub billed_cpu_ns: u64,
    /// Where the next debit's interval starts.
    pub billed_until: Instant,
    /// The closed-loop controller's state (its gain, the rank's lag).
    pub share: control::State,
    /// When it joined.
    pub joined: Instant,
    /// Its session's control queue (for notices).
    pub control: mpsc::Sender<Control>,
    /// A rank of a signed batch job: weighted like any rank, but the queue charges
    /// it, so nothing accrues here (no debit, `charged` stays 0) and it never runs dry.
    pub batch: bool,
}

impl RankState {
    /// The bid in force: zero while the owner is out of credit or once the rank
    /// reached its spending ceiling.
    pub fn effective_bid(&self) -> Bid {
        if self.dry || self.capped {
            Bid::ZERO
        } else {
            self.bid
        }
    }

    /// CPU used over the kept window of samples, milli-CPUs.
    pub fn measured_milli(&self) -> u64 {
        let (Some(&(t0, u0)), Some(&(t1, u1))) = (self.window.front(), self.window.back()) else {
            return 0;
        };
        let span = t1.saturating_duration_since(t0).as_nanos();
        if span == 0 {
            return (self.tick_cpus * 1000.0).round() as u64;
        }
        let used = u128::from(u1.saturating_sub(u0));
        u64::try_from(used * 1000 / span).unwrap_or(u64::MAX)
    }

    /// Charged but not yet billed, micro-credits.
    pub fn unbilled(&self) -> i64 {
        self.meter.total() - self.billed
    }
}

/// One sample of a rank's cgroup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RankSample {
    /// CPU used so far, nanoseconds.
    pub usage_ns: u64,
    /// Runnable threads now.
    pub runnable: u32,
    /// Time its run queues stood throttled by its cap so far, nanoseconds (`None`:
    /// the kernel did not say).
    pub throttled_ns: Option<u64>,
    /// When it was read.
    pub at: Instant,
}

/// A debit the engine should send: what a rank owes for `[start, end)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DueDebit {
    /// Job.
    pub job: JobId,
    /// Rank.
    pub rank: u32,
    /// Who pays (for a project's debit, the member who spent).
    pub user: String,
    /// The project that pays, `None` for `user`'s personal account.
    pub account: Option<String>,
    /// Micro-credits, positive.
    pub amount: i64,
    /// Start of the interval.
    pub start: Instant,
    /// End of the interval.
    pub end: Instant,
    /// CPU used in the interval, nanoseconds.
    pub cpu_ns: u64,
}

/// What a departing rank leaves behind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Departure {
    /// Everything it was charged, micro-credits.
    pub charged: i64,
    /// Its last debit, if anything was still unbilled.
    pub debit: Option<DueDebit>,
}

/// The node's market.
#[derive(Debug)]
pub struct Book {
    cpus: u32,
    policy: Policy,
    ranks: BTreeMap<Key, RankState>,
    contended: bool,
    price: Bid,
    charging: Bid,
    /// Bumped on every arrival, departure, re-bid and credit change (gains reset).
    generation: u64,
    /// The generation the gains were last reset at.
    gains_at: u64,
    /// The share of their allocations the caps give the jobs (`control::caps::reach`).
    reach: f64,
}

/// The node as `ListJobs` and the metrics show it (see [`stride::node_market`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeView {
    /// CPUs sold.
    pub cpus: u32,
    /// Sum of the competing bids.
    pub price: Bid,
    /// What the ranks pay together now, per minute.
    pub charging: Bid,
    /// Runnable demand above the CPUs.
    pub contended: bool,
}

/// What a node announces of its market.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MarketStatus {
    /// CPUs sold.
    pub cpus: u32,
    /// Sum of the competing bids.
    pub price: Bid,
    /// What the ranks pay together now, per minute.
    pub charging: Bid,
    /// Runnable demand above the CPUs.
    pub contended: bool,
    /// Ranks running.
    pub ranks: u32,
    /// Their runnable threads at the last sample (their CPU demand).
    pub runnable: u32,
}

impl Book {
    /// CPUs, price, charging rate, contention, ranks and runnable demand, for
    /// announcements.
    pub fn status(&self) -> MarketStatus {
        MarketStatus {
            cpus: self.cpus,
            price: self.price,
            charging: self.charging,
            contended: self.contended,
            ranks: u32::try_from(self.ranks.len()).unwrap_or(u32::MAX),
            runnable: self
                .ranks
                .values()
                .fold(0u32, |n, r| n.saturating_add(r.demand)),
        }
    }

    /// An empty market of `cpus` CPUs charging under `policy`.
    pub fn new(cpus: u32, policy: Policy) -> Book {
        Book {
            cpus: cpus.max(1),
            policy,
            ranks: BTreeMap::new(),
            contended: false,
            price: Bid::ZERO,
            charging: Bid::ZERO,
            generation: 0,
            gains_at: 0,
            reach: 1.0,
        }
    }

    /// The node's CPUs, price, charging rate and contention.
    pub fn node(&self) -> NodeView {
        NodeView {
            cpus: self.cpus,
            price: self.price,
            charging: self.charging,
            contended: self.contended,
        }
    }

    /// Every rank, in key order.
    pub fn ranks(&self) -> impl Iterator<Item = (&Key, &RankState)> {
        self.ranks.iter()
    }

    /// One rank.
    pub fn get(&self, key: &Key) -> Option<&RankState> {
        self.ranks.get(key)
    }

    /// Bumped on every arrival, departure, re-bid and change of credit.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Number of ranks.
    pub fn len(&self) -> usize {
        self.ranks.len()
    }

    /// True with no rank.
    pub fn is_empty(&self) -> bool {
        self.ranks.is_empty()
    }

    /// Adds a rank at `now`; `dry` when its owner is known to be out of credit.
    pub fn join(
        &mut self,
        key: Key,
        owner: &str,
        cgroup: u64,
        bid: Bid,
        control: mpsc::Sender<Control>,
        now: Instant,
    ) {
        self.accrue_all(now);
        let state = RankState {
            owner: owner.to_string(),
            account: None,
            cgroup,
            bid,
            dry: false,
            ceiling: None,
            capped: false,
            demand: 1,
            stopped: false,
            usage_ns: 0,
            sampled_at: now,
            accrued_until: now,
            tick_cpus: 0.0,
            tick_secs: 0.0,
            throttled_ns: None,
            tick_throttled: 0.0,
            window: VecDeque::with_capacity(WINDOW),
            model_milli: 0,
            rate: Bid::ZERO,
            meter: Meter::new(),
            billed: 0,
            billed_cpu_ns: 0,
            billed_until: now,
            share: control::State::default(),
            joined: now,
            control,
            batch: false,
        };
        self.ranks.insert(key, state);
        self.changed();
        self.recompute();
    }

    /// Marks a rank as a signed batch rank (see [`RankState::batch`]).
    pub fn set_batch(&mut self, key: &Key) {
        if let Some(r) = self.ranks.get_mut(key) {
            r.batch = true;
        }
    }

    /// Removes a rank whose cgroup showed `usage_ns` at its end: charges the time since
    /// its last sample at the rate in force, and returns what it owes in all.
    pub fn leave(&mut self, key: &Key, usage_ns: Option<u64>, now: Instant) -> Option<Departure> {
        if !self.ranks.contains_key(key) {
            return None;
        }
        // Everyone pays the rates in force up to this moment; then they change.
        self.accrue_all(now);
        let mut r = self.ranks.remove(key)?;
        if let Some(u) = usage_ns {
            r.usage_ns = r.usage_ns.max(u);
        }
        let debit = take_debit(key, &mut r, now);
        self.changed();
        self.recompute();
        Some(Departure {
            charged: r.meter.total(),
            debit,
        })
    }

    /// Takes a rank whose first process exited at `now` out of competition: everyone
    /// pays the rates in force up to `now`, and from then on the others pay (and get
    /// CPU) as if it had left. It stays in the book until [`Book::leave`], which its
    /// session calls once the cgroup is gone and its final CPU use known; on a busy
    /// node that teardown can outlast a tick. Returns whether anything changed.
    pub fn stop(&mut self, key: &Key, now: Instant) -> bool {
        if self.ranks.get(key).is_none_or(|r| r.stopped) {
            return false;
        }
        self.accrue_all(now);
        if let Some(r) = self.ranks.get_mut(key) {
            r.stopped = true;
            r.demand = 0;
        }
        self.changed();
        self.recompute();
        true
    }

    /// Sets the bid of every rank of `job` that `may` allows; they leave the dry state
    /// (the caller checked the owner's credit). Returns the ranks changed and, for each
    /// that was dry, its control queue (to tell it credit is back).
    pub fn rebid(
        &mut self,
        job: JobId,
        bid: Bid,
        may: impl Fn(&RankState) -> bool,
    ) -> (u32, Vec<mpsc::Sender<Control>>) {
        self.accrue_all(Instant::now());
        let mut count = 0;
        let mut restored = Vec::new();
        for ((id, _), r) in self.ranks.iter_mut() {
            if *id != job || !may(r) {
                continue;
            }
            count += 1;
            r.bid = bid;
            if r.dry {
                r.dry = false;
                restored.push(r.control.clone());
            }
        }
        if count > 0 {
            self.changed();
            self.recompute();
        }
        (count, restored)
    }

    fn changed(&mut self) {
        self.generation += 1;
    }

    /// Charges every rank up to `now` at the rate in force.
    fn accrue_all(&mut self, now: Instant) {
        for (key, r) in self.ranks.iter_mut() {
            accrue(key, r, now);
        }
    }

    /// Applies one tick's samples: demand and CPU use, then the model, the rates, the
    /// charges for the time since each rank's last sample, and (closed loop) the gains.
    /// Ranks missing from `samples` (joined after the sampling began, or whose cgroup
    /// could not be read) are left as they were. `node`, when known, is how many of the
    /// node's CPUs stood idle and how many ran anything, on average over the tick (see
    /// [`super::idle`]).
    pub fn tick(
        &mut self,
        samples: &[(Key, RankSample)],
        closed_loop: bool,
        node: Option<NodeCpu>,
    ) {
        for (key, s) in samples {
            let Some(r) = self.ranks.get_mut(key) else {
                continue;
            };
            let now = s.at;
            let dt = now.saturating_duration_since(r.sampled_at);
            let used = s.usage_ns.saturating_sub(r.usage_ns);
            r.tick_secs = dt.as_secs_f64();
            r.tick_cpus = if dt.is_zero() {
                0.0
            } else {
                used as f64 / dt.as_nanos() as f64
            };
            // A thread can be caught sleeping at the sample; CPU used says otherwise,
            // over a tick long enough to measure a rate (`control::MIN_DT`), and never
            // of more CPUs than the node has. A shorter tick keeps the demand, but for
            // a rank's first sample, which counts its runnable threads alone.
            let long = r.tick_secs >= control::MIN_DT;
            let busy = if long {
                ((r.tick_cpus - 0.5).ceil().max(0.0) as u32).min(self.cpus)
            } else {
                0
            };
            // The first sample of a rank that has used no CPU yet may come before its
            // process has even run (the tick a launch triggers): it keeps the demand
            // assumed at join until a sample says more.
            let not_started = r.window.is_empty() && s.usage_ns == 0 && s.runnable == 0;
            if !not_started && !r.stopped && (long || r.window.is_empty()) {
                r.demand = s.runnable.max(busy);
            }
            r.usage_ns = r.usage_ns.max(s.usage_ns);
            r.tick_throttled = match (s.throttled_ns, r.throttled_ns) {
                (Some(now), Some(then)) if !dt.is_zero() => {
                    now.saturating_sub(then) as f64 / dt.as_nanos() as f64
                }
                _ => 0.0,
            };
            r.throttled_ns = s.throttled_ns.or(r.throttled_ns);
            if r.window.len() == WINDOW {
                r.window.pop_front();
            }
            r.window.push_back((now, r.usage_ns));
        }
        // Rates from the state just measured; charge each rank's elapsed time at them.
        self.recompute();
        for (key, s) in samples {
            let Some(r) = self.ranks.get_mut(key) else {
                continue;
            };
            accrue(key, r, s.at);
            r.sampled_at = r.sampled_at.max(s.at);
        }
        if closed_loop {
            self.control_step(samples, node);
        }
    }

    /// One controller step over the ranks sampled this tick (gains reset first when
    /// the market changed since the last step); `node` is the node's idle and busy CPU
    /// over the tick.
    fn control_step(&mut self, samples: &[(Key, RankSample)], node: Option<NodeCpu>) {
        // Without contention every runnable thread has a CPU: nothing to divide, and a
        // correction would only chase noise (or other work on the machine).
        if !self.contended {
            for r in self.ranks.values_mut() {
                r.share = control::State::default();
            }
            self.reach = 1.0;
            return;
        }
        if self.gains_at != self.generation {
            for r in self.ranks.values_mut() {
                r.share = control::State::default();
            }
            self.gains_at = self.generation;
            // The tick that saw the change measured the old market: skip it.
            return;
        }
        let keys: Vec<Key> = samples
            .iter()
            .map(|(k, _)| *k)
            .filter(|k| self.ranks.contains_key(k))
            .collect();
        let mut states: Vec<control::State> = keys.iter().map(|k| self.ranks[k].share).collect();
        let inputs: Vec<control::Sample> = keys
            .iter()
            .map(|k| {
                let r = &self.ranks[k];
                control::Sample {
                    model: r.model_milli as f64 / 1000.0,
                    measured: r.tick_cpus,
                    dt: r.tick_secs,
                }
            })
            .collect();
        control::step(&mut states, &inputs);
        let mut reach = control::caps::Tick {
            idle: node.map_or(0.0, |n| n.idle),
            busy: node.map(|n| n.busy),
            ..Default::default()
        };
        for (k, s) in keys.iter().zip(&inputs) {
            if s.model > 0.0 && s.dt >= control::MIN_DT {
                reach.model += s.model;
                reach.measured += s.measured.max(0.0);
                reach.throttled += self.ranks[k].tick_throttled;
            }
        }
        self.reach = control::caps::reach_over(&reach);
        tracing::trace!(?inputs, ?states, tick = ?reach, reach = self.reach, "share control step");
        for (k, st) in keys.iter().zip(states) {
            if let Some(r) = self.ranks.get_mut(k) {
                r.share = st;
            }
        }
    }

    /// Recomputes the model allocation, each rank's rate, the price and contention
    /// from the bids in force and the last measured demand.
    fn recompute(&mut self) {
        let jobs: Vec<Job> = self
            .ranks
            .values()
            .map(|r| Job {
                bid: r.effective_bid(),
                demand: r.demand,
            })
            .collect();
        let bids: Vec<Bid> = jobs.iter().map(|j| j.bid).collect();
        let claims: Vec<Claim> = stride::tickets_for_bids(&bids)
            .into_iter()
            .zip(&jobs)
            .map(|(tickets, j)| Claim {
                tickets,
                demand: j.demand,
            })
            .collect();
        let alloc = stride::water_fill(self.cpus, &claims);
        let market = stride::node_market(self.policy, self.cpus, &jobs).unwrap_or_else(|_| {
            // Sums beyond 64 bits of micro-credits: each rank still pays its own rate.
            stride::NodeMarket {
                price: Bid::ZERO,
                charging: Bid::ZERO,
                contended: stride::is_contended(self.cpus, jobs.iter().map(|j| j.demand)),
                rates: stride::charge_rates(self.policy, self.cpus, &jobs),
            }
        });
        for ((r, milli), rate) in self
            .ranks
            .values_mut()
            .zip(alloc.milli_cpus())
            .zip(&market.rates)
        {
            r.model_milli = *milli;
            r.rate = *rate;
        }
        // A rank competes from its start, with the demand assumed at join (as its
        // weight does), until a sample says otherwise: a newcomer shows in the price
        // at once, and one that turns out to sleep leaves it at the next tick.
        self.price = market.price;
        self.contended = market.contended;
        self.charging = market.charging;
    }

    /// Debits due at the metering tick at `now` (ticks every `tick`): every rank whose
    /// last debit is `every` old, give or take half a tick, and that owes something. (A
    /// rank that owes nothing has its interval start moved on.)
    ///
    /// The half tick matters: ticks jitter a few milliseconds around their interval, so
    /// with a strict `>= every` a debit that fell due a millisecond after this tick
    /// would wait a whole tick more, and half the debits of a rank would cover
    /// `every + tick`. With the tolerance a debit covers `every` rounded to the nearest
    /// whole number of ticks, never a whole tick more.
    pub fn due_debits(&mut self, now: Instant, every: Duration, tick: Duration) -> Vec<DueDebit> {
        let threshold = every.saturating_sub(tick / 2);
        let mut due = Vec::new();
        for (key, r) in self.ranks.iter_mut() {
            if now.saturating_duration_since(r.billed_until) < threshold {
                continue;
            }
            if let Some(d) = take_debit(key, r, now) {
                due.push(d);
            }
        }
        due
    }
}

/// Charges `r` from where it was accrued to `now` at its rate.
fn accrue(key: &Key, r: &mut RankState, now: Instant) {
    if r.batch {
        r.accrued_until = r.accrued_until.max(now);
        return;
    }
    let dt = now.saturating_duration_since(r.accrued_until);
    if let Err(e) = r.meter.accrue(r.rate, nanos(dt)) {
        tracing::error!(job = %key.0, rank = key.1, error = %e, "charge lost");
    }
    r.accrued_until = r.accrued_until.max(now);
}

/// Bills what `r` owes up to `now`, if anything.
fn take_debit(key: &Key, r: &mut RankState, now: Instant) -> Option<DueDebit> {
    let amount = r.unbilled();
    let start = r.billed_until;
    let cpu_ns = r.usage_ns.saturating_sub(r.billed_cpu_ns);
    r.billed = r.meter.total();
    r.billed_until = now;
    r.billed_cpu_ns = r.usage_ns;
    (amount > 0).then(|| DueDebit {
        job: key.0,
        rank: key.1,
        user: r.owner.clone(),
        account: r.account.clone(),
        amount,
        start,
        end: now,
        cpu_ns,
    })
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

mod ceiling;
mod kernel;
mod payer;
#[cfg(test)]
mod tests;
