//! Bad input and bad storage: clear one-line errors, nothing changed.

use std::time::Duration;

use certs::Role;
use proto::account::*;
use proto::{DEFAULT_MAX_FRAME, Framed};
use tokio::io::AsyncWriteExt;

use crate::support::*;

#[tokio::test]
async fn malformed_requests_get_clear_errors_and_the_connection_survives() {
    let d = Accountd::start().await;
    d.admin(&["create", "alice", "--initial", "5"]).ok();
    let before = d.entry_count();
    let tcp = tokio::net::TcpStream::connect(&d.addr).await.unwrap();
    let (tls, _) = certs::connect(
        &d.connector(Role::Node, "n1"),
        tcp,
        Role::Service,
        "accountd",
    )
    .await
    .unwrap();
    let mut f = Framed::new(tls, DEFAULT_MAX_FRAME);

    // A frame whose body is not a request.
    f.get_mut()
        .write_all(&[0, 0, 0, 3, 0xff, 0xff, 0xff])
        .await
        .unwrap();
    let r: AccountResponse = f.recv().await.unwrap().unwrap();
    assert_eq!(r.id, 0);
    let e = r.result.unwrap_err();
    assert_eq!(e.code, ErrorCode::Malformed);
    assert!(e.message.contains("malformed request"), "{}", e.message);

    // A request from a future protocol version.
    let mut req = AccountRequest::new(2, AccountOp::WhoAmI);
    req.version = 99;
    f.send(&req).await.unwrap();
    let r: AccountResponse = f.recv().await.unwrap().unwrap();
    assert_eq!(
        (r.id, r.result.unwrap_err().code),
        (2, ErrorCode::UnsupportedVersion)
    );

    // An operation this server does not know (a newer client): tag 999.
    let unknown = (ACCOUNT_PROTOCOL_VERSION, 3u64, (999u16, 0u8));
    f.send(&unknown).await.unwrap();
    let r: AccountResponse = f.recv().await.unwrap().unwrap();
    assert_eq!(
        (r.id, r.result.unwrap_err().code),
        (3, ErrorCode::Unsupported)
    );

    // The connection is still good.
    f.send(&AccountRequest::new(4, AccountOp::WhoAmI))
        .await
        .unwrap();
    let r: AccountResponse = f.recv().await.unwrap().unwrap();
    assert!(matches!(r.result, Ok(AccountReply::WhoAmI(_))));

    // A frame larger than the limit: an error, then the connection is closed.
    f.get_mut()
        .write_all(&(64u32 << 20).to_be_bytes())
        .await
        .unwrap();
    let r: AccountResponse = f.recv().await.unwrap().unwrap();
    assert_eq!(r.result.unwrap_err().code, ErrorCode::Malformed);
    let end = tokio::time::timeout(Duration::from_secs(5), f.recv::<AccountResponse>())
        .await
        .unwrap();
    assert!(matches!(end, Ok(None) | Err(_)), "{end:?}");
    assert_eq!(d.entry_count(), before);
}

