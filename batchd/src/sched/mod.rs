//! The decision loop: the only writer of a job's state once it is queued. On
//! each tick of the queue's [`clock`], and at each job's end (the processors it
//! frees are given out at once, see [`clock`]), it builds the policy's
//! [`snapshot`] of everything that happened since the last decision, calls the configured
//! `batch::policy::Policy`, and applies the decision ([`apply`]): suspends, market price, starts (each recorded in the
//! store, attempt counted, before any rank is launched), reservations. It
//! hears every rank's start, exit or loss ([`crate::rank`]), ends or requeues
//! jobs, serves cancels ([`Command`]), charges running jobs ([`charge`]), and
//! after a restart settles the jobs the store says were running ([`recover`]).
//! It runs only while this instance holds the queue's lease ([`lead`]), and
//! every launch and kill it sends carries the lease's epoch.

pub mod apply;
mod cancel_array;
pub mod charge;
pub mod clock;
pub mod depend;
pub mod lead;
pub mod recover;
pub mod snapshot;

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use certs::PeerIdentity;
use proto::batch::{BatchError, BatchErrorCode, JobState, QueueEntry};
use proto::node::{ExitStatus, JobId, Signal};
use tokio::sync::{mpsc, oneshot};

use crate::Shared;
use crate::market::Node;
use crate::rank::{Event, RankEvent};

/// A request to the loop.
#[derive(Debug)]
pub enum Command {
    /// Cancel a job (its ownership already checked).
    Cancel {
        /// The job.
        id: u64,
        /// The answer.
        reply: oneshot::Sender<Result<QueueEntry, BatchError>>,
    },
}

/// A started job's ranks.
pub struct Run {
    /// Which start of the job.
    pub attempt: u32,
    /// Node of each rank.
    pub nodes: Vec<Node>,
    /// Signals to each rank's session.
    pub ctl: Vec<mpsc::UnboundedSender<Signal>>,
    /// Each rank's exit.
    pub exits: Vec<Option<ExitStatus>>,
    /// The first limit a rank hit (time or memory): the state the job ends in, and
    /// the node's words for it.
    pub limit: Option<(JobState, String)>,
    /// Stopped by a preemption.
    pub suspended: bool,
    /// Charge rate now, micro-credits per processor-hour.
    pub rate_ph: i64,
    /// Charges are accrued up to here (UTC ms).
    pub accrued_to_ms: i64,
    /// Accrued and not yet debited, micro-credits × 3 600 000.
    pub owed: i128,
    /// Last debit (UTC ms).
    pub last_debit_ms: i64,
}

impl Run {
    /// Signals every rank.
    pub fn signal(&self, s: Signal) {
        for c in &self.ctl {
            let _ = c.send(s);
        }
    }
}

/// The loop's state.
pub struct Sched {
    shared: Arc<Shared>,
    policy: Box<dyn batch::policy::Policy>,
    runs: HashMap<u64, Run>,
    events: mpsc::UnboundedSender<RankEvent>,
    recovering: recover::Recovering,
    held_checked: Option<tokio::time::Instant>,
    suspect: HashMap<String, tokio::time::Instant>,
    paid: HashMap<String, tokio::time::Instant>,
    /// The instant of the last decision (UTC ms): a tick, or a job's end.
    decided: i64,
    /// The last tick whose work was done (UTC ms).
    ticked: i64,
    /// The instant of the latest end handled and not decided on yet (UTC ms).
    freed: Option<i64>,
    /// Ranks' news taken from the channel and not handled yet, in order.
    heard: VecDeque<RankEvent>,
    /// The lease's epoch this loop runs at (0: SQLite).
    epoch: u64,
}

/// Asks the loop to cancel job `id` (after `ops` checked `peer` may).
pub async fn cancel(
    shared: &Shared,
    peer: &PeerIdentity,
    id: JobId,
) -> Result<QueueEntry, BatchError> {
    {
        let q = shared.lock_queue();
        q.owned(peer, id)?;
    }
    if shared.lease.epoch_now().is_none() {
        return Err(BatchError::new(
            BatchErrorCode::Unavailable,
            "this batchd does not lead the queue now (another instance does); retry at another instance or shortly",
        ));
    }
    let (reply, rx) = oneshot::channel();
    let gone = || {
        BatchError::new(
            BatchErrorCode::Unavailable,
            "the queue is shutting down; retry",
        )
    };
    shared
        .commands
        .send(Command::Cancel { id: id.0, reply })
        .map_err(|_| gone())?;
    rx.await.map_err(|_| gone())?
}

