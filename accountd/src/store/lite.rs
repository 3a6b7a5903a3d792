//! The SQLite backend: [`Rows`] in SQLite's SQL on one connection (cached
//! statements), and the writer and reader over the file [`super::schema`]
//! opens. Write transactions are `BEGIN IMMEDIATE`, so one writer at a time
//! holds the file; savepoints keep a failed job's writes out of the batch.

use proto::account::{AccountError, Claim, LedgerEntry, RankEnd, ReportBy, ReportRow};
use rusqlite::{Connection, OptionalExtension, Row, TransactionBehavior, params};

use super::Refusal;
use super::query::{ENTRY_COLUMNS, EntryColumns, unknown_grouping};
use super::rows::{
    AccountRow, ChainedFn, ChargeContent, ClaimRecord, EndRecord, EntryRow, Keep, Reader, Rows,
    StoredCharge, Tx, Writer, claim_from_row, end_with_width, storage,
};

/// [`Rows`] on a SQLite connection, transaction or savepoint.
pub struct Lite<C>(pub C);

/// What lends a [`Connection`]: a connection (owned or borrowed) or a transaction.
pub trait AsConn {
    /// The connection.
    fn conn(&self) -> &Connection;
}

impl AsConn for Connection {
    fn conn(&self) -> &Connection {
        self
    }
}

impl AsConn for &Connection {
    fn conn(&self) -> &Connection {
        self
    }
}

impl AsConn for rusqlite::Transaction<'_> {
    fn conn(&self) -> &Connection {
        self
    }
}

/// An entry's columns from a row selected with [`ENTRY_COLUMNS`].
pub fn entry_columns(r: &Row<'_>) -> rusqlite::Result<EntryColumns> {
    Ok(EntryColumns {
        id: r.get(0)?,
        at_us: r.get(1)?,
        user: r.get(2)?,
        amount: r.get(3)?,
        kind: r.get(4)?,
        node: r.get(5)?,
        job: r.get(6)?,
        seq: r.get(7)?,
        rank: r.get(8)?,
        interval: (r.get(9)?, r.get(10)?),
        cpu_us: r.get(11)?,
        actor: r.get(12)?,
        reason: r.get(13)?,
        balance_after: r.get(14)?,
    })
}

impl<C: AsConn> Lite<C> {
    fn c(&self) -> &Connection {
        self.0.conn()
    }

