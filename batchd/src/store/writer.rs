//! The store's writer thread and the async handle to it. Writes queue up on a
//! channel; the thread takes what is waiting (up to `max_batch`) and applies it
//! through its [`Backend`] in one transaction, so that one refused write (a
//! duplicate id) leaves the others in, then commits once (one `fsync` for the
//! whole group) and only then answers each caller. This is how durable
//! submissions reach thousands per second on one disk. The SQLite backend is
//! here ([`Lite`]: each write under its own savepoint); PostgreSQL's is
//! `super::pg::PgWriter`, and [`super::open`] picks one.

use std::path::{Path, PathBuf};
use std::thread::JoinHandle;

use rusqlite::{Connection, params};
use tokio::sync::{mpsc, oneshot};

use super::{JobRecord, Loaded, Location, StoreError, load_jobs, schema};

/// What the writer thread writes through: one backend's group commit.
pub trait Backend: Send + 'static {
    /// Applies `batch` in one transaction: the result of each write (a refused
    /// one left out, the others kept), or why the transaction as a whole failed
    /// (then nothing of it is stored).
    fn apply(&mut self, batch: &[&Write]) -> Result<Vec<Result<(), StoreError>>, String>;

    /// Called once the writer has written everything, before it stops.
    fn close(&mut self) {}
}

/// The SQLite backend: one connection to the file.
pub struct Lite {
    conn: Connection,
    path: PathBuf,
}

impl Lite {
    /// Opens (creating when missing) the queue file at `path` and reads it back.
    pub(super) fn open(path: &Path, now_ms: i64) -> Result<(Lite, Loaded), StoreError> {
        let (conn, _epoch) = schema::open_writer(path, now_ms)?;
        let loaded = load_jobs(&conn, path)?;
        Ok((
            Lite {
                conn,
                path: path.to_path_buf(),
            },
            loaded,
        ))
    }
}

impl Backend for Lite {
    fn apply(&mut self, batch: &[&Write]) -> Result<Vec<Result<(), StoreError>>, String> {
        apply(&mut self.conn, batch, &self.path).map_err(|e| e.to_string())
    }

    fn close(&mut self) {
        let _ = self.conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE);");
    }
}

/// One change to the store.
#[derive(Debug, Clone)]
pub enum Write {
    /// A new job (refused with [`StoreError::Duplicate`] when its id exists).
    Insert(Box<JobRecord>),
    /// A new array and its tasks (refused with [`StoreError::Duplicate`] when
    /// the array's id or a task's exists).
    InsertArray(Box<super::ArrayRecord>),
    /// [`Write::Update`] of many jobs at once (an array cancelled).
    UpdateMany(Vec<JobRecord>),
    /// Everything the queue changes about a job (by id): state, attempts, times,
    /// nodes, charges, exit, reason.
    Update(Box<JobRecord>),
    /// A job's new charged total and the debit it owes for it, together.
    Charge(Box<JobRecord>, Box<super::PendingDebit>),
    /// accountd has debit `seq` of job `job`.
    Delivered {
        /// The job.
        job: u64,
        /// The debit.
        seq: u64,
    },
    /// accountd will never take debit `seq` of job `job`.
    Refused {
        /// The job.
        job: u64,
        /// The debit.
        seq: u64,
        /// accountd's answer.
        why: String,
    },
    /// `write` (a change of a job by the decision loop) only while the lease
    /// of `queue` is still at `epoch` ([`crate::lease`]): on PostgreSQL the
    /// lease row is read `FOR SHARE` in the same transaction, so a successor's
    /// takeover waits for the commit, and a replaced leader's change is refused
    /// ([`StoreError::Fenced`]). SQLite has no lease: `write` as is.
    Fenced {
        /// The queue (the lease's name).
        queue: String,
        /// The leader's epoch.
        epoch: u64,
        /// The change.
        write: Box<Write>,
    },
    /// What one rank used, as its node reported at its exit.
    RankUsage(Box<super::RankUsage>),
    /// Output bytes of a job's `stream` (1 stdout, 2 stderr) at `offset`.
    Output {
        /// The job.
        id: u64,
        /// 1 stdout, 2 stderr.
        stream: u8,
        /// Where the bytes start in the stream.
        offset: u64,
        /// The bytes.
        data: Vec<u8>,
    },
}

