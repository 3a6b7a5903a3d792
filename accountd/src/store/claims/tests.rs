//! Claims on real SQLite files: first wins, a same-node retry is answered
//! again, another node or another digest is refused, and nothing is ever
//! rewritten.

use proto::account::{AccountOp, AccountReply, Claim, ErrorCode};
use proto::node::JobId;

use super::*;
use crate::store::testdb::{Kind, TestDb, both, both_async};
use crate::store::{Store, lite::Lite, schema};

fn key(attempt: u32, rank: u32, digest: u8) -> Claim {
    Claim {
        user: "alice".into(),
        job: JobId(0xabc),
        attempt,
        rank,
        digest: [digest; 32],
    }
}

fn rows(db: &TestDb) -> i64 {
    db.scalar("SELECT COUNT(*) FROM claims")
}

both! {
    #[test]
    fn the_first_claim_wins_and_a_same_node_retry_is_claimed_again(kind: Kind) {
        let db = TestDb::new(kind);
        let mut c = db.rows();
        claim(&mut *c, &key(0, 0, 1), "node:n1", 10).unwrap();
        claim(&mut *c, &key(0, 0, 1), "node:n1", 20).unwrap();
        assert_eq!(rows(&db), 1);
        let first = existing(&mut *c, &key(0, 0, 1)).unwrap().unwrap();
        assert_eq!(
            first,
            ClaimRecord {
                node: "n1".into(),
                digest: vec![1; 32],
                at_us: 10
            }
        );
        let err = claim(&mut *c, &key(0, 0, 1), "node:n2", 30).unwrap_err();
        assert_eq!(err.code, ErrorCode::AlreadyClaimed);
        assert!(err.message.contains("already started by node n1"), "{err}");
        let err = claim(&mut *c, &key(0, 0, 2), "node:n1", 40).unwrap_err();
        assert_eq!(err.code, ErrorCode::KeyConflict);
        assert!(err.message.contains("different signed job"), "{err}");
        assert_eq!(rows(&db), 1, "refusals write nothing");
        // Other ranks and attempts are their own keys.
        claim(&mut *c, &key(0, 1, 1), "node:n2", 50).unwrap();
        claim(&mut *c, &key(1, 0, 1), "node:n2", 60).unwrap();
        let mut bob = key(0, 0, 1);
        bob.user = "bob".into();
        claim(&mut *c, &bob, "node:n2", 70).unwrap();
        assert_eq!(rows(&db), 4);
    }

    #[test]
    fn only_nodes_claim_and_names_are_checked(kind: Kind) {
        let db = TestDb::new(kind);
        let mut c = db.rows();
        let err = claim(&mut *c, &key(0, 0, 1), "service:batchd", 1).unwrap_err();
        assert_eq!(err.code, ErrorCode::Forbidden);
        let mut bad = key(0, 0, 1);
        bad.user = "../root".into();
        assert_eq!(
            claim(&mut *c, &bad, "node:n1", 1).unwrap_err().code,
            ErrorCode::Malformed
        );
        assert_eq!(rows(&db), 0);
    }

    #[test]
    fn claims_are_append_only(kind: Kind) {
        let db = TestDb::new(kind);
        let mut c = db.rows();
        claim(&mut *c, &key(0, 0, 1), "node:n1", 10).unwrap();
        let upd = db.exec_err(
            "UPDATE claims SET node = 'n2'",
            "UPDATE claims SET node = 'n2'",
        );
        assert!(upd.contains("append-only"), "{upd}");
        let del = db.exec_err("DELETE FROM claims", "DELETE FROM claims");
        assert!(del.contains("append-only"), "{del}");
    }
}

#[test]
fn a_ledger_from_before_claims_gets_the_table() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.db");
    let conn = schema::open_writer(&path, true).unwrap();
    conn.execute_batch(
        "DROP TRIGGER claims_no_update; DROP TRIGGER claims_no_delete; DROP TABLE claims;",
    )
    .unwrap();
    drop(conn);
    let conn = schema::open_writer(&path, false).unwrap();
    claim(&mut Lite(&conn), &key(0, 0, 1), "node:n1", 10).unwrap();
    let n: i64 = conn
        .query_row("SELECT COUNT(*) FROM claims", [], |r| r.get(0))
        .unwrap();
    assert_eq!(n, 1);
    assert!(conn.execute("DELETE FROM claims", []).is_err());
}

both_async! {
    #[test]
    async fn claims_go_through_the_group_committing_writer(kind: Kind) {
        let db = TestDb::new(kind);
        let store = Store::open(db.store_config(16, 1_000_000)).unwrap();
        let op = || AccountOp::Claim(key(0, 0, 7));
        let (a, b) = tokio::join!(
            store.write("node:n1".into(), op()),
            store.write("node:n2".into(), op())
        );
        // Both in one batch or not: exactly one node wins.
        let wins = [&a, &b].iter().filter(|r| r.is_ok()).count();
        assert_eq!(wins, 1, "{a:?} {b:?}");
        for r in [&a, &b] {
            match r {
                Ok(reply) => assert_eq!(reply, &AccountReply::Claimed),
                Err(e) => assert_eq!(e.code, ErrorCode::AlreadyClaimed),
            }
        }
        tokio::task::spawn_blocking(move || store.close())
            .await
            .unwrap();
    }
}
