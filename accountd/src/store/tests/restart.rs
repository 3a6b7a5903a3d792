//! A PostgreSQL restart under a running store: both of its connections are
//! gone and do not know it yet. Nothing probes them before use any more, so
//! the first transaction of each finds out and runs again on a new
//! connection: the first write and the first read after the restart succeed,
//! and a debit written before the restart is still a repeat after it.

use money::MICROS_PER_CREDIT;
use proto::account::*;

use crate::store::Store;
use crate::store::testdb::{Kind, TestDb};

const MAX: i64 = 1_000_000 * MICROS_PER_CREDIT;

fn debit(seq: u64) -> AccountOp {
    AccountOp::Debit(Debit {
        key: DebitKey {
            node: "n1".into(),
            job: "j".into(),
            seq,
        },
        user: "alice".into(),
        amount: 1_000,
        rank: 0,
        interval: MeterInterval {
            start_us: 0,
            end_us: 1,
        },
        cpu_us: 1,
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn the_first_write_and_read_after_a_postgresql_restart_succeed() {
    let db = TestDb::new(Kind::Pg);
    let store = Store::open(db.store_config(64, MAX)).unwrap();
    let create = AccountOp::CreateAccount(CreateAccount {
        user: "alice".into(),
        initial: 1_000_000,
    });
    store.write("admin:root".into(), create).await.unwrap();
    store.write("node:n1".into(), debit(1)).await.unwrap();
    let server = db.server.as_ref().unwrap();
    server.stop();
    server.restart();
    let again = store.write("node:n1".into(), debit(1)).await;
    assert!(
        matches!(&again, Ok(AccountReply::Charged(c)) if c.duplicate),
        "{again:?}"
    );
    let next = store.write("node:n1".into(), debit(2)).await;
    assert!(
        matches!(&next, Ok(AccountReply::Charged(c)) if !c.duplicate),
        "{next:?}"
    );
    let balance = AccountOp::Balance(BalanceQuery {
        user: Some("alice".into()),
    });
    match store.read(balance).await {
        Ok(AccountReply::Balance(b)) => assert_eq!(b.balance, 1_000_000 - 2_000),
        other => panic!("{other:?}"),
    }
    store.close();
}
