//! The two storage threads and the async handle to them, the same for every
//! backend. The writer applies batches in group commits through a
//! [`Writer`]; the reader answers queries through a [`Reader`] on its own
//! connection (SQLite's WAL, or PostgreSQL's MVCC, lets it read while the
//! writer commits). Both exit when the [`Store`] is closed, after finishing
//! what was queued.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use proto::account::{AccountError, AccountOp, AccountReply, EntryKind, ErrorCode};
use tokio::sync::{mpsc, oneshot};

use super::anchors::{AnchorPolicy, AnchorSettings, Anchoring, Latest};
use super::lite::{LiteReader, LiteWriter};
use super::rows::{Reader, Rows, Tx, Writer};
use super::sums::BalanceSums;
use super::{StoreError, audit, claims, ledger, projects, query, schema};
use crate::metrics::StoreMeters;

/// How the store is opened and run.
#[derive(Debug, Clone)]
pub struct StoreConfig {
    /// The SQLite file (unused with `postgres`).
    pub path: PathBuf,
    /// Create the file (and schema) when missing.
    pub create: bool,
    /// Keep the ledger in this PostgreSQL database instead of the SQLite file.
    pub postgres: Option<super::pg::PgConfig>,
    /// Sign the chain head now and then into a file (see [`super::anchors`]).
    pub anchors: Option<AnchorSettings>,
    /// Most writes in one group commit (1 = one transaction per write).
    pub max_batch: usize,
    /// Largest amount of one entry, micro-credits.
    pub max_entry: i64,
}

/// Refused requests, kept as one row of the `refusals` table: one request
/// (`count` 1), or a summary of `count` requests from one peer that were not
/// recorded one by one (see [`crate::refusals`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// Role of the caller.
    pub role: String,
    /// Name of the caller.
    pub name: String,
    /// The operation tried.
    pub op: String,
    /// The error code given.
    pub code: ErrorCode,
    /// The message given (for a summary: what it sums up, and the last message).
    pub message: String,
    /// How many refused requests the row stands for.
    pub count: u64,
}

enum WriteJob {
    Op {
        actor: String,
        op: AccountOp,
        reply: oneshot::Sender<Result<AccountReply, AccountError>>,
    },
    Refusal {
        refusal: Refusal,
        reply: oneshot::Sender<Result<AccountReply, AccountError>>,
    },
}

struct ReadJob {
    op: AccountOp,
    reply: oneshot::Sender<Result<AccountReply, AccountError>>,
}

/// Async handle to the ledger's threads.
pub struct Store {
    writer: mpsc::Sender<WriteJob>,
    reader: mpsc::Sender<ReadJob>,
    threads: Vec<JoinHandle<()>>,
    meters: Arc<StoreMeters>,
    latest: Latest,
}

fn gone() -> AccountError {
    AccountError::new(
        ErrorCode::Unavailable,
        "accountd is shutting down; retry shortly",
    )
}

impl Store {
    /// Opens (or with `create`, initialises) the ledger and starts its threads.
    pub fn open(cfg: StoreConfig) -> Result<Store, StoreError> {
        let (wconn, rconn): (Box<dyn Writer>, Box<dyn Reader>) = match &cfg.postgres {
            Some(pg) => {
                // The synchronous client runs its own small runtime, which may
                // not start on a thread of the caller's.
                let opened = std::thread::scope(|s| {
                    s.spawn(|| super::pg::open(pg, cfg.create))
                        .join()
                        .unwrap_or_else(|_| {
                            Err(StoreError::Postgres("opening PostgreSQL panicked".into()))
                        })
                })?;
                (Box::new(opened.0), Box::new(opened.1))
            }
            None => (
                Box::new(LiteWriter(schema::open_writer(&cfg.path, cfg.create)?)),
                Box::new(LiteReader(schema::open_reader(&cfg.path)?)),
            ),
        };
        let (wtx, wrx) = mpsc::channel(cfg.max_batch.max(1) * 4);
        let (rtx, rrx) = mpsc::channel(256);
        let max_batch = cfg.max_batch.max(1);
        let max_entry = cfg.max_entry;
        let anchoring = match &cfg.anchors {
            Some(a) => Some(Anchoring::new(
                AnchorPolicy::load(a).map_err(|e| StoreError::Anchors(e.to_string()))?,
            )),
            None => None,
        };
        let latest = anchoring
            .as_ref()
            .map(Anchoring::latest)
            .unwrap_or_default();
        let meters = Arc::new(StoreMeters::default());
        let m = Arc::clone(&meters);
        let w = std::thread::Builder::new()
            .name("ledger-writer".into())
            .spawn(move || writer_loop(wconn, wrx, max_batch, max_entry, anchoring, &m))
            .map_err(StoreError::Thread)?;
        let r = std::thread::Builder::new()
            .name("ledger-reader".into())
            .spawn(move || reader_loop(rconn, rrx))
            .map_err(StoreError::Thread)?;
        Ok(Store {
            writer: wtx,
            reader: rtx,
            threads: vec![w, r],
            meters,
            latest,
        })
    }

