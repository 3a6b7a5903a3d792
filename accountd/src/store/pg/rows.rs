//! [`Rows`] in PostgreSQL's SQL, on a client or a (nested) transaction, with
//! the connection's prepared statements cached by their text. `user` is a
//! reserved word in PostgreSQL and is quoted; sums are cast back to `BIGINT`.
//! In a write transaction the balances, ids, hashes, keys and new entries go
//! through [`super::batch`], so a group commit costs a constant number of
//! statements; everything else is one statement per call, as here.

use postgres::types::ToSql;
use postgres::{GenericClient, Row, Statement};
use proto::account::{AccountError, Claim, LedgerEntry, RankEnd, ReportBy, ReportRow};

use super::batch::Pending;
use super::{Cache, pg_storage};
use crate::store::Refusal;
use crate::store::lite::report_row;
use crate::store::query::unknown_grouping;
use crate::store::rows::{
    AccountRow, ChainedFn, ChargeContent, ClaimRecord, EndRecord, EntryColumns, EntryRow, Rows,
    StoredCharge, claim_from_row, end_with_width, storage,
};

/// [`Rows`] on a PostgreSQL client or transaction.
pub struct Pg<C> {
    /// The client or transaction.
    pub c: C,
    /// Its connection's prepared statements.
    pub cache: Cache,
    /// What a write transaction has read and not yet written.
    pub pending: Pending,
}

impl<C: GenericClient> Pg<C> {
    /// Rows on `c`, whose connection's statements are in `cache`.
    pub fn new(c: C, cache: Cache) -> Pg<C> {
        Pg {
            c,
            cache,
            pending: Pending::default(),
        }
    }

    fn stmt(&mut self, sql: &'static str) -> Result<Statement, AccountError> {
        super::link::prepared(&mut self.c, &self.cache, sql).map_err(pg_storage)
    }

    pub(super) fn query(
        &mut self,
        sql: &'static str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Row>, AccountError> {
        let s = self.stmt(sql)?;
        self.c.query(&s, params).map_err(pg_storage)
    }

    pub(super) fn opt(
        &mut self,
        sql: &'static str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Option<Row>, AccountError> {
        let s = self.stmt(sql)?;
        self.c.query_opt(&s, params).map_err(pg_storage)
    }

    fn execute(
        &mut self,
        sql: &'static str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<u64, AccountError> {
        let s = self.stmt(sql)?;
        self.c.execute(&s, params).map_err(pg_storage)
    }
}

/// A claim's key as the parameters `$1` to `$4` of a statement on `claims` or
/// `rank_ends`.
struct ClaimKey<'a> {
    user: &'a str,
    job: String,
    attempt: i64,
    rank: i64,
}

