//! The PostgreSQL backend of the queue: the same tables as the SQLite file
//! ([`super::schema`] and the modules beside it), with `BIGINT` for integers
//! and `BYTEA` for blobs, the same meaning, and the same version in `meta`.
//! The connection settings are accountd's (`[store] postgres`, a password
//! file, TLS verified against a CA; see `accountd::store::pg::link`), and so
//! is the error text, which carries PostgreSQL's own reason.
//!
//! [`PgWriter`] is the writer thread's backend: a group is one transaction.
//! A submission whose id exists is refused alone (`ON CONFLICT DO NOTHING`,
//! and for an array a savepoint undoing its rows); a write that fails for
//! another reason is refused alone too, by rolling the group back and applying
//! it again without that write. Every write is conditional on the rows it
//! names, never on what this process remembers, so that several batchd may
//! later share one database. The schema is created under an advisory lock
//! (two instances starting at once create it once). [`PgReader`] serves the
//! daemon's reads on a thread of its own, since the synchronous client must
//! not run on the daemon's async runtime. A connection the server ended is
//! made again at the next use.

use std::collections::HashMap;
use std::sync::Mutex;

use postgres::types::ToSql;
use postgres::{Client, Statement};

use super::writer::{Backend, Write};
use super::{
    ArrayRecord, JOB_COLUMNS, JobRecord, JobRow, JobUsage, Loaded, PendingDebit, PgConfig,
    RankUsage, StoreError, arrays, decode_job, parse_epoch, schema::SCHEMA_VERSION, usage,
};

/// The tables, as [`super::schema`] and its neighbours have them in SQLite.
pub const SCHEMA: &str = r#"
CREATE TABLE IF NOT EXISTS meta(
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS jobs(
    seq BIGINT PRIMARY KEY,
    id BIGINT NOT NULL UNIQUE,
    "user" TEXT NOT NULL,
    signed BYTEA NOT NULL,
    submitted_ms BIGINT NOT NULL,
    state BIGINT NOT NULL,
    attempts BIGINT NOT NULL DEFAULT 0,
    started_ms BIGINT,
    ended_ms BIGINT,
    nodes TEXT NOT NULL DEFAULT '',
    charged BIGINT NOT NULL DEFAULT 0,
    charge_seq BIGINT NOT NULL DEFAULT 0,
    done_ms BIGINT NOT NULL DEFAULT 0,
    exit BYTEA,
    reason TEXT,
    truncated BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS jobs_user ON jobs("user", seq);
CREATE TABLE IF NOT EXISTS output(
    job BIGINT NOT NULL,
    stream BIGINT NOT NULL,
    "offset" BIGINT NOT NULL,
    data BYTEA NOT NULL,
    PRIMARY KEY(job, stream, "offset")
);
CREATE TABLE IF NOT EXISTS debits(
    job BIGINT NOT NULL,
    seq BIGINT NOT NULL,
    "user" TEXT NOT NULL,
    amount BIGINT NOT NULL,
    start_us BIGINT NOT NULL,
    end_us BIGINT NOT NULL,
    refused TEXT,
    account TEXT,
    PRIMARY KEY(job, seq)
);
CREATE TABLE IF NOT EXISTS rank_usage(
    job BIGINT NOT NULL,
    attempt BIGINT NOT NULL,
    rank BIGINT NOT NULL,
    node TEXT NOT NULL,
    cpu_nanos BIGINT NOT NULL,
    peak_memory BIGINT,
    ended_ms BIGINT NOT NULL,
    PRIMARY KEY(job, attempt, rank)
);
CREATE TABLE IF NOT EXISTS job_payer(
    job BIGINT PRIMARY KEY,
    account TEXT,
    max_cost BIGINT
);
CREATE TABLE IF NOT EXISTS lease(
    queue TEXT PRIMARY KEY,
    holder TEXT NOT NULL,
    epoch BIGINT NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL
);
CREATE TABLE IF NOT EXISTS arrays(
    id BIGINT PRIMARY KEY,
    "user" TEXT NOT NULL,
    signed BYTEA NOT NULL,
    submitted_ms BIGINT NOT NULL,
    first_seq BIGINT NOT NULL,
    count BIGINT NOT NULL
);
"#;

/// The advisory lock key under which the schema is created ("batchd" in ASCII).
const SCHEMA_LOCK: i64 = 0x6261_7463_6864;

/// The advisory lock key under which a group inserts jobs: several batchd on one
/// database each number their submissions, so the number stored is the larger
/// of the submitter's and one past the largest stored, taken under this lock
/// (held to the commit) so that two instances never store the same one.
const SEQ_LOCK: i64 = 0x6261_7463_6873;

/// The arrival number a job numbered `$1` by its submitter is stored under.
macro_rules! next_seq {
    () => {
        "GREATEST($1, (SELECT COALESCE(MAX(seq) + 1, $1) FROM jobs))"
    };
}

/// A PostgreSQL error as a store error, with PostgreSQL's own reason.
pub fn pg_error(e: &postgres::Error) -> StoreError {
    StoreError::Postgres(accountd::store::pg::describe(e))
}

/// Connects once (TLS and password file as configured) and names the
/// connection `batchd` in `pg_stat_activity`.
pub fn connect(cfg: &PgConfig) -> Result<Client, StoreError> {
    let mut c = accountd::store::pg::connect(cfg)
        .map_err(|e| StoreError::Postgres(format!("{e} ({})", cfg.conninfo)))?;
    c.batch_execute("SET application_name = 'batchd'")
        .map_err(|e| pg_error(&e))?;
    Ok(c)
}

/// Creates the tables when missing and records the version and the epoch
/// (`now_ms` when the queue is new); refuses another version. Returns the
/// epoch.
pub fn prepare(c: &mut Client, now_ms: i64) -> Result<i64, StoreError> {
    let e = |e: postgres::Error| pg_error(&e);
    let mut tx = c.transaction().map_err(e)?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&SCHEMA_LOCK])
        .map_err(e)?;
    tx.batch_execute(SCHEMA).map_err(e)?;
    let insert = "INSERT INTO meta(key, value) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING";
    tx.execute(insert, &[&"schema_version", &SCHEMA_VERSION.to_string()])
        .map_err(e)?;
    tx.execute(insert, &[&"epoch_ms", &now_ms.to_string()])
        .map_err(e)?;
    let get = |tx: &mut postgres::Transaction<'_>, key: &str| -> Result<String, StoreError> {
        let row = tx
            .query_one("SELECT value FROM meta WHERE key = $1", &[&key])
            .map_err(e)?;
        Ok(row.get(0))
    };
    let version = get(&mut tx, "schema_version")?;
    if version != SCHEMA_VERSION.to_string() {
        return Err(StoreError::SchemaVersion {
            store: "(PostgreSQL)".into(),
            found: version,
        });
    }
    let epoch = get(&mut tx, "epoch_ms")?;
    tx.commit().map_err(e)?;
    parse_epoch(&epoch, "(PostgreSQL)")
}

