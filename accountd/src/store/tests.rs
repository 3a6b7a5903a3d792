//! Tests of the ledger on real SQLite files in temporary directories.

use money::MICROS_PER_CREDIT;
use proto::account::*;
use rusqlite::Connection;

use super::*;

const MAX: i64 = 1_000_000 * MICROS_PER_CREDIT;

fn fresh() -> (tempfile::TempDir, Connection) {
    let dir = tempfile::tempdir().unwrap();
    let conn = schema::open_writer(&dir.path().join("l.db"), true).unwrap();
    (dir, conn)
}

fn debit(node: &str, job: &str, seq: u64, user: &str, amount: i64) -> Debit {
    Debit {
        key: DebitKey {
            node: node.into(),
            job: job.into(),
            seq,
        },
        user: user.into(),
        amount,
        rank: 0,
        interval: MeterInterval {
            start_us: 0,
            end_us: 60_000_000,
        },
        cpu_us: 30_000_000,
    }
}

#[test]
fn a_repeated_debit_is_applied_once_and_returns_the_first_receipt() {
    let (_d, c) = fresh();
    ledger::create(&c, "alice", 10_000_000, "admin:root", 1, MAX).unwrap();
    let first = ledger::debit(
        &c,
        &debit("n1", "j1", 1, "alice", 2_500_000),
        "node:n1",
        2,
        MAX,
    )
    .unwrap();
    assert!(!first.duplicate);
    assert_eq!(first.balance_after, 7_500_000);
    ledger::debit(
        &c,
        &debit("n1", "j1", 2, "alice", 500_000),
        "node:n1",
        3,
        MAX,
    )
    .unwrap();
    let again = ledger::debit(
        &c,
        &debit("n1", "j1", 1, "alice", 2_500_000),
        "node:n1",
        4,
        MAX,
    )
    .unwrap();
    assert!(again.duplicate);
    assert_eq!(again.entry_id, first.entry_id);
    assert_eq!(again.balance_after, 7_500_000);
    assert_eq!(again.balance_now, 7_000_000);
    assert_eq!(query::balance(&c, "alice").unwrap().balance, 7_000_000);
    let err = ledger::debit(&c, &debit("n1", "j1", 1, "alice", 1), "node:n1", 5, MAX).unwrap_err();
    assert_eq!(err.code, ErrorCode::KeyConflict);
    assert!(audit::audit(&c).unwrap().problems.is_empty());
}

#[test]
fn debits_may_overdraw_but_bad_ones_change_nothing() {
    let (_d, c) = fresh();
    ledger::create(&c, "bob", 1_000_000, "admin:root", 1, MAX).unwrap();
    let r = ledger::debit(
        &c,
        &debit("n1", "j", 1, "bob", 3_000_000),
        "node:n1",
        2,
        MAX,
    )
    .unwrap();
    assert_eq!(r.balance_after, -2_000_000);
    let cases = [
        (debit("n1", "j", 2, "nobody", 1), ErrorCode::UnknownUser),
        (debit("n1", "j", 3, "bob", 0), ErrorCode::InvalidAmount),
        (debit("n1", "j", 4, "bob", -5), ErrorCode::InvalidAmount),
        (
            debit("n1", "j", 5, "bob", MAX + 1),
            ErrorCode::InvalidAmount,
        ),
        (debit("n/1", "j", 6, "bob", 1), ErrorCode::Malformed),
        (debit("n1", "j", u64::MAX, "bob", 1), ErrorCode::Malformed),
    ];
    for (d, code) in cases {
        assert_eq!(
            ledger::debit(&c, &d, "node:n1", 3, MAX).unwrap_err().code,
            code,
            "{d:?}"
        );
    }
    let mut bad_interval = debit("n1", "j", 7, "bob", 1);
    bad_interval.interval = MeterInterval {
        start_us: 10,
        end_us: 5,
    };
    assert_eq!(
        ledger::debit(&c, &bad_interval, "n", 3, MAX)
            .unwrap_err()
            .code,
        ErrorCode::Malformed
    );
    assert_eq!(query::balance(&c, "bob").unwrap().balance, -2_000_000);
    let entries: i64 = c
        .query_row("SELECT COUNT(*) FROM entries", [], |r| r.get(0))
        .unwrap();
    assert_eq!(entries, 2);
}

