//! The hash chain on both backends: each kind of tampering that keeps every
//! balance and running sum consistent is still caught by the audit, which
//! names the entry where the chain breaks; and a version-1 SQLite ledger is
//! chained once on upgrade.

use money::MICROS_PER_CREDIT;
use proto::account::AuditReport;
use rusqlite::Connection;

use super::debit;
use crate::store::testdb::{Kind, TestDb, both};
use crate::store::{audit, ledger, lite::Lite, schema};

const MAX: i64 = 1_000_000 * MICROS_PER_CREDIT;
const C: i64 = MICROS_PER_CREDIT;

/// Entries 1 (grant of 100) and 2, 3, 4 (debits of 1, 2, 3 credits) of user `u`.
fn four_entries(kind: Kind) -> TestDb {
    let db = TestDb::new(kind);
    let mut c = db.rows();
    ledger::create(&mut *c, "u", 100 * C, "admin:root", 1, MAX).unwrap();
    for seq in 1..=3u64 {
        let d = debit("n1", "j", seq, "u", seq as i64 * C);
        ledger::debit(&mut *c, &d, "node:n1", 1 + seq as i64, MAX).unwrap();
    }
    assert!(audit::audit(&mut *c).unwrap().problems.is_empty());
    db
}

fn audit_of(db: &TestDb) -> AuditReport {
    audit::audit(&mut *db.reader()).unwrap()
}

/// The one chain problem, which must name `id`.
fn chain_breaks_at(report: &AuditReport, id: i64) {
    let chain: Vec<_> = report
        .problems
        .iter()
        .filter(|p| p.what.contains("chain"))
        .collect();
    assert_eq!(chain.len(), 1, "{:?}", report.problems);
    assert_eq!(chain[0].entry_ids, vec![id], "{:?}", chain[0]);
    assert!(
        chain[0].what.contains(&format!("entry {id}")),
        "{:?}",
        chain[0]
    );
}

const LITE_UNLOCK: &str = "DROP TRIGGER entries_no_update; DROP TRIGGER entries_no_delete;";
const PG_UNLOCK: &str = "ALTER TABLE entries DISABLE TRIGGER entries_append_only;";

both! {
    #[test]
    fn an_amount_changed_with_every_balance_made_to_agree_breaks_the_chain_there(kind: Kind) {
        let db = four_entries(kind);
        // Entry 3 moves 1 credit less; its and every later running sum, and
        // the balance, are changed to agree.
        let fix = format!(
            "UPDATE entries SET amount = amount + {C} WHERE id = 3;
             UPDATE entries SET balance_after = balance_after + {C} WHERE id >= 3;
             UPDATE accounts SET balance = balance + {C};"
        );
        db.exec(&format!("{LITE_UNLOCK}{fix}"), &format!("{PG_UNLOCK}{fix}"));
        let report = audit_of(&db);
        assert_eq!(report.problems.len(), 1, "{:?}", report.problems);
        chain_breaks_at(&report, 3);
    }

    #[test]
    fn a_deleted_entry_breaks_the_chain_at_the_next(kind: Kind) {
        let db = four_entries(kind);
        let fix = format!(
            "DELETE FROM entries WHERE id = 3;
             UPDATE entries SET balance_after = balance_after + {} WHERE id > 3;
             UPDATE accounts SET balance = balance + {};",
            2 * C,
            2 * C
        );
        db.exec(&format!("{LITE_UNLOCK}{fix}"), &format!("{PG_UNLOCK}{fix}"));
        chain_breaks_at(&audit_of(&db), 4);
    }

    #[test]
    fn an_inserted_entry_breaks_the_chain_where_it_was_put(kind: Kind) {
        let db = four_entries(kind);
        // A copy of entry 4 under a new key and id, with a hash taken from
        // the entry before it, and the balance made to agree.
        let lite = format!(
            "INSERT INTO entries(id, at_us, user, amount, kind, node, job, seq, rank,
                 interval_start_us, interval_end_us, cpu_us, idem_key, actor, balance_after, hash)
             SELECT 5, at_us, user, amount, kind, node, job, 9, rank, interval_start_us,
                 interval_end_us, cpu_us, 'n1/j/debit/9', actor, balance_after - {}, hash
             FROM entries WHERE id = 4;
             UPDATE accounts SET balance = balance - {};",
            3 * C,
            3 * C
        );
        let pg = format!(
            r#"UPDATE head SET last_id = 5;
             INSERT INTO entries(id, at_us, "user", amount, kind, node, job, seq, rank,
                 interval_start_us, interval_end_us, cpu_us, idem_key, actor, balance_after, hash)
             SELECT 5, at_us, "user", amount, kind, node, job, 9, rank, interval_start_us,
                 interval_end_us, cpu_us, 'n1/j/debit/9', actor, balance_after - {}, hash
             FROM entries WHERE id = 4;
             UPDATE accounts SET balance = balance - {};"#,
            3 * C,
            3 * C
        );
        db.exec(&lite, &pg);
        let report = audit_of(&db);
        assert_eq!(report.problems.len(), 1, "{:?}", report.problems);
        chain_breaks_at(&report, 5);
    }
}

#[test]
fn a_version_1_ledger_is_chained_once_on_upgrade_and_says_up_to_where() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.db");
    {
        let conn = schema::open_writer(&path, true).unwrap();
        ledger::create(&mut Lite(&conn), "u", 100 * C, "admin:root", 1, MAX).unwrap();
        ledger::debit(
            &mut Lite(&conn),
            &debit("n1", "j", 1, "u", C),
            "node:n1",
            2,
            MAX,
        )
        .unwrap();
        // Back to how version 1 stored it: no hashes.
        conn.execute_batch(
            "DROP TRIGGER entries_no_update; UPDATE entries SET hash = NULL;
             UPDATE meta SET value = '1' WHERE key = 'schema_version';",
        )
        .unwrap();
    }
    let conn = schema::open_writer(&path, false).unwrap();
    let meta = |k: &str| -> String {
        conn.query_row("SELECT value FROM meta WHERE key = ?1", [k], |r| r.get(0))
            .unwrap()
    };
    assert_eq!(meta("schema_version"), "2");
    assert_eq!(meta("chained_on_upgrade"), "2");
    ledger::debit(
        &mut Lite(&conn),
        &debit("n1", "j", 2, "u", C),
        "node:n1",
        3,
        MAX,
    )
    .unwrap();
    let report = audit::audit(&mut Lite(&conn)).unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    assert!(
        conn.execute("UPDATE entries SET amount = 1", [])
            .unwrap_err()
            .to_string()
            .contains("append-only"),
        "the trigger is back"
    );
    drop(conn);
    // A second opening changes nothing.
    let again = Connection::open(&path).unwrap();
    let before: Vec<u8> = again
        .query_row("SELECT hash FROM entries WHERE id = 1", [], |r| r.get(0))
        .unwrap();
    drop(again);
    let conn = schema::open_writer(&path, false).unwrap();
    let after: Vec<u8> = conn
        .query_row("SELECT hash FROM entries WHERE id = 1", [], |r| r.get(0))
        .unwrap();
    assert_eq!(before, after);
}
