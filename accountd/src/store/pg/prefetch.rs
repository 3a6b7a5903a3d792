//! The read ahead of a group commit on PostgreSQL, sent in the same round
//! trip as `BEGIN` and the head row's lock ([`begin_write`]): one simple
//! query of three statements, each on its own snapshot, so the read ahead
//! sees every commit made before the lock was granted. It reads every debit
//! key of the batch with its stored charge (a repeat or a conflict is then
//! decided in memory), the last entry's hash, and the balance of every
//! account the batch names, into [`Pending`](super::batch::Pending).
//!
//! The keys and account names are written into the SQL as constants (the
//! planner then finds them in the indexes), each an escape string with its
//! backslashes and quotes doubled ([`texts`]), so nothing a node or an admin
//! sends can end it early. The answer comes back as text and is parsed
//! here. Writes that join the batch once the lock is held ([`Pg::prefetch`])
//! have what they need and the batch did not read ahead read by one more
//! statement of the same kind.

use postgres::{GenericClient, SimpleQueryMessage, SimpleQueryRow};
use proto::account::AccountError;

use super::{Pg, pg_storage};
use crate::store::chain;
use crate::store::rows::{ChargeContent, storage};

/// `BEGIN`, the head row's lock (every write transaction takes it first),
/// and the read ahead of `keys` and `users`, as one simple query. Its
/// answer is read by [`Pg::begun`].
pub fn begin_write(keys: &[String], users: &[String]) -> String {
    format!(
        "BEGIN; SELECT last_id FROM head FOR UPDATE; {}",
        read_ahead(keys, users)
    )
}

/// The read ahead as one statement. The first column says what a row is: a
/// charge (0), the last entry (1), or an account with its balance in the
/// fourth column (2).
///
/// Each key is looked up on its own in the key's unique index: a `LATERAL`
/// subquery with a `LIMIT`, which the planner cannot flatten into a join,
/// so the cost stays a few microseconds a key however long the ledger. With
/// `idem_key = ANY(…)` of a batch's 500 keys the planner chose a sequential
/// scan of all of `entries` once it held some thousands of entries (14 ms at
/// 46,000 and growing with the ledger, inside the head lock; BENCHMARKS.md).
pub(in crate::store) fn read_ahead(keys: &[String], users: &[String]) -> String {
    format!(
        r#"(SELECT 0, e.idem_key, e.id, e.balance_after, e."user", e.amount, e.rank,
                   e.interval_start_us, e.interval_end_us, e.cpu_us, e.reason, NULL::BYTEA
            FROM unnest({}) AS k(key)
            CROSS JOIN LATERAL (SELECT * FROM entries WHERE idem_key = k.key LIMIT 1) AS e)
           UNION ALL
           (SELECT 1, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, hash
            FROM entries ORDER BY id DESC LIMIT 1)
           UNION ALL
           (SELECT 2, NULL, NULL, balance, "user", NULL, NULL, NULL, NULL, NULL, NULL, NULL
            FROM accounts WHERE "user" = ANY({}))"#,
        texts(keys),
        texts(users)
    )
}

/// `items` as an SQL expression of type `TEXT[]`: an array of constants,
/// so that the planner looks them up in the index. Each is an escape string
/// (`E'…'`, read the same whatever `standard_conforming_strings` says) with
/// its backslashes and quotes doubled, so it cannot end early. An item
/// holding a NUL byte is left out: PostgreSQL's text cannot hold one, so no
/// such key or account is stored.
fn texts(items: &[String]) -> String {
    let mut s = String::from("ARRAY[");
    for (n, item) in items.iter().filter(|i| !i.contains('\0')).enumerate() {
        s.push_str(if n == 0 { "E'" } else { ",E'" });
        for c in item.chars() {
            match c {
                '\\' => s.push_str("\\\\"),
                '\'' => s.push_str("''"),
                c => s.push(c),
            }
        }
        s.push('\'');
    }
    s.push_str("]::TEXT[]");
    s
}

/// Column `i` of a text row.
fn text(r: &SimpleQueryRow, i: usize) -> Result<Option<&str>, AccountError> {
    r.try_get(i).map_err(pg_storage)
}

/// Column `i` of a text row as an integer.
fn int(r: &SimpleQueryRow, i: usize) -> Result<Option<i64>, AccountError> {
    text(r, i)?
        .map(|t| {
            t.parse()
                .map_err(|_| storage(format!("column {i} of the read ahead holds {t:?}")))
        })
        .transpose()
}

