//! Tests of what only the SQLite backend has: opening files, WAL and full
//! sync, file modes, and upgrading an older file.

use money::MICROS_PER_CREDIT;
use rusqlite::Connection;

use crate::store::{StoreError, ledger, lite::Lite, schema};

const MAX: i64 = 1_000_000 * MICROS_PER_CREDIT;

fn fresh() -> (tempfile::TempDir, Connection) {
    let dir = tempfile::tempdir().unwrap();
    let conn = schema::open_writer(&dir.path().join("l.db"), true).unwrap();
    (dir, conn)
}

#[test]
fn opening_refuses_missing_directories_and_foreign_files() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope.db");
    let e = schema::open_writer(&missing, false).unwrap_err();
    assert!(matches!(e, StoreError::Missing { .. }), "{e}");
    assert!(!missing.exists(), "nothing may be created");
    assert!(matches!(
        schema::open_writer(dir.path(), true).unwrap_err(),
        StoreError::NotAFile { .. }
    ));
    let junk = dir.path().join("junk.db");
    std::fs::write(
        &junk,
        b"this is not sqlite at all, just some text padding it out........",
    )
    .unwrap();
    let e = schema::open_writer(&junk, false).unwrap_err();
    assert!(matches!(e, StoreError::NotALedger { .. }), "{e}");
    let other = dir.path().join("other.db");
    Connection::open(&other)
        .unwrap()
        .execute_batch("CREATE TABLE t(x)")
        .unwrap();
    assert!(matches!(
        schema::open_writer(&other, false).unwrap_err(),
        StoreError::NotALedger { .. }
    ));
}

#[test]
fn the_ledger_is_wal_with_full_sync_and_append_only() {
    let (_d, c) = fresh();
    let mode: String = c
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    let sync: i64 = c.query_row("PRAGMA synchronous", [], |r| r.get(0)).unwrap();
    assert_eq!(
        (mode.as_str(), sync),
        ("wal", 2),
        "WAL with synchronous=FULL"
    );
    ledger::create(&mut Lite(&c), "hal", 5, "admin:root", 1, MAX).unwrap();
    let e = c.execute("UPDATE entries SET amount = 6", []).unwrap_err();
    assert!(e.to_string().contains("append-only"), "{e}");
    assert!(c.execute("DELETE FROM entries", []).is_err());
}

#[test]
fn a_new_ledger_and_its_wal_are_readable_by_the_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let (d, c) = fresh();
    ledger::create(&mut Lite(&c), "ivy", 5, "admin:root", 1, MAX).unwrap();
    for name in ["l.db", "l.db-wal", "l.db-shm"] {
        let mode = std::fs::metadata(d.path().join(name))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o077, 0, "{name} has mode {:o}", mode & 0o777);
    }
}

#[test]
fn a_ledger_from_before_refusal_counts_gets_the_column_and_keeps_its_rows() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.db");
    let conn = schema::open_writer(&path, true).unwrap();
    // The table as it was: no `count`.
    conn.execute_batch(
        "DROP TABLE refusals;
         CREATE TABLE refusals(id INTEGER PRIMARY KEY, at_us INTEGER NOT NULL,
             role TEXT NOT NULL, name TEXT NOT NULL, op TEXT NOT NULL,
             code TEXT NOT NULL, message TEXT NOT NULL);
         INSERT INTO refusals(at_us, role, name, op, code, message)
             VALUES (1, 'user', 'alice', 'audit', 'Forbidden', 'no');",
    )
    .unwrap();
    drop(conn);
    let conn = schema::open_writer(&path, false).unwrap();
    let (rows, total): (i64, i64) = conn
        .query_row("SELECT COUNT(*), SUM(count) FROM refusals", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .unwrap();
    assert_eq!((rows, total), (1, 1));
}
