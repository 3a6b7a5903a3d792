//! A group commit on PostgreSQL in a constant number of statements, whatever
//! the batch size: three round trips, `BEGIN` with the head row's lock and
//! the read ahead ([`super::prefetch`]), the write, and `COMMIT`. Inside a
//! write transaction (once the head row is locked, see [`super`]) the
//! [`Rows`](crate::store::rows::Rows) of [`Pg`] answer from and write into
//! [`Pending`], the transaction's view of what it touches:
//!
//! - the read ahead has put into it every debit key of the batch with its
//!   stored charge, the last entry's hash, and the balance of every account
//!   the batch names;
//! - ids are handed out from the head row's `last_id`, chain hashes computed
//!   here from the last hash, balances kept in memory;
//! - [`Pg::flush`] writes the new entries, the changed balances and the new
//!   `last_id` in one statement (multi-row inserts and updates from
//!   `unnest` of column arrays), before any statement that reads what the
//!   batch wrote, at each savepoint's end, and before the commit.
//!
//! Every write transaction of every accountd holds the head row's lock, so
//! nothing read here can change under the transaction; the database still
//! checks key uniqueness on the insert.

use std::collections::HashMap;

use postgres::GenericClient;
use proto::account::AccountError;

use super::{Pg, pg_storage};
use crate::store::rows::{ChargeContent, EntryRow, StoredCharge, storage};

/// Most entries one flush sends (a migration's copy is flushed in parts).
const MAX_FLUSH: usize = 4096;

/// New entries, column by column, as the flush's arrays.
#[derive(Debug, Clone, Default)]
struct Columns {
    id: Vec<i64>,
    at_us: Vec<i64>,
    user: Vec<String>,
    amount: Vec<i64>,
    kind: Vec<String>,
    node: Vec<Option<String>>,
    job: Vec<Option<String>>,
    seq: Vec<Option<i64>>,
    rank: Vec<Option<i64>>,
    start: Vec<Option<i64>>,
    end: Vec<Option<i64>>,
    cpu_us: Vec<Option<i64>>,
    idem: Vec<Option<String>>,
    actor: Vec<String>,
    reason: Vec<Option<String>>,
    balance_after: Vec<i64>,
    hash: Vec<Vec<u8>>,
}

impl Columns {
    fn push(&mut self, e: &EntryRow<'_>) {
        self.id.push(e.id);
        self.at_us.push(e.at_us);
        self.user.push(e.user.to_string());
        self.amount.push(e.amount);
        self.kind.push(e.kind.to_string());
        self.node.push(e.key.map(|k| k.0.to_string()));
        self.job.push(e.key.map(|k| k.1.to_string()));
        self.seq.push(e.key.map(|k| k.2));
        self.rank.push(e.rank);
        self.start.push(e.interval.map(|i| i.0));
        self.end.push(e.interval.map(|i| i.1));
        self.cpu_us.push(e.cpu_us);
        self.idem.push(e.key.map(|k| k.3.to_string()));
        self.actor.push(e.actor.to_string());
        self.reason.push(e.reason.map(str::to_string));
        self.balance_after.push(e.balance_after);
        self.hash.push(e.hash.to_vec());
    }
}

/// What a write transaction has read and not yet written.
#[derive(Debug, Clone, Default)]
pub struct Pending {
    /// The last entry id given out; `Some` once the head row is locked.
    last_id: Option<i64>,
    /// Whether `last_id` moved since the last flush.
    moved: bool,
    /// The last entry's hash (`Some(None)`: no entry yet), once known.
    pub(super) last_hash: Option<Option<Vec<u8>>>,
    /// Known balances (`None`: no such account).
    pub(super) balances: HashMap<String, Option<i64>>,
    /// Balances changed since the last flush.
    changed: HashMap<String, i64>,
    /// Known charges by key text (`None`: the key is unused).
    pub(super) keys: HashMap<String, Option<StoredCharge>>,
    /// Entries not yet written.
    entries: Columns,
}

impl Pending {
    /// A copy of what is known, for a savepoint (call after a flush).
    pub fn known(&self) -> Pending {
        Pending {
            moved: false,
            changed: HashMap::new(),
            entries: Columns::default(),
            ..self.clone()
        }
    }

    fn dirty(&self) -> bool {
        self.moved || !self.changed.is_empty() || !self.entries.id.is_empty()
    }
}

impl<C: GenericClient> Pg<C> {
    /// Whether this is a write transaction holding the head lock.
    pub(super) fn batching(&self) -> bool {
        self.pending.last_id.is_some()
    }

    /// Starts a write transaction's view: the head row is locked (see
    /// [`BEGIN_WRITE`]) and `last` is the last id given out.
    pub fn locked(&mut self, last: i64) {
        self.pending.last_id = Some(last);
    }

    /// A balance known to the transaction: `Some(known)` or `None` (ask).
    pub(super) fn known_balance(&self, user: &str) -> Option<Option<i64>> {
        self.pending.balances.get(user).copied()
    }

    /// Remembers a balance read from the database.
    pub(super) fn learn_balance(&mut self, user: &str, balance: Option<i64>) {
        if self.batching() {
            self.pending.balances.insert(user.to_string(), balance);
        }
    }

