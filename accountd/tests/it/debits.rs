//! Many debits to a frame (`Debits`): each debit gets exactly the outcome a
//! `Debit` of its own would get, whatever else shares its frame, and a frame
//! with no debits, too many, or from a role that may not charge is refused.

use certs::Role;
use proto::account::*;

use crate::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_debit_of_a_frame_gets_what_it_would_get_alone() {
    let d = Accountd::start().await;
    d.admin(&["create", "alice", "--initial", "50"]).ok();
    let mut node = d.client(Role::Node, "n1").await;
    let first = debit("n1", "j", 1, "alice", C);
    let AccountReply::Charged(first_receipt) =
        node.call(AccountOp::Debit(first.clone())).await.unwrap()
    else {
        panic!("a debit is answered Charged")
    };
    let mut changed = first.clone();
    changed.amount = 7 * C;
    let frame = vec![
        debit("n1", "j", 2, "alice", 2 * C), // new
        first.clone(),                       // exact repeat of an earlier debit
        changed,                             // changed repeat
        debit("n1", "j", 3, "nobody", C),    // unknown user
        debit("n2", "j", 4, "alice", C),     // another node's key
        debit("n1", "j", 5, "alice", 3 * C), // new
        debit("n1", "j", 2, "alice", 2 * C), // repeat within the frame
        debit("n1", "j", 6, "alice", 0),     // bad amount
    ];
    let outcomes = node.debits(frame.clone()).await.unwrap();
    assert_eq!(outcomes.len(), frame.len());
    let applied = |i: usize| outcomes[i].as_ref().unwrap_or_else(|e| panic!("{i}: {e}"));
    let code = |i: usize| outcomes[i].as_ref().unwrap_err().code;
    assert!(!applied(0).duplicate);
    assert_eq!(applied(0).balance_after, 47 * C);
    assert!(applied(1).duplicate);
    assert_eq!(applied(1).entry_id, first_receipt.entry_id);
    assert_eq!(applied(1).balance_after, 49 * C);
    assert_eq!(code(2), ErrorCode::KeyConflict);
    assert_eq!(code(3), ErrorCode::UnknownUser);
    assert_eq!(code(4), ErrorCode::Forbidden);
    assert!(!applied(5).duplicate);
    assert_eq!(applied(5).balance_after, 44 * C);
    assert!(applied(6).duplicate);
    assert_eq!(applied(6).entry_id, applied(0).entry_id);
    assert_eq!(code(7), ErrorCode::InvalidAmount);

    // Sent again one by one, every debit gets the same answer (the new ones
    // are now repeats of what the frame wrote).
    for (i, d1) in frame.iter().enumerate() {
        match (node.call(AccountOp::Debit(d1.clone())).await, &outcomes[i]) {
            (Ok(AccountReply::Charged(alone)), Ok(framed)) => {
                assert!(alone.duplicate, "{i}");
                assert_eq!(alone.entry_id, framed.entry_id, "{i}");
                assert_eq!(alone.balance_after, framed.balance_after, "{i}");
            }
            (alone, Err(framed)) => assert_eq!(code_of(alone), framed.code, "{i}"),
            (alone, framed) => panic!("{i}: alone {alone:?}, in the frame {framed:?}"),
        }
    }
    // Three debits written: the first alone, two in the frame.
    assert_eq!(d.entry_count(), 1 + 3);
    assert_eq!(d.balance("alice"), 44 * C);
    let audit = d.admin(&["audit"]);
    audit.ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_or_oversized_frame_or_one_from_a_user_is_refused_whole() {
    let d = Accountd::start().await;
    d.admin(&["create", "alice", "--initial", "50"]).ok();
    let mut node = d.client(Role::Node, "n1").await;
    let empty = node.call(AccountOp::Debits(Vec::new())).await;
    assert_eq!(code_of(empty), ErrorCode::Malformed);
    let over: Vec<Debit> = (0..=MAX_DEBITS_PER_FRAME as u64)
        .map(|s| debit("n1", "j", s, "alice", 1))
        .collect();
    match node.call(AccountOp::Debits(over)).await {
        Err(clients::account::ClientError::Server(e)) => {
            assert_eq!(e.code, ErrorCode::Malformed);
            assert!(
                e.message.contains(&format!("1 to {MAX_DEBITS_PER_FRAME}")),
                "{e}"
            );
        }
        other => panic!("{other:?}"),
    }
    let full: Vec<Debit> = (0..MAX_DEBITS_PER_FRAME as u64)
        .map(|s| debit("n1", "j", s, "alice", 1))
        .collect();
    let outcomes = node.debits(full).await.unwrap();
    assert!(outcomes.iter().all(|o| matches!(o, Ok(r) if !r.duplicate)));
    let mut user = d.client(Role::User, "alice").await;
    let refused = user
        .call(AccountOp::Debits(vec![debit("alice", "j", 1, "alice", 1)]))
        .await;
    assert_eq!(code_of(refused), ErrorCode::Forbidden);
    assert_eq!(d.entry_count(), 1 + MAX_DEBITS_PER_FRAME as i64);
    assert_eq!(d.balance("alice"), 50 * C - MAX_DEBITS_PER_FRAME as i64);
}