struct Queued {
    write: Write,
    reply: Option<oneshot::Sender<Result<(), StoreError>>>,
}

/// The async handle to the writer thread.
pub struct Store {
    tx: mpsc::Sender<Queued>,
    thread: Option<JoinHandle<()>>,
    at: Location,
    fence: std::sync::Mutex<Option<(String, u64)>>,
}

impl Store {
    /// Opens (creating when missing) the queue file, reads it back, and starts
    /// the writer thread.
    pub fn open(path: &Path, max_batch: usize, now_ms: i64) -> Result<(Store, Loaded), StoreError> {
        Store::open_at(&Location::Sqlite(path.to_path_buf()), max_batch, now_ms)
    }

    /// Starts the writer thread over `backend`, the queue at `at` (opened by
    /// [`Store::open_at`], in [`super::open`]).
    pub(super) fn start(
        backend: Box<dyn Backend>,
        at: &Location,
        max_batch: usize,
    ) -> Result<Store, StoreError> {
        let (tx, rx) = mpsc::channel(max_batch.max(1) * 4);
        let max_batch = max_batch.max(1);
        let thread = std::thread::Builder::new()
            .name("batchd-store".into())
            .spawn(move || writer_loop(backend, rx, max_batch))
            .map_err(StoreError::Thread)?;
        Ok(Store {
            tx,
            thread: Some(thread),
            at: at.clone(),
            fence: Default::default(),
        })
    }

    /// Where the queue is.
    pub fn location(&self) -> &Location {
        &self.at
    }

    /// From now on, the job changes of the decision loop ([`Write::Update`],
    /// [`Write::UpdateMany`], [`Write::Charge`]) are written only while the
    /// lease of `queue` is at `epoch` ([`Write::Fenced`]).
    pub fn set_fence(&self, queue: &str, epoch: u64) {
        *self.fence.lock().unwrap_or_else(|p| p.into_inner()) = Some((queue.to_string(), epoch));
    }

    /// Applies `write` and returns once it is committed.
    pub async fn write(&self, write: Write) -> Result<(), StoreError> {
        let fence = self.fence.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let write = match (fence, write) {
            (
                Some((queue, epoch)),
                w @ (Write::Update(_) | Write::UpdateMany(_) | Write::Charge(..)),
            ) => Write::Fenced {
                queue,
                epoch,
                write: Box::new(w),
            },
            (_, w) => w,
        };
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(Queued {
                write,
                reply: Some(reply),
            })
            .await
            .map_err(|_| StoreError::Closed)?;
        rx.await.map_err(|_| StoreError::Closed)?
    }

    /// Queues `write` without waiting for it (output, which a crash may lose).
    pub fn write_later(&self, write: Write) {
        let _ = self.tx.try_send(Queued { write, reply: None });
    }