/// Reads the whole queue back, as [`super::load_jobs`] does from SQLite.
pub fn load(c: &mut Client) -> Result<Loaded, StoreError> {
    let e = |e: postgres::Error| pg_error(&e);
    let store = "(PostgreSQL)";
    let arrays = arrays::decode(
        c.query(arrays::LOAD_SQL, &[])
            .map_err(e)?
            .iter()
            .map(|r| {
                (
                    r.get::<_, i64>(0) as u64,
                    r.get::<_, Vec<u8>>(1),
                    r.get::<_, i64>(2),
                    r.get::<_, i64>(3),
                )
            })
            .collect(),
    );
    let payers = c
        .query("SELECT job, account, max_cost FROM job_payer", &[])
        .map_err(e)?
        .iter()
        .map(|r| {
            (
                r.get::<_, i64>(0) as u64,
                super::Payer {
                    account: r.get(1),
                    max_cost: r.get(2),
                },
            )
        })
        .collect();
    let rows = c
        .query(&format!("SELECT {JOB_COLUMNS} FROM jobs ORDER BY seq"), &[])
        .map_err(e)?;
    let mut jobs = Vec::with_capacity(rows.len());
    for r in rows {
        let row: JobRow = (
            r.get(0),
            r.get(1),
            r.get(2),
            r.get(3),
            r.get(4),
            r.get(5),
            r.get(6),
            r.get(7),
            r.get(8),
            r.get(9),
            r.get(10),
            r.get(11),
            r.get(12),
            r.get(13),
            r.get(14),
            r.get(15),
        );
        jobs.push(decode_job(row, &arrays, &payers, store)?);
    }
    let output = c
        .query(
            "SELECT job,
                    COALESCE(SUM(CASE WHEN stream = 1 THEN octet_length(data) END), 0)::BIGINT,
                    COALESCE(SUM(CASE WHEN stream = 2 THEN octet_length(data) END), 0)::BIGINT
             FROM output GROUP BY job ORDER BY job",
            &[],
        )
        .map_err(e)?
        .iter()
        .map(|r| {
            (
                r.get::<_, i64>(0) as u64,
                r.get::<_, i64>(1) as u64,
                r.get::<_, i64>(2) as u64,
            )
        })
        .collect();
    let epoch: String = c
        .query_one("SELECT value FROM meta WHERE key = 'epoch_ms'", &[])
        .map_err(e)?
        .get(0);
    let debits = c
        .query(
            r#"SELECT job, seq, "user", amount, start_us, end_us, account FROM debits
               WHERE refused IS NULL ORDER BY end_us, job, seq"#,
            &[],
        )
        .map_err(e)?
        .iter()
        .map(|r| PendingDebit {
            job: r.get::<_, i64>(0) as u64,
            seq: r.get::<_, i64>(1) as u64,
            user: r.get(2),
            amount: r.get(3),
            start_us: r.get::<_, i64>(4) as u64,
            end_us: r.get::<_, i64>(5) as u64,
            account: r.get(6),
        })
        .collect();
    Ok(Loaded {
        epoch_ms: parse_epoch(&epoch, store)?,
        jobs,
        output,
        debits,
    })
}

