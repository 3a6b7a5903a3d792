//! Who leads: several batchd may serve one queue from one PostgreSQL database,
//! and exactly one of them (the leader) runs the decision loop and launches.
//! The lease is a row of the `lease` table (queue name, holder, epoch,
//! `expires_at`), kept on a thread of its own with its own connection: every
//! third of `[store] lease` (3 s by default; a follower every sixth) each
//! instance runs one
//!
//! ```sql
//! UPDATE lease SET epoch = CASE WHEN holder = $me THEN epoch ELSE epoch + 1 END,
//!        holder = $me, expires_at = now() + $lease
//!  WHERE queue = $queue AND (holder = $me OR expires_at < now()) RETURNING epoch
//! ```
//!
//! so the holder renews and, once it stops renewing, the first follower to try
//! takes the lease with the next epoch. The instance counts its lease from the
//! moment it sent the UPDATE, so its own view ends no later than the database's;
//! when it cannot renew (the database lost, the process paused) its view runs
//! out and it stops launching at once, whatever its loop was doing.
//!
//! A leader's write transaction holds the row `FOR SHARE` (below); when its host
//! drops off the network inside one, PostgreSQL ends the session once it has sat
//! idle in the transaction for `accountd::store::pg::IDLE_IN_TRANSACTION_LIMIT`
//! (2 s, set on every session), and the row is free for the next leader.
//!
//! The epoch fences a replaced leader twice: its job changes are written only
//! while the lease row still has its epoch (`store::Write::Fenced`), and every
//! launch and kill it sends carries the epoch, which rexecd refuses when it has
//! seen a higher one from the queue. A queue on SQLite has one instance per file:
//! its lease is held for ever, at epoch 0, and nothing changes for it.

use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use crate::store::{Location, PgConfig, StoreError};

/// The default `[store] lease`: how long a lease lasts unrenewed.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(3);

/// What this instance knows of the lease now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// Another instance leads, or the database cannot be reached.
    Follower,
    /// This instance leads at `epoch` until `until` (for ever when `None`: SQLite).
    Leader {
        /// The lease's epoch.
        epoch: u64,
        /// When this instance's view of the lease ends.
        until: Option<Instant>,
    },
}

impl State {
    /// The epoch, when this instance leads now.
    pub fn epoch_now(&self) -> Option<u64> {
        match *self {
            State::Leader { epoch, until } if until.is_none_or(|u| Instant::now() < u) => {
                Some(epoch)
            }
            _ => None,
        }
    }
}

/// The lease as the rest of the daemon sees it.
#[derive(Debug, Clone)]
pub struct Lease {
    rx: watch::Receiver<State>,
    /// The queue's name (the lease row's key, and the name rexecd fences by).
    pub queue: String,
}

impl Lease {
    /// A lease held for ever at epoch 0 (a queue on SQLite).
    pub fn for_ever(queue: &str) -> Lease {
        let (tx, rx) = watch::channel(State::Leader {
            epoch: 0,
            until: None,
        });
        // Dropped sender: the value stays; `changed` then never fires.
        drop(tx);
        Lease {
            rx,
            queue: queue.to_string(),
        }
    }

    /// The epoch, when this instance leads now.
    pub fn epoch_now(&self) -> Option<u64> {
        self.rx.borrow().epoch_now()
    }

    /// Waits until this instance leads; returns the epoch.
    pub async fn acquired(&self) -> u64 {
        let mut rx = self.rx.clone();
        loop {
            let state = *rx.borrow_and_update();
            if let Some(e) = state.epoch_now() {
                return e;
            }
            if rx.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }

    /// Completes once this instance no longer leads at `epoch`: another took
    /// the lease, or its view ran out unrenewed.
    pub async fn lost(&self, epoch: u64) {
        let mut rx = self.rx.clone();
        loop {
            let state = *rx.borrow_and_update();
            let until = match state {
                State::Leader { epoch: e, until } if e == epoch => until,
                _ => return,
            };
            if state.epoch_now().is_none() {
                return;
            }
            match until {
                Some(u) => {
                    tokio::select! {
                        r = rx.changed() => if r.is_err() { tokio::time::sleep_until(u).await; return; },
                        _ = tokio::time::sleep_until(u) => {}
                    }
                }
                None => {
                    if rx.changed().await.is_err() {
                        std::future::pending::<()>().await;
                    }
                }
            }
        }
    }
}

/// Starts keeping the lease of `queue` at `at`: for ever on SQLite; on
/// PostgreSQL a thread that tries to take or renew it every third of `lease`
/// and stops when every [`Lease`] is dropped.
pub fn start(at: &Location, queue: &str, lease: Duration) -> Result<Lease, StoreError> {
    let cfg = match at {
        Location::Sqlite(_) => return Ok(Lease::for_ever(queue)),
        Location::Postgres(cfg) => cfg.clone(),
    };
    let me = format!(
        "{}:{}:{:x}",
        hostname(),
        std::process::id(),
        crate::unix_now_ms()
    );
    let (tx, rx) = watch::channel(State::Follower);
    let name = queue.to_string();
    std::thread::Builder::new()
        .name("batchd-lease".into())
        .spawn(move || keep(cfg, name, me, lease, tx))
        .map_err(StoreError::Thread)?;
    Ok(Lease {
        rx,
        queue: queue.to_string(),
    })
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "batchd".into())
}

const TAKE_SQL: &str = "UPDATE lease SET
        epoch = CASE WHEN holder = $2 THEN epoch ELSE epoch + 1 END,
        holder = $2,
        expires_at = now() + make_interval(secs => $3)
    WHERE queue = $1 AND (holder = $2 OR expires_at < now())
    RETURNING epoch";

