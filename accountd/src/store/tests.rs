//! Tests of the ledger on real SQLite files in temporary directories.

use money::MICROS_PER_CREDIT;
use proto::account::*;

use super::testdb::{TestDb, both, both_async};
use super::*;

/// An admin's grant or adjustment of `amount` to `user`.
fn entry(user: &str, amount: i64, reason: &str) -> AdminEntry {
    AdminEntry {
        user: user.into(),
        amount,
        reason: reason.into(),
    }
}

const MAX: i64 = 1_000_000 * MICROS_PER_CREDIT;

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

both! {
    #[test]
    fn a_repeated_debit_is_applied_once_and_returns_the_first_receipt(kind: Kind) {
        let db = TestDb::new(kind);
        let mut c = db.rows();
        ledger::create(&mut *c, "alice", 10_000_000, "admin:root", 1, MAX).unwrap();
        let first = ledger::debit(
            &mut *c,
            &debit("n1", "j1", 1, "alice", 2_500_000),
            "node:n1",
            2,
            MAX,
        )
        .unwrap();
        assert!(!first.duplicate);
        assert_eq!(first.balance_after, 7_500_000);
        ledger::debit(
            &mut *c,
            &debit("n1", "j1", 2, "alice", 500_000),
            "node:n1",
            3,
            MAX,
        )
        .unwrap();
        let again = ledger::debit(
            &mut *c,
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
        assert_eq!(query::balance(&mut *c, "alice").unwrap().balance, 7_000_000);
        let err = ledger::debit(&mut *c, &debit("n1", "j1", 1, "alice", 1), "node:n1", 5, MAX).unwrap_err();
        assert_eq!(err.code, ErrorCode::KeyConflict);
        assert!(audit::audit(&mut *c).unwrap().problems.is_empty());
    }

    #[test]
    fn debits_may_overdraw_but_bad_ones_change_nothing(kind: Kind) {
        let db = TestDb::new(kind);
        let mut c = db.rows();
        ledger::create(&mut *c, "bob", 1_000_000, "admin:root", 1, MAX).unwrap();
        let r = ledger::debit(
            &mut *c,
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
                ledger::debit(&mut *c, &d, "node:n1", 3, MAX).unwrap_err().code,
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
            ledger::debit(&mut *c, &bad_interval, "n", 3, MAX)
                .unwrap_err()
                .code,
            ErrorCode::Malformed
        );
        assert_eq!(query::balance(&mut *c, "bob").unwrap().balance, -2_000_000);
        assert_eq!(db.scalar("SELECT COUNT(*) FROM entries"), 2);
    }

    #[test]
    fn balance_overflow_is_refused(kind: Kind) {
        let db = TestDb::new(kind);
        let mut c = db.rows();
        ledger::create(&mut *c, "rich", 0, "admin:root", 1, i64::MAX).unwrap();
        ledger::admin_change(&mut *c, EntryKind::Grant, &entry("rich", i64::MAX - 1, "big"), "admin:root", 1, i64::MAX).unwrap();
        let e = ledger::admin_change(&mut *c, EntryKind::Grant, &entry("rich", 2, "more"), "admin:root", 1, i64::MAX).unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidAmount);
        assert_eq!(query::balance(&mut *c, "rich").unwrap().balance, i64::MAX - 1);
    }

    #[test]
    fn refunds_cannot_exceed_what_the_node_charged_for_the_job(kind: Kind) {
        let db = TestDb::new(kind);
        let mut c = db.rows();
        ledger::create(&mut *c, "carol", 5_000_000, "admin:root", 1, MAX).unwrap();
        ledger::debit(
            &mut *c,
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
        ledger::refund(&mut *c, &refund(100, 1_500_000), "node:n1", 3, MAX).unwrap();
        let e = ledger::refund(&mut *c, &refund(101, 600_000), "node:n1", 4, MAX).unwrap_err();
        assert_eq!(e.code, ErrorCode::RefundTooLarge);
        let again = ledger::refund(&mut *c, &refund(100, 1_500_000), "node:n1", 5, MAX).unwrap();
        assert!(again.duplicate);
        assert_eq!(query::balance(&mut *c, "carol").unwrap().balance, 4_500_000);
        assert!(audit::audit(&mut *c).unwrap().problems.is_empty());
    }

    #[test]
    fn admin_writes_need_reasons_and_accounts_are_unique(kind: Kind) {
        let db = TestDb::new(kind);
        let mut c = db.rows();
        ledger::create(&mut *c, "dave", 0, "admin:root", 1, MAX).unwrap();
        assert_eq!(
            ledger::create(&mut *c, "dave", 0, "admin:root", 1, MAX)
                .unwrap_err()
                .code,
            ErrorCode::AccountExists
        );
        assert_eq!(
            ledger::admin_change(&mut *c, EntryKind::Grant, &entry("dave", 5, " "), "admin:root", 1, MAX)
                .unwrap_err()
                .code,
            ErrorCode::Malformed
        );
        assert_eq!(
            ledger::admin_change(&mut *c, EntryKind::Adjust, &entry("dave", 0, "x"), "admin:root", 1, MAX)
                .unwrap_err()
                .code,
            ErrorCode::InvalidAmount
        );
        ledger::admin_change(&mut *c, EntryKind::Adjust, &entry("dave", -7, "correction"), "admin:root", 2, MAX).unwrap();
        let page = query::history(&mut *c, "dave", None, None, None, 10).unwrap();
        assert_eq!(page.entries.len(), 1);
        assert_eq!(page.entries[0].reason.as_deref(), Some("correction"));
        assert_eq!(page.entries[0].actor, "admin:root");
    }

    #[test]
    fn history_pages_and_time_windows(kind: Kind) {
        let db = TestDb::new(kind);
        let mut c = db.rows();
        ledger::create(&mut *c, "erin", 100_000_000, "admin:root", 10, MAX).unwrap();
        for seq in 1..=25 {
            ledger::debit(
                &mut *c,
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
            let page = query::history(&mut *c, "erin", None, None, after, 7).unwrap();
            all.extend(page.entries);
            match page.next_after {
                Some(a) => after = Some(a),
                None => break,
            }
        }
        assert_eq!(all.len(), 26);
        assert!(all.windows(2).all(|w| w[0].id < w[1].id));
        let window = query::history(&mut *c, "erin", Some(15), Some(20), None, 100).unwrap();
        assert_eq!(window.entries.len(), 5);
        let rows = query::report(&mut *c, ReportBy::Node, None, None).unwrap();
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
    fn audit_names_the_rows_that_were_tampered_with(kind: Kind) {
        let db = TestDb::new(kind);
        let mut c = db.rows();
        ledger::create(&mut *c, "frank", 5_000_000, "admin:root", 1, MAX).unwrap();
        let r = ledger::debit(
            &mut *c,
            &debit("n1", "j", 1, "frank", 1_000_000),
            "node:n1",
            2,
            MAX,
        )
        .unwrap();
        ledger::debit(
            &mut *c,
            &debit("n1", "j", 2, "frank", 1_000_000),
            "node:n1",
            3,
            MAX,
        )
        .unwrap();
        assert!(audit::audit(&mut *c).unwrap().problems.is_empty());
        drop(c);
        let id = r.entry_id;
        db.exec(
            &format!(
                "DROP TRIGGER entries_no_update; DROP INDEX entries_idem;
                 UPDATE accounts SET balance = balance + 1 WHERE user = 'frank';
                 INSERT INTO entries(at_us, user, amount, kind, node, job, seq, idem_key, actor,
                     balance_after)
                 SELECT at_us, user, amount, kind, node, job, seq, idem_key, actor, balance_after
                 FROM entries WHERE id = {id};"
            ),
            &format!(
                r#"ALTER TABLE entries DISABLE TRIGGER entries_append_only;
                 ALTER TABLE entries DROP CONSTRAINT entries_idem_key_key;
                 UPDATE accounts SET balance = balance + 1 WHERE "user" = 'frank';
                 UPDATE head SET last_id = last_id + 1;
                 INSERT INTO entries(id, at_us, "user", amount, kind, node, job, seq, idem_key,
                     actor, balance_after, hash)
                 SELECT (SELECT last_id FROM head), at_us, "user", amount, kind, node, job, seq,
                     idem_key, actor, balance_after, hash
                 FROM entries WHERE id = {id};"#
            ),
        );
        let report = audit::audit(&mut *db.reader()).unwrap();
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
    fn refund_limits_are_per_job_even_for_jobs_with_similar_names(kind: Kind) {
        let db = TestDb::new(kind);
        let mut c = db.rows();
        ledger::create(&mut *c, "gina", 100 * MICROS_PER_CREDIT, "admin:root", 1, MAX).unwrap();
        for (i, job) in ["j", "j2", "j.", "j0", "jj"].iter().enumerate() {
            ledger::debit(
                &mut *c,
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
        let e = ledger::refund(&mut *c, &refund(1_001), "node:n1", 3, MAX).unwrap_err();
        assert_eq!(
            e.code,
            ErrorCode::RefundTooLarge,
            "only job j's 1000 may come back"
        );
        ledger::refund(&mut *c, &refund(1_000), "node:n1", 3, MAX).unwrap();
    }
}

both_async! {
    workers = 4;
    #[test]
    async fn concurrent_writers_group_commit_exact_balances(kind: Kind) {
        let db = TestDb::new(kind);
        let store = std::sync::Arc::new(Store::open(db.store_config(256, MAX)).unwrap());
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
    async fn repeats_and_conflicts_inside_one_batch_are_told_apart(kind: Kind) {
        let db = TestDb::new(kind);
        let store = std::sync::Arc::new(Store::open(db.store_config(256, MAX)).unwrap());
        store
            .write(
                "admin:root".into(),
                AccountOp::CreateAccount(CreateAccount {
                    user: "u".into(),
                    initial: 1_000_000,
                }),
            )
            .await
            .unwrap();
        // Each key three times at once: the charge, its repeat, and a changed
        // repeat; whichever lands first stands, the same again is a duplicate,
        // the other a conflict.
        let mut tasks = Vec::new();
        for seq in 0..20u64 {
            for amount in [1_000, 1_000, 1_001] {
                let store = store.clone();
                tasks.push(tokio::spawn(async move {
                    let d = debit("n1", "j", seq, "u", amount);
                    (seq, store.write("node:n1".into(), AccountOp::Debit(d)).await)
                }));
            }
        }
        let mut per_key = std::collections::HashMap::<u64, Vec<_>>::new();
        for t in tasks {
            let (seq, r) = t.await.unwrap();
            per_key.entry(seq).or_default().push(r);
        }
        let mut charged = 0;
        for (seq, results) in per_key {
            let receipts: Vec<ChargeReceipt> = results
                .iter()
                .filter_map(|r| match r {
                    Ok(AccountReply::Charged(c)) => Some(c.clone()),
                    _ => None,
                })
                .collect();
            let conflicts = results
                .iter()
                .filter(|r| matches!(r, Err(e) if e.code == ErrorCode::KeyConflict))
                .count();
            assert_eq!(receipts.len() + conflicts, 3, "key {seq}: {results:?}");
            assert_eq!(receipts.iter().filter(|c| !c.duplicate).count(), 1, "key {seq}: {results:?}");
            assert!(receipts.iter().all(|c| c.entry_id == receipts[0].entry_id && c.amount == receipts[0].amount));
            assert_eq!(conflicts, if receipts[0].amount == -1_000 { 1 } else { 2 }, "key {seq}: {results:?}");
            charged += receipts[0].amount;
        }
        let got = store
            .read(AccountOp::Balance(BalanceQuery { user: Some("u".into()) }))
            .await
            .unwrap();
        assert_eq!(
            got,
            AccountReply::Balance(AccountBalance { user: "u".into(), balance: 1_000_000 + charged })
        );
        let AccountReply::Audit(report) = store.read(AccountOp::Audit).await.unwrap() else {
            panic!()
        };
        assert!(report.problems.is_empty(), "{:?}", report.problems);
        assert_eq!(report.entries, 1 + 20);
        std::sync::Arc::try_unwrap(store).ok().unwrap().close();
    }

    #[test]
    async fn a_storage_error_inside_a_batch_stays_with_its_job(kind: Kind) {
        let db = TestDb::new(kind);
        let store = std::sync::Arc::new(Store::open(db.store_config(256, MAX)).unwrap());
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
        db.exec(
            "CREATE TRIGGER boom BEFORE INSERT ON entries WHEN NEW.user = 'boom'
             BEGIN SELECT RAISE(ABORT, 'disk on fire'); END;",
            r#"CREATE FUNCTION boom() RETURNS trigger LANGUAGE plpgsql AS $$
                   BEGIN RAISE EXCEPTION 'disk on fire'; END $$;
               CREATE TRIGGER boom BEFORE INSERT ON entries FOR EACH ROW
                   WHEN (NEW."user" = 'boom') EXECUTE FUNCTION boom();"#,
        );
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
    async fn quotes_and_backslashes_in_a_batch_are_only_data(kind: Kind) {
        // The batch's keys and accounts are read ahead before their names are
        // checked (PostgreSQL's read ahead writes them into its SQL).
        let db = TestDb::new(kind);
        let store = std::sync::Arc::new(Store::open(db.store_config(256, MAX)).unwrap());
        let create = AccountOp::CreateAccount(CreateAccount { user: "u".into(), initial: 1_000_000 });
        store.write("admin:root".into(), create).await.unwrap();
        let evil = [
            "j'); DROP TABLE entries; --",
            "j\\'; DELETE FROM accounts; --",
            "j\\",
            "j\0",
            "$$'\"",
        ];
        let mut tasks = Vec::new();
        for (seq, name) in evil.iter().enumerate() {
            for d in [debit("n1", name, 1, "u", 1_000), debit("n1", "j", seq as u64, name, 1_000)] {
                let store = store.clone();
                tasks.push(tokio::spawn(async move {
                    store.write("node:n1".into(), AccountOp::Debit(d)).await
                }));
            }
            let store = store.clone();
            tasks.push(tokio::spawn(async move {
                let d = debit("n1", "j", 100 + seq as u64, "u", 1_000);
                store.write("node:n1".into(), AccountOp::Debit(d)).await
            }));
        }
        let results: Vec<_> = joined(tasks).await;
        for (i, r) in results.iter().enumerate() {
            match i % 3 {
                2 => assert!(matches!(r, Ok(AccountReply::Charged(c)) if !c.duplicate), "{r:?}"),
                _ => assert_eq!(r.as_ref().unwrap_err().code, ErrorCode::Malformed, "{r:?}"),
            }
        }
        let again = debit("n1", "j", 100, "u", 1_000);
        let r = store.write("node:n1".into(), AccountOp::Debit(again)).await;
        assert!(matches!(&r, Ok(AccountReply::Charged(c)) if c.duplicate), "{r:?}");
        let AccountReply::Audit(report) = store.read(AccountOp::Audit).await.unwrap() else {
            panic!()
        };
        assert!(report.problems.is_empty(), "{:?}", report.problems);
        assert_eq!(report.entries, 1 + evil.len() as u64);
        std::sync::Arc::try_unwrap(store).ok().unwrap().close();
    }
}

async fn joined<T: std::fmt::Debug>(tasks: Vec<tokio::task::JoinHandle<T>>) -> Vec<T> {
    let mut out = Vec::new();
    for t in tasks {
        out.push(t.await.unwrap());
    }
    out
}

#[cfg(test)]
mod anchors;
#[cfg(test)]
mod chain;
#[cfg(test)]
mod lite;
#[cfg(test)]
mod many;
#[cfg(test)]
mod migrate;
#[cfg(test)]
mod plan;
#[cfg(test)]
mod restart;
#[cfg(test)]
mod tls;