/// Column `i` of a text row, which may not be NULL.
fn need<T>(v: Option<T>, i: usize) -> Result<T, AccountError> {
    v.ok_or_else(|| storage(format!("column {i} of the read ahead is NULL")))
}

/// A `BYTEA` column in PostgreSQL's hex output (`\x0a1b…`).
fn bytes(r: &SimpleQueryRow, i: usize) -> Result<Option<Vec<u8>>, AccountError> {
    text(r, i)?
        .map(|t| {
            t.strip_prefix("\\x")
                .and_then(chain::unhex)
                .ok_or_else(|| storage(format!("column {i} of the read ahead is not hex")))
        })
        .transpose()
}

/// The rows of the `n`th statement (from 0) of a simple query's answer.
fn rows_of(answer: &[SimpleQueryMessage], n: usize) -> impl Iterator<Item = &SimpleQueryRow> {
    answer
        .iter()
        .scan(0, |done, m| {
            let at = *done;
            if let SimpleQueryMessage::CommandComplete(_) = m {
                *done += 1;
            }
            Some((at, m))
        })
        .filter_map(move |(at, m)| match m {
            SimpleQueryMessage::Row(r) if at == n => Some(r),
            _ => None,
        })
}

impl<C: GenericClient> Pg<C> {
    /// Takes in the answer to [`begin_write`] of `keys` and `users`: the
    /// head row is locked, and what the read ahead found is known.
    pub fn begun(
        &mut self,
        answer: &[SimpleQueryMessage],
        keys: &[String],
        users: &[String],
    ) -> Result<(), AccountError> {
        let head = rows_of(answer, 1)
            .next()
            .ok_or_else(|| storage("the head row of the ledger is missing"))?;
        let last = need(int(head, 0)?, 0)?;
        self.locked(last);
        self.learn(rows_of(answer, 2), keys, users)
    }

    /// Makes the stored charges of `keys`, the last hash and the balances of
    /// `users` known to the write transaction, reading (in one statement)
    /// those it does not know yet.
    pub fn prefetch(&mut self, keys: &[String], users: &[String]) -> Result<(), AccountError> {
        if !self.batching() {
            return Ok(());
        }
        let keys: Vec<String> = keys
            .iter()
            .filter(|k| !self.pending.keys.contains_key(*k))
            .cloned()
            .collect();
        let users: Vec<String> = users
            .iter()
            .filter(|u| !self.pending.balances.contains_key(*u))
            .cloned()
            .collect();
        if keys.is_empty() && users.is_empty() && self.pending.last_hash.is_some() {
            return Ok(());
        }
        let answer = self
            .c
            .simple_query(&read_ahead(&keys, &users))
            .map_err(pg_storage)?;
        self.learn(rows_of(&answer, 0), &keys, &users)
    }

    /// Records the read ahead's rows: `keys` and `users` without a row are
    /// unused keys and unknown accounts.
    fn learn<'a>(
        &mut self,
        rows: impl Iterator<Item = &'a SimpleQueryRow>,
        keys: &[String],
        users: &[String],
    ) -> Result<(), AccountError> {
        let mut last_hash = None;
        let p = &mut self.pending;
        for k in keys {
            p.keys.entry(k.clone()).or_insert(None);
        }
        for u in users {
            p.balances.entry(u.clone()).or_insert(None);
        }
        for r in rows {
            match need(int(r, 0)?, 0)? {
                1 => last_hash = bytes(r, 11)?,
                2 => {
                    let user = need(text(r, 4)?, 4)?.to_string();
                    p.balances.insert(user, Some(need(int(r, 3)?, 3)?));
                }
                _ => {
                    let key = need(text(r, 1)?, 1)?.to_string();
                    let charge = ChargeContent {
                        user: need(text(r, 4)?, 4)?.to_string(),
                        amount: need(int(r, 5)?, 5)?,
                        rank: int(r, 6)?,
                        interval: (int(r, 7)?, int(r, 8)?),
                        cpu_us: int(r, 9)?,
                        reason: text(r, 10)?.map(str::to_string),
                    };
                    let id = need(int(r, 2)?, 2)?;
                    let after = need(int(r, 3)?, 3)?;
                    p.keys.insert(key, Some((id, after, charge)));
                }
            }
        }
        // Nothing written yet in this transaction: the last entry read is
        // the last one (a flush would have made it known already).
        if p.last_hash.is_none() {
            p.last_hash = Some(last_hash);
        }
        Ok(())
    }
}
