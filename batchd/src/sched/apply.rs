//! Applying a policy's decision to the live queue, and a job's end. The order
//! is the simulator's: suspensions, then the market price, then starts. A start
//! places one rank per processor on the nodes with free processors, cheapest
//! first; records the start (state, attempt + 1, nodes, time) and waits for the
//! store to commit it; only then launches the ranks. A job whose owner's
//! balance is not positive is Held instead of started, and released once it is.

use std::collections::HashMap;

use proto::batch::JobState;
use proto::node::{ExitStatus, JobId, Signal};

use super::{Run, Sched, snapshot};
use crate::market::Node;
use crate::store::Write;

/// How long a node that lost a rank gets no new ranks (the selectors may still
/// list a node that died until its announcements time out).
pub const SUSPECT_FOR: std::time::Duration = std::time::Duration::from_secs(10);

/// Micro-credits per CPU-minute to micro-credits per processor-hour.
pub fn per_hour(per_minute: i64) -> i64 {
    per_minute.saturating_mul(60)
}

impl Sched {
    /// One decision, at `tick_ms` (a tick, or the end it gives the processors of):
    /// snapshot, policy, apply. Starts and suspensions are recorded at that instant
    /// (the policy's `since` and work done), however late the decision runs. The
    /// policy decides over entries borrowed from the queue, so the queue stays
    /// locked while it does (a decision is work on memory, milliseconds, with no
    /// waiting in it); what it decided is applied after.
    pub(super) async fn decide(&mut self, tick_ms: i64) {
        let now_ms = crate::unix_now_ms();
        let procs = self.shared.market_processors();
        let (started, epoch, d, suspend, starts, reserved, order) = {
            let q = self.shared.lock_queue();
            let jobs = snapshot::collect(&q, tick_ms, procs);
            if jobs.waiting.is_empty() {
                return;
            }
            let started = std::time::Instant::now();
            let now = crate::terms::secs(q.epoch_ms, tick_ms);
            let snap = jobs.snapshot(now, procs);
            let (d, order) = self.policy.decide_and_order(&snap);
            let suspend: Vec<u64> = d.suspend.iter().filter_map(|s| jobs.id_of(*s)).collect();
            let starts: Vec<(u64, Option<i64>)> = d
                .start
                .iter()
                .filter_map(|seq| {
                    let rate = d.rates.iter().find(|r| r.0 == *seq).map(|r| r.1);
                    Some((jobs.id_of(*seq)?, rate.or(d.price)))
                })
                .collect();
            let reserved = d
                .reserved
                .and_then(|(seq, at)| Some((jobs.id_of(seq)?, at)));
            let order = jobs.waiting_ids_at(&order);
            (started, q.epoch_ms, d, suspend, starts, reserved, order)
        };
        for id in suspend {
            self.suspend(id, now_ms).await;
        }
        if let Some(p) = d.price {
            let ids: Vec<u64> = self.runs.keys().copied().collect();
            for id in ids {
                self.set_rate(id, p, now_ms);
            }
        }
        for (id, rate) in starts {
            self.start(id, rate, now_ms).await;
        }
        let mut q = self.shared.lock_queue();
        q.policy_order = order;
        // Only the job the last decision reserved for has an estimated start.
        if let Some(j) = q.estimated.take().and_then(|id| q.jobs.get_mut(&id)) {
            j.estimated_start = None;
        }
        if let Some((id, at)) = reserved
            && let Some(j) = q.jobs.get_mut(&id)
        {
            j.estimated_start = Some(((epoch / 1000) + at).max(0) as u64);
            q.estimated = Some(id);
        }
        self.shared.metrics.decided(started);
    }

    /// Free processors on each node: its share less the ranks of running jobs
    /// (nodes that just lost a rank are left out for [`SUSPECT_FOR`]).
    fn free(&mut self) -> Vec<(Node, u32)> {
        let mut used: HashMap<&str, u32> = HashMap::new();
        for run in self.runs.values().filter(|r| !r.suspended) {
            for n in &run.nodes {
                *used.entry(n.name.as_str()).or_default() += 1;
            }
        }
        let now = tokio::time::Instant::now();
        self.suspect.retain(|_, until| *until > now);
        let market = self.shared.lock_market();
        let mut free: Vec<(Node, u32)> = market
            .nodes
            .iter()
            .filter(|n| !self.suspect.contains_key(&n.name))
            .map(|n| {
                let u = used.get(n.name.as_str()).copied().unwrap_or(0);
                (n.clone(), n.procs.saturating_sub(u))
            })
            .filter(|(_, f)| *f > 0)
            .collect();
        free.sort_by(|a, b| (a.0.price, &a.0.name).cmp(&(b.0.price, &b.0.name)));
        free
    }