#[tokio::test]
async fn unknown_users_and_absurd_amounts_are_refused_and_change_nothing() {
    let d = Accountd::start_with(&["--max-entry", "1000"]).await;
    d.admin(&["create", "alice", "--initial", "5"]).ok();
    let before = d.entry_count();
    let mut n = d.client(Role::Node, "n1").await;
    let cases = [
        (debit("n1", "j", 1, "nobody", C), ErrorCode::UnknownUser),
        (debit("n1", "j", 2, "alice", 0), ErrorCode::InvalidAmount),
        (debit("n1", "j", 3, "alice", -C), ErrorCode::InvalidAmount),
        (
            debit("n1", "j", 4, "alice", 1000 * C + 1),
            ErrorCode::InvalidAmount,
        ),
        (
            debit("n1", "j", 5, "alice", i64::MAX),
            ErrorCode::InvalidAmount,
        ),
        (debit("n1", "j", 6, "al ice", C), ErrorCode::Malformed),
        (debit("n1", "j", u64::MAX, "alice", C), ErrorCode::Malformed),
    ];
    for (op, code) in cases {
        assert_eq!(
            code_of(n.call(AccountOp::Debit(op.clone())).await),
            code,
            "{op:?}"
        );
    }
    let refund = Refund {
        key: DebitKey {
            node: "n1".into(),
            job: "never-charged".into(),
            seq: 1,
        },
        user: "alice".into(),
        amount: C,
        reason: "oops".into(),
    };
    assert_eq!(
        code_of(n.call(AccountOp::Refund(refund)).await),
        ErrorCode::RefundTooLarge
    );

    d.admin(&["balance", "ghost"])
        .fails_with("no account for user \"ghost\"");
    d.admin(&["grant", "ghost", "1", "--reason", "x"])
        .fails_with("accountctl create ghost");
    d.admin(&["grant", "alice", "abc", "--reason", "x"])
        .fails_with("is not an amount");
    d.admin(&["grant", "alice", "1.0000001", "--reason", "x"])
        .fails_with("more than 6 decimals");
    d.admin(&["grant", "alice", "-5", "--reason", "x"])
        .fails_with("must be positive");
    d.admin(&["grant", "alice", "1001", "--reason", "x"])
        .fails_with("per-entry limit of 1000.000000");
    d.admin(&["grant", "alice", "99999999999999999999", "--reason", "x"])
        .fails_with("too large");
    d.admin(&["grant", "alice", "1", "--reason", " "])
        .fails_with("reason is required");
    d.admin(&["adjust", "alice", "0", "--reason", "x"])
        .fails_with("must not be zero");
    d.admin(&["create", "alice"]).fails_with("already exists");
    d.admin(&["create", "bad/name"])
        .fails_with("invalid user name");
    d.admin(&["history", "alice", "--since", "yesterday"])
        .fails_with("is not a time");
    assert_eq!(d.entry_count(), before);
    assert_eq!(d.balance("alice"), 5 * C);
}

#[tokio::test]
async fn a_missing_database_is_a_clear_error_and_nothing_is_created() {
    let mut d = Accountd::start().await;
    d.terminate().await;
    let missing = d.dir.path().join("nope.db");
    let args: Vec<String> = d
        .args(false)
        .into_iter()
        .map(|a| {
            if a == d.db.display().to_string() {
                missing.display().to_string()
            } else {
                a
            }
        })
        .collect();
    let out = std::process::Command::new(ACCOUNTD)
        .args(&args)
        .env("RUST_LOG", "off")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("nope.db does not exist") && err.contains("--init"),
        "{err}"
    );
    assert!(!missing.exists());
}

#[tokio::test]
async fn a_sigterm_the_moment_accountd_is_ready_is_a_clean_shutdown() {
    // The handlers exist before the ready file does (a regression: they were
    // installed when the server loop first ran, and an early SIGTERM killed it).
    for _ in 0..3 {
        let mut d = Accountd::start().await;
        let status = d.terminate().await;
        assert!(status.success(), "accountd stopped with {status}");
    }
}

#[tokio::test]
async fn an_unwritable_or_foreign_database_is_refused_and_left_untouched() {
    let mut d = Accountd::start().await;
    d.admin(&["create", "alice", "--initial", "5"]).ok();
    assert!(d.terminate().await.success(), "SIGTERM is a clean shutdown");
    let bytes = std::fs::read(&d.db).unwrap();

    // The ledger file on a read-only mount (root ignores permission bits, not
    // a read-only mount): a bind mount of the file itself, removed by `ReadOnly`'s
    // drop even if an assertion fails.
    {
        let _ro = ReadOnly::bind(&d.db);
        let err = d.spawn(false).await.unwrap_err();
        assert!(err.contains("is not writable"), "{err}");
        assert!(err.contains(&d.db.display().to_string()), "{err}");
    }
    assert_eq!(
        std::fs::read(&d.db).unwrap(),
        bytes,
        "the ledger file changed"
    );

    // A directory where the file should be, and a file that is not a ledger.
    let real = d.db.clone();
    d.db = d.dir.path().to_path_buf();
    let err = d.spawn(false).await.unwrap_err();
    assert!(err.contains("is a directory"), "{err}");
    d.db = d.dir.path().join("notes.txt");
    std::fs::write(
        &d.db,
        "shopping list: milk, eggs, and a reasonably long line",
    )
    .unwrap();
    let err = d.spawn(false).await.unwrap_err();
    assert!(err.contains("is not an accountd ledger"), "{err}");

    // The real ledger still opens and is sound.
    d.db = real;
    d.spawn(false).await.unwrap();
    assert_eq!(d.admin(&["balance", "alice"]).ok(), "alice 5.000000\n");
    assert!(d.admin(&["audit"]).ok().starts_with("audit passed"));
}

