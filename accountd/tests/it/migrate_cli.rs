//! `accountctl migrate` through the real binaries: a SQLite ledger written by
//! accountd moves into a real PostgreSQL, accountd serves it from there with
//! the same balances, and a second migration into it is refused.

use crate::pgserver::Postgres;
use crate::support::*;

#[tokio::test]
async fn accountctl_migrate_moves_a_ledger_into_postgres_once() {
    let mut d = Accountd::start().await;
    d.admin(&["create", "u", "--initial", "100"]).ok();
    let mut node = d.client(certs::Role::Node, "n1").await;
    for seq in 1..=20 {
        node.call(proto::account::AccountOp::Debit(debit(
            "n1", "j", seq, "u", C,
        )))
        .await
        .unwrap();
    }
    d.terminate().await;
    let pg = Postgres::with_database("ledger");
    let from = d.dir.path().join("from.toml");
    std::fs::write(&from, format!("database = {:?}\n", d.db)).unwrap();
    let to = d.dir.path().join("to.toml");
    std::fs::write(
        &to,
        format!("[store]\npostgres = \"{}\"\n", pg.conninfo("ledger")),
    )
    .unwrap();
    let run = || {
        isolated_ctl(d.dir.path())
            .args(["migrate", "--from"])
            .arg(&from)
            .arg("--to")
            .arg(&to)
            .output()
            .unwrap()
    };
    let out = run();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.starts_with("migrated 1 accounts, 21 entries"),
        "{text}"
    );
    assert_eq!(
        pg.psql("ledger", "SELECT balance FROM accounts"),
        (80 * C).to_string()
    );
    let again = run();
    let err = String::from_utf8_lossy(&again.stderr);
    assert_eq!(again.status.code(), Some(1), "{err}");
    assert!(err.contains("already holds"), "{err}");
}