#[test]
fn balance_overflow_is_refused() {
    let (_d, c) = fresh();
    ledger::create(&c, "rich", 0, "admin:root", 1, i64::MAX).unwrap();
    ledger::grant(&c, "rich", i64::MAX - 1, "big", "admin:root", 1, i64::MAX).unwrap();
    let e = ledger::grant(&c, "rich", 2, "more", "admin:root", 1, i64::MAX).unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidAmount);
    assert_eq!(query::balance(&c, "rich").unwrap().balance, i64::MAX - 1);
}

#[test]
fn refunds_cannot_exceed_what_the_node_charged_for_the_job() {
    let (_d, c) = fresh();
    ledger::create(&c, "carol", 5_000_000, "admin:root", 1, MAX).unwrap();
    ledger::debit(
        &c,
        &debit("n1", "j", 1, "carol", 2_000_000),
        "node:n1",
        2,
        MAX,
    )
    .unwrap();
    let refund = |seq, amount| Refund {
        key: DebitKey {
            node: "n1".into(),
            job: "j".into(),
            seq,
        },
        user: "carol".into(),
        amount,
        reason: "meter glitch".into(),
    };
    ledger::refund(&c, &refund(100, 1_500_000), "node:n1", 3, MAX).unwrap();
    let e = ledger::refund(&c, &refund(101, 600_000), "node:n1", 4, MAX).unwrap_err();
    assert_eq!(e.code, ErrorCode::RefundTooLarge);
    let again = ledger::refund(&c, &refund(100, 1_500_000), "node:n1", 5, MAX).unwrap();
    assert!(again.duplicate);
    assert_eq!(query::balance(&c, "carol").unwrap().balance, 4_500_000);
    assert!(audit::audit(&c).unwrap().problems.is_empty());
}

#[test]
fn admin_writes_need_reasons_and_accounts_are_unique() {
    let (_d, c) = fresh();
    ledger::create(&c, "dave", 0, "admin:root", 1, MAX).unwrap();
    assert_eq!(
        ledger::create(&c, "dave", 0, "admin:root", 1, MAX)
            .unwrap_err()
            .code,
        ErrorCode::AccountExists
    );
    assert_eq!(
        ledger::grant(&c, "dave", 5, " ", "admin:root", 1, MAX)
            .unwrap_err()
            .code,
        ErrorCode::Malformed
    );
    assert_eq!(
        ledger::adjust(&c, "dave", 0, "x", "admin:root", 1, MAX)
            .unwrap_err()
            .code,
        ErrorCode::InvalidAmount
    );
    ledger::adjust(&c, "dave", -7, "correction", "admin:root", 2, MAX).unwrap();
    let page = query::history(&c, "dave", None, None, None, 10).unwrap();
    assert_eq!(page.entries.len(), 1);
    assert_eq!(page.entries[0].reason.as_deref(), Some("correction"));
    assert_eq!(page.entries[0].actor, "admin:root");
}

#[test]
fn history_pages_and_time_windows() {
    let (_d, c) = fresh();
    ledger::create(&c, "erin", 100_000_000, "admin:root", 10, MAX).unwrap();
    for seq in 1..=25 {
        ledger::debit(
            &c,
            &debit("n1", "j", seq, "erin", 1_000),
            "node:n1",
            10 + seq as i64,
            MAX,
        )
        .unwrap();
    }
    let mut all = Vec::new();
    let mut after = None;
    loop {
        let page = query::history(&c, "erin", None, None, after, 7).unwrap();
        all.extend(page.entries);
        match page.next_after {
            Some(a) => after = Some(a),
            None => break,
        }
    }
    assert_eq!(all.len(), 26);
    assert!(all.windows(2).all(|w| w[0].id < w[1].id));
    let window = query::history(&c, "erin", Some(15), Some(20), None, 100).unwrap();
    assert_eq!(window.entries.len(), 5);
    let rows = query::report(&c, ReportBy::Node, None, None).unwrap();
    assert_eq!(
        rows,
        vec![ReportRow {
            key: "n1".into(),
            charged: 25_000,
            cpu_us: 25 * 30_000_000,
            jobs: 1
        }]
    );
}