impl<'a> ClaimKey<'a> {
    fn of(c: &'a Claim) -> ClaimKey<'a> {
        ClaimKey {
            user: &c.user,
            job: c.job.to_string(),
            attempt: i64::from(c.attempt),
            rank: i64::from(c.rank),
        }
    }

    /// The key's parameters, then `rest` from `$5` on.
    fn with<'p>(&'p self, rest: &[&'p (dyn ToSql + Sync)]) -> Vec<&'p (dyn ToSql + Sync)> {
        let mut params: Vec<&(dyn ToSql + Sync)> =
            vec![&self.user, &self.job, &self.attempt, &self.rank];
        params.extend_from_slice(rest);
        params
    }
}

impl<C: GenericClient> Pg<C> {
    /// Every row of `sql` (a `SELECT` of `claims` or `rank_ends` whose first six
    /// columns are [`claim_columns`]), each made by `row` from the row and its
    /// claim, node and digest.
    fn claim_rows<T>(
        &mut self,
        sql: &'static str,
        mut row: impl FnMut(&Row, Claim, String, Vec<u8>) -> Result<T, AccountError>,
    ) -> Result<Vec<T>, AccountError> {
        let rows = self.query(sql, &[])?;
        let mut out = Vec::with_capacity(rows.len());
        for r in &rows {
            let (claim, node, digest) = claim_columns(r)?;
            out.push(row(r, claim, node, digest)?);
        }
        Ok(out)
    }
}

/// Column `i` of `r`.
pub(super) fn get<'a, T: postgres::types::FromSql<'a>>(
    r: &'a Row,
    i: usize,
) -> Result<T, AccountError> {
    r.try_get(i).map_err(pg_storage)
}

/// The claim in columns `user, job, attempt, rank, node, digest` (the first six)
/// of a `claims` or `rank_ends` row, with its node and digest.
fn claim_columns(r: &Row) -> Result<(Claim, String, Vec<u8>), AccountError> {
    let job: String = get(r, 1)?;
    let digest: Vec<u8> = get(r, 5)?;
    let claim = claim_from_row(get(r, 0)?, &job, get(r, 2)?, get(r, 3)?, &digest)
        .ok_or_else(|| storage(format!("a batch rank of job {job} is not a valid claim")))?;
    Ok((claim, get(r, 4)?, digest))
}

fn entry_columns(r: &Row) -> Result<EntryColumns, AccountError> {
    Ok(EntryColumns {
        id: get(r, 0)?,
        at_us: get(r, 1)?,
        user: get(r, 2)?,
        amount: get(r, 3)?,
        kind: get(r, 4)?,
        node: get(r, 5)?,
        job: get(r, 6)?,
        seq: get(r, 7)?,
        rank: get(r, 8)?,
        interval: (get(r, 9)?, get(r, 10)?),
        cpu_us: get(r, 11)?,
        actor: get(r, 12)?,
        reason: get(r, 13)?,
        balance_after: get(r, 14)?,
    })
}

impl<C: GenericClient> Rows for Pg<C> {
    fn balance_of(&mut self, user: &str) -> Result<Option<i64>, AccountError> {
        if let Some(known) = self.known_balance(user) {
            return Ok(known);
        }
        let row = self.opt(
            r#"SELECT balance FROM accounts WHERE "user" = $1"#,
            &[&user],
        )?;
        let balance = row.map(|r| get(&r, 0)).transpose()?;
        self.learn_balance(user, balance);
        Ok(balance)
    }

    fn lock_balance(&mut self, user: &str) -> Result<Option<i64>, AccountError> {
        // Every write transaction holds the head lock, so no other can
        // change the balance before this one ends.
        self.balance_of(user)
    }

    fn set_balance(&mut self, user: &str, balance: i64) -> Result<(), AccountError> {
        if self.batching() {
            self.stage_balance(user, balance);
            return Ok(());
        }
        self.execute(
            r#"UPDATE accounts SET balance = $1 WHERE "user" = $2"#,
            &[&balance, &user],
        )
        .map(|_| ())
    }

    fn next_entry_id(&mut self) -> Result<i64, AccountError> {
        if let Some(id) = self.stage_id() {
            return Ok(id);
        }
        match self.opt(
            "UPDATE head SET last_id = last_id + 1 RETURNING last_id",
            &[],
        )? {
            Some(r) => get(&r, 0),
            None => Err(storage("the head row of the ledger is missing")),
        }
    }

    fn last_hash(&mut self) -> Result<Option<Vec<u8>>, AccountError> {
        if let Some(known) = self.known_last_hash() {
            return Ok(known);
        }
        let hash = match self.opt("SELECT hash FROM entries ORDER BY id DESC LIMIT 1", &[])? {
            Some(r) => get(&r, 0)?,
            None => None,
        };
        self.learn_last_hash(hash.clone());
        Ok(hash)
    }

    fn insert_entry(&mut self, e: &EntryRow<'_>) -> Result<(), AccountError> {
        if self.batching() {
            return self.stage_entry(e);
        }
        self.execute(
            r#"INSERT INTO entries(id, at_us, "user", amount, kind, node, job, seq, rank,
                 interval_start_us, interval_end_us, cpu_us, idem_key, actor, reason, balance_after,
                 hash)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)"#,
            &[
                &e.id,
                &e.at_us,
                &e.user,
                &e.amount,
                &e.kind,
                &e.key.map(|k| k.0),
                &e.key.map(|k| k.1),
                &e.key.map(|k| k.2),
                &e.rank,
                &e.interval.map(|i| i.0),
                &e.interval.map(|i| i.1),
                &e.cpu_us,
                &e.key.map(|k| k.3),
                &e.actor,
                &e.reason,
                &e.balance_after,
                &e.hash,
            ],
        )?;
        Ok(())
    }

