//! The storage interface: the row-level operations the ledger's rules
//! ([`super::ledger`], [`super::claims`], [`super::query`], [`super::audit`])
//! are written against, once, and that each backend implements in its own
//! SQL: [`super::lite`] (SQLite, the embedded default) and [`super::pg`]
//! (PostgreSQL, shared by several accountd).
//!
//! A [`Rows`] is one open transaction (or, for reads and tests, one
//! connection). Every method maps an unexpected database failure to a
//! retryable [`ErrorCode::Storage`] error; the rules above decide everything
//! else. Writes go through a [`Writer`], whose transactions and savepoints
//! the group commit ([`super::threads`]) drives without knowing the backend.

use proto::account::{
    AccountError, Claim, DebitKey, EntryKind, ErrorCode, LedgerEntry, MeterInterval, RankEnd,
    ReportBy, ReportRow,
};

use super::Refusal;

/// Maps an unexpected database error to a retryable storage error.
pub fn storage(e: impl std::fmt::Display) -> AccountError {
    AccountError::new(
        ErrorCode::Storage,
        format!("ledger storage error ({e}); retry later and tell the operator if it persists"),
    )
}

/// What a charge stores beyond its key, compared field by field on a repeat.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChargeContent {
    /// The account charged.
    pub user: String,
    /// Signed amount as stored (debits negative).
    pub amount: i64,
    /// Rank of the job.
    pub rank: Option<i64>,
    /// Metering interval.
    pub interval: (Option<i64>, Option<i64>),
    /// CPU time, microseconds.
    pub cpu_us: Option<i64>,
    /// Reason (refunds).
    pub reason: Option<String>,
}

/// Columns read into an [`EntryColumns`], in order (each backend quotes `user`
/// its own way).
pub const ENTRY_COLUMNS: [&str; 15] = [
    "id",
    "at_us",
    "user",
    "amount",
    "kind",
    "node",
    "job",
    "seq",
    "rank",
    "interval_start_us",
    "interval_end_us",
    "cpu_us",
    "actor",
    "reason",
    "balance_after",
];

/// One entry's columns as stored ([`ENTRY_COLUMNS`]), before they become a
/// [`LedgerEntry`].
#[derive(Debug, Clone)]
pub struct EntryColumns {
    /// `id`.
    pub id: i64,
    /// `at_us`.
    pub at_us: i64,
    /// `user`.
    pub user: String,
    /// `amount`.
    pub amount: i64,
    /// `kind`.
    pub kind: String,
    /// `node`.
    pub node: Option<String>,
    /// `job`.
    pub job: Option<String>,
    /// `seq`.
    pub seq: Option<i64>,
    /// `rank`.
    pub rank: Option<i64>,
    /// `interval_start_us`, `interval_end_us`.
    pub interval: (Option<i64>, Option<i64>),
    /// `cpu_us`.
    pub cpu_us: Option<i64>,
    /// `actor`.
    pub actor: String,
    /// `reason`.
    pub reason: Option<String>,
    /// `balance_after`.
    pub balance_after: i64,
}

impl From<EntryColumns> for LedgerEntry {
    fn from(c: EntryColumns) -> LedgerEntry {
        let key = match (c.node, c.job, c.seq) {
            (Some(node), Some(job), Some(seq)) => Some(DebitKey {
                node,
                job,
                seq: seq.max(0) as u64,
            }),
            _ => None,
        };
        let interval = match c.interval {
            (Some(s), Some(e)) => Some(MeterInterval {
                start_us: s.max(0) as u64,
                end_us: e.max(0) as u64,
            }),
            _ => None,
        };
        LedgerEntry {
            id: c.id,
            at_us: c.at_us,
            user: c.user,
            amount: c.amount,
            kind: EntryKind::parse(&c.kind).unwrap_or(EntryKind::Adjust),
            key,
            rank: c.rank.and_then(|r| u32::try_from(r).ok()),
            interval,
            cpu_us: c.cpu_us.map(|c| c.max(0) as u64),
            actor: c.actor,
            reason: c.reason,
            balance_after: c.balance_after,
        }
    }
}

/// What [`Rows::each_chained`] calls: an entry, its key text, its chain hash.
pub type ChainedFn<'a> = dyn FnMut(EntryColumns, Option<String>, Option<Vec<u8>>) + 'a;

/// A charge found by its key: entry id, balance after it, and its content.
pub type StoredCharge = (i64, i64, ChargeContent);

