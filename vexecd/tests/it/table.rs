//! The node table: window, stale and foreign datagrams, counters, and
//! arbitrary bytes.

use std::time::{Duration, Instant};

use proptest::prelude::*;
use proto::announce::{Kind, MAX_DATAGRAM};
use vexecd::table::{Accepted, ClusterFilter, DropReason, Network, NodeTable, TableConfig};

use crate::common::*;

#[test]
fn keeps_nodes_for_three_periods_then_forgets_them() {
    let t0 = Instant::now();
    let mut table = NodeTable::new(TableConfig::default());
    assert_eq!(
        table.ingest(&datagram(&node("a", 0, status(4, 0, 0))), None, t0),
        Ok(Accepted::New)
    );
    let mut slow = node("b", 0, status(4, 0, 0));
    slow.period_ms = 10_000;
    table.ingest(&datagram(&slow), None, t0).unwrap();
    // Window: three periods of each sender's own period.
    assert!(table.node("a", t0 + Duration::from_millis(6000)).is_some());
    assert!(table.node("a", t0 + Duration::from_millis(6001)).is_none());
    assert!(table.node("b", t0 + Duration::from_secs(29)).is_some());
    assert_eq!(table.nodes(t0 + Duration::from_secs(7)).count(), 1);
    // A fresh announcement keeps it.
    assert_eq!(
        table.ingest(
            &datagram(&node("a", 1, status(4, 0, 0))),
            None,
            t0 + Duration::from_secs(5)
        ),
        Ok(Accepted::Updated)
    );
    assert!(table.node("a", t0 + Duration::from_secs(10)).is_some());
    assert_eq!(table.expire(t0 + Duration::from_secs(40)), 2);
    assert!(table.is_empty());
    assert_eq!(table.counters().stats.forgotten, 2);
}

#[test]
fn a_huge_claimed_period_is_capped() {
    let t0 = Instant::now();
    let mut table = NodeTable::new(TableConfig::default());
    let mut a = node("a", 0, status(1, 0, 0));
    a.period_ms = u32::MAX;
    table.ingest(&datagram(&a), None, t0).unwrap();
    assert!(
        table.node("a", t0 + Duration::from_secs(91)).is_none(),
        "30 s cap times three periods"
    );
}

#[test]
fn stale_and_replayed_datagrams_are_counted_and_ignored() {
    let t0 = Instant::now();
    let mut table = NodeTable::new(TableConfig::default());
    table
        .ingest(&datagram(&node("a", 5, status(4, 7, 0))), None, t0)
        .unwrap();
    let old = datagram(&node("a", 4, status(4, 1, 0)));
    let replay = datagram(&node("a", 5, status(4, 1, 0)));
    for d in [&old, &replay] {
        let e = table.ingest(d, None, t0).unwrap_err();
        assert_eq!(e.reason, DropReason::Stale);
    }
    assert_eq!(table.node("a", t0).unwrap().status().unwrap().price, 7);
    // A restart: larger incarnation, seq from 0.
    let mut restarted = node("a", 0, status(4, 9, 0));
    restarted.incarnation = 101;
    assert_eq!(
        table.ingest(&datagram(&restarted), None, t0),
        Ok(Accepted::Updated)
    );
    // Once forgotten, a sender whose clock went back is believed again.
    let later = t0 + Duration::from_secs(60);
    assert_eq!(table.ingest(&old, None, later), Ok(Accepted::New));
    let c = table.counters();
    assert_eq!((c.stats.accepted, c.stats.stale), (3, 2));
}