    /// Finishes what is queued and stops the thread.
    pub fn close(mut self) {
        let (tx, _) = mpsc::channel(1);
        drop(std::mem::replace(&mut self.tx, tx));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn writer_loop(mut backend: Box<dyn Backend>, mut rx: mpsc::Receiver<Queued>, max_batch: usize) {
    let mut batch = Vec::with_capacity(max_batch);
    while let Some(first) = rx.blocking_recv() {
        batch.push(first);
        while batch.len() < max_batch {
            match rx.try_recv() {
                Ok(q) => batch.push(q),
                Err(_) => break,
            }
        }
        let writes: Vec<&Write> = batch.iter().map(|q| &q.write).collect();
        match backend.apply(&writes) {
            Ok(results) => {
                for (q, r) in batch.drain(..).zip(results) {
                    if let Some(reply) = q.reply {
                        let _ = reply.send(r);
                    }
                }
            }
            Err(e) => {
                tracing::error!(error = %e, "queue store commit failed");
                for q in batch.drain(..) {
                    if let Some(reply) = q.reply {
                        let _ = reply.send(Err(StoreError::Commit(e.clone())));
                    }
                }
            }
        }
    }
    backend.close();
}

/// Applies a group in one transaction: the result of each write, or the
/// transaction's own failure.
fn apply(
    conn: &mut Connection,
    batch: &[&Write],
    path: &Path,
) -> rusqlite::Result<Vec<Result<(), StoreError>>> {
    let mut tx = conn.transaction()?;
    tx.set_drop_behavior(rusqlite::DropBehavior::Rollback);
    let mut results = Vec::with_capacity(batch.len());
    for &write in batch {
        let sp = tx.savepoint()?;
        let r = one(&sp, write);
        match r {
            Ok(()) => {
                sp.commit()?;
                results.push(Ok(()));
            }
            Err(e) => {
                drop(sp); // rolls back this write only
                results.push(Err(match (write, e.sqlite_error_code()) {
                    (Write::Insert(j), Some(rusqlite::ErrorCode::ConstraintViolation)) => {
                        StoreError::Duplicate(j.id)
                    }
                    (Write::InsertArray(a), Some(rusqlite::ErrorCode::ConstraintViolation)) => {
                        StoreError::Duplicate(a.id)
                    }
                    _ => StoreError::Sql {
                        path: path.to_path_buf(),
                        source: e,
                    },
                }));
            }
        }
    }
    tx.commit()?;
    Ok(results)
}

fn one(conn: &Connection, write: &Write) -> rusqlite::Result<()> {
    match write {
        Write::Fenced { write, .. } => one(conn, write),
        Write::Insert(j) => {
            let signed = postcard::to_allocvec(j.signed.as_ref()).unwrap_or_default();
            conn.prepare_cached(
                "INSERT INTO jobs(seq, id, user, signed, submitted_ms, state)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            )?
            .execute(params![
                j.seq,
                j.id as i64,
                j.user,
                signed,
                j.submitted_ms,
                j.state.code()
            ])?;
            if let Some(p) = &j.payer {
                super::payer::insert(conn, j.id, p)?;
            }
            update(conn, j)
        }
        Write::InsertArray(a) => super::arrays::insert(conn, a),
        Write::UpdateMany(jobs) => jobs.iter().try_for_each(|j| update(conn, j)),
        Write::Update(j) => update(conn, j),
        Write::Charge(j, d) => {
            update(conn, j)?;
            super::debits::insert(conn, d)
        }
        Write::Delivered { job, seq } => super::debits::delivered(conn, *job, *seq),
        Write::Refused { job, seq, why } => super::debits::refused(conn, *job, *seq, why),
        Write::RankUsage(u) => super::usage::insert(conn, u),
        Write::Output {
            id,
            stream,
            offset,
            data,
        } => {
            conn.prepare_cached(
                "INSERT OR IGNORE INTO output(job, stream, offset, data) VALUES (?1, ?2, ?3, ?4)",
            )?
            .execute(params![*id as i64, stream, *offset as i64, data])?;
            Ok(())
        }
    }
}

fn update(conn: &Connection, j: &JobRecord) -> rusqlite::Result<()> {
    let exit = j
        .exit
        .map(|e| postcard::to_allocvec(&e).unwrap_or_default());
    conn.prepare_cached(
        "UPDATE jobs SET state = ?2, attempts = ?3, started_ms = ?4, ended_ms = ?5, nodes = ?6,
                charged = ?7, charge_seq = ?8, done_ms = ?9, exit = ?10, reason = ?11,
                truncated = ?12
         WHERE id = ?1",
    )?
    .execute(params![
        j.id as i64,
        j.state.code(),
        j.attempts,
        j.started_ms,
        j.ended_ms,
        j.nodes.join(","),
        j.charged,
        j.charge_seq as i64,
        j.done_ms,
        exit,
        j.reason,
        j.truncated as i64
    ])?;
    Ok(())
}
