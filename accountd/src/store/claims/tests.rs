//! Claims on real SQLite files: first wins, a same-node retry is answered
//! again, another node or another digest is refused, and nothing is ever
//! rewritten.

use proto::account::{AccountOp, AccountReply, Claim, ErrorCode, RankEnd};
use proto::node::JobId;

use super::*;
use crate::store::testdb::{TestDb, both, both_async};
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

fn ends(db: &TestDb) -> i64 {
    db.scalar("SELECT COUNT(*) FROM rank_ends")
}

fn end_of(attempt: u32, rank: u32, width: u32) -> RankEnd {
    RankEnd {
        claim: key(attempt, rank, 1),
        width,
    }
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

both! {
    #[test]
    fn a_job_whose_attempt_ended_on_every_rank_is_never_claimed_again(kind: Kind) {
        let db = TestDb::new(kind);
        let mut c = db.rows();
        claim(&mut *c, &key(0, 0, 1), "node:n1", 10).unwrap();
        claim(&mut *c, &key(0, 1, 1), "node:n2", 11).unwrap();
        end(&mut *c, &end_of(0, 0, 2), "node:n1", 20).unwrap();
        // One rank of two ended: the job has not run to its end, the next
        // attempt may still start.
        claim(&mut *c, &key(1, 0, 1), "node:n3", 21).unwrap();
        end(&mut *c, &end_of(0, 1, 2), "node:n2", 30).unwrap();
        end(&mut *c, &end_of(0, 1, 2), "node:n2", 31).unwrap();
        assert_eq!(ends(&db), 2, "a repeated end is recorded once");
        assert_eq!(
            c.end_of(&key(0, 1, 1)).unwrap(),
            Some(EndRecord {
                node: "n2".into(),
                at_us: 30
            })
        );
        // Every rank of attempt 0 ended: no new claim of any attempt of the job,
        // on any node, the one that ran it included.
        for (attempt, rank, node) in [(1, 1, "node:n3"), (2, 0, "node:n1"), (7, 1, "node:n4")] {
            let err = claim(&mut *c, &key(attempt, rank, 1), node, 40).unwrap_err();
            assert_eq!(err.code, ErrorCode::JobEnded, "{err}");
            assert!(err.message.contains("attempt 0 ended on all 2 ranks"), "{err}");
        }
        // A rank already claimed is still answered as before (a lost reply's retry).
        claim(&mut *c, &key(1, 0, 1), "node:n3", 41).unwrap();
        assert_eq!(rows(&db), 3, "refusals write nothing");
        // Another job of the same user, and the same job id of another user, are
        // their own.
        let mut other = key(0, 0, 1);
        other.job = JobId(0xabd);
        claim(&mut *c, &other, "node:n1", 50).unwrap();
        let mut bob = key(3, 0, 1);
        bob.user = "bob".into();
        claim(&mut *c, &bob, "node:n1", 51).unwrap();
    }

    #[test]
    fn only_the_claiming_node_records_an_end_and_only_of_a_rank_in_range(kind: Kind) {
        let db = TestDb::new(kind);
        let mut c = db.rows();
        claim(&mut *c, &key(0, 0, 1), "node:n1", 10).unwrap();
        let code = |r: Result<(), proto::account::AccountError>| r.unwrap_err().code;
        // Unclaimed, claimed by another node, another digest, not a node.
        assert_eq!(code(end(&mut *c, &end_of(0, 1, 2), "node:n1", 20)), ErrorCode::Forbidden);
        assert_eq!(code(end(&mut *c, &end_of(0, 0, 1), "node:n2", 20)), ErrorCode::Forbidden);
        let mut other = end_of(0, 0, 1);
        other.claim.digest = [2; 32];
        assert_eq!(code(end(&mut *c, &other, "node:n1", 20)), ErrorCode::Forbidden);
        assert_eq!(
            code(end(&mut *c, &end_of(0, 0, 1), "service:batchd", 20)),
            ErrorCode::Forbidden
        );
        // A width that does not hold the rank.
        assert_eq!(code(end(&mut *c, &end_of(0, 0, 0), "node:n1", 20)), ErrorCode::Malformed);
        claim(&mut *c, &key(0, 3, 1), "node:n1", 10).unwrap();
        assert_eq!(code(end(&mut *c, &end_of(0, 3, 2), "node:n1", 20)), ErrorCode::Malformed);
        assert_eq!(ends(&db), 0, "refusals write nothing");
        end(&mut *c, &end_of(0, 0, 1), "node:n1", 30).unwrap();
        assert_eq!(ends(&db), 1);
    }

    #[test]
    fn rank_ends_are_append_only(kind: Kind) {
        let db = TestDb::new(kind);
        let mut c = db.rows();
        claim(&mut *c, &key(0, 0, 1), "node:n1", 10).unwrap();
        end(&mut *c, &end_of(0, 0, 1), "node:n1", 20).unwrap();
        let upd = db.exec_err("UPDATE rank_ends SET width = 9", "UPDATE rank_ends SET width = 9");
        assert!(upd.contains("append-only"), "{upd}");
        let del = db.exec_err("DELETE FROM rank_ends", "DELETE FROM rank_ends");
        assert!(del.contains("append-only"), "{del}");
    }

    #[test]
    fn a_ledger_from_before_rank_ends_gets_the_table_and_keeps_its_claims(kind: Kind) {
        let db = TestDb::new(kind);
        claim(&mut *db.rows(), &key(0, 0, 1), "node:n1", 10).unwrap();
        // As an accountd from before rank ends left it.
        db.exec(
            "DROP TRIGGER rank_ends_no_update; DROP TRIGGER rank_ends_no_delete; \
             DROP TABLE rank_ends;",
            "DROP TABLE rank_ends;",
        );
        // Opening it again (as a newer accountd starts) adds the table.
        let mut c = db.rows();
        claim(&mut *c, &key(0, 0, 1), "node:n1", 11).unwrap();
        end(&mut *c, &end_of(0, 0, 1), "node:n1", 20).unwrap();
        assert_eq!(
            claim(&mut *c, &key(1, 0, 1), "node:n2", 30).unwrap_err().code,
            ErrorCode::JobEnded
        );
        assert_eq!((rows(&db), ends(&db)), (1, 1));
    }
}

both_async! {
    workers = 4;
    #[test]
    async fn rank_ends_go_through_the_group_committing_writer(kind: Kind) {
        let db = TestDb::new(kind);
        let store = Store::open(db.store_config(16, 1_000_000)).unwrap();
        let claimed = store.write("node:n1".into(), AccountOp::Claim(key(0, 0, 1))).await;
        assert_eq!(claimed, Ok(AccountReply::Claimed));
        let ended = store
            .write("node:n1".into(), AccountOp::RankEnd(end_of(0, 0, 1)))
            .await;
        assert_eq!(ended, Ok(AccountReply::Ended));
        let again = store
            .write("node:n2".into(), AccountOp::Claim(key(1, 0, 1)))
            .await
            .unwrap_err();
        assert_eq!(again.code, ErrorCode::JobEnded, "{again}");
        tokio::task::spawn_blocking(move || store.close())
            .await
            .unwrap();
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
    workers = 4;
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
