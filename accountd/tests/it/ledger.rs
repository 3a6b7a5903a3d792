//! Idempotent debits, exact balances under concurrent nodes, and debits that
//! overdraw an account.

use std::collections::HashMap;
use std::time::Duration;

use accountd::debit::{DebitClient, DebitClientConfig, Settlement};
use accountd::journal::Charge;
use certs::Role;
use proto::account::*;

use crate::support::*;

#[tokio::test]
async fn a_repeated_debit_is_applied_once() {
    let d = Accountd::start().await;
    d.admin(&["create", "alice", "--initial", "100"]).ok();
    let mut n1 = d.client(Role::Node, "n1").await;
    let first = n1
        .call(AccountOp::Debit(debit("n1", "job7", 1, "alice", 3 * C)))
        .await
        .unwrap();
    let AccountReply::Charged(first) = first else {
        panic!("{first:?}")
    };
    assert!(!first.duplicate);
    // Same key again, on a new connection (as after a node reconnect).
    let mut again = d.client(Role::Node, "n1").await;
    let second = again
        .call(AccountOp::Debit(debit("n1", "job7", 1, "alice", 3 * C)))
        .await
        .unwrap();
    let AccountReply::Charged(second) = second else {
        panic!("{second:?}")
    };
    assert!(second.duplicate);
    assert_eq!(second.entry_id, first.entry_id);
    assert_eq!(second.balance_after, 97 * C);
    // Same key, different amount: a conflict, nothing changes.
    assert_eq!(
        code_of(
            again
                .call(AccountOp::Debit(debit("n1", "job7", 1, "alice", 4 * C)))
                .await
        ),
        ErrorCode::KeyConflict
    );
    assert_eq!(d.balance("alice"), 97 * C);
    assert_eq!(d.entry_count(), 2);
    let csv = d.admin(&["history", "alice", "--csv"]).ok().to_string();
    assert_eq!(
        csv.lines().filter(|l| l.contains(",debit,")).count(),
        1,
        "{csv}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_concurrent_nodes_debiting_the_same_users_give_exact_balances() {
    let d = Accountd::start().await;
    let users = ["u0", "u1", "u2", "u3"];
    for u in users {
        d.admin(&["create", u, "--initial", "1000"]).ok();
    }
    let amount = |n: u64, seq: u64| 1_000 + (n * 7_919 + seq * 104_729) as i64 % 50_000;
    let per_node = 150u64;
    let mut tasks = Vec::new();
    for n in 0..8u64 {
        let mut c = d.client(Role::Node, &format!("n{n}")).await;
        tasks.push(tokio::spawn(async move {
            for seq in 0..per_node {
                let user = ["u0", "u1", "u2", "u3"][(seq % 4) as usize];
                let op =
                    AccountOp::Debit(debit(&format!("n{n}"), "job", seq, user, amount(n, seq)));
                c.call(op.clone()).await.unwrap();
                if seq % 10 == 0 {
                    // A retransmission: must not charge twice.
                    let r = c.call(op).await.unwrap();
                    assert!(matches!(
                        r,
                        AccountReply::Charged(ChargeReceipt {
                            duplicate: true,
                            ..
                        })
                    ));
                }
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let mut expect: HashMap<&str, i64> = users.iter().map(|u| (*u, 1000 * C)).collect();
    for n in 0..8 {
        for seq in 0..per_node {
            *expect.get_mut(users[(seq % 4) as usize]).unwrap() -= amount(n, seq);
        }
    }
    for u in users {
        let line = d.admin(&["balance", u]).ok().to_string();
        assert_eq!(
            line,
            format!("{u} {}\n", money::format_credits_fixed(expect[u]))
        );
    }
    assert_eq!(d.entry_count(), 4 + 8 * per_node as i64);
    assert!(d.admin(&["audit"]).ok().starts_with("audit passed"));
    let report = d
        .admin(&["report", "--by", "node", "--csv"])
        .ok()
        .to_string();
    assert_eq!(report.lines().count(), 9, "{report}");
    assert!(
        report.lines().nth(1).unwrap().ends_with(",1.250,1"),
        "150 x 0.5 s = 1.25 CPU minutes: {report}"
    );
}

#[tokio::test]
async fn history_and_reports_through_accountctl() {
    // Every entry is made today, unless the test runs across midnight (UTC).
    let day = || accountd::time::format_time(accountd::time::now_us())[..10].to_string();
    let first_day = day();
    let d = Accountd::start().await;
    d.admin(&["create", "alice", "--initial", "10"]).ok();
    let mut n1 = d.client(Role::Node, "n1").await;
    let mut n2 = d.client(Role::Node, "n2").await;
    n1.call(AccountOp::Debit(debit("n1", "a", 1, "alice", C / 4)))
        .await
        .unwrap();
    n1.call(AccountOp::Debit(debit("n1", "b", 1, "alice", C / 4)))
        .await
        .unwrap();
    n2.call(AccountOp::Debit(debit("n2", "a", 1, "alice", C / 2)))
        .await
        .unwrap();

    let table = d.ctl(Role::User, "alice", &["history"]).ok().to_string();
    assert_eq!(table.lines().count(), 5, "{table}");
    assert!(
        table.lines().last().unwrap().contains("-0.500000"),
        "{table}"
    );
    let json = d.admin(&["history", "alice", "--json"]).ok().to_string();
    assert!(
        json.starts_with("[\n  {\"id\": 1,") && json.ends_with("}\n]\n"),
        "{json}"
    );
    assert_eq!(json.matches("\"kind\": \"debit\"").count(), 3, "{json}");
    assert!(
        json.contains("\"node\": \"n2\"") && json.contains("\"reason\": null"),
        "{json}"
    );
    let csv = d
        .admin(&[
            "history",
            "alice",
            "--csv",
            "--since",
            "@0",
            "--until",
            "9999-01-01",
        ])
        .ok()
        .to_string();
    assert_eq!(csv.lines().count(), 5, "{csv}");
    let none = d
        .admin(&["history", "alice", "--csv", "--until", "1971-01-01"])
        .ok()
        .to_string();
    assert_eq!(none.lines().count(), 1, "header only: {none}");

    let by_user = d
        .admin(&["report", "--by", "user", "--csv"])
        .ok()
        .to_string();
    assert_eq!(
        by_user,
        "user,charged,cpu_minutes,jobs\nalice,1.000000,0.025,3\n"
    );
    let by_node = d
        .admin(&["report", "--by", "node", "--csv"])
        .ok()
        .to_string();
    assert_eq!(
        by_node,
        "node,charged,cpu_minutes,jobs\nn1,0.500000,0.016,2\nn2,0.500000,0.008,1\n"
    );
    let by_day = d.admin(&["report", "--by", "day"]).ok().to_string();
    let last_day = day();
    let rows: Vec<&str> = by_day.lines().skip(1).collect();
    assert!(!rows.is_empty(), "{by_day}");
    assert!(
        rows.iter()
            .all(|r| r.starts_with(&first_day) || r.starts_with(&last_day)),
        "{by_day}"
    );
    let later = d
        .admin(&["report", "--by", "day", "--since", "9000-01-01", "--csv"])
        .ok()
        .to_string();
    assert_eq!(later, "day,charged,cpu_minutes,jobs\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_debit_beyond_the_balance_goes_negative_exactly_and_accountctl_prints_it() {
    let d = Accountd::start().await;
    d.admin(&["create", "dora", "--initial", "1"]).ok();
    d.admin(&["create", "eve", "--initial", "1"]).ok();

    // The CPU was used: a charge larger than the balance is applied in full.
    let mut n1 = d.client(Role::Node, "n1").await;
    let r = n1
        .call(AccountOp::Debit(debit("n1", "big", 1, "dora", 3 * C)))
        .await
        .unwrap();
    let AccountReply::Charged(r) = r else {
        panic!("{r:?}")
    };
    assert_eq!(
        (r.amount, r.balance_after, r.balance_now, r.duplicate),
        (-3 * C, -2 * C, -2 * C, false)
    );

    // The node's journaled client hears the negative balance too (rexecd drops
    // the job's bid to zero on it), and the account keeps going down exactly.
    let cfg = DebitClientConfig::new(
        d.dir.path().join("n1.journal"),
        d.addr.clone(),
        d.connector(Role::Node, "n1"),
    );
    let (node, mut settled) = DebitClient::start(cfg).await.unwrap();
    node.charge(Charge::Debit(debit("n1", "big", 2, "dora", C / 4 + 1)))
        .await
        .unwrap();
    assert!(node.wait_settled(Duration::from_secs(30)).await);
    let Some(Settlement::Applied { receipt, .. }) = settled.recv().await else {
        panic!("the charge was not applied")
    };
    let after = -2 * C - C / 4 - 1;
    assert_eq!(
        (
            receipt.balance_after,
            receipt.balance_now,
            receipt.duplicate
        ),
        (after, after, false)
    );
    node.shutdown().await;
    assert_eq!(d.balance("dora"), after);

    // accountctl prints it with fixed precision, to the admin and to dora.
    assert_eq!(d.admin(&["balance", "dora"]).ok(), "dora -2.250001\n");
    assert_eq!(
        d.ctl(Role::User, "dora", &["balance"]).ok(),
        "dora -2.250001\n"
    );
    let csv = d.admin(&["history", "dora", "--csv"]).ok().to_string();
    let debits: Vec<&str> = csv.lines().filter(|l| l.contains(",debit,")).collect();
    assert_eq!(debits.len(), 2, "{csv}");
    assert!(debits[0].contains(",debit,-3.000000,-2.000000,"), "{csv}");
    assert!(debits[1].contains(",debit,-0.250001,-2.250001,"), "{csv}");
    // Nobody else was touched, and the ledger is sound.
    assert_eq!(d.admin(&["balance", "eve"]).ok(), "eve 1.000000\n");
    assert!(d.admin(&["audit"]).ok().starts_with("audit passed"));

    // A grant pays the debt back.
    d.admin(&["grant", "dora", "3", "--reason", "top-up"]).ok();
    assert_eq!(d.admin(&["balance", "dora"]).ok(), "dora 0.749999\n");
}
