//! Moving a ledger from SQLite to PostgreSQL and back: everything arrives,
//! the copy checks out (entries, balances, chain head, audit), and a target
//! that holds anything is refused. `MIGRATE_ENTRIES` sets the size (3,000
//! by default; the 100,000 is `MIGRATE_ENTRIES=100000`).

use std::time::Instant;

use money::MICROS_PER_CREDIT;
use proto::account::{Claim, RankEnd};
use proto::node::JobId;

use super::debit;
use crate::store::lite::{Lite, LiteReader, LiteWriter};
use crate::store::migrate::{MigrateError, migrate};
use crate::store::testdb::{Kind, TestDb};
use crate::store::{claims, ledger, pg, schema};

const MAX: i64 = 1_000_000 * MICROS_PER_CREDIT;

fn lite_target(path: &std::path::Path) -> (LiteWriter, LiteReader) {
    let w = schema::open_writer(path, true).unwrap();
    (
        LiteWriter(w),
        LiteReader(schema::open_reader(path).unwrap()),
    )
}

#[test]
fn a_ledger_moves_to_postgres_and_back_with_every_check_passing() {
    let n: u64 = std::env::var("MIGRATE_ENTRIES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3_000);
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src.db");
    {
        let conn = schema::open_writer(&src, true).unwrap();
        let tx = conn.unchecked_transaction().unwrap();
        let mut rows = Lite(&*tx);
        for u in 0..16 {
            ledger::create(
                &mut rows,
                &format!("u{u}"),
                1_000 * MICROS_PER_CREDIT,
                "admin:root",
                1,
                MAX,
            )
            .unwrap();
        }
        for seq in 0..n.saturating_sub(16) {
            let d = debit(
                "n1",
                "j",
                seq,
                &format!("u{}", seq % 16),
                1_000 + seq as i64,
            );
            ledger::debit(&mut rows, &d, "node:n1", 2 + seq as i64, MAX).unwrap();
        }
        let claim = Claim {
            user: "u1".into(),
            job: JobId(0xabc),
            attempt: 0,
            rank: 3,
            digest: [9; 32],
        };
        claims::claim(&mut rows, &claim, "node:n1", 5).unwrap();
        let end = RankEnd { claim, width: 4 };
        claims::end(&mut rows, &end, "node:n1", 6).unwrap();
        tx.commit().unwrap();
    }
    let pgdb = TestDb::new(Kind::Pg);
    let cfg = pgdb.pg_config().unwrap();
    let (mut w, mut r) = pg::open(&cfg, true).unwrap();
    let started = Instant::now();
    let m = migrate(
        &mut Lite(schema::open_reader(&src).unwrap()),
        &mut w,
        &mut r,
    )
    .unwrap();
    println!("SQLite to PostgreSQL: {m:?} in {:?}", started.elapsed());
    assert_eq!(
        (m.accounts, m.entries, m.claims, m.ends),
        (16, n as usize, 1, 1)
    );
    // Into a target that holds a ledger: refused, nothing written.
    let again = migrate(
        &mut Lite(schema::open_reader(&src).unwrap()),
        &mut w,
        &mut r,
    );
    assert!(matches!(again, Err(MigrateError::NotEmpty(_))), "{again:?}");
    // And back into a new SQLite file.
    let back = dir.path().join("back.db");
    let (mut bw, mut br) = lite_target(&back);
    let started = Instant::now();
    let m2 = migrate(&mut *pgdb.reader(), &mut bw, &mut br).unwrap();
    println!("PostgreSQL to SQLite: {m2:?} in {:?}", started.elapsed());
    assert_eq!(m2, m);
    let hash = |p: &std::path::Path| -> Vec<u8> {
        rusqlite::Connection::open(p)
            .unwrap()
            .query_row(
                "SELECT hash FROM entries ORDER BY id DESC LIMIT 1",
                [],
                |r| r.get(0),
            )
            .unwrap()
    };
    assert_eq!(
        hash(&src),
        hash(&back),
        "the same chain head after the round trip"
    );
    // A SQLite target with entries is refused too.
    let (mut sw, mut sr) = lite_target(&src);
    assert!(matches!(
        migrate(&mut *pgdb.reader(), &mut sw, &mut sr),
        Err(MigrateError::NotEmpty(_))
    ));
}
