//! Charging running jobs through accountd, as the policy says: the rate the
//! policy gave a job when it started (FIRSTPRICE its bid, PRIOFIFO its queue's
//! rate), the market price every running job pays when the policy sets one
//! (Vickrey), else the job's own bid. Rates are micro-credits per
//! processor-hour, as in the simulator; a job accrues `rate × width × time`
//! while it runs (not while suspended) and is debited at least every
//! [`DEBIT_PERIOD`] and at its end. Each debit is recorded in the store (charged
//! total, sequence number, and the debit itself in the journal) before the
//! [`crate::journal`] delivers it, keyed `(queue, job id, seq)` so a repeat
//! changes nothing. A user whose balance is not positive has their
//! queued jobs Held, and released when it is again.

use std::collections::HashMap;
use std::time::Duration;

use proto::batch::JobState;
use proto::node::JobId;

use super::Sched;
use crate::store::{PendingDebit, Write};

/// Most time between two debits of a running job.
pub const DEBIT_PERIOD: Duration = Duration::from_secs(60);

/// How often held jobs' owners' balances are looked at again.
pub const HELD_RECHECK: Duration = Duration::from_secs(5);

/// How long a positive balance is believed before a start.
pub const BALANCE_CACHE: Duration = Duration::from_secs(5);

/// How long a start waits for accountd's answer about a balance.
pub const BALANCE_WAIT: Duration = Duration::from_secs(1);

/// Rate × processors × milliseconds per micro-credit.
const UNIT: i128 = 3_600_000;

impl Sched {
    /// Accrues job `id`'s charges up to `now_ms`.
    pub(super) fn accrue(&mut self, id: u64, now_ms: i64) {
        let Some(run) = self.runs.get_mut(&id) else {
            return;
        };
        if !run.suspended {
            let ms = (now_ms - run.accrued_to_ms).max(0) as i128;
            run.owed += run.rate_ph as i128 * run.nodes.len() as i128 * ms;
        }
        run.accrued_to_ms = now_ms;
    }

    /// From `now_ms`, job `id` pays `rate_ph`.
    pub(super) fn set_rate(&mut self, id: u64, rate_ph: i64, now_ms: i64) {
        self.accrue(id, now_ms);
        if let Some(run) = self.runs.get_mut(&id) {
            run.rate_ph = rate_ph;
        }
    }

    /// Debits what job `id` owes when a period has passed (or `now` is set).
    pub(super) async fn settle(&mut self, id: u64, now: bool) {
        let now_ms = crate::unix_now_ms();
        let Some(run) = self.runs.get_mut(&id) else {
            return;
        };
        let due = (run.owed / UNIT) as i64;
        let period_over = now_ms - run.last_debit_ms >= DEBIT_PERIOD.as_millis() as i64;
        if due <= 0 || !(now || period_over) {
            return;
        }
        run.owed -= due as i128 * UNIT;
        let from = run.last_debit_ms;
        run.last_debit_ms = now_ms;
        let (rec, debit) = {
            let mut q = self.shared.lock_queue();
            let Some(j) = q.jobs.get_mut(&id) else {
                return;
            };
            j.rec.charged += due;
            j.rec.charge_seq += 1;
            let debit = PendingDebit {
                job: id,
                seq: j.rec.charge_seq,
                user: j.rec.user.clone(),
                account: j.account.clone(),
                amount: due,
                start_us: (from.max(0) as u64) * 1000,
                end_us: (now_ms.max(0) as u64) * 1000,
            };
            (j.rec.clone(), debit)
        };
        let write = Write::Charge(Box::new(rec), Box::new(debit.clone()));
        if let Err(e) = self.shared.store.write(write).await {
            tracing::error!(job = %JobId(id), error = %e, "cannot record a debit");
            return;
        }
        // Recorded: the journal delivers it, now or after a restart.
        let _ = self.shared.journal.send(debit);
    }

    /// Accrues every running job and debits those due (all of them with `now`);
    /// a job whose charges reach its spending ceiling is stopped there.
    pub(super) async fn charge_all(&mut self, now: bool) {
        let now_ms = crate::unix_now_ms();
        let ids: Vec<u64> = self.runs.keys().copied().collect();
        for id in ids {
            self.accrue(id, now_ms);
            if self.at_ceiling(id) {
                self.stop_at_ceiling(id, now_ms).await;
                continue;
            }
            self.settle(id, now).await;
        }
    }