/// One new entry, as the backend stores it (its id from
/// [`Rows::next_entry_id`], its hash from [`super::chain`]).
#[derive(Debug, Clone)]
pub struct EntryRow<'a> {
    /// Entry id.
    pub id: i64,
    /// Its chain hash.
    pub hash: &'a [u8],
    /// UTC microseconds.
    pub at_us: i64,
    /// The account.
    pub user: &'a str,
    /// Signed amount.
    pub amount: i64,
    /// `grant`, `adjust`, `debit` or `refund`.
    pub kind: &'a str,
    /// Node, job, sequence number and stored key text of a charge.
    pub key: Option<(&'a str, &'a str, i64, &'a str)>,
    /// Rank of the job.
    pub rank: Option<i64>,
    /// Metering interval.
    pub interval: Option<(i64, i64)>,
    /// CPU time, microseconds.
    pub cpu_us: Option<i64>,
    /// Who wrote it (`role:name`).
    pub actor: &'a str,
    /// Reason (grants, adjustments, refunds).
    pub reason: Option<&'a str>,
    /// The account's balance after it.
    pub balance_after: i64,
}

/// One account as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccountRow {
    /// The user.
    pub user: String,
    /// The balance.
    pub balance: i64,
    /// When it was created, UTC microseconds.
    pub created_us: i64,
    /// Who created it (`role:name`).
    pub created_by: String,
}

/// A claim as stored, back as the request that made it (`job` parsed, the
/// digest 32 bytes); `None` when the row is not one.
pub fn claim_from_row(
    user: String,
    job: &str,
    attempt: i64,
    rank: i64,
    digest: &[u8],
) -> Option<Claim> {
    Some(Claim {
        user,
        job: job.parse().ok()?,
        attempt: u32::try_from(attempt).ok()?,
        rank: u32::try_from(rank).ok()?,
        digest: digest.try_into().ok()?,
    })
}

/// A rank's end as stored: its claim and the width stored beside it.
pub fn end_with_width(claim: Claim, width: i64) -> Result<RankEnd, AccountError> {
    let width = u32::try_from(width)
        .map_err(|_| storage(format!("a rank end of job {} has width {width}", claim.job)))?;
    Ok(RankEnd { claim, width })
}

/// Who first claimed a batch rank, as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimRecord {
    /// The node that claimed it.
    pub node: String,
    /// SHA-256 of the signed spec it claimed.
    pub digest: Vec<u8>,
    /// When, UTC microseconds.
    pub at_us: i64,
}

impl ClaimRecord {
    /// The record of a claim by `node` of the spec with `digest` at `at_us`.
    pub fn of(node: String, digest: Vec<u8>, at_us: i64) -> ClaimRecord {
        ClaimRecord {
            node,
            digest,
            at_us,
        }
    }
}

/// Which node recorded a claimed rank's end, and when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndRecord {
    /// The node that recorded it (the one that claimed the rank).
    pub node: String,
    /// When, UTC microseconds.
    pub at_us: i64,
}

/// The half-open range of keys that start with `prefix` (which ends in `/`,
/// and `0` follows `/`): the range is what the key index answers fastest.
pub fn prefix_range(prefix: &str) -> (String, String) {
    let hi = match prefix.strip_suffix('/') {
        Some(p) => format!("{p}0"),
        None => format!("{prefix}\u{10FFFF}"),
    };
    (prefix.to_string(), hi)
}

