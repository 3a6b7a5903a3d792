//! [`Store::write_many`] on both backends: writes queued together land in one
//! group commit, and each gets exactly what it would get alone.

use money::MICROS_PER_CREDIT;
use proto::account::*;

use crate::store::Store;
use crate::store::testdb::{TestDb, both_async};

const MAX: i64 = 1_000_000 * MICROS_PER_CREDIT;

fn debit(seq: u64, user: &str, amount: i64) -> AccountOp {
    AccountOp::Debit(super::debit("n1", "j", seq, user, amount))
}

fn receipt(r: &Result<AccountReply, AccountError>) -> &ChargeReceipt {
    match r {
        Ok(AccountReply::Charged(c)) => c,
        other => panic!("{other:?}"),
    }
}

fn code(r: &Result<AccountReply, AccountError>) -> ErrorCode {
    r.as_ref().unwrap_err().code
}

both_async! {
    workers = 4;
    #[test]
    async fn writes_queued_together_get_what_each_would_get_alone(kind: Kind) {
        let db = TestDb::new(kind);
        let store = Store::open(db.store_config(256, MAX)).unwrap();
        let create = AccountOp::CreateAccount(CreateAccount {
            user: "alice".into(),
            initial: 100,
        });
        store.write("admin:root".into(), create).await.unwrap();
        let first = store.write("node:n1".into(), debit(1, "alice", 10)).await;
        let first = receipt(&first).clone();
        let ops = vec![
            debit(2, "alice", 5),
            debit(1, "alice", 10),
            debit(1, "alice", 11),
            debit(3, "nobody", 1),
            debit(2, "alice", 5),
            debit(4, "alice", -1),
            debit(5, "alice", 20),
        ];
        let out = store.write_many("node:n1", ops).await;
        assert_eq!(out.len(), 7);
        assert!(!receipt(&out[0]).duplicate);
        assert_eq!(receipt(&out[0]).balance_after, 85);
        assert!(receipt(&out[1]).duplicate);
        assert_eq!(receipt(&out[1]).entry_id, first.entry_id);
        assert_eq!(code(&out[2]), ErrorCode::KeyConflict);
        assert_eq!(code(&out[3]), ErrorCode::UnknownUser);
        assert!(receipt(&out[4]).duplicate);
        assert_eq!(receipt(&out[4]).entry_id, receipt(&out[0]).entry_id);
        assert_eq!(code(&out[5]), ErrorCode::InvalidAmount);
        assert_eq!(receipt(&out[6]).balance_after, 65);
        assert_eq!(db.scalar("SELECT COUNT(*) FROM entries"), 4);
        let balance = store
            .read(AccountOp::Balance(BalanceQuery {
                user: Some("alice".into()),
            }))
            .await;
        assert!(matches!(balance, Ok(AccountReply::Balance(b)) if b.balance == 65));
        assert!(store.write_many("node:n1", Vec::new()).await.is_empty());
        tokio::task::spawn_blocking(move || store.close()).await.unwrap();
    }
}