    /// `SELECT {what}` (columns and table) of the row keyed by claim `c`.
    fn keyed_row<T>(
        &self,
        what: &str,
        c: &Claim,
        row: impl FnOnce(&Row<'_>) -> rusqlite::Result<T>,
    ) -> Result<Option<T>, AccountError> {
        let sql =
            format!("SELECT {what} WHERE user = ?1 AND job = ?2 AND attempt = ?3 AND rank = ?4");
        self.c()
            .prepare_cached(&sql)
            .and_then(|mut s| {
                s.query_row(params![c.user, c.job.to_string(), c.attempt, c.rank], row)
                    .optional()
            })
            .map_err(storage)
    }

    /// Inserts into `table` the row of claim `c` recorded by `node`: its key,
    /// node and digest, then the columns `rest` names with their values.
    fn insert_keyed(
        &self,
        table: &str,
        c: &Claim,
        node: &str,
        rest: &[(&str, &dyn rusqlite::ToSql)],
    ) -> Result<(), AccountError> {
        let (job, digest) = (c.job.to_string(), &c.digest[..]);
        let mut values: Vec<&dyn rusqlite::ToSql> =
            vec![&c.user, &job, &c.attempt, &c.rank, &node, &digest];
        values.extend(rest.iter().map(|(_, v)| *v));
        let columns: Vec<&str> = rest.iter().map(|(name, _)| *name).collect();
        let marks: Vec<String> = (1..=values.len()).map(|i| format!("?{i}")).collect();
        let sql = format!(
            "INSERT INTO {table}(user, job, attempt, rank, node, digest, {}) VALUES ({})",
            columns.join(", "),
            marks.join(", ")
        );
        self.c()
            .prepare_cached(&sql)
            .and_then(|mut s| s.execute(&values[..]))
            .map(|_| ())
            .map_err(storage)
    }

    /// Every row of `SELECT user, job, attempt, rank, node, digest, {rest}`,
    /// each made by `row` from the row and its claim, node and digest.
    fn claim_rows<T>(
        &self,
        rest: &str,
        mut row: impl FnMut(&Row<'_>, Claim, String, Vec<u8>) -> Result<T, AccountError>,
    ) -> Result<Vec<T>, AccountError> {
        let sql = format!("SELECT user, job, attempt, rank, node, digest, {rest}");
        let mut s = self.c().prepare(&sql).map_err(storage)?;
        let mut rows = s.query([]).map_err(storage)?;
        let mut out = Vec::new();
        while let Some(r) = rows.next().map_err(storage)? {
            let (claim, node, digest) = claim_columns(r)?;
            out.push(row(r, claim, node, digest)?);
        }
        Ok(out)
    }
}

impl<C: AsConn> Rows for Lite<C> {
    fn balance_of(&mut self, user: &str) -> Result<Option<i64>, AccountError> {
        self.c()
            .prepare_cached("SELECT balance FROM accounts WHERE user = ?1")
            .and_then(|mut s| s.query_row([user], |r| r.get(0)).optional())
            .map_err(storage)
    }

    fn lock_balance(&mut self, user: &str) -> Result<Option<i64>, AccountError> {
        self.balance_of(user)
    }

    fn set_balance(&mut self, user: &str, balance: i64) -> Result<(), AccountError> {
        self.c()
            .prepare_cached("UPDATE accounts SET balance = ?1 WHERE user = ?2")
            .and_then(|mut s| s.execute(params![balance, user]))
            .map(|_| ())
            .map_err(storage)
    }

    fn next_entry_id(&mut self) -> Result<i64, AccountError> {
        self.c()
            .prepare_cached(
                "SELECT COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'entries'), 0) + 1",
            )
            .and_then(|mut s| s.query_row([], |r| r.get(0)))
            .map_err(storage)
    }

    fn last_hash(&mut self) -> Result<Option<Vec<u8>>, AccountError> {
        self.c()
            .prepare_cached("SELECT hash FROM entries ORDER BY id DESC LIMIT 1")
            .and_then(|mut s| s.query_row([], |r| r.get(0)).optional())
            .map(Option::flatten)
            .map_err(storage)
    }

    fn insert_entry(&mut self, e: &EntryRow<'_>) -> Result<(), AccountError> {
        self.c()
            .prepare_cached(
                "INSERT INTO entries(id, at_us, user, amount, kind, node, job, seq, rank,
                     interval_start_us, interval_end_us, cpu_us, idem_key, actor, reason,
                     balance_after, hash)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)",
            )
            .and_then(|mut s| {
                s.execute(params![
                    e.id,
                    e.at_us,
                    e.user,
                    e.amount,
                    e.kind,
                    e.key.map(|k| k.0),
                    e.key.map(|k| k.1),
                    e.key.map(|k| k.2),
                    e.rank,
                    e.interval.map(|i| i.0),
                    e.interval.map(|i| i.1),
                    e.cpu_us,
                    e.key.map(|k| k.3),
                    e.actor,
                    e.reason,
                    e.balance_after,
                    e.hash
                ])
            })
            .map(|_| ())
            .map_err(storage)
    }

    fn charge_by_key(&mut self, idem: &str) -> Result<Option<StoredCharge>, AccountError> {
        self.c()
            .prepare_cached(
                "SELECT id, balance_after, user, amount, rank, interval_start_us, interval_end_us,
                        cpu_us, reason
                 FROM entries WHERE idem_key = ?1",
            )
            .and_then(|mut s| {
                s.query_row([idem], |r| {
                    Ok((
                        r.get(0)?,
                        r.get(1)?,
                        ChargeContent {
                            user: r.get(2)?,
                            amount: r.get(3)?,
                            rank: r.get(4)?,
                            interval: (r.get(5)?, r.get(6)?),
                            cpu_us: r.get(7)?,
                            reason: r.get(8)?,
                        },
                    ))
                })
                .optional()
            })
            .map_err(storage)
    }

    fn net_by_key_range(&mut self, lo: &str, hi: &str, user: &str) -> Result<i64, AccountError> {
        self.c()
            .prepare_cached(
                "SELECT COALESCE(SUM(amount), 0) FROM entries
                 WHERE idem_key >= ?1 AND idem_key < ?2 AND user = ?3",
            )
            .and_then(|mut s| s.query_row(params![lo, hi, user], |row| row.get(0)))
            .map_err(storage)
    }

    fn insert_account(&mut self, user: &str, now: i64, actor: &str) -> Result<bool, AccountError> {
        self.c()
            .prepare_cached(
                "INSERT INTO accounts(user, balance, created_us, created_by) VALUES (?1, 0, ?2, ?3)
                 ON CONFLICT(user) DO NOTHING",
            )
            .and_then(|mut s| s.execute(params![user, now, actor]))
            .map(|n| n > 0)
            .map_err(storage)
    }

