//! Writes to the ledger: debits, refunds, account creation, grants and
//! adjustments, written once against the storage interface ([`Rows`]). Each
//! function checks its input, then writes one entry and the matching balance
//! update in the transaction it is given (the writer runs it inside the
//! current group-commit transaction, so either both land or neither does).
//! The backends serialise write transactions (SQLite's `BEGIN IMMEDIATE`,
//! PostgreSQL's lock on the chain head row, see [`super::pg`]), so a key
//! looked up here cannot be taken by another accountd before the commit.
//!
//! Every refusal (bad input, unknown user, overflow, conflict) is decided
//! before the function's first write, so a refused operation leaves nothing
//! behind even without a savepoint; an error after a write is always
//! [`ErrorCode::Storage`]. The group commit relies on this.
//!
//! Idempotency: debits and refunds carry a key; a repeat with the same key and
//! content (every field the entry stores: user, amount, rank, interval, CPU
//! time, reason) returns the first receipt (marked `duplicate`) and writes
//! nothing; a repeat that differs in any of them is a
//! [`ErrorCode::KeyConflict`] naming the fields that differ.
//!
//! Unknown users: a debit for a user without an account is refused with
//! [`ErrorCode::UnknownUser`] — nodes must not run paid jobs for people the
//! ledger does not know; the node's journal records the refusal and stops
//! retrying it.

use proto::account::{
    AccountBalance, AccountError, AdminEntry, ChargeReceipt, Debit, DebitKey, EntryKind,
    EntryReceipt, ErrorCode, Refund,
};

use super::chain;
use super::query::EntryColumns;
pub use super::rows::storage;
use super::rows::{ChargeContent, EntryRow, Rows};
use crate::validate::{check_name, check_nonzero, check_positive, check_reason};

fn unknown_user(user: &str) -> AccountError {
    AccountError::new(
        ErrorCode::UnknownUser,
        format!("no account for user {user:?}: an admin must run `accountctl create {user}` first"),
    )
}

fn overflow(user: &str) -> AccountError {
    AccountError::new(
        ErrorCode::InvalidAmount,
        format!("that amount would overflow the balance of {user:?}"),
    )
}

/// The idempotency key as stored: `node/job/kind/seq`. Names cannot contain
/// `/`, so the text is unambiguous, and all charges of one job share the
/// prefix `node/job/` (see [`job_prefix_range`]).
pub fn key_text(kind: EntryKind, key: &DebitKey) -> String {
    format!("{}/{}/{}/{}", key.node, key.job, kind.as_str(), key.seq)
}

/// The half-open range of stored keys of every charge of one job on one node:
/// `["node/job/", "node/job0")` (`'0'` follows `'/'`).
pub fn job_prefix_range(node: &str, job: &str) -> (String, String) {
    (format!("{node}/{job}/"), format!("{node}/{job}0"))
}

fn check_key(key: &DebitKey) -> Result<i64, AccountError> {
    check_name("node", &key.node)?;
    check_name("job", &key.job)?;
    i64::try_from(key.seq)
        .map_err(|_| AccountError::new(ErrorCode::Malformed, "sequence number out of range"))
}

fn to_i64(what: &str, v: u64) -> Result<i64, AccountError> {
    i64::try_from(v)
        .map_err(|_| AccountError::new(ErrorCode::Malformed, format!("{what} out of range")))
}

/// Current balance of `user`, or `None` when there is no such account.
pub fn balance_of(db: &mut dyn Rows, user: &str) -> Result<Option<i64>, AccountError> {
    db.balance_of(user)
}

/// The fields of a repeat that differ from the first charge, by name, for the
/// conflict message.
fn differences(old: &ChargeContent, new: &ChargeContent) -> Vec<&'static str> {
    let fields = [
        ("user", old.user != new.user),
        ("amount", old.amount != new.amount),
        ("rank", old.rank != new.rank),
        ("interval", old.interval != new.interval),
        ("cpu time", old.cpu_us != new.cpu_us),
        ("reason", old.reason != new.reason),
    ];
    fields.iter().filter(|f| f.1).map(|f| f.0).collect()
}

/// Checks a repeat of a key: `Some(receipt)` when the key was used with exactly
/// the same content (every stored field: user, amount, rank, interval, CPU time,
/// reason), a [`ErrorCode::KeyConflict`] naming the fields that differ when not,
/// `None` if the key is new.
fn existing_charge(
    db: &mut dyn Rows,
    idem: &str,
    new: &ChargeContent,
) -> Result<Option<ChargeReceipt>, AccountError> {
    let Some((entry_id, balance_after, old)) = db.charge_by_key(idem)? else {
        return Ok(None);
    };
    let differ = differences(&old, new);
    if !differ.is_empty() {
        return Err(AccountError::new(
            ErrorCode::KeyConflict,
            format!(
                "key {idem} was already used for a different charge (entry {entry_id}; {} differ); use a new sequence number",
                differ.join(", ")
            ),
        ));
    }
    let balance_now = db.balance_of(&old.user)?.unwrap_or(balance_after);
    Ok(Some(ChargeReceipt {
        entry_id,
        amount: old.amount,
        balance_after,
        balance_now,
        duplicate: true,
    }))
}