/// Row-level access to the ledger inside one transaction or connection.
pub trait Rows {
    /// Current balance of `user`, `None` without an account.
    fn balance_of(&mut self, user: &str) -> Result<Option<i64>, AccountError>;
    /// Like [`Rows::balance_of`], holding the account's row lock until the
    /// transaction ends where the backend has row locks.
    fn lock_balance(&mut self, user: &str) -> Result<Option<i64>, AccountError>;
    /// Sets the balance of an existing account.
    fn set_balance(&mut self, user: &str, balance: i64) -> Result<(), AccountError>;
    /// The id the next entry gets (ids run 1, 2, 3, ... without gaps).
    fn next_entry_id(&mut self) -> Result<i64, AccountError>;
    /// The chain hash of the last entry, `None` when there is none.
    fn last_hash(&mut self) -> Result<Option<Vec<u8>>, AccountError>;
    /// Appends an entry.
    fn insert_entry(&mut self, e: &EntryRow<'_>) -> Result<(), AccountError>;
    /// The charge stored under key text `idem`.
    fn charge_by_key(&mut self, idem: &str) -> Result<Option<StoredCharge>, AccountError>;
    /// Sum of `user`'s charges whose key text lies in `[lo, hi)`.
    fn net_by_key_range(&mut self, lo: &str, hi: &str, user: &str) -> Result<i64, AccountError>;
    /// Creates an account with balance 0; `false` when it exists.
    fn insert_account(&mut self, user: &str, now: i64, actor: &str) -> Result<bool, AccountError>;
    /// The first claim of `c`'s key.
    fn claim_of(&mut self, c: &Claim) -> Result<Option<ClaimRecord>, AccountError>;
    /// Records the first claim of `c`'s key.
    fn insert_claim(&mut self, c: &Claim, node: &str, now: i64) -> Result<(), AccountError>;
    /// The recorded end of the rank of `c`'s key.
    fn end_of(&mut self, c: &Claim) -> Result<Option<EndRecord>, AccountError>;
    /// Records the end of a claimed rank.
    fn insert_end(&mut self, e: &RankEnd, node: &str, now: i64) -> Result<(), AccountError>;
    /// The first attempt of `user`'s job `job` whose every rank has ended (as
    /// many ends as the widest width recorded for it), with that width.
    fn ended_attempt(&mut self, user: &str, job: &str) -> Result<Option<(u32, u32)>, AccountError>;
    /// Records a refused request.
    fn insert_refusal(&mut self, now: i64, r: &Refusal) -> Result<(), AccountError>;
    /// Up to `limit` entries of `user` with id above `after`, time in `[since, until)`, by id.
    fn history(
        &mut self,
        user: &str,
        after: i64,
        since: i64,
        until: i64,
        limit: i64,
    ) -> Result<Vec<LedgerEntry>, AccountError>;
    /// Net charged, CPU time and distinct jobs of the charges in `[since, until)`, grouped.
    fn report(
        &mut self,
        by: ReportBy,
        since: i64,
        until: i64,
    ) -> Result<Vec<ReportRow>, AccountError>;
    /// Every account: user, balance, when and by whom it was created.
    fn accounts(&mut self) -> Result<Vec<AccountRow>, AccountError>;
    /// Every claim of a batch rank, with who claimed it and when.
    fn claims(&mut self) -> Result<Vec<(Claim, ClaimRecord)>, AccountError>;
    /// Every recorded end of a claimed rank.
    fn ends(&mut self) -> Result<Vec<(RankEnd, EndRecord)>, AccountError>;
    /// Calls `f` on every entry with its stored key text and chain hash, in id order.
    fn each_chained(&mut self, f: &mut ChainedFn<'_>) -> Result<(), AccountError>;
    /// Every run of absent entry ids `(first, last)`: between entries, and after
    /// the last one up to the last id the backend gave out.
    fn missing_ids(&mut self) -> Result<Vec<(i64, i64)>, AccountError>;
    /// The first `limit` idempotency keys (in byte order) that more than one
    /// entry carries, each with those entries' ids in order: found by the
    /// database (its unique index, or a grouping that spills to disk), so
    /// the caller holds no key in memory.
    fn duplicate_keys(&mut self, limit: usize) -> Result<Vec<(String, Vec<i64>)>, AccountError>;
    /// The database's own consistency check: `Some(what failed)` or `None`.
    fn integrity(&mut self) -> Result<Option<String>, AccountError>;
    /// The project document stored under `key` (see [`super::projects`]).
    fn doc(&mut self, key: &str) -> Result<Option<String>, AccountError>;
    /// Stores (or replaces) the project document under `key`.
    fn put_doc(&mut self, key: &str, value: &str) -> Result<(), AccountError>;
    /// Every project document whose key starts with `prefix`, by key.
    fn docs(&mut self, prefix: &str) -> Result<Vec<(String, String)>, AccountError>;
    /// The keys of the project documents that start with `prefix`, in order.
    fn doc_keys(&mut self, prefix: &str) -> Result<Vec<String>, AccountError>;
}

/// Whether a transaction's work is kept.
pub type Keep = bool;

/// An open write transaction.
pub trait Tx {
    /// Its rows.
    fn rows(&mut self) -> &mut dyn Rows;
    /// Runs `work` in a savepoint, released when it returns `true`, rolled back
    /// otherwise; an error only when the savepoint itself failed.
    fn savepoint(
        &mut self,
        work: &mut dyn FnMut(&mut dyn Rows) -> Keep,
    ) -> Result<(), AccountError>;
    /// Reads ahead what a batch will ask about (the stored charges of
    /// `keys`, the balances of `users`) where that saves round trips, unless
    /// already read (see [`Writer::expect`]); the answers stay the same
    /// either way.
    fn prefetch(&mut self, _keys: &[String], _users: &[String]) -> Result<(), AccountError> {
        Ok(())
    }
}

/// The write side of a backend: one connection, one transaction at a time.
pub trait Writer: Send {
    /// Runs `work` in one transaction, committed when it returns `true` and
    /// rolled back otherwise; an error when beginning or committing failed.
    fn transaction(
        &mut self,
        work: &mut dyn FnMut(&mut dyn Tx) -> Keep,
    ) -> Result<Keep, AccountError>;
    /// Says what the next transaction will read ahead ([`Tx::prefetch`]),
    /// so that a backend may read it along with the transaction's start.
    fn expect(&mut self, _keys: &[String], _users: &[String]) {}
    /// The last entry's id and stored hash (the chain head).
    fn head(&mut self) -> Result<Option<(i64, Vec<u8>)>, AccountError>;
    /// Sum of every balance (for metrics).
    fn balances(&mut self) -> Result<i64, AccountError>;
    /// Called when the writer stops (SQLite checkpoints its WAL).
    fn close(&mut self) {}
}

/// The read side of a backend.
pub trait Reader: Send {
    /// Runs `work` on a consistent view of the ledger.
    fn read(&mut self, work: &mut dyn FnMut(&mut dyn Rows)) -> Result<(), AccountError>;
}