    fn claim_of(&mut self, c: &Claim) -> Result<Option<ClaimRecord>, AccountError> {
        self.keyed_row("node, digest, at_us FROM claims", c, |r| {
            Ok(ClaimRecord {
                node: r.get(0)?,
                digest: r.get(1)?,
                at_us: r.get(2)?,
            })
        })
    }

    fn insert_claim(&mut self, c: &Claim, node: &str, now: i64) -> Result<(), AccountError> {
        self.insert_keyed("claims", c, node, &[("at_us", &now)])
    }

    fn end_of(&mut self, c: &Claim) -> Result<Option<EndRecord>, AccountError> {
        self.keyed_row("node, at_us FROM rank_ends", c, |r| {
            Ok(EndRecord {
                node: r.get(0)?,
                at_us: r.get(1)?,
            })
        })
    }

    fn insert_end(&mut self, e: &RankEnd, node: &str, now: i64) -> Result<(), AccountError> {
        self.insert_keyed(
            "rank_ends",
            &e.claim,
            node,
            &[("width", &e.width), ("at_us", &now)],
        )
    }

    fn ended_attempt(&mut self, user: &str, job: &str) -> Result<Option<(u32, u32)>, AccountError> {
        self.c()
            .prepare_cached(
                "SELECT attempt, MAX(width) FROM rank_ends WHERE user = ?1 AND job = ?2
                 GROUP BY attempt HAVING COUNT(*) >= MAX(width) ORDER BY attempt LIMIT 1",
            )
            .and_then(|mut s| {
                s.query_row(params![user, job], |r| Ok((r.get(0)?, r.get(1)?)))
                    .optional()
            })
            .map_err(storage)
    }

