//! The writer thread's PostgreSQL backend ([`PgWriter`]): a group of writes is
//! one transaction; a submission whose id exists is refused alone, and a write
//! that fails for another reason is refused alone by applying the group again
//! without it. Jobs are numbered under an advisory lock so that several batchd
//! on one database never store the same arrival number. A group whose connection
//! was lost (the primary killed, a standby being promoted) is written again on a
//! new connection for up to [`RECONNECT_FOR`], so that a failover of a fraction of
//! a second loses no change the scheduler made.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use postgres::types::ToSql;
use postgres::{Client, Statement};

use super::{connect, load, prepare};
use crate::store::writer::{Backend, Write};
use crate::store::{ArrayRecord, JobRecord, Loaded, PendingDebit, PgConfig, RankUsage, StoreError};

/// The advisory lock key under which a group inserts jobs: several batchd on one
/// database each number their submissions, so the number stored is the larger
/// of the submitter's and one past the largest stored, taken under this lock
/// (held to the commit) so that two instances never store the same one.
/// How long a group whose connection was lost is tried again on new connections:
/// longer than a standby's promotion (0.1 to 0.3 s in the fault test) and than the
/// lease (3 s by default), after which a stale leader's writes are refused anyway.
const RECONNECT_FOR: Duration = Duration::from_secs(5);
/// The pause between two such tries.
const RECONNECT_PAUSE: Duration = Duration::from_millis(100);

const SEQ_LOCK: i64 = 0x6261_7463_6873;

/// The arrival number a job numbered `$1` by its submitter is stored under.
macro_rules! next_seq {
    () => {
        "GREATEST($1, (SELECT COALESCE(MAX(seq) + 1, $1) FROM jobs))"
    };
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

    /// Records who pays for signed job `job` ([`crate::store::payer`]).
    fn payer(&mut self, job: u64, p: &crate::store::Payer) -> Result<(), postgres::Error> {
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
        let deadline = Instant::now() + RECONNECT_FOR;
        loop {
            match self.apply_once(batch) {
                // No connection left: the group did not commit (or its COMMIT's
                // answer was lost; written again, a job update is the same row, and
                // a submission already stored is refused alone as a repeat).
                Err(why) if self.client.is_none() && Instant::now() < deadline => {
                    tracing::warn!(error = %why,
                        "queue store: the connection to PostgreSQL was lost; writing the group again");
                    std::thread::sleep(RECONNECT_PAUSE);
                }
                done => return done,
            }
        }
    }
}

impl PgWriter {
    /// One try of [`Backend::apply`] on the connection there is (or a new one).
    fn apply_once(&mut self, batch: &[&Write]) -> Result<Vec<Result<(), StoreError>>, String> {
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