#[test]
fn malformed_oversized_and_foreign_datagrams_are_counted_by_reason() {
    let t0 = Instant::now();
    let cluster = ClusterFilter {
        name_suffix: Some(".lab".into()),
        networks: vec![Network {
            addr: "10.1.0.0".parse().unwrap(),
            prefix: 16,
        }],
        ..ClusterFilter::default()
    };
    let mut table = NodeTable::new(TableConfig {
        cluster,
        ..TableConfig::default()
    });
    let good = datagram(&node("n1.lab", 0, status(2, 0, 0)));
    let inside = Some("10.1.2.3".parse().unwrap());
    assert!(table.ingest(&good, inside, t0).is_ok());
    // Foreign: wrong name suffix, source outside, announced address outside.
    let foreign_name = datagram(&node("n1.other", 0, status(2, 0, 0)));
    let mut outside_addr = node("n2.lab", 0, status(2, 0, 0));
    outside_addr.addr = "192.0.2.1:7400".parse().unwrap();
    let mut other_cluster = node("n3.lab", 0, status(2, 0, 0));
    other_cluster.cluster = "another".into();
    let mut bad_summary = node("n4.lab", 0, status(2, 0, 0));
    bad_summary.summary = Some(vec![1, 2, 3]);
    let reasons = [
        (
            table.ingest(&foreign_name, inside, t0),
            DropReason::ForeignCluster,
        ),
        (
            table.ingest(&good, Some("192.0.2.9".parse().unwrap()), t0),
            DropReason::ForeignCluster,
        ),
        (
            table.ingest(&datagram(&outside_addr), inside, t0),
            DropReason::ForeignCluster,
        ),
        (
            table.ingest(&datagram(&other_cluster), inside, t0),
            DropReason::ForeignCluster,
        ),
        (
            table.ingest(&vec![0u8; MAX_DATAGRAM + 1], inside, t0),
            DropReason::Oversized,
        ),
        (table.ingest(b"RXMA", inside, t0), DropReason::Malformed),
        (
            table.ingest(&good[..good.len() - 1], inside, t0),
            DropReason::Malformed,
        ),
        (
            table.ingest(b"GET / HTTP/1.1\r\n", inside, t0),
            DropReason::Malformed,
        ),
        (
            table.ingest(&datagram(&bad_summary), inside, t0),
            DropReason::Malformed,
        ),
    ];
    for (i, (got, want)) in reasons.into_iter().enumerate() {
        assert_eq!(got.unwrap_err().reason, want, "datagram {i}");
    }
    let c = table.counters();
    assert_eq!(
        (
            c.stats.accepted,
            c.stats.foreign_cluster,
            c.stats.oversized,
            c.stats.malformed
        ),
        (1, 4, 1, 4)
    );
    assert_eq!(table.nodes(t0).count(), 1);
}

#[test]
fn a_full_table_drops_new_senders_but_updates_known_ones() {
    let t0 = Instant::now();
    let mut table = NodeTable::new(TableConfig {
        max_entries: 2,
        ..TableConfig::default()
    });
    for (i, name) in ["a", "b", "c"].iter().enumerate() {
        let r = table.ingest(&datagram(&node(name, 0, status(1, 0, 0))), None, t0);
        assert_eq!(r.is_ok(), i < 2);
    }
    assert_eq!(table.counters().stats.table_full, 1);
    assert!(
        table
            .ingest(&datagram(&node("a", 1, status(1, 0, 0))), None, t0)
            .is_ok()
    );
    // Once the old ones expire, room is made.
    assert!(
        table
            .ingest(
                &datagram(&node("c", 0, status(1, 0, 0))),
                None,
                t0 + Duration::from_secs(60)
            )
            .is_ok()
    );
}

#[test]
fn selectors_and_account_services_are_kept_apart_from_nodes() {
    let t0 = Instant::now();
    let mut table = NodeTable::new(TableConfig::default());
    let mut sel = node("same", 0, status(1, 0, 0));
    sel.kind = Kind::Selector;
    let mut acc = node("same", 0, status(1, 0, 0));
    acc.kind = Kind::Account;
    for a in [node("same", 0, status(1, 0, 0)), sel, acc] {
        table.ingest(&datagram(&a), None, t0).unwrap();
    }
    assert_eq!(table.nodes(t0).count(), 1);
    assert_eq!(table.selectors(t0).count(), 1);
    assert_eq!(table.account_services(t0).count(), 1);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    /// Any bytes at all: no panic, and every datagram is either accepted or
    /// counted under exactly one reason.
    #[test]
    fn arbitrary_bytes_never_panic_and_are_all_accounted(
        datagrams in proptest::collection::vec(
            prop_oneof![
                proptest::collection::vec(any::<u8>(), 0..1400),
                // Valid header, arbitrary body: reaches the decoder's depths.
                proptest::collection::vec(any::<u8>(), 0..200).prop_map(|mut b| {
                    let mut d = b"RXMA\x01".to_vec();
                    d.append(&mut b);
                    d
                }),
            ],
            1..20,
        )
    ) {
        let t0 = Instant::now();
        let mut table = NodeTable::new(TableConfig::default());
        for d in &datagrams {
            let _ = table.ingest(d, None, t0);
        }
        let c = table.counters();
        prop_assert_eq!(c.stats.accepted + c.dropped(), datagrams.len() as u64);
    }

    /// Valid announcements with one byte changed: never a panic.
    #[test]
    fn mutated_announcements_never_panic(pos in 0usize..200, byte in any::<u8>(), seq in any::<u64>()) {
        let t0 = Instant::now();
        let mut d = datagram(&node("node7", seq, status(8, 3_000_000, 8700)));
        let pos = pos % d.len();
        d[pos] = byte;
        let mut table = NodeTable::new(TableConfig::default());
        let _ = table.ingest(&d, None, t0);
        prop_assert_eq!(table.counters().stats.accepted + table.counters().dropped(), 1);
    }
}

