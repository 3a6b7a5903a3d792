//! A large, valid ledger built fast, for the audit's benchmark and its
//! memory test: accounts and debits written through the store's own code
//! (`ledger::create`, `ledger::debit`, so every entry is chained and keyed as
//! accountd writes it), many to a transaction, on any backend's writer.

use accountd::store::ledger;
use accountd::store::rows::Writer;
use proto::account::{AccountError, Debit, DebitKey, MeterInterval};

/// Accounts the debits are spread over.
pub const USERS: u64 = 16;
/// Each account's opening grant, in micro-credits (the default per-entry limit).
const INITIAL: i64 = 100_000 * 1_000_000;
/// Entries written per transaction.
const CHUNK: u64 = 10_000;
const MAX: i64 = i64::MAX;

/// Debit `seq` of the built ledger (1000 micro-credits from user `seq % USERS`).
fn debit(seq: u64) -> Debit {
    Debit {
        key: DebitKey {
            node: "n1".into(),
            job: format!("job-{}", seq / 1000),
            seq,
        },
        user: format!("user{}", seq % USERS),
        amount: 1000,
        rank: 0,
        interval: MeterInterval {
            start_us: seq * 1_000_000,
            end_us: seq * 1_000_000 + 1_000_000,
        },
        cpu_us: 1000,
    }
}

/// Grows the ledger behind `w` to `entries` entries: the accounts first (one
/// entry each) when it is empty, then debits. `done` is how many entries it
/// holds already (0 for a new ledger).
pub fn fill(w: &mut dyn Writer, done: u64, entries: u64) -> Result<(), AccountError> {
    let mut next = done;
    let mut failed = None;
    while next < entries {
        let end = (next + CHUNK).min(entries);
        w.transaction(&mut |tx| {
            let rows = tx.rows();
            for n in next..end {
                let r = if n < USERS {
                    ledger::create(rows, &format!("user{n}"), INITIAL, "admin:bench", 1, MAX)
                        .map(drop)
                } else {
                    ledger::debit(rows, &debit(n), "node:n1", 2, MAX).map(drop)
                };
                if let Err(e) = r {
                    failed = Some(e);
                    return false;
                }
            }
            true
        })?;
        if let Some(e) = failed.take() {
            return Err(e);
        }
        next = end;
    }
    Ok(())
}
