//! The ledger on PostgreSQL, served by two accountd at once: writes for one
//! account arriving at both instances together leave the exact balance, each
//! debit key is applied once whichever instance sees it (a changed repeat is
//! a conflict at either), and the audit passes.

use std::time::Duration;

use certs::Role;
use certs::testing::TestPki;
use clients::account::AccountClient;
use proto::account::{AccountOp, AccountReply, AdminEntry, Debit, DebitKey, MeterInterval};
use rexec_tests::market::Accountd;
use rexec_tests::postgres::Postgres;

const C: i64 = 1_000_000;

/// A PostgreSQL server with an empty `ledger` database, and two accountd on it.
fn two_on_one(pki: &TestPki) -> (Postgres, Accountd, Accountd) {
    let pg = Postgres::start();
    pg.create_db("ledger");
    let config = format!("[store]\npostgres = \"{}\"\n", pg.conninfo("ledger"));
    let a = Accountd::start_with_config(pki, config.clone());
    let b = Accountd::start_with_config(pki, config);
    (pg, a, b)
}

fn debit(seq: u64, amount: i64) -> Debit {
    Debit {
        key: DebitKey {
            node: "n1".into(),
            job: "j1".into(),
            seq,
        },
        user: "alice".into(),
        amount,
        rank: 0,
        interval: MeterInterval {
            start_us: 0,
            end_us: 1_000_000,
        },
        cpu_us: 1_000_000,
    }
}

async fn client(pki: &TestPki, addr: &str, role: Role, name: &str) -> AccountClient {
    let connector = certs::connector(&pki.tls_paths(role, name)).unwrap();
    AccountClient::connect(addr, &connector, "accountd", Duration::from_secs(30))
        .await
        .unwrap()
}

#[test]
fn sixty_four_grants_and_debits_split_over_two_accountd_end_exact() {
    if !rexec_tests::can_run("ledger_pg::sixty_four") {
        return;
    }
    let pki = TestPki::new();
    let (_pg, a, b) = two_on_one(&pki);
    a.admin(&["create", "alice", "--initial", "1000"]).ok();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .unwrap();
    let addrs = [a.addr.clone(), b.addr.clone()];
    rt.block_on(async {
        let mut tasks = Vec::new();
        for i in 0..64u64 {
            let addr = addrs[(i % 2) as usize].clone();
            let pki = &pki;
            let grant = i % 4 < 2;
            let (role, name) = if grant {
                (Role::Admin, "ops")
            } else {
                (Role::Node, "n1")
            };
            let mut c = client(pki, &addr, role, name).await;
            tasks.push(tokio::spawn(async move {
                let op = if grant {
                    AccountOp::Grant(AdminEntry {
                        user: "alice".into(),
                        amount: 3 * C + i as i64,
                        reason: format!("grant {i}"),
                    })
                } else {
                    AccountOp::Debit(debit(i, 2 * C + i as i64))
                };
                c.call(op).await.map_err(|e| e.to_string())
            }));
        }
        for t in tasks {
            t.await.unwrap().unwrap();
        }
    });
    // 32 grants of 3 credits and 32 debits of 2, plus each one's i micro-credits.
    let (mut grants, mut debits) = (0i64, 0i64);
    for i in 0..64i64 {
        if i % 4 < 2 {
            grants += 3 * C + i;
        } else {
            debits += 2 * C + i;
        }
    }
    let expect = 1000 * C + grants - debits;
    assert_eq!(a.balance("alice"), expect);
    assert_eq!(b.balance("alice"), expect);
    assert_eq!(a.history("alice").len(), 65);
    let audit = b.admin(&["audit"]);
    assert_eq!(audit.code, 0, "{audit:?}");
}

#[test]
fn a_debit_key_is_applied_once_across_both_instances() {
    if !rexec_tests::can_run("ledger_pg::once") {
        return;
    }
    let pki = TestPki::new();
    let (_pg, a, b) = two_on_one(&pki);
    a.admin(&["create", "alice", "--initial", "100"]).ok();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut ca = client(&pki, &a.addr, Role::Node, "n1").await;
        let mut cb = client(&pki, &b.addr, Role::Node, "n1").await;
        let (ra, rb) = tokio::join!(
            ca.call(AccountOp::Debit(debit(7, 5 * C))),
            cb.call(AccountOp::Debit(debit(7, 5 * C)))
        );
        let receipts: Vec<_> = [ra, rb]
            .into_iter()
            .map(|r| match r {
                Ok(AccountReply::Charged(c)) => c,
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(
            receipts.iter().filter(|r| r.duplicate).count(),
            1,
            "one of the two is the repeat: {receipts:?}"
        );
        assert_eq!(receipts[0].entry_id, receipts[1].entry_id);
        for c in [&mut ca, &mut cb] {
            let err = c
                .call(AccountOp::Debit(debit(7, 6 * C)))
                .await
                .unwrap_err()
                .to_string();
            assert!(
                err.contains("already used for a different charge"),
                "a changed repeat is a conflict at either instance: {err}"
            );
        }
    });
    assert_eq!(a.balance("alice"), 95 * C);
    assert_eq!(b.admin(&["audit"]).code, 0);
}
