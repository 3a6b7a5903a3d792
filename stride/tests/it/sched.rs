//! Behaviour of the stride scheduler: errors, tie-breaking, and events that must leave no
//! trace (neither windfall nor loss).

use stride::{ClientId, SchedError, Scheduler};

fn run(s: &mut Scheduler, rounds: u64) -> Vec<Vec<ClientId>> {
    let mut out = Vec::new();
    (0..rounds)
        .map(|_| {
            s.run_quantum(&mut out);
            out.clone()
        })
        .collect()
}

fn three_clients() -> Scheduler {
    let mut s = Scheduler::new(1).unwrap();
    s.join(ClientId(1), 5, 1).unwrap();
    s.join(ClientId(2), 3, 1).unwrap();
    s.join(ClientId(3), 2, 1).unwrap();
    s
}

#[test]
fn refusals_are_typed() {
    assert_eq!(Scheduler::new(0).unwrap_err(), SchedError::NoCpus);
    let mut s = Scheduler::new(2).unwrap();
    s.join(ClientId(1), 1, 1).unwrap();
    assert_eq!(
        s.join(ClientId(1), 1, 1),
        Err(SchedError::Duplicate(ClientId(1)))
    );
    assert_eq!(s.leave(ClientId(9)), Err(SchedError::Unknown(ClientId(9))));
    assert_eq!(
        s.set_demand(ClientId(9), 1),
        Err(SchedError::Unknown(ClientId(9)))
    );
    assert!(matches!(
        s.set_tickets(ClientId(1), 0),
        Err(SchedError::Tickets { tickets: 0, .. })
    ));
    assert!(matches!(
        s.join(ClientId(2), u64::MAX, 1),
        Err(SchedError::Tickets { .. })
    ));
    let e = s.set_tickets(ClientId(1), 0).unwrap_err().to_string();
    assert!(e.contains("client 1") && e.contains("tickets"), "{e}");
}

#[test]
fn equal_passes_go_to_the_lower_id() {
    let mut s = Scheduler::new(1).unwrap();
    s.join(ClientId(7), 1, 1).unwrap();
    s.join(ClientId(3), 1, 1).unwrap();
    let order: Vec<u64> = run(&mut s, 4).into_iter().map(|r| r[0].0).collect();
    assert_eq!(order, vec![3, 7, 3, 7]);
}

#[test]
fn leaving_and_rejoining_at_once_changes_nothing() {
    let mut plain = three_clients();
    let mut churned = three_clients();
    assert_eq!(run(&mut plain, 37), run(&mut churned, 37));
    let gone = churned.leave(ClientId(2)).unwrap();
    churned.rejoin(gone, 1).unwrap();
    churned.set_tickets(ClientId(1), 5).unwrap();
    churned.set_demand(ClientId(3), 0).unwrap();
    churned.set_demand(ClientId(3), 1).unwrap();
    assert_eq!(run(&mut plain, 500), run(&mut churned, 500));
}

#[test]
fn sleeping_clients_run_nothing_and_get_no_credit_for_it() {
    let mut s = three_clients();
    run(&mut s, 100);
    s.set_demand(ClientId(1), 0).unwrap();
    let before = s.received(ClientId(1)).unwrap();
    let rounds = run(&mut s, 1000);
    assert!(rounds.iter().all(|r| !r.contains(&ClientId(1))));
    s.set_demand(ClientId(1), 1).unwrap();
    let base: Vec<u64> = s.clients().map(|c| c.received).collect();
    run(&mut s, 1000);
    let got: Vec<u64> = s
        .clients()
        .zip(&base)
        .map(|(c, b)| c.received - b)
        .collect();
    // Back to 5:3:2 at once: no burst to "catch up" on the time it slept.
    assert!(
        got[0].abs_diff(500) <= 2 && got[1].abs_diff(300) <= 2,
        "{got:?}"
    );
    assert_eq!(s.received(ClientId(1)).unwrap() - before, got[0]);
}

#[test]
fn lag_of_a_saturated_job_is_not_banked() {
    // A holds most tickets but has one thread: on two CPUs it gets one CPU, far less than its
    // tickets say, and B gets the other. When C arrives, A must not use its "unspent" pass to
    // starve anyone, and B must not pay for the leftovers it used.
    let mut s = Scheduler::new(2).unwrap();
    s.join(ClientId(1), 100, 1).unwrap();
    s.join(ClientId(2), 1, 1).unwrap();
    run(&mut s, 10_000);
    assert_eq!(s.received(ClientId(1)), Some(10_000));
    assert_eq!(s.received(ClientId(2)), Some(10_000));
    s.join(ClientId(3), 50, 1).unwrap();
    let before: Vec<u64> = s.clients().map(|c| c.received).collect();
    run(&mut s, 1510);
    let got: Vec<u64> = s
        .clients()
        .zip(&before)
        .map(|(c, b)| c.received - b)
        .collect();
    // Water filling: A saturated at 1 CPU; B and C share one CPU 1:50.
    assert_eq!(got[0], 1510);
    assert!(got[1].abs_diff(30) <= 2, "B got {} of ~30", got[1]);
    assert!(got[2].abs_diff(1480) <= 2, "C got {} of ~1480", got[2]);
}

#[test]
fn a_ticket_change_takes_effect_at_once() {
    let mut s = Scheduler::new(1).unwrap();
    s.join(ClientId(1), 1, 1).unwrap();
    s.join(ClientId(2), 1, 1).unwrap();
    run(&mut s, 101);
    s.set_tickets(ClientId(1), 4).unwrap();
    let before: Vec<u64> = s.clients().map(|c| c.received).collect();
    run(&mut s, 1000);
    let got: Vec<u64> = s
        .clients()
        .zip(&before)
        .map(|(c, b)| c.received - b)
        .collect();
    assert!(
        got[0].abs_diff(800) <= 2 && got[1].abs_diff(200) <= 2,
        "{got:?}"
    );
}

#[test]
fn a_multithreaded_client_fills_idle_cpus_but_never_more_than_its_threads() {
    let mut s = Scheduler::new(4).unwrap();
    s.join(ClientId(1), 1, 3).unwrap();
    s.join(ClientId(2), 1000, 1).unwrap();
    for round in run(&mut s, 100) {
        assert_eq!(round.len(), 4);
        assert_eq!(round.iter().filter(|&&c| c == ClientId(1)).count(), 3);
    }
    s.set_demand(ClientId(2), 0).unwrap();
    for round in run(&mut s, 10) {
        assert_eq!(round, vec![ClientId(1); 3], "one CPU idle");
    }
}