/// Runs the loop until `shutdown` completes. The policies are not `Send`, so
/// the loop runs on the caller's task (the daemon joins it with its server).
pub async fn run(
    shared: Arc<Shared>,
    commands: &mut mpsc::UnboundedReceiver<Command>,
    epoch: u64,
    shutdown: impl std::future::Future,
) {
    let cfg = &shared.cfg;
    let Some(policy) = batch::policy::by_name(
        &cfg.policy,
        cfg.seed,
        batch::policy::ga::GaConfig::default(),
    ) else {
        tracing::error!(policy = %cfg.policy, "unknown policy; the queue does not schedule");
        return;
    };
    let (events, mut news) = mpsc::unbounded_channel();
    let recovering = recover::Recovering::from_queue(&shared);
    let mut s = Sched {
        shared: shared.clone(),
        policy,
        runs: HashMap::new(),
        events,
        recovering,
        held_checked: None,
        suspect: HashMap::new(),
        paid: HashMap::new(),
        decided: i64::MIN,
        ticked: i64::MIN,
        freed: None,
        heard: VecDeque::new(),
        epoch,
    };
    // The queue's own clock: its jobs' policy entries were built on it.
    let clock = shared.lock_queue().clock();
    s.decided = clock.tick_at(crate::unix_now_ms());
    s.ticked = s.decided;
    let mut tick = clock.interval(crate::unix_now_ms());
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            _ = &mut shutdown => break,
            _ = tick.tick() => {
                let due = clock.due(crate::unix_now_ms());
                s.advance(clock, &mut news, Some(due)).await;
            }
            Some(ev) = news.recv() => {
                s.heard.push_back(ev);
                s.advance(clock, &mut news, None).await;
            }
            Some(cmd) = commands.recv() => {
                s.advance(clock, &mut news, None).await;
                match cmd {
                    Command::Cancel { id, reply } => {
                        let running = s.runs.len();
                        let r = s.cancel(id).await;
                        let _ = reply.send(r);
                        // A cancel that freed processors is an end like any other.
                        if s.runs.len() < running {
                            s.freed = Some(crate::unix_now_ms());
                            s.advance(clock, &mut news, None).await;
                        }
                    }
                }
            }
        }
    }
    // Leaving: every session drops, so the nodes kill the ranks; the store
    // still says Running, and the next start requeues them (`recover`).
    s.charge_all(true).await;
}

impl Sched {
    /// The work of the tick at `tick_ms`, once: settle what a restart left,
    /// release held jobs, charge, decide.
    async fn on_tick(&mut self, tick_ms: i64) {
        if tick_ms <= self.ticked {
            return;
        }
        self.ticked = tick_ms;
        if self.epoch > 0 {
            lead::merge_arrivals(&self.shared).await;
        }
        self.recover().await;
        self.release_held().await;
        self.resolve_dependencies().await;
        self.charge_all(false).await;
        self.decided = self.decided.max(tick_ms);
        self.decide(tick_ms).await;
    }

    /// The decision at the end heard at `end_ms`: the processors it freed are
    /// given out now, not at the next tick. A decision already made at or after
    /// `end_ms` (news that reached the loop after a decision it precedes, by a
    /// hair) moves it to just after that one.
    async fn on_end(&mut self, end_ms: i64) {
        let at = end_ms.max(self.decided.saturating_add(1));
        self.decided = at;
        self.decide(at).await;
    }

