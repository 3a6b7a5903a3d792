//! Each role can do exactly what it may, and is refused (and recorded) for the rest.

use certs::Role;
use proto::account::*;

use crate::support::*;

#[tokio::test]
async fn each_role_can_do_exactly_what_it_may() {
    let d = Accountd::start().await;
    // Admin: create, grant, adjust, read anything, report, audit.
    assert_eq!(
        d.admin(&["create", "alice", "--initial", "10"]).ok(),
        "created alice with balance 10.000000\n"
    );
    d.admin(&["create", "bob"]).ok();
    assert!(
        d.admin(&["grant", "alice", "2.5", "--reason", "welcome"])
            .ok()
            .contains("balance 12.500000")
    );
    assert!(
        d.admin(&["adjust", "alice", "-0.5", "--reason", "typo"])
            .ok()
            .contains("balance 12.000000")
    );
    assert_eq!(d.admin(&["balance", "alice"]).ok(), "alice 12.000000\n");
    assert_eq!(
        d.admin(&["history", "alice", "--csv"]).ok().lines().count(),
        4
    );
    d.admin(&["report", "--by", "user"]).ok();
    d.admin(&["audit"]).ok();
    assert_eq!(d.admin(&["whoami"]).ok(), "admin ops\n");
    d.admin(&["balance"])
        .fails_with("name the user (accountctl balance USER)");

    // User: own balance and history only.
    assert_eq!(
        d.ctl(Role::User, "alice", &["balance"]).ok(),
        "alice 12.000000\n"
    );
    assert_eq!(
        d.ctl(Role::User, "alice", &["balance", "alice"]).ok(),
        "alice 12.000000\n"
    );
    assert!(
        d.ctl(Role::User, "alice", &["history"])
            .ok()
            .contains("welcome")
    );
    let refusals_before = refusals(&d);
    let denied: &[&[&str]] = &[
        &["balance", "bob"],
        &["history", "bob"],
        &["create", "carol"],
        &["grant", "alice", "100", "--reason", "me"],
        &["adjust", "bob", "-1", "--reason", "ha"],
        &["report", "--by", "node"],
        &["audit"],
    ];
    for args in denied {
        d.ctl(Role::User, "alice", args)
            .fails_with("user alice may not");
    }

    // Node: debit and refund with its own name; balances (for the out-of-credit check); nothing else.
    let mut n1 = d.client(Role::Node, "n1").await;
    let r = n1
        .call(AccountOp::Debit(debit("n1", "j1", 1, "alice", 2 * C)))
        .await
        .unwrap();
    assert!(
        matches!(r, AccountReply::Charged(ChargeReceipt { balance_after, .. }) if balance_after == 10 * C)
    );
    let refund = Refund {
        key: DebitKey {
            node: "n1".into(),
            job: "j1".into(),
            seq: 1_000,
        },
        user: "alice".into(),
        amount: C,
        reason: "meter overlap".into(),
    };
    assert!(matches!(
        n1.call(AccountOp::Refund(refund)).await,
        Ok(AccountReply::Charged(_))
    ));
    assert!(matches!(
        n1.call(AccountOp::Balance(BalanceQuery {
            user: Some("bob".into())
        }))
        .await,
        Ok(AccountReply::Balance(_))
    ));
    assert_eq!(
        code_of(
            n1.call(AccountOp::Debit(debit("n2", "j1", 1, "alice", C)))
                .await
        ),
        ErrorCode::Forbidden
    );
    let history = AccountOp::History(HistoryQuery {
        user: Some("alice".into()),
        limit: 10,
        ..Default::default()
    });
    assert_eq!(
        code_of(n1.call(history.clone()).await),
        ErrorCode::Forbidden
    );
    assert_eq!(
        code_of(n1.call(AccountOp::Audit).await),
        ErrorCode::Forbidden
    );
    let grant = AccountOp::Grant(AdminEntry {
        user: "alice".into(),
        amount: C,
        reason: "x".into(),
    });
    assert_eq!(code_of(n1.call(grant.clone()).await), ErrorCode::Forbidden);
    d.ctl(Role::Node, "n1", &["create", "mallory"])
        .fails_with("node n1 may not");

    // Service certificates (vexecd) and admins may not charge; services read nothing.
    let mut svc = d.client(Role::Service, "vexecd").await;
    assert_eq!(
        code_of(
            svc.call(AccountOp::Debit(debit("vexecd", "j", 1, "alice", C)))
                .await
        ),
        ErrorCode::Forbidden
    );
    assert_eq!(
        code_of(
            svc.call(AccountOp::Balance(BalanceQuery {
                user: Some("alice".into())
            }))
            .await
        ),
        ErrorCode::Forbidden
    );
    assert!(
        matches!(svc.call(AccountOp::WhoAmI).await, Ok(AccountReply::WhoAmI(i)) if i.role == "service")
    );
    let mut admin = d.client(Role::Admin, "ops").await;
    assert_eq!(
        code_of(
            admin
                .call(AccountOp::Debit(debit("ops", "j", 1, "alice", C)))
                .await
        ),
        ErrorCode::Forbidden
    );

    // Nothing refused changed the ledger, and every refusal was recorded.
    assert_eq!(d.balance("alice"), 11 * C);
    assert_eq!(d.balance("bob"), 0);
    assert_eq!(d.entry_count(), 5);
    let expected = denied.len() as i64 + 4 + 1 + 3;
    assert_eq!(refusals(&d) - refusals_before, expected);
    let recorded: String = d
        .db()
        .query_row(
            "SELECT message FROM refusals WHERE role = 'service' ORDER BY id LIMIT 1",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(recorded.contains("service vexecd may not"), "{recorded}");
}

fn refusals(d: &Accountd) -> i64 {
    // A refusal is committed before it is answered.
    d.db()
        .query_row("SELECT COUNT(*) FROM refusals", [], |r| r.get(0))
        .unwrap()
}

#[tokio::test]
async fn a_certificate_from_another_cluster_is_refused() {
    let d = Accountd::start().await;
    let stranger = certs::testing::TestPki::new();
    let mut tls = stranger.tls_paths(Role::Admin, "ops");
    // Trust the real CA (so the server is verified) but present a foreign certificate.
    tls.ca = d.tls(Role::Admin, "ops").ca;
    tls.crl = None;
    let out = ctl_with(&d.addr, &tls, d.dir.path(), &["audit"]);
    assert_eq!(out.code, 1, "{out:?}");
    assert_eq!(out.stderr.lines().count(), 1, "{out:?}");
    assert_eq!(d.entry_count(), 0);
}
