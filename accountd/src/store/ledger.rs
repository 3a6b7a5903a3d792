//! Writes to the ledger: debits, refunds, account creation, grants and
//! adjustments. Each function checks its input, then writes one entry and the
//! matching balance update on the connection it is given (the writer runs it
//! inside a savepoint of the current group-commit transaction, so either both
//! land or neither does).
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
    AccountBalance, AccountError, ChargeReceipt, Debit, DebitKey, EntryKind, EntryReceipt,
    ErrorCode, Refund,
};
use rusqlite::{Connection, OptionalExtension, params};

use crate::validate::{check_name, check_nonzero, check_positive, check_reason};

/// Maps an unexpected SQLite error to a retryable storage error.
pub fn storage(e: rusqlite::Error) -> AccountError {
    AccountError::new(
        ErrorCode::Storage,
        format!("ledger storage error ({e}); retry later and tell the operator if it persists"),
    )
}

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
pub fn balance_of(conn: &Connection, user: &str) -> Result<Option<i64>, AccountError> {
    conn.prepare_cached("SELECT balance FROM accounts WHERE user = ?1")
        .and_then(|mut s| s.query_row([user], |r| r.get(0)).optional())
        .map_err(storage)
}

/// What a charge stores beyond its key, compared field by field on a repeat.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ChargeContent {
    user: String,
    amount: i64,
    rank: Option<i64>,
    interval: (Option<i64>, Option<i64>),
    cpu_us: Option<i64>,
    reason: Option<String>,
}

impl ChargeContent {
    /// The fields that differ from `other`, by name, for the conflict message.
    fn differences(&self, other: &ChargeContent) -> Vec<&'static str> {
        let mut out = Vec::new();
        if self.user != other.user {
            out.push("user");
        }
        if self.amount != other.amount {
            out.push("amount");
        }
        if self.rank != other.rank {
            out.push("rank");
        }
        if self.interval != other.interval {
            out.push("interval");
        }
        if self.cpu_us != other.cpu_us {
            out.push("cpu time");
        }
        if self.reason != other.reason {
            out.push("reason");
        }
        out
    }
}

/// Checks a repeat of a key: `Some(receipt)` when the key was used with exactly
/// the same content (every stored field: user, amount, rank, interval, CPU time,
/// reason), a [`ErrorCode::KeyConflict`] naming the fields that differ when not,
/// `None` if the key is new.
fn existing_charge(
    conn: &Connection,
    idem: &str,
    new: &ChargeContent,
) -> Result<Option<ChargeReceipt>, AccountError> {
    let row: Option<(i64, i64, ChargeContent)> = conn
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
        .map_err(storage)?;
    let Some((entry_id, balance_after, old)) = row else {
        return Ok(None);
    };
    let differ = old.differences(new);
    if !differ.is_empty() {
        return Err(AccountError::new(
            ErrorCode::KeyConflict,
            format!(
                "key {idem} was already used for a different charge (entry {entry_id}; {} differ); use a new sequence number",
                differ.join(", ")
            ),
        ));
    }
    let balance_now = balance_of(conn, &old.user)?.unwrap_or(balance_after);
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

/// Applies `amount` to the account and appends the entry; returns (id, balance_after).
fn append(conn: &Connection, e: NewEntry<'_>) -> Result<(i64, i64), AccountError> {
    let balance = balance_of(conn, e.user)?.ok_or_else(|| unknown_user(e.user))?;
    let after = balance
        .checked_add(e.amount)
        .ok_or_else(|| overflow(e.user))?;
    conn.prepare_cached("UPDATE accounts SET balance = ?1 WHERE user = ?2")
        .and_then(|mut s| s.execute(params![after, e.user]))
        .map_err(storage)?;
    let (node, job, seq, idem) = match &e.key {
        Some((k, seq, idem)) => (
            Some(k.node.as_str()),
            Some(k.job.as_str()),
            Some(*seq),
            Some(idem.as_str()),
        ),
        None => (None, None, None, None),
    };
    conn.prepare_cached(
        "INSERT INTO entries(at_us, user, amount, kind, node, job, seq, rank, interval_start_us,
             interval_end_us, cpu_us, idem_key, actor, reason, balance_after)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)",
    )
    .and_then(|mut s| {
        s.execute(params![
            e.at_us,
            e.user,
            e.amount,
            e.kind.as_str(),
            node,
            job,
            seq,
            e.rank,
            e.interval.map(|i| i.0),
            e.interval.map(|i| i.1),
            e.cpu_us,
            idem,
            e.actor,
            e.reason,
            after
        ])
    })
    .map_err(storage)?;
    Ok((conn.last_insert_rowid(), after))
}