    /// The latest chain head the writer signed, `None` without anchoring or
    /// before the first.
    pub fn signed_head(&self) -> Option<proto::account::SignedHead> {
        let latest = self.latest.lock().ok()?;
        latest.as_ref().map(super::anchors::Anchor::to_signed_head)
    }

    /// What the writer has counted, for metrics.
    pub fn meters(&self) -> Arc<StoreMeters> {
        Arc::clone(&self.meters)
    }

    /// Applies a write (debit, refund, create, grant, adjust) as `actor`;
    /// answers once it is durable.
    pub async fn write(&self, actor: String, op: AccountOp) -> Result<AccountReply, AccountError> {
        let (reply, rx) = oneshot::channel();
        self.writer
            .send(WriteJob::Op { actor, op, reply })
            .await
            .map_err(|_| gone())?;
        rx.await.map_err(|_| gone())?
    }

    /// Applies several writes as `actor`, each exactly as [`Store::write`]
    /// would, and answers each once it is durable, in order. Every job is
    /// queued before any answer is awaited, so the writer takes them into
    /// the same group commit (up to its `max_batch`).
    pub async fn write_many(
        &self,
        actor: &str,
        ops: Vec<AccountOp>,
    ) -> Vec<Result<AccountReply, AccountError>> {
        let mut waiting = Vec::with_capacity(ops.len());
        for op in ops {
            let (reply, rx) = oneshot::channel();
            let job = WriteJob::Op {
                actor: actor.to_string(),
                op,
                reply,
            };
            waiting.push(self.writer.send(job).await.ok().map(|()| rx));
        }
        let mut answers = Vec::with_capacity(waiting.len());
        for rx in waiting {
            answers.push(match rx {
                Some(rx) => rx.await.unwrap_or_else(|_| Err(gone())),
                None => Err(gone()),
            });
        }
        answers
    }

    /// Answers a query (balance, history, report, audit) with users resolved.
    pub async fn read(&self, op: AccountOp) -> Result<AccountReply, AccountError> {
        let (reply, rx) = oneshot::channel();
        self.reader
            .send(ReadJob { op, reply })
            .await
            .map_err(|_| gone())?;
        rx.await.map_err(|_| gone())?
    }

    /// Records a refused request; returns once the record is committed (a
    /// failure to record is logged, the refusal stands either way).
    pub async fn record_refusal(&self, refusal: Refusal) {
        let (reply, rx) = oneshot::channel();
        if self
            .writer
            .send(WriteJob::Refusal { refusal, reply })
            .await
            .is_err()
        {
            return;
        }
        if let Ok(Err(e)) = rx.await {
            tracing::error!(error = %e, "could not record a refusal");
        }
    }

    /// Stops taking work, finishes what is queued and joins the threads.
    pub fn close(self) {
        let Store {
            writer,
            reader,
            threads,
            ..
        } = self;
        drop(writer);
        drop(reader);
        for t in threads {
            let _ = t.join();
        }
    }
}

fn writer_loop(
    mut conn: Box<dyn Writer>,
    mut rx: mpsc::Receiver<WriteJob>,
    max_batch: usize,
    max_entry: i64,
    mut anchoring: Option<Anchoring>,
    meters: &StoreMeters,
) {
    let mut sums = BalanceSums::new(&mut *conn, meters);
    let mut batch = Vec::with_capacity(max_batch);
    while let Some(job) = sums.next_job(&mut *conn, &mut rx) {
        batch.push(job);
        top_up(&mut batch, &mut rx, max_batch);
        let started = Instant::now();
        let mut more = |b: &mut Vec<WriteJob>| top_up(b, &mut rx, max_batch);
        let results = commit_batch(&mut *conn, &mut batch, &mut more, max_entry);
        let debits = batch
            .iter()
            .zip(&results)
            .filter(|(job, r)| {
                matches!(
                    job,
                    WriteJob::Op {
                        op: AccountOp::Debit(_),
                        ..
                    }
                ) && matches!(r, Ok(AccountReply::Charged(c)) if !c.duplicate)
            })
            .count();
        meters.committed(batch.len(), debits as u64, started);
        let wrote = results.iter().any(Result::is_ok);
        // Answer first: what follows does not change what was committed.
        for (job, result) in batch.drain(..).zip(results) {
            let (WriteJob::Op { reply, .. } | WriteJob::Refusal { reply, .. }) = job;
            let _ = reply.send(result);
        }
        if wrote {
            sums.wrote(&mut *conn);
            anchor(&mut *conn, anchoring.as_mut(), false);
        }
    }
    anchor(&mut *conn, anchoring.as_mut(), true);
    conn.close();
}

