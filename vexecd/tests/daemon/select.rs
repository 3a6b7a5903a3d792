//! Listing and selecting: every node heard is listed, `lowest-price` picks
//! the cheapest, `history` the earliest predicted completion, and a node not
//! heard again is forgotten after its window.

use std::time::{Duration, Instant};

use clients::selector::ClientError;
use proto::select::{SelectQuery, SelectorErrorCode};

use crate::util::*;

fn code(r: Result<Vec<proto::select::NodeView>, ClientError>) -> SelectorErrorCode {
    match r {
        Err(ClientError::Server(e)) => e.code,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_are_listed_and_lowest_price_picks_the_cheapest() {
    let cfg = loopback();
    let d = Vexecd::start(&Spec::new(cfg.clone()));
    for (i, (name, price)) in [("n3", 3_000_000), ("n1", 5_000_000), ("n2", 1_000_000)]
        .into_iter()
        .enumerate()
    {
        let a = node(name, 7400 + i as u16, price, 5000);
        multicast(&cfg, &a.encode().unwrap()).await;
    }
    let heard = eventually(|| async { nodes(&d, None).await.total == 3 }).await;
    assert!(heard, "three nodes not listed; log:\n{}", d.log());
    let list = nodes(&d, None).await;
    assert_eq!(names(&list), ["n1", "n2", "n3"]);
    assert_eq!(list.nodes[1].status.price, 1_000_000);
    assert_eq!(list.nodes[1].addr.port(), 7402);
    assert!(list.nodes.iter().all(|n| n.predicted_ms.is_none()));

    let mut c = d.client().await;
    let picked = c.select(SelectQuery::new(2, "lowest-price")).await.unwrap();
    let picked: Vec<_> = picked.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(picked, ["n2", "n3"]);
    let mut q = SelectQuery::new(1, "lowest-price");
    q.exclude = vec!["n2".into()];
    assert_eq!(c.select(q).await.unwrap()[0].name, "n3");

    // Refusals are answered and the connection stays usable.
    let mut capped = SelectQuery::new(2, "lowest-price");
    capped.max_price = Some(2_000_000);
    assert_eq!(
        code(c.select(capped).await),
        SelectorErrorCode::NotEnoughNodes
    );
    assert_eq!(
        code(c.select(SelectQuery::new(1, "cheapest-please")).await),
        SelectorErrorCode::UnknownPolicy
    );
    assert_eq!(
        code(c.select(SelectQuery::new(0, "lowest-price")).await),
        SelectorErrorCode::BadRequest
    );
    assert_eq!(
        code(c.select(SelectQuery::new(1, "history")).await),
        SelectorErrorCode::NeedsLength
    );
    assert_eq!(
        c.select(SelectQuery::new(3, "random")).await.unwrap().len(),
        3
    );
    let s = c.stats().await.unwrap();
    assert_eq!((s.nodes, s.selects), (3, 3), "{s:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_picks_the_earliest_predicted_completion() {
    let cfg = loopback();
    let d = Vexecd::start(&Spec::new(cfg.clone()));
    // The cheapest node is the busiest all week.
    for (i, (name, price, busy)) in [
        ("busy", 1_000_000, 0.9),
        ("half", 3_000_000, 0.5),
        ("idle", 5_000_000, 0.0),
    ]
    .into_iter()
    .enumerate()
    {
        let mut a = node(name, 7410 + i as u16, price, 5000);
        a.summary = Some(summary(busy));
        multicast(&cfg, &a.encode().unwrap()).await;
    }
    let heard = eventually(|| async { nodes(&d, None).await.total == 3 }).await;
    assert!(heard, "three nodes not listed; log:\n{}", d.log());

    let hour = 3_600_000;
    let mut c = d.client().await;
    let mut q = SelectQuery::new(3, "history");
    q.expected_cpu_ms = Some(hour);
    let picked = c.select(q).await.unwrap();
    let order: Vec<_> = picked.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(order, ["idle", "half", "busy"]);
    let p: Vec<u64> = picked.iter().map(|n| n.predicted_ms.unwrap()).collect();
    assert!(p[0] < p[1] && p[1] < p[2], "{p:?}");
    // An idle node of speed 1 takes the CPU length itself.
    assert!(p[0].abs_diff(hour) < hour / 100, "{p:?}");
    assert_eq!(picked[0].speed_milli, Some(1000));
    let cheapest = c.select(SelectQuery::new(1, "lowest-price")).await.unwrap();
    assert_eq!(cheapest[0].name, "busy");

    // The listing predicts the same for the given length.
    let list = nodes(&d, Some(hour)).await;
    assert_eq!(names(&list), ["busy", "half", "idle"]);
    let listed: Vec<u64> = list.nodes.iter().map(|n| n.predicted_ms.unwrap()).collect();
    assert!(listed[2] < listed[1] && listed[1] < listed[0], "{listed:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_not_heard_again_is_forgotten_after_its_window() {
    let cfg = loopback();
    let d = Vexecd::start(&Spec::new(cfg.clone()));
    let udp = d.udp.unwrap();
    send_to(udp, &node("steady", 7420, 1, 10_000).encode().unwrap());
    // Window: three periods of 200 ms.
    let sent = Instant::now();
    send_to(udp, &node("brief", 7421, 1, 200).encode().unwrap());
    let listed = eventually(|| async { nodes(&d, None).await.total == 2 }).await;
    assert!(listed, "log:\n{}", d.log());
    let gone = eventually(|| async { names(&nodes(&d, None).await) == ["steady"] }).await;
    assert!(gone, "brief still listed; log:\n{}", d.log());
    assert!(
        sent.elapsed() >= Duration::from_millis(600),
        "forgotten early"
    );
    // The expiry pass (once per vexecd's period) counts it.
    assert!(eventually(|| async { stats(&d).await.forgotten == 1 }).await);
    // Heard again: listed again.
    let mut again = node("brief", 7421, 1, 200);
    again.seq = 1;
    send_to(udp, &again.encode().unwrap());
    assert!(eventually(|| async { nodes(&d, None).await.total == 2 }).await);
}