/// One attempt: the epoch when this instance holds the lease now.
fn take(
    c: &mut postgres::Client,
    queue: &str,
    me: &str,
    lease: Duration,
) -> Result<Option<u64>, postgres::Error> {
    c.execute(
        "INSERT INTO lease(queue, holder, epoch, expires_at) VALUES ($1, '', 0, to_timestamp(0))
         ON CONFLICT DO NOTHING",
        &[&queue],
    )?;
    let secs = lease.as_secs_f64();
    let row = c.query_opt(TAKE_SQL, &[&queue, &me, &secs])?;
    Ok(row.map(|r| r.get::<_, i64>(0) as u64))
}

fn keep(cfg: PgConfig, queue: String, me: String, lease: Duration, tx: watch::Sender<State>) {
    let period = lease / 3;
    let mut client: Option<postgres::Client> = None;
    let mut failing = false;
    while !tx.is_closed() {
        let sent = Instant::now();
        if client.as_ref().is_some_and(postgres::Client::is_closed) {
            client = None;
        }
        if client.is_none() {
            match crate::store::pg::connect(&cfg) {
                Ok(c) => client = Some(c),
                Err(e) if !failing => {
                    tracing::warn!(error = %e, "lease: cannot reach the database; not leading");
                    failing = true;
                }
                Err(_) => {}
            }
        }
        if let Some(c) = client.as_mut() {
            match take(c, &queue, &me, lease) {
                Ok(got) => {
                    let recovered = std::mem::replace(&mut failing, false);
                    let now = match got {
                        Some(epoch) => State::Leader {
                            epoch,
                            until: Some(sent + lease),
                        },
                        None => State::Follower,
                    };
                    let before = *tx.borrow();
                    match (before, now) {
                        // Renewed after the database was out of reach: said, so that
                        // the log's last word on the lease is not "cannot renew".
                        (State::Leader { epoch: a, .. }, State::Leader { epoch: b, .. })
                            if a == b && recovered =>
                        {
                            tracing::info!(%queue, epoch = b, holder = %me,
                                "lease taken: leading again, the database back")
                        }
                        (State::Leader { epoch: a, .. }, State::Leader { epoch: b, .. })
                            if a == b => {}
                        (_, State::Leader { epoch, .. }) => {
                            tracing::info!(%queue, epoch, holder = %me, "lease taken: leading")
                        }
                        (State::Leader { epoch, .. }, State::Follower) => {
                            tracing::warn!(%queue, epoch, "lease lost to another instance")
                        }
                        _ => {}
                    }
                    tx.send_replace(now);
                }
                Err(e) => {
                    if !failing {
                        tracing::warn!(error = %accountd::store::pg::describe(&e),
                            "lease: cannot renew; leading stops when it runs out");
                    }
                    failing = true;
                    client = None;
                }
            }
        }
        // A follower tries twice as often as the leader renews: it takes an
        // expired lease within a sixth of `lease` of its expiry.
        let period = match *tx.borrow() {
            State::Leader { .. } => period,
            State::Follower => period / 2,
        };
        std::thread::sleep(period.saturating_sub(sent.elapsed()));
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use crate::store::Location;
    use crate::store::testdb::{Kind, TestDb};

    use super::take;

    /// The lease is short here, so that it lapses soon.
    const LEASE: Duration = Duration::from_millis(500);

    /// Instance `a` takes the lease, begins a fenced write transaction (the lease row
    /// `FOR SHARE`, as the writer does) and falls silent, as a leader does whose host
    /// dropped off the network between two statements; once its lease has lapsed,
    /// instance `b` tries to take it, waiting at most `wait`. The epoch `b` took, or
    /// why it could not.
    fn takeover_after_a_silent_leader(db: &TestDb, a_idle_limit: bool, wait: &str) -> String {
        let Location::Postgres(cfg) = db.location() else {
            unreachable!("a PostgreSQL place")
        };
        let mut a = crate::store::pg::connect(&cfg).unwrap();
        crate::store::pg::prepare(&mut a, 0).unwrap();
        if !a_idle_limit {
            a.batch_execute("SET idle_in_transaction_session_timeout = 0")
                .unwrap();
        }
        assert!(take(&mut a, "q", "a", LEASE).unwrap().is_some());
        a.batch_execute("BEGIN; SELECT 1 FROM lease WHERE queue = 'q' FOR SHARE")
            .unwrap();
        std::thread::sleep(LEASE + Duration::from_millis(100));
        let mut b = crate::store::pg::connect(&cfg).unwrap();
        b.batch_execute(&format!("SET statement_timeout = '{wait}'"))
            .unwrap();
        let started = Instant::now();
        let got = match take(&mut b, "q", "b", LEASE) {
            Ok(e) => format!("epoch {e:?}"),
            Err(e) => accountd::store::pg::describe(&e),
        };
        eprintln!(
            "idle limit {a_idle_limit}: {got} after {:?}",
            started.elapsed()
        );
        drop(a);
        got
    }

    /// A leader whose host vanished inside a write transaction does not hold the
    /// lease row: PostgreSQL ends its session at the idle limit
    /// (`accountd::store::pg::IDLE_IN_TRANSACTION_LIMIT`) and the next instance
    /// takes the lease. Without the limit (the control), the next instance waits on
    /// the row for as long as it is let (3 s here; a cut host, until it is back).
    #[test]
    fn a_leader_silent_inside_a_transaction_does_not_keep_the_lease() {
        let db = TestDb::new(Kind::Pg);
        let held = takeover_after_a_silent_leader(&db, false, "3s");
        assert!(
            held.contains("statement timeout"),
            "without the idle limit the lease row stays locked: {held}"
        );
        let db = TestDb::new(Kind::Pg);
        let taken = takeover_after_a_silent_leader(&db, true, "10s");
        assert_eq!(taken, "epoch Some(2)");
    }
}