/// What tops a batch up with the writes queued meanwhile (see [`commit_batch`]).
type More<'a> = &'a mut dyn FnMut(&mut Vec<WriteJob>);

/// Adds the writes already queued to `batch`, up to `max` in it.
fn top_up(batch: &mut Vec<WriteJob>, rx: &mut mpsc::Receiver<WriteJob>, max: usize) {
    while batch.len() < max {
        match rx.try_recv() {
            Ok(j) => batch.push(j),
            Err(_) => break,
        }
    }
}

/// Signs the chain head when due (`last`: at shutdown, whenever it moved).
fn anchor(conn: &mut dyn Writer, anchoring: Option<&mut Anchoring>, last: bool) {
    let Some(a) = anchoring else { return };
    match conn.head() {
        Ok(head) => a.tick(head, last),
        Err(e) => tracing::warn!(error = %e, "cannot read the chain head to anchor it"),
    }
}

/// One group commit: apply every job in one transaction, COMMIT once.
///
/// Fast path: the jobs are applied directly. That is safe because every
/// ledger function refuses (unknown user, bad amount, ...) before its first
/// write, so a refused job leaves nothing behind; only a storage error can
/// strike after a write. If one does, the whole transaction is rolled back and
/// the batch is applied again with a savepoint around each job, so the
/// failure stays with the job that caused it.
///
/// Once the transaction holds the ledger's write lock, the batch first takes
/// in (through `more`) the writes queued while the lock was awaited: with
/// several accountd on one PostgreSQL an instance waits there for the
/// others' commits, and its next batch grows instead of waiting a turn more.
fn commit_batch(
    conn: &mut dyn Writer,
    batch: &mut Vec<WriteJob>,
    more: More<'_>,
    max_entry: i64,
) -> Vec<Result<AccountReply, AccountError>> {
    match apply_batch(conn, batch, Some(more), max_entry) {
        Some(results) => results,
        None => {
            tracing::warn!("storage error inside a batch; applying it again job by job");
            apply_batch(conn, batch, None, max_entry).unwrap_or_default()
        }
    }
}

/// Applies and commits a batch; `None` when the fast path met a storage error
/// (the transaction has then been rolled back). The fast path is the one
/// with `more` (see [`commit_batch`]); without it, each job runs in its own
/// savepoint.
fn apply_batch(
    conn: &mut dyn Writer,
    batch: &mut Vec<WriteJob>,
    mut more: Option<More<'_>>,
    max_entry: i64,
) -> Option<Vec<Result<AccountReply, AccountError>>> {
    let now = crate::time::now_us();
    let careful = more.is_none();
    let mut results = Vec::with_capacity(batch.len());
    let (mut keys, mut users) = batch_reads(batch);
    conn.expect(&keys, &users);
    let outcome = conn.transaction(&mut |tx: &mut dyn Tx| {
        results.clear();
        let before = batch.len();
        if let Some(more) = more.as_mut() {
            more(batch);
        }
        if batch.len() > before {
            (keys, users) = batch_reads(batch);
        }
        if let Err(e) = tx.prefetch(&keys, &users) {
            tracing::warn!(error = %e, "reading ahead for a batch failed");
            return false;
        }
        // One read per batch: plain charges must not name a project.
        let projects = match keys.is_empty() {
            true => Default::default(),
            false => match projects::names(tx.rows()) {
                Ok(p) => p,
                Err(e) => {
                    tracing::warn!(error = %e, "reading the projects for a batch failed");
                    return false;
                }
            },
        };
        for job in batch.iter() {
            if !careful {
                let r = apply(tx.rows(), job, &projects, now, max_entry);
                if matches!(&r, Err(e) if e.code == ErrorCode::Storage) {
                    return false;
                }
                results.push(r);
                continue;
            }
            let mut out = None;
            let sp = tx.savepoint(&mut |rows: &mut dyn Rows| {
                let r = apply(rows, job, &projects, now, max_entry);
                let keep = r.is_ok();
                out = Some(r);
                keep
            });
            results.push(match (sp, out) {
                (Err(e), _) => Err(e),
                (Ok(()), Some(r)) => r,
                (Ok(()), None) => Err(ledger::storage("savepoint ran nothing")),
            });
        }
        true
    });
    match outcome {
        Ok(true) => Some(results),
        Ok(false) => None,
        Err(e) => Some(batch.iter().map(|_| Err(e.clone())).collect()),
    }
}