    fn charge_by_key(&mut self, idem: &str) -> Result<Option<StoredCharge>, AccountError> {
        if let Some(known) = self.known_charge(idem) {
            return Ok(known);
        }
        let row = self.opt(
            r#"SELECT id, balance_after, "user", amount, rank, interval_start_us, interval_end_us,
                      cpu_us, reason
               FROM entries WHERE idem_key = $1"#,
            &[&idem],
        )?;
        let Some(r) = row else { return Ok(None) };
        Ok(Some((
            get(&r, 0)?,
            get(&r, 1)?,
            ChargeContent {
                user: get(&r, 2)?,
                amount: get(&r, 3)?,
                rank: get(&r, 4)?,
                interval: (get(&r, 5)?, get(&r, 6)?),
                cpu_us: get(&r, 7)?,
                reason: get(&r, 8)?,
            },
        )))
    }

    fn net_by_key_range(&mut self, lo: &str, hi: &str, user: &str) -> Result<i64, AccountError> {
        self.flush()?;
        // COLLATE "C": the key range is a byte range, as in SQLite.
        let r = self.opt(
            r#"SELECT COALESCE(SUM(amount), 0)::BIGINT FROM entries
               WHERE idem_key COLLATE "C" >= $1 AND idem_key COLLATE "C" < $2 AND "user" = $3"#,
            &[&lo, &hi, &user],
        )?;
        r.map_or(Ok(0), |r| get(&r, 0))
    }

    fn insert_account(&mut self, user: &str, now: i64, actor: &str) -> Result<bool, AccountError> {
        let inserted = self.execute(
            r#"INSERT INTO accounts("user", balance, created_us, created_by) VALUES ($1, 0, $2, $3)
               ON CONFLICT ("user") DO NOTHING"#,
            &[&user, &now, &actor],
        )? > 0;
        if inserted {
            self.learn_balance(user, Some(0));
        }
        Ok(inserted)
    }

    fn claim_of(&mut self, c: &Claim) -> Result<Option<ClaimRecord>, AccountError> {
        let row = self.opt(
            r#"SELECT node, digest, at_us FROM claims
               WHERE "user" = $1 AND job = $2 AND attempt = $3 AND rank = $4"#,
            &ClaimKey::of(c).with(&[]),
        )?;
        let Some(r) = row else { return Ok(None) };
        Ok(Some(ClaimRecord {
            node: get(&r, 0)?,
            digest: get(&r, 1)?,
            at_us: get(&r, 2)?,
        }))
    }

    fn insert_claim(&mut self, c: &Claim, node: &str, now: i64) -> Result<(), AccountError> {
        self.execute(
            r#"INSERT INTO claims("user", job, attempt, rank, node, digest, at_us)
               VALUES ($1, $2, $3, $4, $5, $6, $7)"#,
            &ClaimKey::of(c).with(&[&node, &&c.digest[..], &now]),
        )
        .map(|_| ())
    }

    fn end_of(&mut self, c: &Claim) -> Result<Option<EndRecord>, AccountError> {
        let row = self.opt(
            r#"SELECT node, at_us FROM rank_ends
               WHERE "user" = $1 AND job = $2 AND attempt = $3 AND rank = $4"#,
            &ClaimKey::of(c).with(&[]),
        )?;
        let Some(r) = row else { return Ok(None) };
        Ok(Some(EndRecord {
            node: get(&r, 0)?,
            at_us: get(&r, 1)?,
        }))
    }

    fn insert_end(&mut self, e: &RankEnd, node: &str, now: i64) -> Result<(), AccountError> {
        let c = &e.claim;
        self.execute(
            r#"INSERT INTO rank_ends("user", job, attempt, rank, node, digest, width, at_us)
               VALUES ($1, $2, $3, $4, $5, $6, $7, $8)"#,
            &ClaimKey::of(c).with(&[&node, &&c.digest[..], &i64::from(e.width), &now]),
        )
        .map(|_| ())
    }

    fn ended_attempt(&mut self, user: &str, job: &str) -> Result<Option<(u32, u32)>, AccountError> {
        let row = self.opt(
            r#"SELECT attempt, MAX(width) FROM rank_ends WHERE "user" = $1 AND job = $2
               GROUP BY attempt HAVING COUNT(*) >= MAX(width) ORDER BY attempt LIMIT 1"#,
            &[&user, &job],
        )?;
        let Some(r) = row else { return Ok(None) };
        let (attempt, width): (i64, i64) = (get(&r, 0)?, get(&r, 1)?);
        let fit =
            |v: i64| u32::try_from(v).map_err(|_| storage(format!("rank end {v} out of range")));
        Ok(Some((fit(attempt)?, fit(width)?)))
    }

