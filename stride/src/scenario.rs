//! Scripted scenarios replayed on the model, starting with the paper's Figure 4.
//!
//! A [`Scenario`] is a node, its jobs and a timeline of arrivals and departures. Replaying it
//! gives, for every interval between two events, each present job's CPU share twice (the
//! water-filling model, and a measurement from running the stride scheduler quantum by quantum
//! over the interval) and its charge under both policies. The `stride-demo` binary prints the
//! replay of [`figure4`]; a test asserts it interval by interval.

use crate::alloc::{Claim, MILLI, water_fill};
use crate::charge::{Job, Overflow, Policy, interval_charges};
use crate::sched::{ClientId, SchedError, Scheduler};
use crate::tickets::tickets_for_bids;
use money::{Bid, MicroCredits};

/// A job in a scenario.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScenarioJob {
    /// Short name, such as `A`.
    pub name: String,
    /// Its bid.
    pub bid: Bid,
    /// Its runnable threads while present.
    pub demand: u32,
}

/// Whether an event brings a job or takes it away.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    /// The job arrives.
    Arrive,
    /// The job leaves.
    Depart,
}

/// One event on the timeline.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    /// Label as in the paper, such as `A1` (arrival) or `A2` (departure).
    pub label: String,
    /// Index into [`Scenario::jobs`].
    pub job: usize,
    /// Arrival or departure.
    pub kind: EventKind,
    /// When, in nanoseconds from the start; events are in time order.
    pub at_nanos: u64,
}

/// A node, its jobs and a timeline.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Scenario {
    /// CPUs on the node.
    pub cpus: u32,
    /// The jobs.
    pub jobs: Vec<ScenarioJob>,
    /// Arrivals and departures in time order.
    pub events: Vec<Event>,
    /// Length of one scheduling quantum, in nanoseconds.
    pub quantum_nanos: u64,
}

/// One job during one interval.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobInterval {
    /// Index into [`Scenario::jobs`].
    pub job: usize,
    /// Milli-CPUs by water filling.
    pub model_milli_cpus: u64,
    /// Milli-CPUs measured by running the stride scheduler over the interval (rounded).
    pub measured_milli_cpus: u64,
    /// Charge for the interval under [`Policy::Contention`].
    pub contention_charge: MicroCredits,
    /// Charge for the interval under [`Policy::Paper`].
    pub paper_charge: MicroCredits,
}

/// The node between two consecutive events.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IntervalReport {
    /// Label of the event that opens the interval.
    pub from: String,
    /// Label of the event that closes it.
    pub to: String,
    /// Start, in nanoseconds.
    pub start_nanos: u64,
    /// Length, in nanoseconds.
    pub nanos: u64,
    /// Quanta the scheduler ran.
    pub quanta: u64,
    /// Whether runnable demand exceeded the CPUs.
    pub contended: bool,
    /// The jobs present, in job order.
    pub jobs: Vec<JobInterval>,
}