#[tokio::test]
async fn audit_fails_loudly_on_a_tampered_ledger() {
    let mut d = Accountd::start().await;
    d.admin(&["create", "alice", "--initial", "5"]).ok();
    d.admin(&["grant", "alice", "1", "--reason", "bonus"]).ok();
    d.terminate().await;
    let raw = rusqlite::Connection::open(&d.db).unwrap();
    raw.execute_batch("UPDATE accounts SET balance = balance + 1000000 WHERE user = 'alice'")
        .unwrap();
    drop(raw);
    d.spawn(false).await.unwrap();
    let out = d.admin(&["audit"]);
    assert_eq!(out.code, 3, "{out:?}");
    assert!(
        out.stdout.contains("audit FAILED") && out.stdout.contains("[user alice]"),
        "{out:?}"
    );
}

/// A small ledger, then accountd stopped so that its file can be tampered
/// with. Entries: 1 alice +5, 2 bob +3, 3 alice -1, 4 alice -2, 5 bob -1,
/// 6 alice -0.5; balances alice 1.5, bob 2.
async fn small_ledger_then_stopped() -> Accountd {
    let mut d = Accountd::start().await;
    d.admin(&["create", "alice", "--initial", "5"]).ok();
    d.admin(&["create", "bob", "--initial", "3"]).ok();
    let mut n1 = d.client(Role::Node, "n1").await;
    for (seq, user, amount, id) in [
        (1, "alice", C, 3),
        (2, "alice", 2 * C, 4),
        (3, "bob", C, 5),
        (4, "alice", C / 2, 6),
    ] {
        let r = n1
            .call(AccountOp::Debit(debit("n1", "j", seq, user, amount)))
            .await
            .unwrap();
        let AccountReply::Charged(r) = r else {
            panic!("{r:?}")
        };
        assert_eq!(r.entry_id, id);
    }
    n1.close().await;
    assert!(d.admin(&["audit"]).ok().starts_with("audit passed"));
    assert!(d.terminate().await.success());
    d
}

/// Runs SQL on the stopped ledger's file, as someone with write access to it
/// could, then starts accountd on it again and audits it.
async fn tamper_then_audit(d: &mut Accountd, sql: &str) -> Ctl {
    let raw = rusqlite::Connection::open(&d.db).unwrap();
    raw.execute_batch(sql).unwrap();
    drop(raw);
    d.spawn(false).await.unwrap();
    let out = d.admin(&["audit"]);
    assert_eq!(out.code, 3, "the audit must fail: {out:?}");
    assert!(out.stdout.starts_with("audit FAILED"), "{out:?}");
    assert!(out.stderr.is_empty(), "{out:?}");
    out
}

/// The one problem line of an audit report containing `needle`.
#[track_caller]
fn problem<'a>(out: &'a Ctl, needle: &str) -> &'a str {
    let lines: Vec<&str> = out.stdout.lines().filter(|l| l.contains(needle)).collect();
    assert_eq!(lines.len(), 1, "no single line with {needle:?}: {out:?}");
    lines[0]
}