    fn insert_refusal(&mut self, now: i64, r: &Refusal) -> Result<(), AccountError> {
        self.c()
            .prepare_cached(
                "INSERT INTO refusals(at_us, role, name, op, code, message, count)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            )
            .and_then(|mut s| {
                let count = i64::try_from(r.count).unwrap_or(i64::MAX);
                s.execute(params![
                    now,
                    r.role,
                    r.name,
                    r.op,
                    format!("{:?}", r.code),
                    r.message,
                    count
                ])
            })
            .map(|_| ())
            .map_err(storage)
    }

    fn history(
        &mut self,
        user: &str,
        after: i64,
        since: i64,
        until: i64,
        limit: i64,
    ) -> Result<Vec<LedgerEntry>, AccountError> {
        let sql = format!(
            "SELECT {} FROM entries
             WHERE user = ?1 AND id > ?2 AND at_us >= ?3 AND at_us < ?4
             ORDER BY id LIMIT ?5",
            ENTRY_COLUMNS.join(", ")
        );
        let mut stmt = self.c().prepare_cached(&sql).map_err(storage)?;
        let rows = stmt
            .query_map(params![user, after, since, until, limit], entry_columns)
            .map_err(storage)?;
        rows.map(|r| r.map(LedgerEntry::from))
            .collect::<Result<Vec<_>, _>>()
            .map_err(storage)
    }

    fn report(
        &mut self,
        by: ReportBy,
        since: i64,
        until: i64,
    ) -> Result<Vec<ReportRow>, AccountError> {
        let group = match by {
            ReportBy::User => "user",
            ReportBy::Node => "node",
            ReportBy::Day => "date(at_us / 1000000, 'unixepoch')",
            _ => return Err(unknown_grouping()),
        };
        let sql = format!(
            "SELECT {group} AS k, SUM(amount), SUM(COALESCE(cpu_us, 0)),
                    COUNT(DISTINCT node || '/' || job)
             FROM entries
             WHERE kind IN ('debit', 'refund') AND at_us >= ?1 AND at_us < ?2
             GROUP BY k ORDER BY k"
        );
        let mut stmt = self.c().prepare_cached(&sql).map_err(storage)?;
        let rows = stmt
            .query_map(params![since, until], |r| {
                Ok(report_row(r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
            })
            .map_err(storage)?;
        rows.collect::<Result<Vec<_>, _>>().map_err(storage)
    }

    fn accounts(&mut self) -> Result<Vec<AccountRow>, AccountError> {
        let mut s = self
            .c()
            .prepare("SELECT user, balance, created_us, created_by FROM accounts ORDER BY user")
            .map_err(storage)?;
        let rows = s
            .query_map([], |r| {
                Ok(AccountRow {
                    user: r.get(0)?,
                    balance: r.get(1)?,
                    created_us: r.get(2)?,
                    created_by: r.get(3)?,
                })
            })
            .map_err(storage)?;
        rows.collect::<Result<Vec<_>, _>>().map_err(storage)
    }

    fn claims(&mut self) -> Result<Vec<(Claim, ClaimRecord)>, AccountError> {
        self.claim_rows("at_us FROM claims", |r, claim, node, digest| {
            let at_us = r.get(6).map_err(storage)?;
            Ok((claim, ClaimRecord::of(node, digest, at_us)))
        })
    }

    fn ends(&mut self) -> Result<Vec<(RankEnd, EndRecord)>, AccountError> {
        self.claim_rows("width, at_us FROM rank_ends", |r, claim, node, _| {
            let width: i64 = r.get(6).map_err(storage)?;
            let end = end_with_width(claim, width)?;
            let at_us = r.get(7).map_err(storage)?;
            Ok((end, EndRecord { node, at_us }))
        })
    }

    fn each_chained(&mut self, f: &mut ChainedFn<'_>) -> Result<(), AccountError> {
        let sql = format!(
            "SELECT {}, hash, idem_key FROM entries ORDER BY id",
            ENTRY_COLUMNS.join(", ")
        );
        let mut s = self.c().prepare(&sql).map_err(storage)?;
        let mut rows = s.query([]).map_err(storage)?;
        while let Some(r) = rows.next().map_err(storage)? {
            let cols = entry_columns(r).map_err(storage)?;
            let hash: Option<Vec<u8>> = r.get(15).map_err(storage)?;
            let idem: Option<String> = r.get(16).map_err(storage)?;
            f(cols, idem, hash);
        }
        Ok(())
    }

    fn duplicate_keys(&mut self, limit: usize) -> Result<Vec<(String, Vec<i64>)>, AccountError> {
        let mut s = self
            .c()
            .prepare(
                "SELECT idem_key, group_concat(id) FROM entries WHERE idem_key IS NOT NULL
                 GROUP BY idem_key HAVING count(*) > 1 ORDER BY idem_key LIMIT ?1",
            )
            .map_err(storage)?;
        let rows = s
            .query_map([limit as i64], |r| {
                Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
            })
            .map_err(storage)?;
        let mut out = Vec::new();
        for row in rows {
            let (key, ids) = row.map_err(storage)?;
            let mut ids = ids
                .split(',')
                .map(|id| id.parse::<i64>().map_err(storage))
                .collect::<Result<Vec<i64>, _>>()?;
            ids.sort_unstable();
            out.push((key, ids));
        }
        Ok(out)
    }

    fn missing_ids(&mut self) -> Result<Vec<(i64, i64)>, AccountError> {
        let c = self.c();
        let mut s = c
            .prepare(
                "SELECT prev + 1, id - 1 FROM (
                     SELECT id, LAG(id, 1, 0) OVER (ORDER BY id) AS prev FROM entries
                 ) WHERE id > prev + 1",
            )
            .map_err(storage)?;
        let rows = s
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .map_err(storage)?;
        let mut gaps = rows.collect::<Result<Vec<_>, _>>().map_err(storage)?;
        let last: i64 = c
            .query_row("SELECT COALESCE(MAX(id), 0) FROM entries", [], |r| r.get(0))
            .map_err(storage)?;
        let given_out: i64 = c
            .query_row(
                "SELECT seq FROM sqlite_sequence WHERE name = 'entries'",
                [],
                |r| r.get(0),
            )
            .optional()
            .map_err(storage)?
            .unwrap_or(0);
        if given_out > last {
            gaps.push((last + 1, given_out));
        }
        Ok(gaps)
    }

    fn integrity(&mut self) -> Result<Option<String>, AccountError> {
        let check: String = self
            .c()
            .query_row("PRAGMA quick_check", [], |r| r.get(0))
            .map_err(storage)?;
        Ok((check != "ok").then(|| format!("SQLite quick_check failed: {check}")))
    }

    fn doc(&mut self, key: &str) -> Result<Option<String>, AccountError> {
        self.c()
            .prepare_cached("SELECT value FROM project_docs WHERE key = ?1")
            .and_then(|mut s| s.query_row([key], |r| r.get(0)).optional())
            .map_err(storage)
    }

    fn put_doc(&mut self, key: &str, value: &str) -> Result<(), AccountError> {
        self.c()
            .prepare_cached(
                "INSERT INTO project_docs(key, value) VALUES (?1, ?2)
                 ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            )
            .and_then(|mut s| s.execute([key, value]))
            .map(|_| ())
            .map_err(storage)
    }

    fn docs(&mut self, prefix: &str) -> Result<Vec<(String, String)>, AccountError> {
        let (lo, hi) = super::rows::prefix_range(prefix);
        let mut s = self
            .c()
            .prepare_cached(
                "SELECT key, value FROM project_docs WHERE key >= ?1 AND key < ?2 ORDER BY key",
            )
            .map_err(storage)?;
        let rows = s
            .query_map([lo, hi], |r| Ok((r.get(0)?, r.get(1)?)))
            .map_err(storage)?;
        rows.collect::<Result<Vec<_>, _>>().map_err(storage)
    }

    fn doc_keys(&mut self, prefix: &str) -> Result<Vec<String>, AccountError> {
        let (lo, hi) = super::rows::prefix_range(prefix);
        let mut s = self
            .c()
            .prepare_cached(
                "SELECT key FROM project_docs WHERE key >= ?1 AND key < ?2 ORDER BY key",
            )
            .map_err(storage)?;
        let rows = s.query_map([lo, hi], |r| r.get(0)).map_err(storage)?;
        rows.collect::<Result<Vec<_>, _>>().map_err(storage)
    }
}

/// A report row from the summed columns (net amount, CPU time, job count).
pub fn report_row(key: String, net: i64, cpu: i64, jobs: i64) -> ReportRow {
    ReportRow {
        key,
        charged: net.checked_neg().unwrap_or(i64::MAX),
        cpu_us: cpu.max(0) as u64,
        jobs: jobs.max(0) as u64,
    }
}

/// The writer's connection.
pub struct LiteWriter(pub Connection);

impl Tx for Lite<rusqlite::Transaction<'_>> {
    fn rows(&mut self) -> &mut dyn Rows {
        self
    }

    fn savepoint(
        &mut self,
        work: &mut dyn FnMut(&mut dyn Rows) -> Keep,
    ) -> Result<(), AccountError> {
        let mut sp = self.0.savepoint().map_err(storage)?;
        let keep = work(&mut Lite(&*sp));
        if keep {
            sp.commit().map_err(storage)
        } else {
            if let Err(e) = sp.rollback() {
                tracing::error!(error = %e, "savepoint rollback failed");
            }
            Ok(())
        }
    }
}

impl Writer for LiteWriter {
    fn transaction(
        &mut self,
        work: &mut dyn FnMut(&mut dyn Tx) -> Keep,
    ) -> Result<Keep, AccountError> {
        let tx = self
            .0
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(storage)?;
        let mut tx = Lite(tx);
        if !work(&mut tx) {
            // Dropping a transaction rolls it back.
            return Ok(false);
        }
        tx.0.commit().map_err(|e| {
            tracing::error!(error = %e, "group commit failed; nothing in the batch was acknowledged");
            storage(e)
        })?;
        Ok(true)
    }