/// Why a scenario could not be replayed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ScenarioError {
    /// An event names a job that does not exist, arrives twice or leaves absent.
    #[error(
        "event {0} does not fit the scenario (unknown job, arrival twice or departure while absent)"
    )]
    BadEvent(String),
    /// Events are out of time order, or the quantum is zero.
    #[error("event {0} is out of time order or the quantum is zero")]
    BadTime(String),
    /// The scheduler refused the node.
    #[error(transparent)]
    Sched(#[from] SchedError),
    /// A charge overflowed.
    #[error(transparent)]
    Overflow(#[from] Overflow),
}

/// The paper's Figure 4: two CPUs; single-threaded jobs A, B, C, D bidding 40, 30, 20 and 10
/// credits per minute arrive one a minute (A1, B1, C1, D1), then leave one a minute in the
/// same order (A2, B2, C2, D2). Quanta are 10 ms, as in Linux 2.2.
///
/// ```
/// let report = stride::scenario::figure4().replay()?;
/// assert_eq!(report.len(), 7);
/// assert_eq!((report[0].from.as_str(), report[0].to.as_str()), ("A1", "B1"));
/// # Ok::<(), stride::scenario::ScenarioError>(())
/// ```
pub fn figure4() -> Scenario {
    let names = ["A", "B", "C", "D"];
    let jobs = names
        .iter()
        .zip([40, 30, 20, 10])
        .map(|(name, credits)| ScenarioJob {
            name: (*name).to_owned(),
            bid: Bid::from_credits(credits),
            demand: 1,
        })
        .collect();
    let minute = money::NANOS_PER_MINUTE;
    let mut events = Vec::new();
    for (round, kind) in [(1, EventKind::Arrive), (2, EventKind::Depart)] {
        for (job, name) in names.iter().enumerate() {
            events.push(Event {
                label: format!("{name}{round}"),
                job,
                kind,
                at_nanos: events.len() as u64 * minute,
            });
        }
    }
    Scenario {
        cpus: 2,
        jobs,
        events,
        quantum_nanos: 10_000_000,
    }
}

impl Scenario {
    /// Replays the timeline: one report per interval between consecutive events.
    pub fn replay(&self) -> Result<Vec<IntervalReport>, ScenarioError> {
        let mut sched = Scheduler::new(self.cpus)?;
        let mut present = vec![false; self.jobs.len()];
        let mut reports = Vec::new();
        let mut out = Vec::new();
        for pair in self.events.windows(2) {
            let (event, next) = (&pair[0], &pair[1]);
            self.apply(event, &mut present, &mut sched)?;
            if next.at_nanos < event.at_nanos || self.quantum_nanos == 0 {
                return Err(ScenarioError::BadTime(next.label.clone()));
            }
            let nanos = next.at_nanos - event.at_nanos;
            let quanta = nanos / self.quantum_nanos;

            let ids: Vec<usize> = (0..self.jobs.len()).filter(|&j| present[j]).collect();
            let market: Vec<Job> = ids
                .iter()
                .map(|&j| Job {
                    bid: self.jobs[j].bid,
                    demand: self.jobs[j].demand,
                })
                .collect();
            let bids: Vec<Bid> = market.iter().map(|j| j.bid).collect();
            let claims: Vec<Claim> = tickets_for_bids(&bids)
                .into_iter()
                .zip(&market)
                .map(|(tickets, j)| Claim {
                    tickets,
                    demand: j.demand,
                })
                .collect();
            let model = water_fill(self.cpus, &claims);
            let contention = interval_charges(Policy::Contention, self.cpus, &market, nanos)?;
            let paper = interval_charges(Policy::Paper, self.cpus, &market, nanos)?;

            let before: Vec<u64> = ids.iter().map(|&j| received(&sched, j)).collect();
            for _ in 0..quanta {
                sched.run_quantum(&mut out);
            }
            let jobs = ids
                .iter()
                .enumerate()
                .map(|(k, &j)| {
                    let got = u128::from(received(&sched, j) - before[k]);
                    let measured = (got * u128::from(MILLI) + u128::from(quanta) / 2)
                        / u128::from(quanta.max(1));
                    JobInterval {
                        job: j,
                        model_milli_cpus: model.milli_cpus()[k],
                        measured_milli_cpus: measured as u64,
                        contention_charge: contention[k],
                        paper_charge: paper[k],
                    }
                })
                .collect();
            reports.push(IntervalReport {
                from: event.label.clone(),
                to: next.label.clone(),
                start_nanos: event.at_nanos,
                nanos,
                quanta,
                contended: crate::charge::is_contended(self.cpus, market.iter().map(|j| j.demand)),
                jobs,
            });
        }
        Ok(reports)
    }

    /// Applies one event, then re-tickets every present job from the bids (what the economic
    /// front end does whenever a job starts or exits).
    fn apply(
        &self,
        event: &Event,
        present: &mut [bool],
        sched: &mut Scheduler,
    ) -> Result<(), ScenarioError> {
        let bad = || ScenarioError::BadEvent(event.label.clone());
        let job = self.jobs.get(event.job).ok_or_else(bad)?;
        let id = ClientId(event.job as u64);
        match (event.kind, present[event.job]) {
            (EventKind::Arrive, false) => sched.join(id, 1, job.demand)?,
            (EventKind::Depart, true) => drop(sched.leave(id)?),
            _ => return Err(bad()),
        }
        present[event.job] = event.kind == EventKind::Arrive;
        let ids: Vec<usize> = (0..self.jobs.len()).filter(|&j| present[j]).collect();
        let bids: Vec<Bid> = ids.iter().map(|&j| self.jobs[j].bid).collect();
        for (&j, tickets) in ids.iter().zip(tickets_for_bids(&bids)) {
            sched.set_tickets(ClientId(j as u64), tickets)?;
        }
        Ok(())
    }
}

fn received(sched: &Scheduler, job: usize) -> u64 {
    sched.received(ClientId(job as u64)).unwrap_or(0)
}