    /// Whether job `id`'s charges (debited and accrued) reached its ceiling; if so,
    /// what it accrued past the ceiling is forgiven, so it is charged the ceiling
    /// at most.
    fn at_ceiling(&mut self, id: u64) -> bool {
        let (charged, max) = {
            let q = self.shared.lock_queue();
            match q.jobs.get(&id) {
                Some(j) => (j.rec.charged, j.max_cost),
                None => return false,
            }
        };
        let (Some(max), Some(run)) = (max, self.runs.get_mut(&id)) else {
            return false;
        };
        let left = i128::from(max.saturating_sub(charged).max(0)) * UNIT;
        if run.owed < left {
            return false;
        }
        run.owed = left;
        true
    }

    /// Stops job `id`, whose charges reached its ceiling: its ranks are killed,
    /// the last charge (up to the ceiling) debited, state `CostLimit`.
    async fn stop_at_ceiling(&mut self, id: u64, now_ms: i64) {
        if let Some(run) = self.runs.get_mut(&id) {
            if run.suspended {
                run.signal(proto::node::Signal::Cont);
            }
            run.signal(proto::node::Signal::Kill);
            // Nothing more accrues: it was charged its ceiling.
            run.rate_ph = 0;
        }
        let max = {
            let q = self.shared.lock_queue();
            q.jobs.get(&id).and_then(|j| j.max_cost).unwrap_or(0)
        };
        tracing::info!(job = %JobId(id), max_cost = max, "spending ceiling reached: stopped");
        let reason = format!(
            "stopped at its spending ceiling of {} credits (--max-cost)",
            money::format_credits(max)
        );
        self.end(id, JobState::CostLimit, None, Some(reason), now_ms)
            .await;
    }

    /// Why `user` cannot start a paid job now, if they cannot (balance not
    /// positive). A positive balance is believed for [`BALANCE_CACHE`]; when
    /// accountd does not answer within [`BALANCE_WAIT`] the job is not held (the
    /// decision loop never waits long on the ledger).
    pub(super) async fn dry(&mut self, user: &str) -> Option<String> {
        let now = tokio::time::Instant::now();
        if self
            .paid
            .get(user)
            .is_some_and(|t| now.duration_since(*t) < BALANCE_CACHE)
        {
            return None;
        }
        let asked = tokio::time::timeout(BALANCE_WAIT, self.shared.ledger.balance(user)).await;
        match asked {
            Ok(Ok(b)) if b <= 0 => Some(format!(
                "balance of {user} is {} credits; the job starts once it is positive",
                money::format_credits(b)
            )),
            Ok(Ok(_)) => {
                self.paid.insert(user.to_string(), now);
                None
            }
            Ok(Err(e)) => {
                tracing::debug!(%user, error = %e, "cannot check the balance before a start");
                None
            }
            Err(_) => {
                tracing::debug!(%user, "accountd is slow; starting without a balance check");
                None
            }
        }
    }

    /// Puts held jobs whose owner can pay again back in the queue.
    pub(super) async fn release_held(&mut self) {
        let now = tokio::time::Instant::now();
        if self
            .held_checked
            .is_some_and(|t| now.duration_since(t) < HELD_RECHECK)
        {
            return;
        }
        self.held_checked = Some(now);
        let held: Vec<(u64, String)> = {
            let q = self.shared.lock_queue();
            q.jobs
                .values()
                .filter(|j| j.rec.state == JobState::Held)
                .map(|j| (j.rec.id, j.rec.user.clone()))
                .collect()
        };
        let mut can: HashMap<String, bool> = HashMap::new();
        for (id, user) in held {
            let ok = match can.get(&user) {
                Some(ok) => *ok,
                None => {
                    let ok = self.dry(&user).await.is_none();
                    can.insert(user.clone(), ok);
                    ok
                }
            };
            if ok {
                self.update(id, |r| {
                    r.state = JobState::Queued;
                    r.reason = None;
                })
                .await;
            }
        }
    }
}