/// Fields of one new entry.
struct NewEntry<'a> {
    at_us: i64,
    user: &'a str,
    amount: i64,
    kind: EntryKind,
    key: Option<(&'a DebitKey, i64, String)>,
    rank: Option<u32>,
    interval: Option<(i64, i64)>,
    cpu_us: Option<i64>,
    actor: &'a str,
    reason: Option<&'a str>,
}

/// Applies `amount` to the account and appends the entry, chained to the
/// last one; returns (id, balance_after).
fn append(db: &mut dyn Rows, e: NewEntry<'_>) -> Result<(i64, i64), AccountError> {
    let balance = db
        .lock_balance(e.user)?
        .ok_or_else(|| unknown_user(e.user))?;
    let after = balance
        .checked_add(e.amount)
        .ok_or_else(|| overflow(e.user))?;
    db.set_balance(e.user, after)?;
    let id = db.next_entry_id()?;
    let prev = db.last_hash()?;
    let prev = chain::stored(prev.as_deref()).unwrap_or(chain::GENESIS);
    let cols = EntryColumns {
        id,
        at_us: e.at_us,
        user: e.user.to_string(),
        amount: e.amount,
        kind: e.kind.as_str().to_string(),
        node: e.key.as_ref().map(|k| k.0.node.clone()),
        job: e.key.as_ref().map(|k| k.0.job.clone()),
        seq: e.key.as_ref().map(|k| k.1),
        rank: e.rank.map(i64::from),
        interval: (e.interval.map(|i| i.0), e.interval.map(|i| i.1)),
        cpu_us: e.cpu_us,
        actor: e.actor.to_string(),
        reason: e.reason.map(str::to_string),
        balance_after: after,
    };
    let hash = chain::entry_hash(&prev, &cols);
    db.insert_entry(&EntryRow {
        id,
        hash: &hash,
        at_us: e.at_us,
        user: e.user,
        amount: e.amount,
        kind: e.kind.as_str(),
        key: e
            .key
            .as_ref()
            .map(|(k, seq, idem)| (k.node.as_str(), k.job.as_str(), *seq, idem.as_str())),
        rank: e.rank.map(i64::from),
        interval: e.interval,
        cpu_us: e.cpu_us,
        actor: e.actor,
        reason: e.reason,
        balance_after: after,
    })?;
    Ok((id, after))
}

/// Charges a user for a node's metered CPU (idempotent by key).
pub fn debit(
    db: &mut dyn Rows,
    d: &Debit,
    actor: &str,
    now_us: i64,
    max: i64,
) -> Result<ChargeReceipt, AccountError> {
    debit_from(db, d, None, actor, now_us, max)
}

/// Charges `d` to `account` instead of `d.user`'s own, recording `reason`
/// (who spent) in the entry; `None` charges `d.user` as [`debit`] does.
pub fn debit_from(
    db: &mut dyn Rows,
    d: &Debit,
    account: Option<(&str, &str)>,
    actor: &str,
    now_us: i64,
    max: i64,
) -> Result<ChargeReceipt, AccountError> {
    check_name("user", &d.user)?;
    let (payer, reason) = match account {
        Some((a, r)) => (a, Some(r)),
        None => (d.user.as_str(), None),
    };
    let seq = check_key(&d.key)?;
    check_positive(d.amount, max)?;
    if d.interval.end_us < d.interval.start_us {
        return Err(AccountError::new(
            ErrorCode::Malformed,
            "metering interval ends before it starts",
        ));
    }
    let interval = (
        to_i64("interval start", d.interval.start_us)?,
        to_i64("interval end", d.interval.end_us)?,
    );
    let cpu = to_i64("cpu time", d.cpu_us)?;
    let idem = key_text(EntryKind::Debit, &d.key);
    let content = ChargeContent {
        user: payer.to_string(),
        amount: -d.amount,
        rank: Some(i64::from(d.rank)),
        interval: (Some(interval.0), Some(interval.1)),
        cpu_us: Some(cpu),
        reason: reason.map(str::to_string),
    };
    if let Some(r) = existing_charge(db, &idem, &content)? {
        return Ok(r);
    }
    let (entry_id, after) = append(
        db,
        NewEntry {
            at_us: now_us,
            user: payer,
            amount: -d.amount,
            kind: EntryKind::Debit,
            key: Some((&d.key, seq, idem)),
            rank: Some(d.rank),
            interval: Some(interval),
            cpu_us: Some(cpu),
            actor,
            reason,
        },
    )?;
    Ok(ChargeReceipt {
        entry_id,
        amount: -d.amount,
        balance_after: after,
        balance_now: after,
        duplicate: false,
    })
}

