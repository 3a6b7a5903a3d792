//! The audit: proves the ledger's invariants from the rows themselves and
//! names the rows involved when one fails, on either backend. Checked: the
//! database's own consistency (SQLite's `quick_check`); every account's balance equals the sum of its entries; each
//! entry's `balance_after` equals the running sum up to it; every entry
//! belongs to an account; amounts have the sign their kind demands;
//! idempotency keys are present exactly on debits and refunds, match their
//! columns, and are unique; entry ids run without a gap from 1 to the last id
//! the backend gave out, so a deleted entry is named even when the balances
//! were changed to hide it. (Ids are consecutive because every insert into
//! `entries` either commits or is rolled back with its transaction or
//! savepoint, which also rolls back SQLite's AUTOINCREMENT counter and
//! PostgreSQL's `head.last_id`.) And the hash chain ([`super::chain`]): the
//! first entry whose stored hash does not follow from its content and the
//! hash before it is named, which catches a changed, deleted or inserted
//! entry even when balances and ids were made to agree.
//!
//! Memory stays bounded whatever the ledger's length: the entries are
//! streamed once in id order and what is kept grows only with the number of
//! accounts (a running sum each) and of problems (at most [`MAX_PROBLEMS`]).
//! Keys used twice are found by the database ([`Rows::duplicate_keys`]), not
//! by holding every key here.

use std::collections::HashMap;

use proto::account::{AccountError, AuditProblem, AuditReport, DebitKey, EntryKind};

use super::chain::Verifier;
use super::ledger::key_text;
use super::query::EntryColumns;
use super::rows::Rows;

/// Most problems listed in one report (the count of the rest is reported).
pub const MAX_PROBLEMS: usize = 1000;
const MAX_IDS: usize = 20;

struct Problems(Vec<AuditProblem>, usize);

impl Problems {
    fn push(&mut self, what: String, user: Option<&str>, mut ids: Vec<i64>) {
        if self.0.len() >= MAX_PROBLEMS {
            self.1 += 1;
            return;
        }
        ids.truncate(MAX_IDS);
        self.0.push(AuditProblem {
            what,
            user: user.map(str::to_string),
            entry_ids: ids,
        });
    }
}

/// Runs every check. Problems come back in the report; only a failure to read
/// the ledger is an error.
pub fn audit(db: &mut dyn Rows) -> Result<AuditReport, AccountError> {
    let mut p = Problems(Vec::new(), 0);
    if let Some(failed) = db.integrity()? {
        p.push(failed, None, vec![]);
    }
    let accounts: HashMap<String, i64> = db
        .accounts()?
        .into_iter()
        .map(|a| (a.user, a.balance))
        .collect();
    let mut sums: HashMap<String, (i64, bool)> = HashMap::new();
    let mut entries = 0u64;
    let mut chain = Verifier::default();
    db.each_chained(&mut |cols, idem, hash| {
        chain.next(&cols, hash.as_deref());
        entries += 1;
        let EntryColumns {
            id,
            user,
            amount,
            kind,
            node,
            job,
            seq,
            balance_after: after,
            ..
        } = cols;
        let u = Some(user.as_str());
        if !accounts.contains_key(&user) {
            p.push(
                format!("entry {id} belongs to {user:?}, who has no account"),
                u,
                vec![id],
            );
        }
        let kind = EntryKind::parse(&kind);
        let sign_ok = match kind {
            Some(EntryKind::Debit) => amount < 0,
            Some(EntryKind::Refund) | Some(EntryKind::Grant) => amount > 0,
            Some(EntryKind::Adjust) => amount != 0,
            _ => false,
        };
        if !sign_ok {
            p.push(
                format!("entry {id} has amount {amount} which its kind does not allow"),
                u,
                vec![id],
            );
        }
        // Charges carry their key; so does a project's income grant (its
        // period is in the key, see [`super::projects`]).
        let income =
            kind == Some(EntryKind::Grant) && node.as_deref() == Some(super::projects::INCOME_NODE);
        let keyed = income || matches!(kind, Some(EntryKind::Debit) | Some(EntryKind::Refund));
        match (keyed, &idem, kind) {
            (true, Some(k), Some(kind)) => {
                let expect = match (node, job, seq) {
                    (Some(node), Some(job), Some(seq)) if seq >= 0 => Some(key_text(
                        kind,
                        &DebitKey {
                            node,
                            job,
                            seq: seq as u64,
                        },
                    )),
                    _ => None,
                };
                if expect.as_deref() != Some(k.as_str()) {
                    p.push(
                        format!("entry {id} has key {k:?} that does not match its node/job/seq"),
                        u,
                        vec![id],
                    );
                }
            }
            (true, None, _) => p.push(
                format!("entry {id} is a charge without an idempotency key"),
                u,
                vec![id],
            ),
            (false, Some(k), _) => p.push(
                format!("entry {id} is not a charge but carries key {k:?}"),
                u,
                vec![id],
            ),
            _ => {}
        }
        let (sum, broken) = sums.entry(user.clone()).or_insert((0, false));
        match sum.checked_add(amount) {
            Some(v) => *sum = v,
            None => {
                p.push(
                    format!("the entries of {user:?} overflow at entry {id}"),
                    u,
                    vec![id],
                );
                *broken = true;
            }
        }
        if !*broken && *sum != after {
            p.push(
                format!("entry {id} records balance {after} but the entries up to it sum to {sum}"),
                u,
                vec![id],
            );
            *broken = true;
        }
    })?;
    missing_entries(db, &mut p)?;
    for (what, user) in super::projects::audit(db, &accounts)? {
        p.push(what, Some(&user), vec![]);
    }
    if let Some((id, why)) = chain.first_break {
        p.push(why, None, vec![id]);
    }
    let mut users: Vec<_> = accounts.iter().collect();
    users.sort();
    for (user, balance) in users {
        let sum = sums.get(user).map(|s| s.0).unwrap_or(0);
        if sum != *balance {
            p.push(
                format!("account {user:?} has balance {balance} but its entries sum to {sum}"),
                Some(user),
                vec![],
            );
        }
    }
    for (k, ids) in db.duplicate_keys(MAX_PROBLEMS)? {
        p.push(
            format!("idempotency key {k:?} is used by {} entries", ids.len()),
            None,
            ids,
        );
    }
    if p.1 > 0 {
        let more = p.1;
        p.0.push(AuditProblem {
            what: format!("... and {more} more problems"),
            user: None,
            entry_ids: vec![],
        });
    }
    Ok(AuditReport {
        accounts: accounts.len() as u64,
        entries,
        problems: p.0,
    })
}

/// Reports each run of entry ids that is absent: between two entries, or
/// after the last one up to the last id the backend handed out.
fn missing_entries(db: &mut dyn Rows, p: &mut Problems) -> Result<(), AccountError> {
    let gaps = db.missing_ids()?;
    for (first, end) in gaps {
        let what = if first == end {
            format!("entry {first} is missing: entries are never deleted")
        } else {
            format!("entries {first} to {end} are missing: entries are never deleted")
        };
        let ids = (first..=end).take(MAX_IDS).collect();
        p.push(what, None, ids);
    }
    Ok(())
}
