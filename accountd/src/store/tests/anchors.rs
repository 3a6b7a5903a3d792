//! Signed chain heads on both backends: a rewrite of the whole table with
//! every balance and hash recomputed passes the plain audit but not the
//! anchors, and a forged head is refused.

use std::time::Duration;

use certs::Role;
use certs::testing::TestPki;
use money::MICROS_PER_CREDIT;
use proto::account::{AccountOp, CreateAccount};

use super::debit;
use crate::store::anchors::{self, AnchorError, AnchorSettings};
use crate::store::chain::{self, hex};
use crate::store::testdb::{TestDb, both, both_async};
use crate::store::{Store, audit};

const MAX: i64 = 1_000_000 * MICROS_PER_CREDIT;
const C: i64 = MICROS_PER_CREDIT;

fn settings(pki: &TestPki, dir: &std::path::Path) -> AnchorSettings {
    let tls = pki.tls_paths(Role::Service, "accountd");
    AnchorSettings {
        path: dir.join("anchors"),
        key: tls.key,
        cert: tls.cert,
        entries: 2,
        interval: Duration::from_secs(3600),
    }
}

/// Writes a grant and five debits through a store that anchors every 2 entries.
async fn anchored_ledger(db: &TestDb, pki: &TestPki) -> AnchorSettings {
    let s = settings(pki, db.dir.path());
    let mut cfg = db.store_config(16, MAX);
    cfg.anchors = Some(s.clone());
    let store = Store::open(cfg).unwrap();
    let create = AccountOp::CreateAccount(CreateAccount {
        user: "u".into(),
        initial: 100 * C,
    });
    store.write("admin:root".into(), create).await.unwrap();
    for seq in 1..=5u64 {
        let d = AccountOp::Debit(debit("n1", "j", seq, "u", C));
        store.write("node:n1".into(), d).await.unwrap();
    }
    tokio::task::spawn_blocking(move || store.close())
        .await
        .unwrap();
    s
}

/// Entry 2 moves one credit more, and every balance and hash from it on is
/// recomputed to agree, as someone with the database and the code would.
fn rewrite_everything(db: &TestDb) {
    let mut rows = Vec::new();
    db.reader()
        .each_chained(&mut |cols, _, _| rows.push(cols))
        .unwrap();
    let mut prev = chain::GENESIS;
    let mut sql = String::new();
    for mut cols in rows {
        if cols.id == 2 {
            cols.amount -= C;
        }
        if cols.id >= 2 {
            cols.balance_after -= C;
        }
        prev = chain::entry_hash(&prev, &cols);
        let h = hex(&prev);
        let lit = match db.server {
            None => format!("x'{h}'"),
            Some(_) => format!("'\\x{h}'::bytea"),
        };
        sql.push_str(&format!(
            "UPDATE entries SET amount = {}, balance_after = {}, hash = {lit} WHERE id = {};\n",
            cols.amount, cols.balance_after, cols.id
        ));
    }
    sql.push_str(&format!("UPDATE accounts SET balance = balance - {C};"));
    db.exec(
        &format!("DROP TRIGGER entries_no_update;\n{sql}"),
        &format!("ALTER TABLE entries DISABLE TRIGGER entries_append_only;\n{sql}"),
    );
}

both_async! {
    workers = 4;
    #[test]
    async fn a_rewrite_with_every_hash_recomputed_is_caught_only_by_the_anchors(kind: Kind) {
        let pki = TestPki::new();
        let db = TestDb::new(kind);
        let s = anchored_ledger(&db, &pki).await;
        // The synchronous PostgreSQL client may not run on a runtime thread.
        tokio::task::spawn_blocking(move || after_the_fact(&db, &pki, &s))
            .await
            .unwrap();
    }
}

fn after_the_fact(db: &TestDb, pki: &TestPki, s: &AnchorSettings) {
    let kept = anchors::read(&s.path).unwrap();
    assert!(kept.len() >= 3, "{kept:?}");
    assert_eq!(
        kept.last().unwrap().id,
        6,
        "the last head is anchored at close"
    );
    let ca = pki.ca().ca_cert_path();
    for a in &kept {
        a.verify(&ca).unwrap();
    }
    assert!(anchors::check(&mut *db.reader(), &kept).unwrap().is_empty());
    rewrite_everything(db);
    let plain = audit::audit(&mut *db.reader()).unwrap();
    assert!(
        plain.problems.is_empty(),
        "the chain alone cannot see it: {:?}",
        plain.problems
    );
    let found = anchors::check(&mut *db.reader(), &kept).unwrap();
    assert_eq!(found.len(), 1, "{found:?}");
    let first = kept
        .iter()
        .map(|a| a.id)
        .filter(|id| *id >= 2)
        .min()
        .unwrap();
    assert_eq!(found[0].entry_ids, vec![first], "{found:?}");
    assert!(found[0].what.contains("was rewritten"), "{found:?}");
}

both! {
    #[test]
    fn a_forged_chain_head_is_refused(kind: Kind) {
        let _ = kind;
        let pki = TestPki::new();
        let dir = tempfile::tempdir().unwrap();
        let s = settings(&pki, dir.path());
        let signer = anchors::AnchorSigner::load(&s.key, &s.cert, s.path.clone()).unwrap();
        let good = signer.append(7, [7; 32], 1_000).unwrap();
        let ca = pki.ca().ca_cert_path();
        good.verify(&ca).unwrap();
        // Another hash under the real signature.
        let mut moved = good.clone();
        moved.hash = [8; 32];
        assert!(matches!(moved.verify(&ca), Err(AnchorError::Forged { id: 7, .. })));
        // A head signed by an accountd of another CA.
        let other = TestPki::new();
        let os = settings(&other, dir.path());
        let forger = anchors::AnchorSigner::load(&os.key, &os.cert, dir.path().join("x")).unwrap();
        let forged = forger.sign(7, [8; 32], 1_000).unwrap();
        let e = forged.verify(&ca).unwrap_err();
        assert!(e.to_string().contains("not accepted"), "{e}");
        // A node's key cannot sign heads either.
        let node = pki.tls_paths(Role::Node, "n1");
        let n = anchors::AnchorSigner::load(&node.key, &node.cert, dir.path().join("y")).unwrap();
        assert!(n.sign(7, [8; 32], 1_000).unwrap().verify(&ca).is_err());
        // The file round-trips.
        assert_eq!(anchors::read(&s.path).unwrap(), vec![good]);
    }
}