/// Gives back part of what a node charged a user for a job (idempotent by key).
pub fn refund(
    db: &mut dyn Rows,
    r: &Refund,
    actor: &str,
    now_us: i64,
    max: i64,
) -> Result<ChargeReceipt, AccountError> {
    check_name("user", &r.user)?;
    let seq = check_key(&r.key)?;
    check_positive(r.amount, max)?;
    check_reason(&r.reason)?;
    let idem = key_text(EntryKind::Refund, &r.key);
    let content = ChargeContent {
        user: r.user.clone(),
        amount: r.amount,
        rank: None,
        interval: (None, None),
        cpu_us: None,
        reason: Some(r.reason.clone()),
    };
    if let Some(rc) = existing_charge(db, &idem, &content)? {
        return Ok(rc);
    }
    let (lo, hi) = job_prefix_range(&r.key.node, &r.key.job);
    let net = db.net_by_key_range(&lo, &hi, &r.user)?;
    let charged = net.checked_neg().unwrap_or(i64::MAX);
    if r.amount > charged {
        return Err(AccountError::new(
            ErrorCode::RefundTooLarge,
            format!(
                "refund of {} exceeds the {} net charged to {} for job {} on {}",
                money::format_credits_fixed(r.amount),
                money::format_credits_fixed(charged.max(0)),
                r.user,
                r.key.job,
                r.key.node
            ),
        ));
    }
    let (entry_id, after) = append(
        db,
        NewEntry {
            at_us: now_us,
            user: &r.user,
            amount: r.amount,
            kind: EntryKind::Refund,
            key: Some((&r.key, seq, idem)),
            rank: None,
            interval: None,
            cpu_us: None,
            actor,
            reason: Some(&r.reason),
        },
    )?;
    Ok(ChargeReceipt {
        entry_id,
        amount: r.amount,
        balance_after: after,
        balance_now: after,
        duplicate: false,
    })
}

/// Opens an account with an optional initial grant.
pub fn create(
    db: &mut dyn Rows,
    user: &str,
    initial: i64,
    actor: &str,
    now_us: i64,
    max: i64,
) -> Result<AccountBalance, AccountError> {
    check_name("user", user)?;
    if initial != 0 {
        check_positive(initial, max)?;
    }
    let inserted = db.insert_account(user, now_us, actor)?;
    if !inserted {
        return Err(AccountError::new(
            ErrorCode::AccountExists,
            format!("an account for {user:?} already exists"),
        ));
    }
    let mut balance = 0;
    if initial > 0 {
        balance = admin_entry(
            db,
            user,
            initial,
            EntryKind::Grant,
            None,
            "initial grant",
            actor,
            now_us,
        )?
        .balance_after;
    }
    Ok(AccountBalance {
        user: user.to_string(),
        balance,
    })
}

/// A grant (`kind` [`EntryKind::Grant`]: adds credits) or an adjustment
/// ([`EntryKind::Adjust`]: corrects a balance up or down): the user's name, the
/// amount (a grant's positive, an adjustment's not zero, both at most `max`)
/// and the reason are checked in that order, then one admin entry is written,
/// without a key.
pub fn admin_change(
    db: &mut dyn Rows,
    kind: EntryKind,
    e: &AdminEntry,
    actor: &str,
    now_us: i64,
    max: i64,
) -> Result<EntryReceipt, AccountError> {
    check_name("user", &e.user)?;
    match kind {
        EntryKind::Grant => check_positive(e.amount, max)?,
        EntryKind::Adjust => check_nonzero(e.amount, max)?,
        other => {
            return Err(AccountError::new(
                ErrorCode::Malformed,
                format!("{} is not an admin's change", other.as_str()),
            ));
        }
    }
    check_reason(&e.reason)?;
    admin_entry(db, &e.user, e.amount, kind, None, &e.reason, actor, now_us)
}

/// Adds credits under an idempotency key (a project's income for one
/// period): `None` when the key was used before, and nothing is written.
pub fn keyed_grant(
    db: &mut dyn Rows,
    user: &str,
    amount: i64,
    key: &DebitKey,
    reason: &str,
    actor: &str,
    now_us: i64,
) -> Result<Option<EntryReceipt>, AccountError> {
    let seq = check_key(key)?;
    let idem = key_text(EntryKind::Grant, key);
    if db.charge_by_key(&idem)?.is_some() {
        return Ok(None);
    }
    admin_entry(
        db,
        user,
        amount,
        EntryKind::Grant,
        Some((key, seq, idem)),
        reason,
        actor,
        now_us,
    )
    .map(Some)
}

#[allow(clippy::too_many_arguments)]
fn admin_entry(
    db: &mut dyn Rows,
    user: &str,
    amount: i64,
    kind: EntryKind,
    key: Option<(&DebitKey, i64, String)>,
    reason: &str,
    actor: &str,
    now_us: i64,
) -> Result<EntryReceipt, AccountError> {
    let (entry_id, balance_after) = append(
        db,
        NewEntry {
            at_us: now_us,
            user,
            amount,
            kind,
            key,
            rank: None,
            interval: None,
            cpu_us: None,
            actor,
            reason: Some(reason),
        },
    )?;
    Ok(EntryReceipt {
        entry_id,
        balance_after,
    })
}
