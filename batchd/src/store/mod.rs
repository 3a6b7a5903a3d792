//! The queue's durable state, on one of two backends ([`Location`]): a SQLite
//! file ([`schema`], the default) or a PostgreSQL database ([`pg`]), with the
//! same tables and the same meaning. One thread writes in group commits
//! ([`writer`], over a [`writer::Backend`]), so that a submission is
//! acknowledged only once it is durable and many submissions share one
//! commit. The daemon keeps the live queue in memory and writes every change
//! of a job through [`Store::write`] before acting on it (a start is recorded,
//! attempt counted, before any rank is launched); [`Store::open`] reads it all
//! back at start. [`migrate`] copies a queue between backends and checks the
//! copy through a canonical dump ([`dump`]).

pub mod arrays;
pub mod debits;
pub mod dump;
pub mod migrate;
mod open;
pub mod payer;
pub mod pg;
pub mod schema;
pub mod usage;
pub mod writer;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use proto::batch::{JobState, SignedJob};
use proto::node::ExitStatus;
use rusqlite::{Connection, params};

pub use accountd::store::pg::PgConfig;

pub use arrays::ArrayRecord;
pub use debits::PendingDebit;
pub use payer::Payer;
pub use usage::{JobUsage, RankUsage};
pub use writer::{Store, Write};

/// A job as the store keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobRecord {
    /// Arrival order (assigned by the queue, strictly increasing).
    pub seq: i64,
    /// The job id (the spec's).
    pub id: u64,
    /// Its owner.
    pub user: String,
    /// The signed job as submitted (an array's, shared by its tasks).
    pub signed: Arc<SignedJob>,
    /// Submission time, UTC ms.
    pub submitted_ms: i64,
    /// State.
    pub state: JobState,
    /// Starts so far.
    pub attempts: u32,
    /// Last start (or resume), UTC ms.
    pub started_ms: Option<i64>,
    /// End, UTC ms.
    pub ended_ms: Option<i64>,
    /// Nodes of the current or last run, rank order.
    pub nodes: Vec<String>,
    /// Micro-credits charged so far.
    pub charged: i64,
    /// Debits sent so far (the next debit's sequence number).
    pub charge_seq: u64,
    /// Run time before the current run, ms (suspended work); once the job ended,
    /// all the time it ran in its last attempt.
    pub done_ms: i64,
    /// How it ended.
    pub exit: Option<ExitStatus>,
    /// Why it is held or failed.
    pub reason: Option<String>,
    /// Output bytes dropped over the cap.
    pub truncated: u64,
    /// For a task of an array: the array's id and the task's index.
    pub array: Option<(u64, u32)>,
    /// Who pays, as resolved at submission ([`payer`]); `None` for a job
    /// queued before the queue recorded it: its signed terms say.
    pub payer: Option<Payer>,
}

impl JobRecord {
    /// A job just submitted: queued, never started, nothing charged.
    pub fn queued(
        seq: i64,
        id: u64,
        user: String,
        signed: Arc<SignedJob>,
        submitted_ms: i64,
    ) -> JobRecord {
        JobRecord {
            seq,
            id,
            user,
            signed,
            submitted_ms,
            state: JobState::Queued,
            attempts: 0,
            started_ms: None,
            ended_ms: None,
            nodes: Vec::new(),
            charged: 0,
            charge_seq: 0,
            done_ms: 0,
            exit: None,
            reason: None,
            truncated: 0,
            array: None,
            payer: None,
        }
    }
}

/// Where the queue is stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// A SQLite file.
    Sqlite(PathBuf),
    /// A PostgreSQL database (`[store] postgres`, `password_file`, `ca`).
    Postgres(PgConfig),
}

impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Location::Sqlite(p) => write!(f, "{}", p.display()),
            Location::Postgres(c) => write!(f, "PostgreSQL {}", c.conninfo),
        }
    }
}