#[test]
fn expiring_some_nodes_keeps_the_others_findable_and_updatable() {
    let t0 = Instant::now();
    let mut table = NodeTable::new(TableConfig::default());
    for i in 0..50u32 {
        table
            .ingest(
                &datagram(&node(&format!("n{i}"), 0, status(1, i as i64, 0))),
                None,
                t0,
            )
            .unwrap();
    }
    // Odd nodes announce again later; even ones fall silent.
    let t1 = t0 + Duration::from_secs(5);
    for i in (1..50u32).step_by(2) {
        table
            .ingest(
                &datagram(&node(&format!("n{i}"), 1, status(1, i as i64, 0))),
                None,
                t1,
            )
            .unwrap();
    }
    assert_eq!(table.expire(t0 + Duration::from_secs(8)), 25);
    for i in 0..50u32 {
        let e = table.node(&format!("n{i}"), t1);
        assert_eq!(e.is_some(), i % 2 == 1, "n{i}");
        if let Some(e) = e {
            assert_eq!(
                e.status().unwrap().price,
                i as i64,
                "n{i} kept its own record"
            );
        }
    }
    // An update after the shuffle lands on the right record.
    table
        .ingest(&datagram(&node("n7", 2, status(1, 700, 0))), None, t1)
        .unwrap();
    assert_eq!(table.node("n7", t1).unwrap().status().unwrap().price, 700);
    assert_eq!(table.node("n9", t1).unwrap().status().unwrap().price, 9);
}

#[test]
fn a_summary_travels_in_the_announcement_and_stays_until_replaced() {
    use vexecd::profile::SLOTS;
    use vexecd::profile::summary::Summary;
    let t0 = Instant::now();
    let mut table = NodeTable::new(TableConfig::default());
    let slow = Summary::from_busy(&[0.5; SLOTS], 0.5);
    let mut a = node("n1", 0, status(2, 0, 0));
    a.summary = Some(slow.encode());
    table.ingest(&datagram(&a), None, t0).unwrap();
    let held = |t: &NodeTable| t.node("n1", t0).unwrap().summary.clone();
    assert_eq!(held(&table).as_deref(), Some(&slow));
    // Later announcements without one keep it...
    let b = node("n1", 1, status(2, 0, 0));
    table.ingest(&datagram(&b), None, t0).unwrap();
    assert_eq!(held(&table).as_deref(), Some(&slow));
    // ...and a new one replaces it.
    let fast = Summary::from_busy(&[0.0; SLOTS], 2.0);
    let mut c = node("n1", 2, status(2, 0, 0));
    c.summary = Some(fast.encode());
    table.ingest(&datagram(&c), None, t0).unwrap();
    assert_eq!(held(&table).as_deref(), Some(&fast));
    assert_eq!(table.hot(t0).next().unwrap().1.speed_milli, 2000);
}

#[test]
fn every_instance_of_accountd_and_batchd_is_listed_under_its_own_address() {
    // Two accountd and two batchd on one database: same names, other hosts.
    let t0 = Instant::now();
    let mut table = NodeTable::new(TableConfig::default());
    for (kind, name) in [(Kind::Account, "accountd"), (Kind::Batch, "batchd")] {
        for host in ["10.0.0.9:7071", "10.0.0.10:7071"] {
            let mut a = node(name, 0, status(1, 0, 0));
            a.kind = kind.clone();
            a.addr = host.parse().unwrap();
            table.ingest(&datagram(&a), None, t0).unwrap();
        }
    }
    assert_eq!(table.account_services(t0).count(), 2);
    assert_eq!(table.batch_services(t0).count(), 2);
}

#[test]
fn selectors_sharing_a_name_are_kept_apart_by_address() {
    let t0 = Instant::now();
    let mut table = NodeTable::new(TableConfig::default());
    let mut one = node("vexecd", 0, status(1, 0, 0));
    one.kind = Kind::Selector;
    one.incarnation = 9;
    let mut two = one.clone();
    two.addr = "10.0.0.2:7478".parse().unwrap();
    two.incarnation = 1;
    table.ingest(&datagram(&one), None, t0).unwrap();
    // Another selector of the same name, started earlier: not stale.
    table.ingest(&datagram(&two), None, t0).unwrap();
    assert_eq!(table.selectors(t0).count(), 2);
    one.seq = 1;
    table.ingest(&datagram(&one), None, t0).unwrap();
    assert_eq!(table.counters().stats.stale, 0);
    assert_eq!(table.selectors(t0).count(), 2);
}