#[tokio::test]
async fn audit_names_an_entry_whose_amount_was_edited() {
    let mut d = small_ledger_then_stopped().await;
    // Alice's 2-credit debit (entry 4) rewritten to 0.1 credit, past the
    // append-only guard.
    let out = tamper_then_audit(
        &mut d,
        "DROP TRIGGER entries_no_update;
         UPDATE entries SET amount = -100000 WHERE id = 4;",
    )
    .await;
    let edited = problem(&out, "entry 4 ");
    assert!(
        edited.contains("records balance 2000000 but the entries up to it sum to 3900000")
            && edited.ends_with("[user alice] [entries 4]"),
        "{out:?}"
    );
    let account = problem(&out, "account \"alice\"");
    assert!(
        account.contains("has balance 1500000 but its entries sum to 3400000"),
        "{out:?}"
    );
    assert!(!out.stdout.contains("bob"), "bob's rows are sound: {out:?}");
}

#[tokio::test]
async fn audit_names_a_deleted_entry() {
    let mut d = small_ledger_then_stopped().await;
    // Alice's 2-credit debit (entry 4) removed.
    let out = tamper_then_audit(
        &mut d,
        "DROP TRIGGER entries_no_delete;
         DELETE FROM entries WHERE id = 4;",
    )
    .await;
    let missing = problem(&out, "entry 4 ");
    assert!(
        missing.contains("missing") && missing.ends_with("[entries 4]"),
        "{out:?}"
    );
    let account = problem(&out, "account \"alice\"");
    assert!(
        account.contains("has balance 1500000 but its entries sum to 3500000"),
        "{out:?}"
    );
    assert!(!out.stdout.contains("bob"), "bob's rows are sound: {out:?}");
}

#[tokio::test]
async fn audit_catches_deleted_entries_even_when_the_balances_were_fixed_to_match() {
    let mut d = small_ledger_then_stopped().await;
    // Bob's debit (entry 5) and alice's latest (entry 6, the newest entry of
    // all) removed, and both balances raised to agree with what is left.
    let out = tamper_then_audit(
        &mut d,
        "DROP TRIGGER entries_no_delete;
         DELETE FROM entries WHERE id IN (5, 6);
         UPDATE accounts SET balance = 2000000 WHERE user = 'alice';
         UPDATE accounts SET balance = 3000000 WHERE user = 'bob';",
    )
    .await;
    let missing = problem(&out, "entries 5 to 6 ");
    assert!(
        missing.contains("missing") && missing.ends_with("[entries 5,6]"),
        "{out:?}"
    );
    assert!(!out.stdout.contains("has balance"), "{out:?}");
}

/// A read-only bind mount of one file over itself, undone on drop.
struct ReadOnly(std::path::PathBuf);

impl ReadOnly {
    fn bind(path: &std::path::Path) -> ReadOnly {
        let mount = |args: &[&str]| {
            let status = std::process::Command::new("mount")
                .args(args)
                .arg(path)
                .arg(path)
                .status()
                .expect("run mount");
            assert!(
                status.success(),
                "mount {args:?} failed (the tests run as root)"
            );
        };
        mount(&["--bind"]);
        let guard = ReadOnly(path.to_path_buf());
        mount(&["-o", "remount,bind,ro"]);
        guard
    }
}

impl Drop for ReadOnly {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.0).status();
    }
}

#[tokio::test]
async fn an_unreachable_accountd_is_one_clear_line() {
    let d = Accountd::start().await;
    // A port nobody listens on: held bound (so no other test can take it)
    // but not listening, so a connection to it is refused.
    let held = unused_port();
    let addr = held.local_addr().unwrap().to_string();
    let out = ctl_with(&addr, &d.tls(Role::Admin, "ops"), d.dir.path(), &["audit"]);
    out.fails_with(&format!("cannot reach accountd at {addr}"));
    assert!(out.stderr.contains("is it running"), "{out:?}");
    assert_eq!(
        out.stderr.matches("refused").count(),
        1,
        "said once: {out:?}"
    );
}
