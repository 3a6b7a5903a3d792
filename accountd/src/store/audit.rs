//! The audit: proves the ledger's invariants from the rows themselves and
//! names the rows involved when one fails. Checked: SQLite's own page-level
//! consistency; every account's balance equals the sum of its entries; each
//! entry's `balance_after` equals the running sum up to it; every entry
//! belongs to an account; amounts have the sign their kind demands;
//! idempotency keys are present exactly on debits and refunds, match their
//! columns, and are unique; entry ids run without a gap from 1 to the last id
//! SQLite gave out, so a deleted entry is named even when the balances were
//! changed to hide it. (Ids are consecutive because every insert into
//! `entries` either commits or is rolled back with its transaction or
//! savepoint, which also rolls back the AUTOINCREMENT counter.)

use std::collections::HashMap;

use proto::account::{AccountError, AuditProblem, AuditReport, DebitKey, EntryKind};
use rusqlite::{Connection, OptionalExtension};

use super::ledger::{key_text, storage};

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
pub fn audit(conn: &Connection) -> Result<AuditReport, AccountError> {
    let mut p = Problems(Vec::new(), 0);
    let check: String = conn
        .query_row("PRAGMA quick_check", [], |r| r.get(0))
        .map_err(storage)?;
    if check != "ok" {
        p.push(format!("SQLite quick_check failed: {check}"), None, vec![]);
    }
    let mut accounts: HashMap<String, i64> = HashMap::new();
    {
        let mut s = conn
            .prepare("SELECT user, balance FROM accounts")
            .map_err(storage)?;
        let rows = s
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .map_err(storage)?;
        for row in rows {
            let (u, b) = row.map_err(storage)?;
            accounts.insert(u, b);
        }
    }
    let mut sums: HashMap<String, (i64, bool)> = HashMap::new();
    let mut keys: HashMap<String, Vec<i64>> = HashMap::new();
    let mut entries = 0u64;
    let mut s = conn
        .prepare(
            "SELECT id, user, amount, kind, node, job, seq, idem_key, balance_after
             FROM entries ORDER BY user, id",
        )
        .map_err(storage)?;
    let mut rows = s.query([]).map_err(storage)?;
    while let Some(r) = rows.next().map_err(storage)? {
        entries += 1;
        let id: i64 = r.get(0).map_err(storage)?;
        let user: String = r.get(1).map_err(storage)?;
        let amount: i64 = r.get(2).map_err(storage)?;
        let kind: String = r.get(3).map_err(storage)?;
        let node: Option<String> = r.get(4).map_err(storage)?;
        let job: Option<String> = r.get(5).map_err(storage)?;
        let seq: Option<i64> = r.get(6).map_err(storage)?;
        let idem: Option<String> = r.get(7).map_err(storage)?;
        let after: i64 = r.get(8).map_err(storage)?;
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
        let keyed = matches!(kind, Some(EntryKind::Debit) | Some(EntryKind::Refund));
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
                keys.entry(k.clone()).or_default().push(id);
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
    }
    missing_entries(conn, &mut p)?;
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
    let mut dups: Vec<_> = keys.into_iter().filter(|(_, ids)| ids.len() > 1).collect();
    dups.sort();
    for (k, ids) in dups {
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
/// after the last one up to the last id SQLite handed out (`sqlite_sequence`).
fn missing_entries(conn: &Connection, p: &mut Problems) -> Result<(), AccountError> {
    let mut gaps: Vec<(i64, i64)> = Vec::new();
    {
        let mut s = conn
            .prepare(
                "SELECT prev + 1, id - 1 FROM (
                     SELECT id, LAG(id, 1, 0) OVER (ORDER BY id) AS prev FROM entries
                 ) WHERE id > prev + 1",
            )
            .map_err(storage)?;
        let rows = s
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .map_err(storage)?;
        for row in rows {
            gaps.push(row.map_err(storage)?);
        }
    }
    let last: i64 = conn
        .query_row("SELECT COALESCE(MAX(id), 0) FROM entries", [], |r| r.get(0))
        .map_err(storage)?;
    let given_out: i64 = conn
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