/// Why the store failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The path is a directory.
    #[error("{} is a directory, not a queue file", path.display())]
    NotAFile {
        /// The path.
        path: PathBuf,
    },
    /// The file cannot be written.
    #[error("cannot write queue file {}: {detail}", path.display())]
    NotWritable {
        /// The path.
        path: PathBuf,
        /// Why.
        detail: String,
    },
    /// Another schema version.
    #[error(
        "queue store {store} has schema version {found}; this batchd reads version {}",
        schema::SCHEMA_VERSION
    )]
    SchemaVersion {
        /// The file or database.
        store: String,
        /// What the store says.
        found: String,
    },
    /// A value in the store is not what this build wrote.
    #[error("queue store {store} is corrupt: {detail}")]
    Corrupt {
        /// The file or database.
        store: String,
        /// What.
        detail: String,
    },
    /// SQLite failed.
    #[error("queue file {}: {source}", path.display())]
    Sql {
        /// The path.
        path: PathBuf,
        /// Why.
        source: rusqlite::Error,
    },
    /// PostgreSQL failed (or could not be reached), with PostgreSQL's own reason.
    #[error("queue database: {0}")]
    Postgres(String),
    /// A change of the decision loop from a leader whose lease has passed to
    /// another instance (fencing).
    #[error("queue {queue}: lease epoch {epoch} is no longer the leader's; the change is refused")]
    Fenced {
        /// The queue.
        queue: String,
        /// The writer's epoch.
        epoch: u64,
    },
    /// A group commit failed as a whole.
    #[error("cannot commit to the queue's store: {0}")]
    Commit(String),
    /// A job with this id exists.
    #[error("job {0:016x} was submitted before")]
    Duplicate(u64),
    /// The writer thread is gone (shutting down).
    #[error("the queue's store is closed")]
    Closed,
    /// The writer thread could not start.
    #[error("cannot start the store thread: {0}")]
    Thread(std::io::Error),
}

/// What [`Store::open`] reads back.
#[derive(Debug)]
pub struct Loaded {
    /// The queue's epoch, UTC ms (policy time 0).
    pub epoch_ms: i64,
    /// Every job, in arrival order.
    pub jobs: Vec<JobRecord>,
    /// Kept output bytes of each job, (stdout, stderr), by id.
    pub output: Vec<(u64, u64, u64)>,
    /// Debits recorded and not yet delivered to accountd, oldest first.
    pub debits: Vec<PendingDebit>,
}

fn corrupt(store: &str, detail: String) -> StoreError {
    StoreError::Corrupt {
        store: store.to_string(),
        detail,
    }
}

/// The columns of `jobs` the loader reads, in this order, on both backends.
pub(crate) const JOB_COLUMNS: &str = "seq, id, \"user\", signed, submitted_ms, state, attempts, \
    started_ms, ended_ms, nodes, charged, charge_seq, done_ms, exit, reason, truncated";

/// One `jobs` row as both backends read it ([`JOB_COLUMNS`]).
pub(crate) type JobRow = (
    i64,
    i64,
    String,
    Vec<u8>,
    i64,
    i64,
    i64,
    Option<i64>,
    Option<i64>,
    String,
    i64,
    i64,
    i64,
    Option<Vec<u8>>,
    Option<String>,
    i64,
);

/// A job record from its row (a task's signed job from its array).
pub(crate) fn decode_job(
    r: JobRow,
    arrays: &arrays::Arrays,
    payers: &std::collections::HashMap<u64, Payer>,
    store: &str,
) -> Result<JobRecord, StoreError> {
    let (signed, array) = if r.3.is_empty() {
        let (array, signed) = arrays::of_task(arrays, r.0)
            .ok_or_else(|| corrupt(store, format!("job seq {}: a task of no array", r.0)))?;
        let index = (r.1 as u64).wrapping_sub(array).wrapping_sub(1);
        let index = u32::try_from(index)
            .map_err(|_| corrupt(store, format!("job seq {}: not a task of its array", r.0)))?;
        (signed, Some((array, index)))
    } else {
        let signed: SignedJob = postcard::from_bytes(&r.3)
            .map_err(|e| corrupt(store, format!("job seq {}: signed job: {e}", r.0)))?;
        (Arc::new(signed), None)
    };
    let exit = match r.13 {
        None => None,
        Some(b) => Some(
            postcard::from_bytes(&b)
                .map_err(|e| corrupt(store, format!("job seq {}: exit: {e}", r.0)))?,
        ),
    };
    let state = u16::try_from(r.5)
        .map_err(|_| corrupt(store, format!("job seq {}: state {}", r.0, r.5)))?;
    let attempts = u32::try_from(r.6)
        .map_err(|_| corrupt(store, format!("job seq {}: attempts {}", r.0, r.6)))?;
    Ok(JobRecord {
        seq: r.0,
        id: r.1 as u64,
        user: r.2,
        signed,
        submitted_ms: r.4,
        state: JobState::from(state),
        attempts,
        started_ms: r.7,
        ended_ms: r.8,
        nodes: if r.9.is_empty() {
            Vec::new()
        } else {
            r.9.split(',').map(str::to_string).collect()
        },
        charged: r.10,
        charge_seq: r.11 as u64,
        done_ms: r.12,
        exit,
        reason: r.14,
        truncated: r.15 as u64,
        payer: payers.get(&array.map_or(r.1 as u64, |(a, _)| a)).cloned(),
        array,
    })
}