/// A submitted job, numbered by `next_seq!`.
const INSERT_JOB: &str = concat!(
    r#"INSERT INTO jobs(seq, id, "user", signed, submitted_ms, state) VALUES ("#,
    next_seq!(),
    ", $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING"
);

/// The writer thread's PostgreSQL backend.
pub struct PgWriter {
    cfg: PgConfig,
    client: Option<Client>,
    statements: HashMap<&'static str, Statement>,
}

/// What one write did inside the group: `Ok(Err)` a refusal of that write
/// alone (a duplicate), `Err` a failure of the statement (the group is then
/// rolled back).
type One = Result<Result<(), StoreError>, postgres::Error>;

impl PgWriter {
    /// Connects, prepares the schema, and reads the queue back.
    pub fn open(cfg: &PgConfig, now_ms: i64) -> Result<(PgWriter, Loaded), StoreError> {
        let mut c = connect(cfg)?;
        prepare(&mut c, now_ms)?;
        let loaded = load(&mut c)?;
        Ok((
            PgWriter {
                cfg: cfg.clone(),
                client: Some(c),
                statements: HashMap::new(),
            },
            loaded,
        ))
    }

    fn exec(
        &mut self,
        sql: &'static str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<u64, postgres::Error> {
        let Some(c) = self.client.as_mut() else {
            unreachable!("a group runs on a connection");
        };
        let stmt = match self.statements.get(sql) {
            Some(s) => s.clone(),
            None => {
                let s = c.prepare(sql)?;
                self.statements.insert(sql, s.clone());
                s
            }
        };
        c.execute(&stmt, params)
    }

    fn simple(&mut self, sql: &str) -> Result<(), postgres::Error> {
        match self.client.as_mut() {
            Some(c) => c.batch_execute(sql),
            None => unreachable!("a group runs on a connection"),
        }
    }

