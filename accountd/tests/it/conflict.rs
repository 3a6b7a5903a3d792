//! A repeated charge key with changed content is a `KeyConflict`, never a
//! duplicate: the node must not settle a charge the ledger never recorded.
//! Regression: only the user and amount were compared, so a repeat with
//! another rank, interval or CPU time (or a refund with another reason) was
//! answered `duplicate=true`.

use certs::Role;
use proto::account::*;

use crate::support::*;

#[tokio::test]
async fn a_repeated_key_with_any_field_changed_is_a_conflict() {
    let d = Accountd::start().await;
    d.admin(&["create", "alice", "--initial", "100"]).ok();
    let mut n1 = d.client(Role::Node, "n1").await;
    let original = debit("n1", "job9", 1, "alice", 3 * C);
    let AccountReply::Charged(first) = n1.call(AccountOp::Debit(original.clone())).await.unwrap()
    else {
        panic!("not a receipt")
    };
    assert!(!first.duplicate);

    let mut changed: Vec<(&str, Debit)> = Vec::new();
    let mut d1 = original.clone();
    d1.rank += 1;
    changed.push(("rank", d1));
    let mut d2 = original.clone();
    d2.interval.start_us += 1;
    changed.push(("interval", d2));
    let mut d3 = original.clone();
    d3.interval.end_us += 1_000_000;
    changed.push(("interval", d3));
    let mut d4 = original.clone();
    d4.cpu_us += 1;
    changed.push(("cpu time", d4));
    for (field, d_changed) in changed {
        let r = n1.call(AccountOp::Debit(d_changed.clone())).await;
        let Err(clients::account::ClientError::Server(e)) = r else {
            panic!("a repeat with another {field} was accepted: {r:?}")
        };
        assert_eq!(e.code, ErrorCode::KeyConflict, "{field}: {e}");
        assert!(e.message.contains(field), "{field}: {e}");
    }
    // The true repeat is still a duplicate with the first receipt.
    let AccountReply::Charged(again) = n1.call(AccountOp::Debit(original)).await.unwrap() else {
        panic!("not a receipt")
    };
    assert!(again.duplicate);
    assert_eq!(again.entry_id, first.entry_id);

    // Refunds: the reason is part of what is stored.
    let refund = Refund {
        key: DebitKey {
            node: "n1".into(),
            job: "job9".into(),
            seq: 2,
        },
        user: "alice".into(),
        amount: C,
        reason: "meter overlap".into(),
    };
    let AccountReply::Charged(r1) = n1.call(AccountOp::Refund(refund.clone())).await.unwrap()
    else {
        panic!("not a receipt")
    };
    assert!(!r1.duplicate);
    let mut other_reason = refund.clone();
    other_reason.reason = "a different story".into();
    assert_eq!(
        code_of(n1.call(AccountOp::Refund(other_reason)).await),
        ErrorCode::KeyConflict
    );
    let AccountReply::Charged(r2) = n1.call(AccountOp::Refund(refund)).await.unwrap() else {
        panic!("not a receipt")
    };
    assert!(r2.duplicate && r2.entry_id == r1.entry_id);

    // Exactly one debit and one refund were recorded.
    assert_eq!(d.entry_count(), 3);
    assert_eq!(d.balance("alice"), 98 * C);
}