/// Charges a user for a node's metered CPU (idempotent by key).
pub fn debit(
    conn: &Connection,
    d: &Debit,
    actor: &str,
    now_us: i64,
    max: i64,
) -> Result<ChargeReceipt, AccountError> {
    check_name("user", &d.user)?;
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
        user: d.user.clone(),
        amount: -d.amount,
        rank: Some(i64::from(d.rank)),
        interval: (Some(interval.0), Some(interval.1)),
        cpu_us: Some(cpu),
        reason: None,
    };
    if let Some(r) = existing_charge(conn, &idem, &content)? {
        return Ok(r);
    }
    let (entry_id, after) = append(
        conn,
        NewEntry {
            at_us: now_us,
            user: &d.user,
            amount: -d.amount,
            kind: EntryKind::Debit,
            key: Some((&d.key, seq, idem)),
            rank: Some(d.rank),
            interval: Some(interval),
            cpu_us: Some(cpu),
            actor,
            reason: None,
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
    conn: &Connection,
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
    if let Some(rc) = existing_charge(conn, &idem, &content)? {
        return Ok(rc);
    }
    let (lo, hi) = job_prefix_range(&r.key.node, &r.key.job);
    let net: i64 = conn
        .prepare_cached(
            "SELECT COALESCE(SUM(amount), 0) FROM entries
             WHERE idem_key >= ?1 AND idem_key < ?2 AND user = ?3",
        )
        .and_then(|mut s| s.query_row(params![lo, hi, r.user], |row| row.get(0)))
        .map_err(storage)?;
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
        conn,
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
    conn: &Connection,
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
    let inserted = conn
        .prepare_cached(
            "INSERT INTO accounts(user, balance, created_us, created_by) VALUES (?1, 0, ?2, ?3)
             ON CONFLICT(user) DO NOTHING",
        )
        .and_then(|mut s| s.execute(params![user, now_us, actor]))
        .map_err(storage)?;
    if inserted == 0 {
        return Err(AccountError::new(
            ErrorCode::AccountExists,
            format!("an account for {user:?} already exists"),
        ));
    }
    let mut balance = 0;
    if initial > 0 {
        balance = admin_entry(
            conn,
            user,
            initial,
            EntryKind::Grant,
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

/// Adds credits to an account.
pub fn grant(
    conn: &Connection,
    user: &str,
    amount: i64,
    reason: &str,
    actor: &str,
    now_us: i64,
    max: i64,
) -> Result<EntryReceipt, AccountError> {
    check_name("user", user)?;
    check_positive(amount, max)?;
    check_reason(reason)?;
    admin_entry(conn, user, amount, EntryKind::Grant, reason, actor, now_us)
}

/// Corrects a balance up or down.
pub fn adjust(
    conn: &Connection,
    user: &str,
    amount: i64,
    reason: &str,
    actor: &str,
    now_us: i64,
    max: i64,
) -> Result<EntryReceipt, AccountError> {
    check_name("user", user)?;
    check_nonzero(amount, max)?;
    check_reason(reason)?;
    admin_entry(conn, user, amount, EntryKind::Adjust, reason, actor, now_us)
}

fn admin_entry(
    conn: &Connection,
    user: &str,
    amount: i64,
    kind: EntryKind,
    reason: &str,
    actor: &str,
    now_us: i64,
) -> Result<EntryReceipt, AccountError> {
    let (entry_id, balance_after) = append(
        conn,
        NewEntry {
            at_us: now_us,
            user,
            amount,
            kind,
            key: None,
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