    fn one(&mut self, write: &Write) -> One {
        match write {
            Write::Insert(j) => {
                let signed = postcard::to_allocvec(j.signed.as_ref()).unwrap_or_default();
                self.exec("SELECT pg_advisory_xact_lock($1)", &[&SEQ_LOCK])?;
                let n = self.exec(
                    INSERT_JOB,
                    &[
                        &j.seq,
                        &(j.id as i64),
                        &j.user,
                        &signed,
                        &j.submitted_ms,
                        &i64::from(j.state.code()),
                    ],
                )?;
                if n == 0 {
                    return Ok(Err(StoreError::Duplicate(j.id)));
                }
                if let Some(p) = &j.payer {
                    self.payer(j.id, p)?;
                }
                self.update(j).map(Ok)
            }
            Write::InsertArray(a) => self.insert_array(a),
            Write::Fenced {
                queue,
                epoch,
                write,
            } => {
                // FOR SHARE: a takeover's UPDATE of the row waits for this commit.
                let held = self.exec(
                    "SELECT 1 FROM lease WHERE queue = $1 AND epoch = $2 FOR SHARE",
                    &[queue, &(*epoch as i64)],
                )?;
                if held == 0 {
                    return Ok(Err(StoreError::Fenced {
                        queue: queue.clone(),
                        epoch: *epoch,
                    }));
                }
                self.one(write)
            }
            Write::UpdateMany(jobs) => {
                for j in jobs {
                    self.update(j)?;
                }
                Ok(Ok(()))
            }
            Write::Update(j) => self.update(j).map(Ok),
            Write::Charge(j, d) => {
                self.update(j)?;
                self.debit(d).map(Ok)
            }
            Write::Delivered { job, seq } => self
                .exec(
                    "DELETE FROM debits WHERE job = $1 AND seq = $2",
                    &[&(*job as i64), &(*seq as i64)],
                )
                .map(|_| Ok(())),
            Write::Refused { job, seq, why } => self
                .exec(
                    "UPDATE debits SET refused = $3 WHERE job = $1 AND seq = $2",
                    &[&(*job as i64), &(*seq as i64), why],
                )
                .map(|_| Ok(())),
            Write::RankUsage(u) => self.rank_usage(u).map(Ok),
            Write::Output {
                id,
                stream,
                offset,
                data,
            } => self
                .exec(
                    r#"INSERT INTO output(job, stream, "offset", data) VALUES ($1, $2, $3, $4)
                       ON CONFLICT DO NOTHING"#,
                    &[&(*id as i64), &i64::from(*stream), &(*offset as i64), data],
                )
                .map(|_| Ok(())),
        }
    }

    /// An array and its tasks, or nothing of it when its id or a task's exists.
    fn insert_array(&mut self, a: &ArrayRecord) -> One {
        let signed = postcard::to_allocvec(a.signed.as_ref()).unwrap_or_default();
        self.exec("SELECT pg_advisory_xact_lock($1)", &[&SEQ_LOCK])?;
        let asked = a.tasks.first().map_or(0, |t| t.seq);
        let first_seq: i64 = match self.client.as_mut() {
            Some(c) => c
                .query_one(concat!("SELECT ", next_seq!()), &[&asked])?
                .get(0),
            None => unreachable!("a group runs on a connection"),
        };
        let shift = first_seq - asked;
        self.simple("SAVEPOINT arr")?;
        let n = self.exec(
            r#"INSERT INTO arrays(id, "user", signed, submitted_ms, first_seq, count)
               VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING"#,
            &[
                &(a.id as i64),
                &a.user,
                &signed,
                &a.submitted_ms,
                &first_seq,
                &(a.tasks.len() as i64),
            ],
        )?;
        let mut all = n == 1;
        if all && !a.tasks.is_empty() {
            let seqs: Vec<i64> = a.tasks.iter().map(|t| t.seq + shift).collect();
            let ids: Vec<i64> = a.tasks.iter().map(|t| t.id as i64).collect();
            let users: Vec<&str> = a.tasks.iter().map(|t| t.user.as_str()).collect();
            let times: Vec<i64> = a.tasks.iter().map(|t| t.submitted_ms).collect();
            let states: Vec<i64> = a.tasks.iter().map(|t| i64::from(t.state.code())).collect();
            let n = self.exec(
                r#"INSERT INTO jobs(seq, id, "user", signed, submitted_ms, state)
                   SELECT s, i, u, '\x'::bytea, t, st
                   FROM unnest($1::BIGINT[], $2::BIGINT[], $3::TEXT[], $4::BIGINT[], $5::BIGINT[])
                        AS x(s, i, u, t, st)
                   ON CONFLICT DO NOTHING"#,
                &[&seqs, &ids, &users, &times, &states],
            )?;
            all = n == a.tasks.len() as u64;
        }
        if let (true, Some(p)) = (all, a.tasks.first().and_then(|t| t.payer.as_ref())) {
            self.payer(a.id, p)?;
        }
        if all {
            self.simple("RELEASE SAVEPOINT arr")?;
            Ok(Ok(()))
        } else {
            self.simple("ROLLBACK TO SAVEPOINT arr; RELEASE SAVEPOINT arr")?;
            Ok(Err(StoreError::Duplicate(a.id)))
        }
    }

