//! The live queue in memory: every job the store holds, with its decoded spec,
//! in arrival order. The server reads it to answer `Queue`, `Status` and
//! `Output`; the scheduler changes it, always writing a change to the store
//! before acting on it. Views for clients ([`QueueEntry`]) are built here.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use batch::utility::Utility;
use certs::{PeerIdentity, Role};
use proto::batch::{ArrayTasks, BatchError, BatchErrorCode, JobSpec, JobState, QueueEntry, Worth};
use proto::node::JobId;

use crate::store::JobRecord;

#[cfg(test)]
pub(crate) mod fixture;
pub mod index;
pub mod views;

/// One job.
#[derive(Debug, Clone)]
pub struct Job {
    /// What the store keeps.
    pub rec: JobRecord,
    /// The spec, decoded from the signed bytes (an array's, shared by its tasks).
    pub spec: Arc<JobSpec>,
    /// What it is worth to the policy, built once from its spec (a clone
    /// shares it: a decision copies it without allocating).
    pub utility: Utility,
    /// Kept output bytes: stdout, stderr.
    pub out: [u64; 2],
    /// What it bids or is charged now, micro-credits per CPU-minute.
    pub rate: i64,
    /// The policy's promised start, UTC seconds.
    pub estimated_start: Option<u64>,
    /// Suspensions since the queue started (policies preempt a job once).
    pub preempted: u32,
    /// Its spending ceiling, micro-credits: the lower of its signed
    /// `--max-cost` and its project's ceiling per job, if any.
    pub max_cost: Option<i64>,
    /// The project it is charged to (`rexec submit -A`, signed, else the
    /// owner's default project at submission), if any.
    pub account: Option<String>,
}

impl Job {
    /// A job built from a stored record.
    pub fn new(rec: JobRecord, spec: impl Into<Arc<JobSpec>>) -> Job {
        let spec = spec.into();
        let rate = bid_rate(&spec);
        let utility = crate::terms::utility(&spec);
        // The spec decoded from these bytes once already; the terms follow it.
        let terms = proto::batch::JobTerms::decode(&rec.signed.spec)
            .map(|(_, terms)| terms)
            .unwrap_or_default();
        let (max_cost, account) = match &rec.payer {
            Some(p) => (p.max_cost, p.account.clone()),
            None => (terms.max_cost, terms.account),
        };
        Job {
            rec,
            spec,
            utility,
            out: [0, 0],
            rate,
            estimated_start: None,
            preempted: 0,
            max_cost,
            account,
        }
    }

    /// Whether it waits for processors (queued, held or suspended).
    pub fn waiting(&self) -> bool {
        matches!(
            self.rec.state,
            JobState::Queued | JobState::Held | JobState::Suspended
        )
    }

    /// Whether it ended (see [`JobState::is_ended`]).
    pub fn ended(&self) -> bool {
        self.rec.state.is_ended()
    }
}

/// The job's own bid, micro-credits per CPU-minute: its rate, or its utility's
/// top value spread over its width and length.
pub fn bid_rate(spec: &JobSpec) -> i64 {
    match &spec.worth {
        Worth::Rate(r) => *r,
        Worth::Utility(points) => {
            let top = points.iter().map(|p| p.1).max().unwrap_or(0).max(0);
            let cpu_min = (spec.width.max(1) as i128 * spec.length_s.max(1) as i128).max(1);
            (top as i128 * 60 / cpu_min) as i64
        }
    }
}

/// What a job may cost at most, micro-credits: its rate for its width and
/// length, or its utility's top value.
pub fn cost_estimate(spec: &JobSpec) -> i64 {
    match &spec.worth {
        Worth::Rate(r) => {
            let c = *r as i128 * spec.width as i128 * spec.length_s as i128 / 60;
            c.min(i64::MAX as i128) as i64
        }
        Worth::Utility(points) => points.iter().map(|p| p.1).max().unwrap_or(0).max(0),
    }
}

/// Every job, by id and in arrival order.
#[derive(Debug, Default)]
pub struct Queue {
    /// By id.
    pub jobs: HashMap<u64, Job>,
    /// Arrival order: seq to id.
    pub order: BTreeMap<i64, u64>,
    /// The next arrival number.
    pub next_seq: i64,
    /// Policy time 0, UTC ms.
    pub epoch_ms: i64,
    /// The waiting jobs' ids in the order the policy considered them at its last
    /// decision (most eligible first).
    pub policy_order: Vec<u64>,
    /// Each array's tasks (ids, in index order), by the array's id.
    pub arrays: HashMap<u64, Vec<u64>>,
    /// The jobs by state; a change of a job's state must call [`Queue::touched`].
    pub index: index::Index,
    /// The job whose `estimated_start` the last decision set, if any.
    pub estimated: Option<u64>,
}