#[test]
fn audit_names_the_rows_that_were_tampered_with() {
    let (d, c) = fresh();
    ledger::create(&c, "frank", 5_000_000, "admin:root", 1, MAX).unwrap();
    let r = ledger::debit(
        &c,
        &debit("n1", "j", 1, "frank", 1_000_000),
        "node:n1",
        2,
        MAX,
    )
    .unwrap();
    ledger::debit(
        &c,
        &debit("n1", "j", 2, "frank", 1_000_000),
        "node:n1",
        3,
        MAX,
    )
    .unwrap();
    assert!(audit::audit(&c).unwrap().problems.is_empty());
    drop(c);
    let raw = Connection::open(d.path().join("l.db")).unwrap();
    raw.execute_batch(
        "DROP TRIGGER entries_no_update; DROP INDEX entries_idem;
         UPDATE accounts SET balance = balance + 1 WHERE user = 'frank';",
    )
    .unwrap();
    raw.execute(
        "INSERT INTO entries(at_us, user, amount, kind, node, job, seq, idem_key, actor, balance_after)
         SELECT at_us, user, amount, kind, node, job, seq, idem_key, actor, balance_after
         FROM entries WHERE id = ?1",
        [r.entry_id],
    )
    .unwrap();
    let report = audit::audit(&raw).unwrap();
    let text: Vec<String> = report.problems.iter().map(|p| p.what.clone()).collect();
    assert!(text.iter().any(|t| t.contains("has balance")), "{text:?}");
    assert!(
        text.iter().any(|t| t.contains("is used by 2 entries")),
        "{text:?}"
    );
    let dup = report
        .problems
        .iter()
        .find(|p| p.what.contains("is used by"))
        .unwrap();
    assert!(dup.entry_ids.contains(&r.entry_id));
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

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_writers_group_commit_exact_balances() {
    let dir = tempfile::tempdir().unwrap();
    let store = std::sync::Arc::new(
        Store::open(StoreConfig {
            path: dir.path().join("l.db"),
            create: true,
            max_batch: 256,
            max_entry: MAX,
        })
        .unwrap(),
    );
    for u in ["u0", "u1", "u2"] {
        store
            .write(
                "admin:root".into(),
                AccountOp::CreateAccount(CreateAccount {
                    user: u.into(),
                    initial: 1_000_000_000,
                }),
            )
            .await
            .unwrap();
    }
    let mut tasks = Vec::new();
    for n in 0..8u64 {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            for seq in 0..200u64 {
                let user = format!("u{}", seq % 3);
                let d = debit(&format!("n{n}"), "job", seq, &user, 1_000 + n as i64);
                store
                    .write(format!("node:n{n}"), AccountOp::Debit(d.clone()))
                    .await
                    .unwrap();
                if seq % 50 == 0 {
                    let again = store
                        .write(format!("node:n{n}"), AccountOp::Debit(d))
                        .await
                        .unwrap();
                    assert!(matches!(
                        again,
                        AccountReply::Charged(ChargeReceipt {
                            duplicate: true,
                            ..
                        })
                    ));
                }
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let mut expect = [1_000_000_000i64; 3];
    for n in 0..8i64 {
        for seq in 0..200usize {
            expect[seq % 3] -= 1_000 + n;
        }
    }
    for (i, e) in expect.iter().enumerate() {
        let got = store
            .read(AccountOp::Balance(BalanceQuery {
                user: Some(format!("u{i}")),
            }))
            .await
            .unwrap();
        assert_eq!(
            got,
            AccountReply::Balance(AccountBalance {
                user: format!("u{i}"),
                balance: *e
            })
        );
    }
    let AccountReply::Audit(report) = store.read(AccountOp::Audit).await.unwrap() else {
        panic!()
    };
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    assert_eq!(report.entries, 3 + 8 * 200);
    std::sync::Arc::try_unwrap(store).ok().unwrap().close();
}

#[test]
fn refund_limits_are_per_job_even_for_jobs_with_similar_names() {
    let (_d, c) = fresh();
    ledger::create(&c, "gina", 100 * MICROS_PER_CREDIT, "admin:root", 1, MAX).unwrap();
    for (i, job) in ["j", "j2", "j.", "j0", "jj"].iter().enumerate() {
        ledger::debit(
            &c,
            &debit("n1", job, 1, "gina", (i as i64 + 1) * 1_000),
            "node:n1",
            2,
            MAX,
        )
        .unwrap();
    }
    let refund = |amount| Refund {
        key: DebitKey {
            node: "n1".into(),
            job: "j".into(),
            seq: 9,
        },
        user: "gina".into(),
        amount,
        reason: "r".into(),
    };
    let e = ledger::refund(&c, &refund(1_001), "node:n1", 3, MAX).unwrap_err();
    assert_eq!(
        e.code,
        ErrorCode::RefundTooLarge,
        "only job j's 1000 may come back"
    );
    ledger::refund(&c, &refund(1_000), "node:n1", 3, MAX).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_storage_error_inside_a_batch_stays_with_its_job() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("l.db");
    let store = std::sync::Arc::new(
        Store::open(StoreConfig {
            path: path.clone(),
            create: true,
            max_batch: 256,
            max_entry: MAX,
        })
        .unwrap(),
    );
    for u in ["ok", "boom"] {
        store
            .write(
                "admin:root".into(),
                AccountOp::CreateAccount(CreateAccount {
                    user: u.into(),
                    initial: 1_000_000,
                }),
            )
            .await
            .unwrap();
    }
    // Make every entry for `boom` fail after its balance was already updated.
    Connection::open(&path)
        .unwrap()
        .execute_batch(
            "CREATE TRIGGER boom BEFORE INSERT ON entries WHEN NEW.user = 'boom'
             BEGIN SELECT RAISE(ABORT, 'disk on fire'); END;",
        )
        .unwrap();
    let mut tasks = Vec::new();
    for seq in 0..40u64 {
        let store = store.clone();
        let user = if seq % 10 == 3 { "boom" } else { "ok" };
        tasks.push(tokio::spawn(async move {
            (
                user,
                store
                    .write(
                        "node:n1".into(),
                        AccountOp::Debit(debit("n1", "j", seq, user, 1_000)),
                    )
                    .await,
            )
        }));
    }
    for t in tasks {
        let (user, r) = t.await.unwrap();
        match user {
            "boom" => assert_eq!(r.unwrap_err().code, ErrorCode::Storage),
            _ => assert!(r.is_ok(), "{r:?}"),
        }
    }
    let bal = |u: &str| {
        let store = store.clone();
        let u = u.to_string();
        async move {
            store
                .read(AccountOp::Balance(BalanceQuery { user: Some(u) }))
                .await
                .unwrap()
        }
    };
    assert_eq!(
        bal("boom").await,
        AccountReply::Balance(AccountBalance {
            user: "boom".into(),
            balance: 1_000_000
        })
    );
    assert_eq!(
        bal("ok").await,
        AccountReply::Balance(AccountBalance {
            user: "ok".into(),
            balance: 1_000_000 - 36_000
        })
    );
    let AccountReply::Audit(report) = store.read(AccountOp::Audit).await.unwrap() else {
        panic!()
    };
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    std::sync::Arc::try_unwrap(store).ok().unwrap().close();
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
    ledger::create(&c, "hal", 5, "admin:root", 1, MAX).unwrap();
    let e = c.execute("UPDATE entries SET amount = 6", []).unwrap_err();
    assert!(e.to_string().contains("append-only"), "{e}");
    assert!(c.execute("DELETE FROM entries", []).is_err());
}

#[test]
fn a_new_ledger_and_its_wal_are_readable_by_the_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let (d, c) = fresh();
    ledger::create(&c, "ivy", 5, "admin:root", 1, MAX).unwrap();
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
