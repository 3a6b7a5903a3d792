//! Bad input: malformed, oversized, foreign-cluster and stale datagrams are
//! dropped and counted while vexecd keeps answering; bad requests get error
//! replies on a connection that stays usable; a broken frame ends that
//! connection only; connections are capped and idle ones closed.

use std::time::Duration;

use proto::announce::MAX_DATAGRAM;
use proto::select::{MAX_SELECTOR_REQUEST, SelectQuery, SelectorErrorCode};
use vexecd::rng::{RandomSource, Rng, SeedableRng, SplitMix64};

use crate::util::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_datagrams_are_dropped_counted_and_survived() {
    let cfg = loopback();
    let mut d = Vexecd::start(&Spec::new(cfg.clone()));
    let udp = d.udp.unwrap();
    let mut good = node("n1", 7430, 1_000_000, 10_000);
    good.seq = 5;
    send_to(udp, &good.encode().unwrap());
    assert!(eventually(|| async { nodes(&d, None).await.total == 1 }).await);
    let before = stats(&d).await;

    // Malformed, twice: not an announcement at all, and a good one cut short.
    send_to(udp, b"hello, selector");
    let bytes = good.encode().unwrap();
    send_to(udp, &bytes[..bytes.len() - 3]);
    // Oversized (by multicast too: both paths count).
    multicast(&cfg, &vec![0x5a; MAX_DATAGRAM + 300]).await;
    // Another cluster's node.
    let mut foreign = node("n2", 7431, 1, 10_000);
    foreign.cluster = "elsewhere".into();
    send_to(udp, &foreign.encode().unwrap());
    // An older sequence number of n1, claiming a lower price.
    let mut stale = good.clone();
    stale.seq = 4;
    if let proto::announce::Kind::Node(s) = &mut stale.kind {
        s.price = 1;
    }
    send_to(udp, &stale.encode().unwrap());

    let counted = eventually(|| async {
        let s = stats(&d).await;
        s.malformed == before.malformed + 2
            && s.oversized == before.oversized + 1
            && s.foreign_cluster == before.foreign_cluster + 1
            && s.stale == before.stale + 1
    })
    .await;
    assert!(counted, "{:?}; log:\n{}", stats(&d).await, d.log());
    let list = nodes(&d, None).await;
    assert_eq!(names(&list), ["n1"]);
    assert_eq!(
        list.nodes[0].status.price, 1_000_000,
        "the stale datagram changed n1"
    );

    // A burst of garbage: random bytes, and good datagrams with bytes flipped.
    let before = stats(&d).await;
    let mut rng = SplitMix64::seed_from_u64(11);
    for i in 0..500 {
        let mut b = if i % 2 == 0 {
            let len = rng.below(MAX_DATAGRAM + 50);
            (0..len).map(|_| rng.next_u64() as u8).collect::<Vec<u8>>()
        } else {
            bytes.clone()
        };
        if !b.is_empty() {
            let at = rng.below(b.len());
            b[at] ^= 1 + rng.below(255) as u8;
        }
        send_to(udp, &b);
    }
    let total = |s: &proto::select::SelectorStats| {
        s.accepted + s.malformed + s.oversized + s.foreign_cluster + s.stale + s.table_full
    };
    // Every datagram is accounted for (vexecd's own announcements on the
    // group are accepted too, hence at least).
    let all = eventually(|| async { total(&stats(&d).await) >= total(&before) + 500 }).await;
    assert!(all, "{:?} after {before:?}", stats(&d).await);
    assert!(d.alive(), "vexecd died; log:\n{}", d.log());
    let mut c = d.client().await;
    assert!(
        !c.select(SelectQuery::new(1, "lowest-price"))
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_request_is_answered_and_a_broken_frame_ends_only_its_connection() {
    let cfg = loopback();
    let d = Vexecd::start(&Spec::new(cfg.clone()));
    let mut c = d.client().await;
    // A frame whose body is no request.
    c.send_raw(&[0, 0, 0, 3, 0xff, 0xff, 0xff]).await.unwrap();
    let r = c.read_response().await.unwrap().expect("an answer");
    assert_eq!(r.result.unwrap_err().code, SelectorErrorCode::BadRequest);
    // The connection is still in step.
    c.stats().await.unwrap();

    // A frame over the request limit: answered, then that connection ends.
    let mut other = d.client().await;
    let len = (MAX_SELECTOR_REQUEST as u32 + 1).to_be_bytes();
    other.send_raw(&len).await.unwrap();
    let r = other.read_response().await.unwrap().expect("an answer");
    assert_eq!(r.result.unwrap_err().code, SelectorErrorCode::BadRequest);
    assert!(
        !matches!(other.read_response().await, Ok(Some(_))),
        "the connection stayed open"
    );
    // Others are untouched.
    c.stats().await.unwrap();
    d.client().await.stats().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_are_capped_per_address_and_idle_ones_closed() {
    let cfg = loopback();
    let mut spec = Spec::new(cfg);
    spec.extra = "max_connections_per_address = 2\nidle_timeout = \"700ms\"\n".into();
    let d = Vexecd::start(&spec);
    let mut a = d.client().await;
    let mut b = d.client().await;
    a.stats().await.unwrap();
    b.stats().await.unwrap();
    // A third from the same address is closed at once.
    let third = clients::selector::SelectorClient::connect(
        &d.addr,
        &connector(certs::Role::User, USER),
        SELECTOR,
        PATIENCE,
    )
    .await;
    match third {
        Err(_) => {}
        Ok(mut c) => assert!(c.stats().await.is_err(), "a third connection was served"),
    }
    // Silence past the idle timeout closes a connection; a slot frees up.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(a.stats().await.is_err(), "an idle connection stayed open");
    assert!(b.stats().await.is_err(), "an idle connection stayed open");
    d.client().await.stats().await.unwrap();
}