    /// Sets a balance, written at the next flush.
    pub(super) fn stage_balance(&mut self, user: &str, balance: i64) {
        self.pending
            .balances
            .insert(user.to_string(), Some(balance));
        self.pending.changed.insert(user.to_string(), balance);
    }

    /// The next entry id, from the locked head.
    pub(super) fn stage_id(&mut self) -> Option<i64> {
        let next = self.pending.last_id? + 1;
        self.pending.last_id = Some(next);
        self.pending.moved = true;
        Some(next)
    }

    /// The last hash when known.
    pub(super) fn known_last_hash(&self) -> Option<Option<Vec<u8>>> {
        self.pending.last_hash.clone()
    }

    /// Remembers the last hash read from the database.
    pub(super) fn learn_last_hash(&mut self, hash: Option<Vec<u8>>) {
        if self.batching() {
            self.pending.last_hash = Some(hash);
        }
    }

    /// The stored charge of a key when known.
    pub(super) fn known_charge(&self, idem: &str) -> Option<Option<StoredCharge>> {
        self.pending.keys.get(idem).cloned()
    }

    /// Queues an entry for the next flush; it is at once the last entry and,
    /// with a key, the charge stored under it.
    pub(super) fn stage_entry(&mut self, e: &EntryRow<'_>) -> Result<(), AccountError> {
        self.pending.entries.push(e);
        self.pending.last_hash = Some(Some(e.hash.to_vec()));
        if let Some(key) = e.key {
            let content = ChargeContent {
                user: e.user.to_string(),
                amount: e.amount,
                rank: e.rank,
                interval: (e.interval.map(|i| i.0), e.interval.map(|i| i.1)),
                cpu_us: e.cpu_us,
                reason: e.reason.map(str::to_string),
            };
            self.pending
                .keys
                .insert(key.3.to_string(), Some((e.id, e.balance_after, content)));
        }
        if self.pending.entries.id.len() >= MAX_FLUSH {
            self.flush_part()?;
        }
        Ok(())
    }

    /// Writes a full part of a long transaction (a migration's copy) and
    /// forgets the keys of what it wrote: the database answers for them from
    /// now on, so memory stays bounded however many entries the transaction
    /// copies. A group commit never gets here (each of its jobs is flushed
    /// at its savepoint's end, long before [`MAX_FLUSH`] entries), so its
    /// read ahead and its repeated keys are still answered from memory.
    fn flush_part(&mut self) -> Result<(), AccountError> {
        let written: Vec<String> = self
            .pending
            .entries
            .idem
            .iter()
            .flatten()
            .cloned()
            .collect();
        self.flush()?;
        for key in &written {
            self.pending.keys.remove(key);
        }
        Ok(())
    }

    /// Writes what is pending (entries, balances, the head) in one statement.
    pub fn flush(&mut self) -> Result<(), AccountError> {
        if !self.pending.dirty() {
            return Ok(());
        }
        let e = std::mem::take(&mut self.pending.entries);
        let changed = std::mem::take(&mut self.pending.changed);
        let (users, balances): (Vec<String>, Vec<i64>) = changed.into_iter().unzip();
        let last_id = self.pending.last_id.unwrap_or(0);
        let moved = std::mem::replace(&mut self.pending.moved, false);
        let row = self.opt(
            r#"WITH e AS (
                 INSERT INTO entries(id, at_us, "user", amount, kind, node, job, seq, rank,
                     interval_start_us, interval_end_us, cpu_us, idem_key, actor, reason,
                     balance_after, hash)
                 SELECT * FROM unnest($1::BIGINT[], $2::BIGINT[], $3::TEXT[], $4::BIGINT[],
                     $5::TEXT[], $6::TEXT[], $7::TEXT[], $8::BIGINT[], $9::BIGINT[], $10::BIGINT[],
                     $11::BIGINT[], $12::BIGINT[], $13::TEXT[], $14::TEXT[], $15::TEXT[],
                     $16::BIGINT[], $17::BYTEA[])
                 RETURNING 1
               ), a AS (
                 UPDATE accounts SET balance = b.balance
                 FROM unnest($18::TEXT[], $19::BIGINT[]) AS b("user", balance)
                 WHERE accounts."user" = b."user"
                 RETURNING 1
               ), h AS (
                 UPDATE head SET last_id = $20 WHERE $21 RETURNING 1
               )
               SELECT (SELECT COUNT(*) FROM e), (SELECT COUNT(*) FROM a), (SELECT COUNT(*) FROM h)"#,
            &[
                &e.id,
                &e.at_us,
                &e.user,
                &e.amount,
                &e.kind,
                &e.node,
                &e.job,
                &e.seq,
                &e.rank,
                &e.start,
                &e.end,
                &e.cpu_us,
                &e.idem,
                &e.actor,
                &e.reason,
                &e.balance_after,
                &e.hash,
                &users,
                &balances,
                &last_id,
                &moved,
            ],
        )?;
        let row = row.ok_or_else(|| storage("the flush returned nothing"))?;
        let get = |i| row.try_get::<_, i64>(i).map_err(pg_storage);
        let counts = (get(0)?, get(1)?, get(2)?);
        let want = (e.id.len() as i64, users.len() as i64, i64::from(moved));
        if counts != want {
            return Err(storage(format!(
                "the flush wrote {counts:?} (entries, balances, head), not {want:?}"
            )));
        }
        Ok(())
    }
}