    /// Records who pays for signed job `job` ([`super::payer`]).
    fn payer(&mut self, job: u64, p: &super::Payer) -> Result<(), postgres::Error> {
        self.exec(
            "INSERT INTO job_payer(job, account, max_cost) VALUES ($1, $2, $3)
             ON CONFLICT (job) DO UPDATE SET account = EXCLUDED.account, max_cost = EXCLUDED.max_cost",
            &[&(job as i64), &p.account, &p.max_cost],
        )
        .map(|_| ())
    }

    fn update(&mut self, j: &JobRecord) -> Result<(), postgres::Error> {
        let exit = j
            .exit
            .map(|e| postcard::to_allocvec(&e).unwrap_or_default());
        self.exec(
            "UPDATE jobs SET state = $2, attempts = $3, started_ms = $4, ended_ms = $5,
                    nodes = $6, charged = $7, charge_seq = $8, done_ms = $9, exit = $10,
                    reason = $11, truncated = $12
             WHERE id = $1",
            &[
                &(j.id as i64),
                &i64::from(j.state.code()),
                &i64::from(j.attempts),
                &j.started_ms,
                &j.ended_ms,
                &j.nodes.join(","),
                &j.charged,
                &(j.charge_seq as i64),
                &j.done_ms,
                &exit,
                &j.reason,
                &(j.truncated as i64),
            ],
        )?;
        Ok(())
    }

    fn debit(&mut self, d: &PendingDebit) -> Result<(), postgres::Error> {
        self.exec(
            r#"INSERT INTO debits(job, seq, "user", amount, start_us, end_us, refused, account)
               VALUES ($1, $2, $3, $4, $5, $6, NULL, $7)
               ON CONFLICT (job, seq) DO UPDATE SET "user" = EXCLUDED."user",
                   amount = EXCLUDED.amount, start_us = EXCLUDED.start_us,
                   end_us = EXCLUDED.end_us, refused = NULL, account = EXCLUDED.account"#,
            &[
                &(d.job as i64),
                &(d.seq as i64),
                &d.user,
                &d.amount,
                &(d.start_us as i64),
                &(d.end_us as i64),
                &d.account,
            ],
        )?;
        Ok(())
    }

    fn rank_usage(&mut self, u: &RankUsage) -> Result<(), postgres::Error> {
        self.exec(
            "INSERT INTO rank_usage(job, attempt, rank, node, cpu_nanos, peak_memory, ended_ms)
             VALUES ($1, $2, $3, $4, $5, $6, $7)
             ON CONFLICT (job, attempt, rank) DO UPDATE SET node = EXCLUDED.node,
                 cpu_nanos = EXCLUDED.cpu_nanos, peak_memory = EXCLUDED.peak_memory,
                 ended_ms = EXCLUDED.ended_ms",
            &[
                &(u.job as i64),
                &i64::from(u.attempt),
                &i64::from(u.rank),
                &u.node,
                &(u.cpu_nanos.min(i64::MAX as u64) as i64),
                &u.peak_memory.map(|p| p.min(i64::MAX as u64) as i64),
                &u.ended_ms,
            ],
        )?;
        Ok(())
    }

    /// A live connection, made again when the last one was lost.
    fn connected(&mut self) -> Result<(), String> {
        if self.client.as_ref().is_some_and(Client::is_closed) {
            tracing::warn!("lost the queue's connection to PostgreSQL; reconnecting");
            self.client = None;
        }
        if self.client.is_none() {
            self.statements.clear();
            self.client = Some(connect(&self.cfg).map_err(|e| e.to_string())?);
        }
        Ok(())
    }

    /// Drops a connection that failed in a way that leaves its state unknown.
    fn lose(&mut self, e: &postgres::Error) -> String {
        if accountd::store::pg::link::is_lost(e) {
            self.client = None;
        }
        accountd::store::pg::describe(e)
    }
}

impl Backend for PgWriter {
    fn apply(&mut self, batch: &[&Write]) -> Result<Vec<Result<(), StoreError>>, String> {
        self.connected()?;
        // Writes that failed alone in an earlier try of this group.
        let mut failed: Vec<Option<String>> = vec![None; batch.len()];
        loop {
            if let Err(e) = self.simple("BEGIN") {
                return Err(self.lose(&e));
            }
            let mut results = Vec::with_capacity(batch.len());
            let mut broke = None;
            for (i, write) in batch.iter().enumerate() {
                if let Some(why) = &failed[i] {
                    results.push(Err(StoreError::Postgres(why.clone())));
                    continue;
                }
                match self.one(write) {
                    Ok(r) => results.push(r),
                    Err(e) => {
                        broke = Some((i, e));
                        break;
                    }
                }
            }
            match broke {
                None => {
                    return match self.simple("COMMIT") {
                        Ok(()) => Ok(results),
                        Err(e) => Err(self.lose(&e)),
                    };
                }
                Some((i, e)) => {
                    let why = self.lose(&e);
                    if self.client.is_none() {
                        return Err(why);
                    }
                    if let Err(e) = self.simple("ROLLBACK") {
                        return Err(self.lose(&e));
                    }
                    tracing::warn!(error = %why, "a queue write failed; the rest of its group is written again without it");
                    failed[i] = Some(why);
                }
            }
        }
    }
}