    /// Starts (or resumes) job `id`, charged `rate` per processor-hour (its own
    /// bid when the policy sets none).
    async fn start(&mut self, id: u64, rate: Option<i64>, now_ms: i64) {
        let Some((state, spec, signed, user, array)) = ({
            let q = self.shared.lock_queue();
            q.jobs.get(&id).map(|j| {
                (
                    j.rec.state,
                    j.spec.clone(),
                    j.rec.signed.clone(),
                    j.rec.user.clone(),
                    j.rec.array,
                )
            })
        }) else {
            return;
        };
        let rate_ph = rate.unwrap_or_else(|| per_hour(crate::queue::bid_rate(&spec)));
        let decided_ms = self.decided;
        if state == JobState::Suspended {
            tracing::info!(job = %JobId(id), rate_ph, at_ms = now_ms, decided_ms, "resumed");
            if let Some(run) = self.runs.get_mut(&id) {
                run.signal(Signal::Cont);
                run.suspended = false;
                run.rate_ph = rate_ph;
                run.accrued_to_ms = now_ms;
            }
            self.update(id, |r| {
                r.state = JobState::Running;
                r.started_ms = Some(decided_ms);
            })
            .await;
            return;
        }
        if state != JobState::Queued {
            return;
        }
        if self.shared.lease.epoch_now() != Some(self.epoch) {
            tracing::warn!(job = %JobId(id), epoch = self.epoch, "not started: the lease has run out");
            return;
        }
        if let Some(why) = self.dry(&user).await {
            tracing::info!(job = %JobId(id), %user, "held: {why}");
            self.update(id, |r| {
                r.state = JobState::Held;
                r.reason = Some(why.clone());
            })
            .await;
            return;
        }
        let mut free = self.free();
        let mut nodes = Vec::new();
        'place: for (node, f) in free.iter_mut() {
            while *f > 0 {
                if nodes.len() == spec.width as usize {
                    break 'place;
                }
                nodes.push(node.clone());
                *f -= 1;
            }
        }
        if nodes.len() < spec.width as usize {
            tracing::debug!(job = %JobId(id), "not enough free processors to place it now");
            return;
        }
        let names: Vec<String> = nodes.iter().map(|n| n.name.clone()).collect();
        let mut attempt = 0;
        let recorded = self
            .update(id, |r| {
                r.state = JobState::Running;
                attempt = r.attempts;
                r.attempts += 1;
                r.started_ms = Some(decided_ms);
                r.nodes = names.clone();
                r.reason = None;
                r.done_ms = 0;
            })
            .await;
        if !recorded {
            return;
        }
        // Checked again after the commit: a leader paused while it waited for it
        // launches nothing; the start stays recorded, and the successor settles it.
        if self.shared.lease.epoch_now() != Some(self.epoch) {
            tracing::warn!(job = %JobId(id), epoch = self.epoch, "not launched: the lease ran out during the commit");
            return;
        }
        // The spec's rate is still an `i64` (`Worth::Rate`), checked not negative when it
        // was signed (`certs::jobsign`); a utility's rate is never negative.
        let bid = money::Bid::new(crate::queue::bid_rate(&spec)).unwrap_or(money::Bid::ZERO);
        let ctl = nodes
            .iter()
            .enumerate()
            .map(|(rank, node)| {
                crate::rank::spawn(
                    self.shared.clone(),
                    node.clone(),
                    id,
                    proto::batch::SignedLaunch {
                        job: (*signed).clone(),
                        attempt,
                        rank: rank as u32,
                        bid,
                        nodes: names.clone(),
                        // The instant it was decided on, however late the decision
                        // ran (`REXEC_JOB_START_MS` on the node).
                        started_ms: decided_ms,
                        array_index: array.map(|a| a.1),
                        kill_wait_ms: u64::try_from(self.shared.cfg.kill_wait.as_millis()).ok(),
                        epoch: self.epoch,
                    },
                    self.events.clone(),
                )
            })
            .collect();
        tracing::info!(
            job = %JobId(id),
            attempt,
            epoch = self.epoch,
            nodes = ?names,
            rate_ph,
            at_ms = now_ms,
            decided_ms,
            "started"
        );
        self.runs.insert(
            id,
            Run {
                attempt,
                exits: vec![None; nodes.len()],
                limit: None,
                nodes,
                ctl,
                suspended: false,
                rate_ph,
                accrued_to_ms: now_ms,
                owed: 0,
                last_debit_ms: now_ms,
            },
        );
    }

    async fn suspend(&mut self, id: u64, now_ms: i64) {
        self.accrue(id, now_ms);
        let Some(run) = self.runs.get_mut(&id) else {
            return;
        };
        run.signal(Signal::Stop);
        run.suspended = true;
        if let Some(j) = self.shared.lock_queue().jobs.get_mut(&id) {
            j.preempted += 1;
        }
        let decided_ms = self.decided;
        self.update(id, |r| {
            r.state = JobState::Suspended;
            r.done_ms += (decided_ms - r.started_ms.unwrap_or(decided_ms)).max(0);
        })
        .await;
        tracing::info!(job = %JobId(id), at_ms = now_ms, decided_ms, "suspended");
    }

    /// Ends job `id` in `state`, as heard at `at_ms`: final charge, ranks let
    /// go, recorded.
    pub(super) async fn end(
        &mut self,
        id: u64,
        state: JobState,
        exit: Option<ExitStatus>,
        reason: Option<String>,
        at_ms: i64,
    ) {
        self.accrue(id, crate::unix_now_ms());
        self.settle(id, true).await;
        self.runs.remove(&id);
        self.update(id, |r| {
            // An ended job's done time is all the time it ran (the history's elapsed).
            if r.state == JobState::Running {
                r.done_ms += (at_ms - r.started_ms.unwrap_or(at_ms)).max(0);
            }
            r.state = state;
            r.ended_ms = Some(at_ms);
            r.exit = exit;
            r.reason = reason.clone();
        })
        .await;
        tracing::info!(job = %JobId(id), ?state, ?exit, at_ms, "ended");
    }

    /// A rank of job `id` was lost: the others are killed, and the job is
    /// requeued (charged for the time it ran) unless its attempts are used up.
    pub(super) async fn lost(&mut self, id: u64, why: String) {
        if let Some(run) = self.runs.get(&id) {
            run.signal(Signal::Kill);
        }
        let now_ms = crate::unix_now_ms();
        self.accrue(id, now_ms);
        self.settle(id, true).await;
        self.runs.remove(&id);
        let (attempts, max) = {
            let q = self.shared.lock_queue();
            match q.jobs.get(&id) {
                Some(j) => (j.rec.attempts, j.spec.max_attempts),
                None => return,
            }
        };
        if attempts >= max {
            self.end(
                id,
                JobState::Failed,
                None,
                Some(format!("{why}; no attempts left ({attempts} of {max})")),
                now_ms,
            )
            .await;
            return;
        }
        self.update(id, |r| {
            r.state = JobState::Queued;
            r.nodes.clear();
            r.done_ms = 0;
            r.reason = Some(format!("requeued: {why}"));
        })
        .await;
        tracing::info!(job = %JobId(id), "requeued after a lost rank");
    }

    /// Changes job `id`'s record in the store, then in memory; whether the store
    /// took it. Status answers and `wait` read memory, so they never report a change
    /// a crash before the commit would undo. Memory takes the change even when the
    /// store failed (logged), so the queue goes on from what happened; `change` is
    /// applied to the stored copy and then to the live record, keeping what other
    /// tasks changed in between (a rank's truncated output).
    pub(super) async fn update(
        &self,
        id: u64,
        mut change: impl FnMut(&mut crate::store::JobRecord),
    ) -> bool {
        let rec = {
            let q = self.shared.lock_queue();
            let Some(j) = q.jobs.get(&id) else {
                return false;
            };
            let mut rec = j.rec.clone();
            change(&mut rec);
            rec
        };
        let stored = match self.shared.store.write(Write::Update(Box::new(rec))).await {
            Ok(()) => true,
            Err(e) => {
                tracing::error!(job = %JobId(id), error = %e, "cannot record the job's change");
                false
            }
        };
        let mut q = self.shared.lock_queue();
        if let Some(j) = q.jobs.get_mut(&id) {
            change(&mut j.rec);
            q.touched(id);
        }
        stored
    }
}