    fn insert_refusal(&mut self, now: i64, r: &Refusal) -> Result<(), AccountError> {
        let count = i64::try_from(r.count).unwrap_or(i64::MAX);
        self.execute(
            "INSERT INTO refusals(at_us, role, name, op, code, message, count)
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
            &[
                &now,
                &r.role,
                &r.name,
                &r.op,
                &format!("{:?}", r.code),
                &r.message,
                &count,
            ],
        )
        .map(|_| ())
    }

    fn history(
        &mut self,
        user: &str,
        after: i64,
        since: i64,
        until: i64,
        limit: i64,
    ) -> Result<Vec<LedgerEntry>, AccountError> {
        self.flush()?;
        let rows = self.query(
            r#"SELECT id, at_us, "user", amount, kind, node, job, seq, rank, interval_start_us,
                      interval_end_us, cpu_us, actor, reason, balance_after
               FROM entries
               WHERE "user" = $1 AND id > $2 AND at_us >= $3 AND at_us < $4
               ORDER BY id LIMIT $5"#,
            &[&user, &after, &since, &until, &limit],
        )?;
        rows.iter()
            .map(|r| entry_columns(r).map(LedgerEntry::from))
            .collect()
    }

    fn report(
        &mut self,
        by: ReportBy,
        since: i64,
        until: i64,
    ) -> Result<Vec<ReportRow>, AccountError> {
        self.flush()?;
        let sql = match by {
            ReportBy::User => {
                r#"SELECT "user" AS k, SUM(amount)::BIGINT, SUM(COALESCE(cpu_us, 0))::BIGINT,
                          COUNT(DISTINCT node || '/' || job)
                   FROM entries WHERE kind IN ('debit', 'refund') AND at_us >= $1 AND at_us < $2
                   GROUP BY "user" ORDER BY "user" COLLATE "C""#
            }
            ReportBy::Node => {
                r#"SELECT node AS k, SUM(amount)::BIGINT, SUM(COALESCE(cpu_us, 0))::BIGINT,
                          COUNT(DISTINCT node || '/' || job)
                   FROM entries WHERE kind IN ('debit', 'refund') AND at_us >= $1 AND at_us < $2
                   GROUP BY node ORDER BY node COLLATE "C""#
            }
            ReportBy::Day => {
                r#"SELECT to_char(to_timestamp(at_us / 1000000) AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS k,
                          SUM(amount)::BIGINT, SUM(COALESCE(cpu_us, 0))::BIGINT,
                          COUNT(DISTINCT node || '/' || job)
                   FROM entries WHERE kind IN ('debit', 'refund') AND at_us >= $1 AND at_us < $2
                   GROUP BY k ORDER BY k"#
            }
            _ => return Err(unknown_grouping()),
        };
        let rows = self.query(sql, &[&since, &until])?;
        rows.iter()
            .map(|r| Ok(report_row(get(r, 0)?, get(r, 1)?, get(r, 2)?, get(r, 3)?)))
            .collect()
    }

    fn accounts(&mut self) -> Result<Vec<AccountRow>, AccountError> {
        self.flush()?;
        let rows = self.query(
            r#"SELECT "user", balance, created_us, created_by FROM accounts ORDER BY "user" COLLATE "C""#,
            &[],
        )?;
        rows.iter()
            .map(|r| {
                Ok(AccountRow {
                    user: get(r, 0)?,
                    balance: get(r, 1)?,
                    created_us: get(r, 2)?,
                    created_by: get(r, 3)?,
                })
            })
            .collect()
    }

    fn claims(&mut self) -> Result<Vec<(Claim, ClaimRecord)>, AccountError> {
        self.claim_rows(
            r#"SELECT "user", job, attempt, rank, node, digest, at_us FROM claims"#,
            |r, claim, node, digest| {
                let at_us = get(r, 6)?;
                Ok((claim, ClaimRecord::of(node, digest, at_us)))
            },
        )
    }