/// The charge keys and the users a batch names, for [`Tx::prefetch`].
fn batch_reads(batch: &[WriteJob]) -> (Vec<String>, Vec<String>) {
    let mut keys = Vec::new();
    let mut users = Vec::new();
    for job in batch {
        let WriteJob::Op { op, .. } = job else {
            continue;
        };
        match op {
            AccountOp::Debit(d) => {
                keys.push(ledger::key_text(EntryKind::Debit, &d.key));
                users.push(d.user.clone());
            }
            AccountOp::Refund(r) => {
                keys.push(ledger::key_text(EntryKind::Refund, &r.key));
                users.push(r.user.clone());
            }
            AccountOp::Grant(g) => users.push(g.user.clone()),
            AccountOp::Adjust(a) => users.push(a.user.clone()),
            _ => {}
        }
    }
    users.sort_unstable();
    users.dedup();
    (keys, users)
}

fn apply(
    conn: &mut dyn Rows,
    job: &WriteJob,
    projects: &HashSet<String>,
    now: i64,
    max: i64,
) -> Result<AccountReply, AccountError> {
    let (actor, op) = match job {
        WriteJob::Op { actor, op, .. } => (actor.as_str(), op),
        WriteJob::Refusal { refusal: r, .. } => {
            conn.insert_refusal(now, r)?;
            return Ok(AccountReply::Report(Vec::new()));
        }
    };
    if let AccountOp::Debit(proto::account::Debit { user, .. })
    | AccountOp::Refund(proto::account::Refund { user, .. }) = op
        && projects.contains(user)
    {
        return Err(projects::not_plain(user));
    }
    match op {
        AccountOp::Debit(d) => ledger::debit(conn, d, actor, now, max).map(AccountReply::Charged),
        AccountOp::Refund(r) => ledger::refund(conn, r, actor, now, max).map(AccountReply::Charged),
        AccountOp::CreateAccount(c) => {
            ledger::create(conn, &c.user, c.initial, actor, now, max).map(AccountReply::Created)
        }
        AccountOp::Grant(e) => ledger::admin_change(conn, EntryKind::Grant, e, actor, now, max)
            .map(AccountReply::Entry),
        AccountOp::Adjust(e) => ledger::admin_change(conn, EntryKind::Adjust, e, actor, now, max)
            .map(AccountReply::Entry),
        AccountOp::Claim(c) => claims::claim(conn, c, actor, now).map(|()| AccountReply::Claimed),
        AccountOp::RankEnd(e) => claims::end(conn, e, actor, now).map(|()| AccountReply::Ended),
        AccountOp::Project(p) => {
            projects::write(conn, p, actor, now, max).map(AccountReply::Project)
        }
        other => Err(AccountError::new(
            ErrorCode::Malformed,
            format!("{} is not a write", other.name()),
        )),
    }
}

fn reader_loop(mut conn: Box<dyn Reader>, mut rx: mpsc::Receiver<ReadJob>) {
    while let Some(job) = rx.blocking_recv() {
        let mut answered = None;
        let read = conn.read(&mut |rows: &mut dyn Rows| answered = Some(answer(rows, &job.op)));
        let _ = job.reply.send(match (read, answered) {
            (Err(e), _) => Err(e),
            (Ok(()), Some(a)) => a,
            (Ok(()), None) => Err(ledger::storage("the read ran nothing")),
        });
    }
}

fn answer(conn: &mut dyn Rows, op: &AccountOp) -> Result<AccountReply, AccountError> {
    let need_user = |u: &Option<String>| {
        u.clone()
            .ok_or_else(|| AccountError::new(ErrorCode::Malformed, "no user given"))
    };
    match op {
        AccountOp::Balance(q) => {
            query::balance(conn, &need_user(&q.user)?).map(AccountReply::Balance)
        }
        AccountOp::History(q) => query::history(
            conn,
            &need_user(&q.user)?,
            q.since_us,
            q.until_us,
            q.after_id,
            q.limit,
        )
        .map(AccountReply::History),
        AccountOp::Report(q) => {
            query::report(conn, q.by, q.since_us, q.until_us).map(AccountReply::Report)
        }
        AccountOp::Audit => audit::audit(conn).map(AccountReply::Audit),
        AccountOp::Project(p) => {
            projects::read(conn, p, crate::time::now_us()).map(AccountReply::Project)
        }
        AccountOp::Spend(q) => {
            super::spend::hourly(conn, q.hours, crate::time::now_us()).map(AccountReply::Spend)
        }
        other => Err(AccountError::new(
            ErrorCode::Malformed,
            format!("{} is not a query", other.name()),
        )),
    }
}