    /// Handles the ranks' news and the ticks that came due, in the clock's
    /// order: news heard before a tick (or at it) is handled before that tick's
    /// decision, news heard after it only after, however late the loop gets to
    /// either (a loaded machine, a slow commit, a timer that lost a race with
    /// the news). A job's end is decided on at the instant it was heard, once
    /// every news of that instant is handled, before any later news or tick
    /// (an end that falls on a tick is that tick's decision). `timer` is the tick
    /// a timer firing now stands for; a tick whose time has passed is decided
    /// even if its timer has not fired yet.
    async fn advance(
        &mut self,
        clock: clock::Clock,
        news: &mut mpsc::UnboundedReceiver<RankEvent>,
        mut timer: Option<i64>,
    ) {
        loop {
            while let Ok(ev) = news.try_recv() {
                self.heard.push_back(ev);
            }
            let due = timer
                .take()
                .unwrap_or(i64::MIN)
                .max(clock.tick_at(crate::unix_now_ms()));
            let tick_due = due > self.ticked;
            let next = self.heard.front().map(|ev| ev.at_ms);
            match (next, self.freed) {
                // News before the pending end's decision is due (or at its instant).
                (Some(at), freed) if freed.is_none_or(|f| at <= f) && (!tick_due || at <= due) => {
                    if let Some(ev) = self.heard.pop_front() {
                        let running = self.runs.len();
                        self.on_event(ev).await;
                        if self.runs.len() < running {
                            self.freed = Some(self.freed.unwrap_or(at).max(at));
                        }
                    }
                }
                // An end's decision, unless the tick due now falls on it.
                (_, Some(f)) if !(tick_due && f == due) => {
                    self.freed = None;
                    self.on_end(f).await;
                }
                _ if tick_due => {
                    self.freed = None;
                    self.on_tick(due).await;
                }
                _ => break,
            }
        }
    }

    /// A rank's news (the processors a job frees are given out by the decision
    /// at its end, see [`Sched::advance`]).
    async fn on_event(&mut self, ev: RankEvent) {
        let Some(run) = self.runs.get_mut(&ev.job) else {
            return;
        };
        if run.attempt != ev.attempt {
            return;
        }
        match ev.event {
            Event::Started => {}
            Event::Exit(status) => {
                run.exits[ev.rank as usize] = Some(status);
                if run.exits.iter().all(Option::is_some) {
                    let exit = run
                        .exits
                        .iter()
                        .flatten()
                        .find(|e| !matches!(e, ExitStatus::Code(0)))
                        .or(run.exits[0].as_ref())
                        .copied();
                    let (state, reason) = match run.limit.take() {
                        Some((state, why)) => (state, Some(why)),
                        None => (JobState::Finished, None),
                    };
                    self.end(ev.job, state, exit, reason, ev.at_ms).await;
                }
            }
            Event::Limit(state, why) => {
                tracing::info!(job = %JobId(ev.job), rank = ev.rank, ?state, "limit: {why}");
                if run.limit.is_none() {
                    run.limit = Some((state, why));
                }
                if state == JobState::OutOfMemory {
                    // A rank killed for memory ends the job, as a rank killed by a
                    // signal ends an interactive one.
                    run.signal(Signal::Kill);
                }
            }
            Event::Lost(why) => {
                tracing::warn!(job = %JobId(ev.job), rank = ev.rank, "rank lost: {why}");
                if let Some(node) = run.nodes.get(ev.rank as usize) {
                    let until = tokio::time::Instant::now() + apply::SUSPECT_FOR;
                    self.suspect.insert(node.name.clone(), until);
                }
                self.lost(ev.job, why).await;
            }
            Event::Refused(why) => {
                // The job's own fault: it would be refused again anywhere it went,
                // and the node is in order, so it stays in service.
                tracing::info!(job = %JobId(ev.job), rank = ev.rank, "launch refused: {why}");
                run.signal(Signal::Kill);
                let reason = format!("launch refused: {why}");
                self.end(ev.job, JobState::Failed, None, Some(reason), ev.at_ms)
                    .await;
            }
        }
    }

    async fn cancel(&mut self, id: u64) -> Result<QueueEntry, BatchError> {
        let tasks = self.shared.lock_queue().arrays.get(&id).cloned();
        if let Some(tasks) = tasks {
            return self.cancel_array(id, tasks).await;
        }
        let state = {
            let q = self.shared.lock_queue();
            q.jobs.get(&id).map(|j| j.rec.state)
        };
        match state {
            None => {
                return Err(BatchError::new(
                    BatchErrorCode::NoSuchJob,
                    format!("no job {}", JobId(id)),
                ));
            }
            Some(state) if state.is_ended() => {}
            Some(_) => {
                if let Some(run) = self.runs.get(&id) {
                    if run.suspended {
                        run.signal(Signal::Cont);
                    }
                    run.signal(Signal::Kill);
                }
                self.recovering.forget(id);
                let now_ms = crate::unix_now_ms();
                self.end(
                    id,
                    JobState::Cancelled,
                    None,
                    Some("cancelled".into()),
                    now_ms,
                )
                .await;
            }
        }
        let q = self.shared.lock_queue();
        q.entry(id).ok_or_else(|| {
            BatchError::new(BatchErrorCode::NoSuchJob, format!("no job {}", JobId(id)))
        })
    }
}