    fn head(&mut self) -> Result<Option<(i64, Vec<u8>)>, AccountError> {
        self.0
            .query_row(
                "SELECT id, COALESCE(hash, x'') FROM entries ORDER BY id DESC LIMIT 1",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
            .map_err(storage)
    }

    fn balances(&mut self) -> Result<i64, AccountError> {
        self.0
            .query_row("SELECT COALESCE(SUM(balance), 0) FROM accounts", [], |r| {
                r.get::<_, i64>(0)
            })
            .map_err(storage)
    }

    fn close(&mut self) {
        if let Err(e) = self.0.execute_batch("PRAGMA wal_checkpoint(TRUNCATE);") {
            tracing::warn!(error = %e, "final WAL checkpoint failed");
        }
    }
}

/// The reader's connection (`query_only`).
pub struct LiteReader(pub Connection);

impl Reader for LiteReader {
    fn read(&mut self, work: &mut dyn FnMut(&mut dyn Rows)) -> Result<(), AccountError> {
        work(&mut Lite(&self.0));
        Ok(())
    }
}

/// The claim in columns `user, job, attempt, rank, node, digest` (the first six)
/// of a `claims` or `rank_ends` row, with its node and digest.
fn claim_columns(r: &Row) -> Result<(Claim, String, Vec<u8>), AccountError> {
    let job: String = r.get(1).map_err(storage)?;
    let digest: Vec<u8> = r.get(5).map_err(storage)?;
    let claim = claim_from_row(
        r.get(0).map_err(storage)?,
        &job,
        r.get(2).map_err(storage)?,
        r.get(3).map_err(storage)?,
        &digest,
    )
    .ok_or_else(|| storage(format!("a batch rank of job {job} is not a valid claim")))?;
    Ok((claim, r.get(4).map_err(storage)?, digest))
}
