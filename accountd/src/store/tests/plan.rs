//! The plans PostgreSQL chooses for a group commit's statements on a long
//! ledger: each must go through an index, so that a batch costs the same
//! whether the ledger holds a thousand entries or a hundred million.

use crate::store::pg::prefetch::read_ahead;
use crate::store::testdb::{Kind, TestDb};

/// Entries written behind the ledger's back before planning: past the size
/// where `idem_key = ANY(…)` of a batch's keys turned into a scan of the
/// whole table.
const ENTRIES: i64 = 20_000;

#[test]
fn the_read_ahead_of_a_batch_looks_each_key_up_in_its_index() {
    let db = TestDb::new(Kind::Pg);
    let pg = db.server.as_ref().unwrap();
    pg.psql(
        "ledger",
        &format!(
            r#"INSERT INTO accounts("user", balance, created_us, created_by) VALUES ('u', 0, 0, 'test');
               INSERT INTO entries(id, at_us, "user", amount, kind, node, job, seq, idem_key, actor,
                   balance_after, hash)
               SELECT i, i, 'u', -1, 'debit', 'n' || (i % 64), 'j' || i, i,
                   'n' || (i % 64) || '/j' || i || '/' || i, 'node:n', -i, sha256(int8send(i))
               FROM generate_series(1, {ENTRIES}) AS i;
               UPDATE head SET last_id = {ENTRIES};
               ANALYZE"#
        ),
    );
    // A batch's worth of keys, some stored and most new.
    let keys: Vec<String> = (0..500)
        .map(|i| format!("n{}/j{}/{}", i % 64, i * 97, i * 97))
        .collect();
    let users = vec!["u".to_string(), "v".to_string()];
    let plan = pg.psql("ledger", &format!("EXPLAIN {}", read_ahead(&keys, &users)));
    assert!(
        !plan.contains("Seq Scan on entries"),
        "the read ahead scans the whole ledger:\n{plan}"
    );
    assert!(
        plan.contains("entries_idem_key_key") && plan.contains("entries_pkey"),
        "the read ahead should use the key's and the id's indexes:\n{plan}"
    );
}
