//! Signed chain heads through the real binaries: accountd appends them to
//! its anchors file as it writes; `accountctl audit --anchors --ledger` on the
//! ledger file passes, names the rewritten entry after a rewrite with every
//! hash recomputed, and refuses a forged head; `accountctl head` fetches the
//! latest signed head from the running accountd, and a copy kept elsewhere
//! audits like the file.

use std::path::Path;

use accountd::store::chain;
use proto::account::AccountOp;

use crate::support::*;

fn ctl_offline(d: &Accountd, anchors: &Path, config: &Path) -> std::process::Output {
    isolated_ctl(d.dir.path())
        .args(["audit", "--anchors"])
        .arg(anchors)
        .arg("--ledger")
        .arg(config)
        .output()
        .unwrap()
}

/// An accountd signing its chain head every 2 entries into `dir/anchors`.
async fn anchored(dir: &Path) -> (Accountd, std::path::PathBuf) {
    let anchors = dir.join("anchors");
    let own = dir.join("accountd.toml");
    std::fs::write(
        &own,
        format!("[store]\nanchors = {anchors:?}\nanchor_entries = 2\n"),
    )
    .unwrap();
    let d = Accountd::start_with(&["--config", &own.display().to_string()]).await;
    (d, anchors)
}

/// The config the offline audit reads: `d`'s ledger and the CA.
fn ledger_config(d: &Accountd, dir: &Path) -> std::path::PathBuf {
    let tls = d.tls(certs::Role::Service, "accountd");
    let config = dir.join("ledger.toml");
    std::fs::write(
        &config,
        format!("database = {:?}\nca = {:?}\n", d.db, tls.ca),
    )
    .unwrap();
    config
}

#[tokio::test]
async fn a_rewritten_ledger_is_caught_by_the_anchors_and_a_forged_head_refused() {
    let side = tempfile::tempdir().unwrap();
    let (mut d, anchors) = anchored(side.path()).await;
    let config = ledger_config(&d, side.path());
    d.admin(&["create", "u", "--initial", "100"]).ok();
    let mut node = d.client(certs::Role::Node, "n1").await;
    for seq in 1..=5 {
        node.call(AccountOp::Debit(debit("n1", "j", seq, "u", C)))
            .await
            .unwrap();
    }
    d.terminate().await;
    let out = ctl_offline(&d, &anchors, &config);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.starts_with("audit passed"), "{text}");
    // Entry 2 made one credit larger, every balance and hash recomputed.
    let db = rusqlite::Connection::open(&d.db).unwrap();
    db.execute_batch("DROP TRIGGER entries_no_update;").unwrap();
    let mut prev = chain::GENESIS;
    let mut rows = Vec::new();
    {
        let mut s = db
            .prepare(&format!(
                "SELECT {} FROM entries ORDER BY id",
                accountd::store::query::ENTRY_COLUMNS.join(", ")
            ))
            .unwrap();
        let mut q = s.query([]).unwrap();
        while let Some(r) = q.next().unwrap() {
            rows.push(accountd::store::lite::entry_columns(r).unwrap());
        }
    }
    for mut e in rows {
        if e.id == 2 {
            e.amount -= C;
        }
        if e.id >= 2 {
            e.balance_after -= C;
        }
        prev = chain::entry_hash(&prev, &e);
        db.execute(
            "UPDATE entries SET amount = ?1, balance_after = ?2, hash = ?3 WHERE id = ?4",
            rusqlite::params![e.amount, e.balance_after, &prev[..], e.id],
        )
        .unwrap();
    }
    db.execute("UPDATE accounts SET balance = balance - ?1", [C])
        .unwrap();
    drop(db);
    let out = ctl_offline(&d, &anchors, &config);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(3), "{text}");
    assert!(text.contains("was rewritten"), "{text}");
    // A head whose hash was changed under the old signature is refused.
    let kept = std::fs::read_to_string(&anchors).unwrap();
    let mut fields: Vec<String> = kept
        .lines()
        .next()
        .unwrap()
        .split(' ')
        .map(String::from)
        .collect();
    fields[3] = "00".repeat(32);
    std::fs::write(&anchors, format!("{}\n", fields.join(" "))).unwrap();
    let out = ctl_offline(&d, &anchors, &config);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("is not signed by the cluster's accountd"),
        "{err}"
    );
}

#[tokio::test]
async fn the_latest_signed_head_is_fetched_from_accountd_and_audits_as_kept() {
    let side = tempfile::tempdir().unwrap();
    let (mut d, anchors) = anchored(side.path()).await;
    d.admin(&["head"]).fails_with("has signed no chain head");
    d.admin(&["create", "u", "--initial", "100"]).ok();
    let mut node = d.client(certs::Role::Node, "n1").await;
    for seq in 1..=5 {
        node.call(AccountOp::Debit(debit("n1", "j", seq, "u", C)))
            .await
            .unwrap();
    }
    // Anyone may ask: here a node, over the protocol.
    let proto::account::AccountReply::Head(Some(head)) = node.call(AccountOp::Head).await.unwrap()
    else {
        panic!("no signed head")
    };
    // Entries 1, 3 and 5 were anchored (every 2 entries); 6 not yet.
    assert_eq!(head.id, 5);
    let line = d.admin(&["head"]).ok().trim().to_string();
    let file = std::fs::read_to_string(&anchors).unwrap();
    assert_eq!(Some(line.as_str()), file.lines().last(), "{file}");
    let kept = side.path().join("kept");
    std::fs::write(&kept, format!("{line}\n")).unwrap();
    d.terminate().await;
    let config = ledger_config(&d, side.path());
    let out = ctl_offline(&d, &kept, &config);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.starts_with("audit passed"), "{text}");
}

#[tokio::test]
async fn accountd_without_anchors_answers_head_with_none() {
    let d = Accountd::start().await;
    d.admin(&["create", "u", "--initial", "100"]).ok();
    d.admin(&["head"]).fails_with("has signed no chain head");
}