#[test]
fn idle_cpus_are_the_nodes_own_measurement_less_its_runnable_jobs() {
    use vexecd::table::idle_milli;
    // A node pinned to one CPU of a busy machine: the machine's load does
    // not make its own idle CPU busy.
    let mut s = status(1, 0, 1500);
    s.idle_milli = 800;
    assert_eq!(idle_milli(&s), 800);
    // A job just started (runnable, announced at once) counts before the
    // next measurement does.
    s.runnable = 1;
    assert_eq!(idle_milli(&s), 0);
    let mut big = status(8, 0, 0);
    big.idle_milli = 7500;
    big.runnable = 2;
    assert_eq!(idle_milli(&big), 6000);
}

fn proving() -> NodeTable {
    NodeTable::new(TableConfig {
        prove_moves: true,
        ..TableConfig::default()
    })
}

#[test]
fn with_proof_required_a_move_is_held_and_the_node_stays_where_it_was() {
    let t0 = Instant::now();
    let mut table = proving();
    let real = node("n1", 0, status(2, 0, 0));
    table.ingest(&datagram(&real), None, t0).unwrap();
    let real_addr = real.addr;
    // A forged move: a higher sequence number and another address.
    let mut forged = node("n1", 9, status(2, 0, 0));
    forged.addr = "127.0.0.1:9".parse().unwrap();
    let src = Some("10.9.9.9".parse().unwrap());
    for _ in 0..3 {
        let got = table.ingest(&datagram(&forged), src, t0);
        assert_eq!(got.unwrap_err().reason, DropReason::Unproven);
    }
    assert_eq!(table.addr_of("n1", t0), Some(real_addr));
    assert_eq!(table.counters().unproven, 3);
    // Held once, however often it was sent; the real node's next announcement
    // (lower sequence than the forgery, same address) is still believed.
    assert_eq!(table.take_unproven(), vec![(forged.clone(), src)]);
    assert!(table.take_unproven().is_empty());
    assert_eq!(
        table.ingest(&datagram(&node("n1", 1, status(2, 0, 0))), None, t0),
        Ok(Accepted::Updated)
    );
    // Once proven, the move is applied.
    assert_eq!(
        table.ingest_proven(forged.clone(), src, t0),
        Ok(Accepted::Updated)
    );
    assert_eq!(table.addr_of("n1", t0), Some(forged.addr));
    // A restart (new incarnation) at the same address is a move too.
    let mut restarted = node("n1", 0, status(2, 0, 0));
    restarted.addr = forged.addr;
    restarted.incarnation = forged.incarnation + 1;
    let got = table.ingest(&datagram(&restarted), None, t0);
    assert_eq!(got.unwrap_err().reason, DropReason::Unproven);
}

#[test]
fn without_proof_required_moves_are_believed_and_new_nodes_never_wait() {
    let t0 = Instant::now();
    let mut table = NodeTable::new(TableConfig::default());
    table
        .ingest(&datagram(&node("n1", 0, status(2, 0, 0))), None, t0)
        .unwrap();
    let mut moved = node("n1", 1, status(2, 0, 0));
    moved.addr = "127.0.0.1:9".parse().unwrap();
    assert_eq!(
        table.ingest(&datagram(&moved), None, t0),
        Ok(Accepted::Updated)
    );
    assert_eq!(table.addr_of("n1", t0), Some(moved.addr));
    // With proof required, a node not known (or forgotten) is listed at once.
    let mut table = proving();
    assert_eq!(
        table.ingest(&datagram(&node("n2", 0, status(2, 0, 0))), None, t0),
        Ok(Accepted::New)
    );
    let late = t0 + Duration::from_secs(60);
    assert_eq!(
        table.ingest(&datagram(&moved), None, late),
        Ok(Accepted::New)
    );
}

#[test]
fn held_moves_are_bounded() {
    let t0 = Instant::now();
    let mut table = proving();
    for i in 0..(vexecd::table::MAX_UNPROVEN as u64 + 50) {
        let name = format!("n{i}");
        table
            .ingest(&datagram(&node(&name, 0, status(1, 0, 0))), None, t0)
            .unwrap();
        let mut moved = node(&name, 1, status(1, 0, 0));
        moved.addr = "127.0.0.1:9".parse().unwrap();
        let _ = table.ingest(&datagram(&moved), None, t0);
    }
    assert_eq!(table.take_unproven().len(), vexecd::table::MAX_UNPROVEN);
}

#[test]
fn a_stale_proof_changes_nothing() {
    let t0 = Instant::now();
    let mut table = proving();
    let mut moved = node("n1", 1, status(2, 0, 0));
    moved.addr = "127.0.0.1:9".parse().unwrap();
    table
        .ingest(&datagram(&node("n1", 5, status(2, 0, 0))), None, t0)
        .unwrap();
    // The proof of an announcement older than what is held arrives late.
    let got = table.ingest_proven(moved, None, t0);
    assert_eq!(got.unwrap_err().reason, DropReason::Stale);
    assert_ne!(table.addr_of("n1", t0).unwrap().port(), 9);
}