/// The refusal of a job that is not in the queue (or not the asker's to see).
pub fn no_such(id: JobId) -> BatchError {
    BatchError::new(
        BatchErrorCode::NoSuchJob,
        format!("no job {id} in this queue"),
    )
}

impl Queue {
    /// The job `id` when `peer` is its owner or an admin.
    pub fn owned(&self, peer: &PeerIdentity, id: JobId) -> Result<&Job, BatchError> {
        // An array is its first task's owner's.
        let j = self
            .jobs
            .get(&id.0)
            .or_else(|| self.jobs.get(self.arrays.get(&id.0)?.first()?))
            .ok_or_else(|| no_such(id))?;
        match peer.role {
            Role::Admin => Ok(j),
            Role::User if peer.name == j.rec.user => Ok(j),
            // Someone else's job is as good as absent to a user.
            Role::User => Err(no_such(id)),
            _ => Err(BatchError::new(
                BatchErrorCode::Forbidden,
                format!(
                    "{} {} may not read or change batch jobs",
                    peer.role, peer.name
                ),
            )),
        }
    }

    /// Adds a job (from the store, or once its submission is committed). A job
    /// already in the queue stays as it is: the leader may have read it from
    /// the store (another instance's arrivals) before its submitter added it.
    pub fn insert(&mut self, job: Job) {
        if self.jobs.contains_key(&job.rec.id) {
            return;
        }
        self.next_seq = self.next_seq.max(job.rec.seq + 1);
        if let Some((array, _)) = job.rec.array {
            self.arrays.entry(array).or_default().push(job.rec.id);
            self.index.arrived(array, job.rec.seq);
        }
        self.order.insert(job.rec.seq, job.rec.id);
        self.index.set(&job);
        self.jobs.insert(job.rec.id, job);
    }

    /// The clock the queue decides on (its epoch and tick).
    pub fn clock(&self) -> crate::sched::clock::Clock {
        self.index.clock()
    }

    /// Sets the clock the queue decides on, filing every job again (a policy
    /// entry's submission time is the first tick at or after it).
    pub fn set_clock(&mut self, clock: crate::sched::clock::Clock) {
        self.index.set_clock(clock);
        let ids: Vec<u64> = self.order.values().copied().collect();
        for id in ids {
            self.touched(id);
        }
    }

    /// Files job `id` under its state now: called after every change of a
    /// job's record, so the decision's [`index::Index`] stays true.
    pub fn touched(&mut self, id: u64) {
        if let Some(j) = self.jobs.get(&id) {
            self.index.set(j);
        }
    }

    /// Takes the next arrival number.
    pub fn take_seq(&mut self) -> i64 {
        let s = self.next_seq;
        self.next_seq += 1;
        s
    }

    /// Jobs in arrival order.
    pub fn in_order(&self) -> impl Iterator<Item = &Job> {
        self.order.values().filter_map(|id| self.jobs.get(id))
    }

    /// The waiting jobs in the policy's order at its last decision, then those
    /// it has not yet seen (submitted or held since), by arrival.
    pub fn waiting(&self) -> Vec<&Job> {
        let mut seen = std::collections::HashSet::new();
        let mut out: Vec<&Job> = self
            .policy_order
            .iter()
            .filter_map(|id| self.jobs.get(id))
            .filter(|j| j.waiting() && seen.insert(j.rec.id))
            .collect();
        out.extend(
            self.in_order()
                .filter(|j| j.waiting() && !seen.contains(&j.rec.id)),
        );
        out
    }

    /// How many jobs wait. A job just submitted is the last of them until the
    /// policy has seen it, so this is its position (and costs no more than
    /// counting: a burst of submissions stays linear).
    pub fn waiting_count(&self) -> u32 {
        self.jobs.values().filter(|j| j.waiting()).count() as u32
    }

    /// The place of waiting job `id` among the waiting jobs (1 = next), in the
    /// policy's order.
    pub fn position(&self, id: u64) -> Option<u32> {
        self.waiting()
            .iter()
            .position(|j| j.rec.id == id)
            .map(|p| p as u32 + 1)
    }

    /// The client's view of job `id` (or of array `id`, all its tasks in one).
    pub fn entry(&self, id: u64) -> Option<QueueEntry> {
        if let Some(tasks) = self.arrays.get(&id) {
            return views::summary(self, id, tasks);
        }
        let j = self.jobs.get(&id)?;
        Some(self.entry_of(j, None))
    }