/// The epoch as `meta` holds it.
pub(crate) fn parse_epoch(value: &str, store: &str) -> Result<i64, StoreError> {
    value
        .parse()
        .map_err(|_| corrupt(store, format!("meta.epoch_ms is {value:?}")))
}

/// Reads every job row.
pub(crate) fn load_jobs(conn: &Connection, path: &Path) -> Result<Loaded, StoreError> {
    let sql = |source| StoreError::Sql {
        path: path.to_path_buf(),
        source,
    };
    let store = path.display().to_string();
    let mut stmt = conn
        .prepare(&format!("SELECT {JOB_COLUMNS} FROM jobs ORDER BY seq"))
        .map_err(sql)?;
    let rows = stmt
        .query_map([], |r| {
            Ok::<JobRow, _>((
                r.get(0)?,
                r.get(1)?,
                r.get(2)?,
                r.get(3)?,
                r.get(4)?,
                r.get(5)?,
                r.get(6)?,
                r.get(7)?,
                r.get(8)?,
                r.get(9)?,
                r.get(10)?,
                r.get(11)?,
                r.get(12)?,
                r.get(13)?,
                r.get(14)?,
                r.get(15)?,
            ))
        })
        .map_err(sql)?;
    let arrays = arrays::load(conn).map_err(sql)?;
    let payers = payer::load(conn).map_err(sql)?;
    let mut jobs = Vec::new();
    for row in rows {
        jobs.push(decode_job(row.map_err(sql)?, &arrays, &payers, &store)?);
    }
    let mut out = conn
        .prepare(
            "SELECT job, COALESCE(SUM(CASE WHEN stream = 1 THEN length(data) END), 0),
                    COALESCE(SUM(CASE WHEN stream = 2 THEN length(data) END), 0)
             FROM output GROUP BY job",
        )
        .map_err(sql)?;
    let output = out
        .query_map([], |r| {
            Ok((
                r.get::<_, i64>(0)? as u64,
                r.get::<_, i64>(1)? as u64,
                r.get::<_, i64>(2)? as u64,
            ))
        })
        .map_err(sql)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(sql)?;
    let epoch: String = conn
        .query_row("SELECT value FROM meta WHERE key = 'epoch_ms'", [], |r| {
            r.get(0)
        })
        .map_err(sql)?;
    let epoch_ms = parse_epoch(&epoch, &store)?;
    let debits = debits::pending(conn).map_err(sql)?;
    Ok(Loaded {
        epoch_ms,
        jobs,
        output,
        debits,
    })
}

/// The reading side: kept output and usage, read on a connection of its own.
pub struct Reader(ReaderKind);

enum ReaderKind {
    Lite {
        conn: Mutex<Connection>,
        path: PathBuf,
    },
    Pg(pg::PgReader),
}

impl Reader {
    /// Opens a reader of the file the writer opened.
    pub fn open(path: &Path) -> Result<Reader, StoreError> {
        Reader::open_at(&Location::Sqlite(path.to_path_buf()))
    }