    fn ends(&mut self) -> Result<Vec<(RankEnd, EndRecord)>, AccountError> {
        self.claim_rows(
            r#"SELECT "user", job, attempt, rank, node, digest, width, at_us FROM rank_ends"#,
            |r, claim, node, _| {
                let end = end_with_width(claim, get(r, 6)?)?;
                let at_us = get(r, 7)?;
                Ok((end, EndRecord { node, at_us }))
            },
        )
    }

    fn each_chained(&mut self, f: &mut ChainedFn<'_>) -> Result<(), AccountError> {
        self.flush()?;
        use postgres::fallible_iterator::FallibleIterator;
        let s = self.stmt(
            r#"SELECT id, at_us, "user", amount, kind, node, job, seq, rank, interval_start_us,
                      interval_end_us, cpu_us, actor, reason, balance_after, hash, idem_key
               FROM entries ORDER BY id"#,
        )?;
        let params: [&(dyn ToSql + Sync); 0] = [];
        let mut rows = self
            .c
            .query_raw(&s, params.iter().copied())
            .map_err(pg_storage)?;
        while let Some(r) = rows.next().map_err(pg_storage)? {
            f(entry_columns(&r)?, get(&r, 16)?, get(&r, 15)?);
        }
        Ok(())
    }

    fn duplicate_keys(&mut self, limit: usize) -> Result<Vec<(String, Vec<i64>)>, AccountError> {
        self.flush()?;
        let rows = self.query(
            r#"SELECT idem_key, array_agg(id ORDER BY id) FROM entries WHERE idem_key IS NOT NULL
               GROUP BY idem_key HAVING count(*) > 1 ORDER BY idem_key COLLATE "C" LIMIT $1"#,
            &[&(limit as i64)],
        )?;
        rows.iter().map(|r| Ok((get(r, 0)?, get(r, 1)?))).collect()
    }

    fn missing_ids(&mut self) -> Result<Vec<(i64, i64)>, AccountError> {
        self.flush()?;
        let rows = self.query(
            "SELECT prev + 1, id - 1 FROM (
                 SELECT id, LAG(id, 1, 0::BIGINT) OVER (ORDER BY id) AS prev FROM entries
             ) AS runs WHERE id > prev + 1",
            &[],
        )?;
        let mut gaps = rows
            .iter()
            .map(|r| Ok((get(r, 0)?, get(r, 1)?)))
            .collect::<Result<Vec<(i64, i64)>, AccountError>>()?;
        let last: i64 = match self.opt("SELECT COALESCE(MAX(id), 0)::BIGINT FROM entries", &[])? {
            Some(r) => get(&r, 0)?,
            None => 0,
        };
        let given_out: i64 = match self.opt("SELECT last_id FROM head", &[])? {
            Some(r) => get(&r, 0)?,
            None => 0,
        };
        if given_out > last {
            gaps.push((last + 1, given_out));
        }
        Ok(gaps)
    }

    fn integrity(&mut self) -> Result<Option<String>, AccountError> {
        Ok(None)
    }

    fn doc(&mut self, key: &str) -> Result<Option<String>, AccountError> {
        let row = self.opt("SELECT value FROM project_docs WHERE key = $1", &[&key])?;
        row.map(|r| get(&r, 0)).transpose()
    }

    fn put_doc(&mut self, key: &str, value: &str) -> Result<(), AccountError> {
        self.execute(
            "INSERT INTO project_docs(key, value) VALUES ($1, $2)
             ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            &[&key, &value],
        )
        .map(|_| ())
    }

    fn docs(&mut self, prefix: &str) -> Result<Vec<(String, String)>, AccountError> {
        let (lo, hi) = crate::store::rows::prefix_range(prefix);
        let rows = self.query(
            r#"SELECT key, value FROM project_docs
               WHERE key COLLATE "C" >= $1 AND key COLLATE "C" < $2 ORDER BY key COLLATE "C""#,
            &[&lo, &hi],
        )?;
        rows.iter().map(|r| Ok((get(r, 0)?, get(r, 1)?))).collect()
    }

    fn doc_keys(&mut self, prefix: &str) -> Result<Vec<String>, AccountError> {
        let (lo, hi) = crate::store::rows::prefix_range(prefix);
        let rows = self.query(
            r#"SELECT key FROM project_docs
               WHERE key COLLATE "C" >= $1 AND key COLLATE "C" < $2 ORDER BY key COLLATE "C""#,
            &[&lo, &hi],
        )?;
        rows.iter().map(|r| get(r, 0)).collect()
    }
}