    pub(crate) fn entry_of(&self, j: &Job, position: Option<u32>) -> QueueEntry {
        let secs = |ms: i64| (ms.max(0) / 1000) as u64;
        let position = if j.waiting() {
            position.or_else(|| self.position(j.rec.id))
        } else {
            None
        };
        QueueEntry {
            job: JobId(j.rec.id),
            user: j.rec.user.clone(),
            program: j.spec.argv.first().cloned().unwrap_or_default(),
            width: j.spec.width,
            length_s: j.spec.length_s,
            state: j.rec.state,
            position,
            rate: j.rate,
            estimated_start: j.estimated_start,
            submitted_at: secs(j.rec.submitted_ms),
            started_at: j.rec.started_ms.map(secs),
            ended_at: j.rec.ended_ms.map(secs),
            nodes: if matches!(j.rec.state, JobState::Running | JobState::Suspended) {
                j.rec.nodes.clone()
            } else {
                Vec::new()
            },
            attempts: j.rec.attempts,
            charged: j.rec.charged,
            exit: j.rec.exit,
            reason: j.rec.reason.clone(),
            array: j.rec.array.map(|(a, i)| ArrayTasks {
                array: JobId(a),
                runs: vec![(i, i)],
            }),
        }
    }

    /// A listing: jobs of `user` (every job for `None`), running first, then
    /// waiting in the policy's order, then dependent ones, then (with `ended`) ended ones, most recent
    /// first; unless `expand`, the tasks of one array in one state are one entry
    /// where the first of them would be.
    pub fn list(
        &self,
        user: Option<&str>,
        ended: bool,
        expand: bool,
        max: usize,
    ) -> Vec<QueueEntry> {
        let mine = |j: &&Job| user.is_none_or(|u| j.rec.user == u);
        let mut out: Vec<QueueEntry> = self
            .in_order()
            .filter(mine)
            .filter(|j| j.rec.state == JobState::Running)
            .map(|j| self.entry_of(j, None))
            .collect();
        for (pos, j) in self.waiting().into_iter().enumerate() {
            if mine(&j) {
                out.push(self.entry_of(j, Some(pos as u32 + 1)));
            }
        }
        // Then those waiting on other jobs (`--after`), by arrival.
        out.extend(
            self.in_order()
                .filter(mine)
                .filter(|j| j.rec.state == JobState::Dependent)
                .map(|j| self.entry_of(j, None)),
        );
        if ended {
            let mut done: Vec<&Job> = self.in_order().filter(mine).filter(|j| j.ended()).collect();
            done.sort_by_key(|j| std::cmp::Reverse((j.rec.ended_ms, j.rec.seq)));
            out.extend(done.into_iter().map(|j| self.entry_of(j, None)));
        }
        if !expand {
            out = views::fold(out);
        }
        out.truncate(max);
        out
    }
}

impl Queue {
    /// The live queue as the store's `loaded` rows make it (at start, and when a
    /// follower takes the lease over), deciding on a clock of `tick` from the
    /// stored epoch, and the debits still to deliver.
    pub fn from_loaded(
        loaded: crate::store::Loaded,
        tick: std::time::Duration,
    ) -> (Queue, Vec<crate::store::PendingDebit>) {
        let mut queue = Queue {
            epoch_ms: loaded.epoch_ms,
            ..Queue::default()
        };
        queue.set_clock(crate::sched::clock::Clock::new(loaded.epoch_ms, tick));
        // An array's spec is decoded once for all its tasks.
        let mut arrays: std::collections::HashMap<u64, Arc<JobSpec>> = Default::default();
        for rec in loaded.jobs {
            if let Some(spec) = rec.array.and_then(|(a, _)| arrays.get(&a)) {
                let spec = spec.clone();
                queue.insert(Job::new(rec, spec));
                continue;
            }
            match postcard::from_bytes::<JobSpec>(&rec.signed.spec) {
                Ok(spec) => {
                    let spec = Arc::new(spec);
                    if let Some((a, _)) = rec.array {
                        arrays.insert(a, spec.clone());
                    }
                    queue.insert(Job::new(rec, spec))
                }
                Err(e) => {
                    tracing::error!(seq = rec.seq, error = %e, "a stored job does not decode; skipped")
                }
            }
        }
        let pending_debits = loaded.debits;
        for (id, out, err) in loaded.output {
            if let Some(j) = queue.jobs.get_mut(&id) {
                j.out = [out, err];
            }
        }
        (queue, pending_debits)
    }
}
