//! `batchd migrate` through the real binary: a SQLite queue goes into a
//! PostgreSQL database a config file names and back into a new SQLite file,
//! the three dumps equal; a target that holds a queue and a connection string
//! holding a password are refused with a clear error, writing nothing.

use testhost::postgres as server;

use std::process::Command;
use std::sync::Arc;

use batchd::store::migrate::dump;
use batchd::store::{JobRecord, Location, PgConfig, Store, Write};
use proto::batch::SignedJob;

const BATCHD: &str = env!("CARGO_BIN_EXE_batchd");

fn migrate(from: &std::path::Path, to: &std::path::Path) -> (bool, String, String) {
    let out = Command::new(BATCHD)
        .args(["migrate", "--from"])
        .arg(from)
        .arg("--to")
        .arg(to)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn batchd_migrate_moves_a_queue_to_postgresql_and_back() {
    let pg = server::Postgres::with_database("queue");
    let dir = tempfile::tempdir().unwrap();
    let lite = dir.path().join("q.db");
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let (store, _) = Store::open(&lite, 16, 42).unwrap();
        for i in 0..3u64 {
            let signed = Arc::new(SignedJob {
                spec: vec![i as u8; 9],
                signature: vec![1],
                cert: vec![2],
            });
            let job = JobRecord::queued(i as i64, 10 + i, "alice".into(), signed, 100);
            store.write(Write::Insert(Box::new(job))).await.unwrap();
        }
        store.close();
    });
    let conninfo = pg.conninfo("queue");
    let toml = dir.path().join("pg.toml");
    std::fs::write(&toml, format!("[store]\npostgres = {conninfo:?}\n")).unwrap();

    let (ok, out, err) = migrate(&lite, &toml);
    assert!(ok, "{err}");
    assert!(out.contains("migrated 3 jobs (0 arrays)"), "{out}");
    let back = dir.path().join("back.db");
    let (ok, _, err) = migrate(&toml, &back);
    assert!(ok, "{err}");
    let at_pg = Location::Postgres(PgConfig {
        conninfo: conninfo.clone(),
        password_file: None,
        ca: None,
    });
    let original = dump(&Location::Sqlite(lite.clone())).unwrap();
    assert_eq!(original.rows("jobs").len(), 3);
    assert_eq!(dump(&at_pg).unwrap(), original);
    assert_eq!(dump(&Location::Sqlite(back.clone())).unwrap(), original);

    // Into a queue again: refused, nothing written.
    let (ok, _, err) = migrate(&lite, &toml);
    assert!(!ok && err.contains("already holds 3 rows of jobs"), "{err}");
    assert_eq!(dump(&at_pg).unwrap(), original);
    // A password in the connection string: refused, naming the right key.
    let bad = dir.path().join("bad.toml");
    std::fs::write(
        &bad,
        format!("[store]\npostgres = \"{conninfo} password=x\"\n"),
    )
    .unwrap();
    let (ok, _, err) = migrate(&lite, &bad);
    assert!(!ok && err.contains("password_file"), "{err}");
    // A source that does not exist: refused, not created.
    let none = dir.path().join("none.db");
    let (ok, _, err) = migrate(&none, &back);
    assert!(!ok && err.contains("there is no queue file"), "{err}");
    assert!(!none.exists());
}