type ReadJob = Box<dyn FnOnce(Result<&mut Client, StoreError>) + Send>;

/// The reading side on PostgreSQL: a thread with its own connection.
pub struct PgReader {
    tx: Mutex<std::sync::mpsc::Sender<ReadJob>>,
}

impl PgReader {
    /// Connects and starts the reading thread.
    pub fn open(cfg: &PgConfig) -> Result<PgReader, StoreError> {
        let cfg = cfg.clone();
        let (tx, rx) = std::sync::mpsc::channel::<ReadJob>();
        let (first_tx, first_rx) = std::sync::mpsc::sync_channel(1);
        std::thread::Builder::new()
            .name("batchd-reader".into())
            .spawn(move || {
                // Connected here: the synchronous client must not run on an
                // async task's thread.
                let mut client = match connect(&cfg) {
                    Ok(c) => {
                        let _ = first_tx.send(Ok(()));
                        Some(c)
                    }
                    Err(e) => {
                        let _ = first_tx.send(Err(e));
                        return;
                    }
                };
                for job in rx {
                    if client.as_ref().is_some_and(Client::is_closed) {
                        client = None;
                    }
                    if client.is_none() {
                        client = connect(&cfg).ok();
                    }
                    match client.as_mut() {
                        Some(c) => job(Ok(c)),
                        None => job(Err(StoreError::Postgres(
                            "no connection to PostgreSQL; retry shortly".into(),
                        ))),
                    }
                }
            })
            .map_err(StoreError::Thread)?;
        first_rx.recv().map_err(|_| StoreError::Closed)??;
        Ok(PgReader { tx: Mutex::new(tx) })
    }

    fn call<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Client) -> Result<T, postgres::Error> + Send + 'static,
    ) -> Result<T, StoreError> {
        self.call_store(move |c| f(c).map_err(|e| pg_error(&e)))
    }

    fn call_store<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Client) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let (rtx, rrx) = std::sync::mpsc::sync_channel(1);
        let job: ReadJob = Box::new(move |c| {
            let _ = rtx.send(c.and_then(f));
        });
        self.tx
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .send(job)
            .map_err(|_| StoreError::Closed)?;
        rrx.recv().map_err(|_| StoreError::Closed)?
    }

    /// The chunks `(offset, data)` of `stream` of job `id` reaching past `from`.
    pub(super) fn output(
        &self,
        id: u64,
        stream: u8,
        from: u64,
    ) -> Result<Vec<(i64, Vec<u8>)>, StoreError> {
        self.call(move |c| {
            Ok(c.query(
                r#"SELECT "offset", data FROM output WHERE job = $1 AND stream = $2
                   AND "offset" + octet_length(data) > $3 ORDER BY "offset""#,
                &[&(id as i64), &i64::from(stream), &(from as i64)],
            )?
            .iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect())
        })
    }

    /// The whole queue, as [`load`] reads it.
    pub(super) fn load(&self) -> Result<Loaded, StoreError> {
        self.call_store(load)
    }

    /// How many jobs the store holds.
    pub(super) fn job_count(&self) -> Result<usize, StoreError> {
        self.call(|c| {
            let n: i64 = c.query_one("SELECT COUNT(*) FROM jobs", &[])?.get(0);
            Ok(n as usize)
        })
    }

    /// What job `id`'s ranks used.
    pub(super) fn job_usage(&self, id: u64) -> Result<JobUsage, StoreError> {
        self.call(move |c| {
            let row = c.query_opt(usage::USAGE_SQL, &[&(id as i64)])?;
            Ok(usage::usage_of(
                row.map(|r| (r.get(0), r.get(1), r.get(2), r.get(3))),
            ))
        })
    }
}