    /// Opens a reader of the store the writer opened.
    pub fn open_at(at: &Location) -> Result<Reader, StoreError> {
        Ok(Reader(match at {
            Location::Sqlite(path) => ReaderKind::Lite {
                conn: Mutex::new(schema::open_reader(path)?),
                path: path.clone(),
            },
            Location::Postgres(cfg) => ReaderKind::Pg(pg::PgReader::open(cfg)?),
        }))
    }

    /// The whole queue, read back as [`Store::open_at`] reads it (a follower
    /// taking the lease over).
    pub fn load(&self) -> Result<Loaded, StoreError> {
        match &self.0 {
            ReaderKind::Lite { conn, path } => {
                let conn = conn.lock().unwrap_or_else(|p| p.into_inner());
                load_jobs(&conn, path)
            }
            ReaderKind::Pg(r) => r.load(),
        }
    }

    /// How many jobs (array tasks included) the store holds.
    pub fn job_count(&self) -> Result<usize, StoreError> {
        match &self.0 {
            ReaderKind::Lite { conn, path } => {
                let conn = conn.lock().unwrap_or_else(|p| p.into_inner());
                conn.query_row("SELECT COUNT(*) FROM jobs", [], |r| r.get::<_, i64>(0))
                    .map(|n| n as usize)
                    .map_err(|source| StoreError::Sql {
                        path: path.clone(),
                        source,
                    })
            }
            ReaderKind::Pg(r) => r.job_count(),
        }
    }

    /// Up to `max` bytes of `stream` (1 stdout, 2 stderr) of job `id` from `from`.
    pub fn output(
        &self,
        id: u64,
        stream: u8,
        from: u64,
        max: usize,
    ) -> Result<Vec<u8>, StoreError> {
        match &self.0 {
            ReaderKind::Lite { conn, path } => {
                let conn = conn.lock().unwrap_or_else(|p| p.into_inner());
                let sql = |source| StoreError::Sql {
                    path: path.clone(),
                    source,
                };
                let mut stmt = conn
                    .prepare_cached(
                        "SELECT offset, data FROM output WHERE job = ?1 AND stream = ?2
                         AND offset + length(data) > ?3 ORDER BY offset",
                    )
                    .map_err(sql)?;
                let mut rows = stmt
                    .query(params![id as i64, stream, from as i64])
                    .map_err(sql)?;
                let mut chunks = Vec::new();
                while let Some(row) = rows.next().map_err(sql)? {
                    chunks.push((row.get(0).map_err(sql)?, row.get(1).map_err(sql)?));
                }
                Ok(join_output(chunks, from, max))
            }
            ReaderKind::Pg(r) => Ok(join_output(r.output(id, stream, from)?, from, max)),
        }
    }

    /// What the ranks of each job of `ids` used, as their nodes reported it
    /// (every id present; nothing reported: the default), in one read.
    pub fn jobs_usage(
        &self,
        ids: &[u64],
    ) -> Result<std::collections::HashMap<u64, JobUsage>, StoreError> {
        match &self.0 {
            ReaderKind::Lite { conn, path } => {
                let conn = conn.lock().unwrap_or_else(|p| p.into_inner());
                usage::jobs_usage(&conn, ids).map_err(|source| StoreError::Sql {
                    path: path.clone(),
                    source,
                })
            }
            ReaderKind::Pg(r) => r.jobs_usage(ids),
        }
    }
}

/// Up to `max` bytes from offset `from` of the stored chunks `(offset, data)`
/// (in offset order, each reaching past `from`), stopping at a gap.
fn join_output(chunks: Vec<(i64, Vec<u8>)>, from: u64, max: usize) -> Vec<u8> {
    let mut buf = Vec::new();
    for (offset, data) in chunks {
        let skip = (from as i64 - offset).max(0) as usize;
        if offset as u64 + skip as u64 != from + buf.len() as u64 {
            break; // a gap: never expected, stop at it
        }
        let take = &data[skip.min(data.len())..];
        let room = max - buf.len();
        buf.extend_from_slice(&take[..take.len().min(room)]);
        if buf.len() >= max {
            break;
        }
    }
    buf
}

#[cfg(test)]
pub(crate) mod testdb;
#[cfg(test)]
mod tests;
