//! Claims on real SQLite files: first wins, a same-node retry is answered
//! again, another node or another digest is refused, and nothing is ever
//! rewritten.

use proto::account::{AccountOp, AccountReply, Claim, ErrorCode};
use proto::node::JobId;
use rusqlite::Connection;

use super::*;
use crate::store::{Store, StoreConfig, schema};

fn fresh() -> (tempfile::TempDir, Connection) {
    let dir = tempfile::tempdir().unwrap();
    let conn = schema::open_writer(&dir.path().join("l.db"), true).unwrap();
    (dir, conn)
}

fn key(attempt: u32, rank: u32, digest: u8) -> Claim {
    Claim {
        user: "alice".into(),
        job: JobId(0xabc),
        attempt,
        rank,
        digest: [digest; 32],
    }
}

fn rows(c: &Connection) -> i64 {
    c.query_row("SELECT COUNT(*) FROM claims", [], |r| r.get(0))
        .unwrap()
}

#[test]
fn the_first_claim_wins_and_a_same_node_retry_is_claimed_again() {
    let (_d, c) = fresh();
    claim(&c, &key(0, 0, 1), "node:n1", 10).unwrap();
    claim(&c, &key(0, 0, 1), "node:n1", 20).unwrap();
    assert_eq!(rows(&c), 1);
    let first = existing(&c, &key(0, 0, 1)).unwrap().unwrap();
    assert_eq!(
        first,
        ClaimRecord {
            node: "n1".into(),
            digest: vec![1; 32],
            at_us: 10
        }
    );
    let err = claim(&c, &key(0, 0, 1), "node:n2", 30).unwrap_err();
    assert_eq!(err.code, ErrorCode::AlreadyClaimed);
    assert!(err.message.contains("already started by node n1"), "{err}");
    let err = claim(&c, &key(0, 0, 2), "node:n1", 40).unwrap_err();
    assert_eq!(err.code, ErrorCode::KeyConflict);
    assert!(err.message.contains("different signed job"), "{err}");
    assert_eq!(rows(&c), 1, "refusals write nothing");
    // Other ranks and attempts are their own keys.
    claim(&c, &key(0, 1, 1), "node:n2", 50).unwrap();
    claim(&c, &key(1, 0, 1), "node:n2", 60).unwrap();
    let mut bob = key(0, 0, 1);
    bob.user = "bob".into();
    claim(&c, &bob, "node:n2", 70).unwrap();
    assert_eq!(rows(&c), 4);
}

#[test]
fn only_nodes_claim_and_names_are_checked() {
    let (_d, c) = fresh();
    let err = claim(&c, &key(0, 0, 1), "service:batchd", 1).unwrap_err();
    assert_eq!(err.code, ErrorCode::Forbidden);
    let mut bad = key(0, 0, 1);
    bad.user = "../root".into();
    assert_eq!(
        claim(&c, &bad, "node:n1", 1).unwrap_err().code,
        ErrorCode::Malformed
    );
    assert_eq!(rows(&c), 0);
}

#[test]
fn claims_are_append_only() {
    let (_d, c) = fresh();
    claim(&c, &key(0, 0, 1), "node:n1", 10).unwrap();
    let upd = c.execute("UPDATE claims SET node = 'n2'", []);
    assert!(upd.unwrap_err().to_string().contains("append-only"));
    let del = c.execute("DELETE FROM claims", []);
    assert!(del.unwrap_err().to_string().contains("append-only"));
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
    claim(&conn, &key(0, 0, 1), "node:n1", 10).unwrap();
    assert_eq!(rows(&conn), 1);
    assert!(conn.execute("DELETE FROM claims", []).is_err());
}

#[tokio::test]
async fn claims_go_through_the_group_committing_writer() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(StoreConfig {
        path: dir.path().join("l.db"),
        create: true,
        max_batch: 16,
        max_entry: 1_000_000,
    })
    .unwrap();
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
