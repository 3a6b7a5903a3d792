//! The announcement sockets on real loopback multicast (group joined on
//! 127.0.0.1, TTL 0) and on the unicast path with multicast switched off.

use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::Duration;

use discovery::config::DiscoveryConfig;
use discovery::net::{Receiver, Sender, announce_loop};
use proto::announce::{Announcement, DEFAULT_CLUSTER, Kind};
use tokio::sync::Notify;
use tokio::time::timeout;

/// A group and port of this test's own ([`testhost::net::channel`]), so parallel
/// tests (and test runs) do not hear each other.
fn loopback() -> DiscoveryConfig {
    let own = testhost::net::channel();
    DiscoveryConfig {
        group: own.group,
        port: own.port,
        interface: Ipv4Addr::LOCALHOST,
        ttl: 0,
        ..DiscoveryConfig::default()
    }
}

fn selector(name: &str) -> Announcement {
    Announcement {
        cluster: DEFAULT_CLUSTER.into(),
        name: name.into(),
        addr: "127.0.0.1:7500".parse().unwrap(),
        incarnation: 1,
        seq: 0,
        period_ms: 1000,
        kind: Kind::Selector,
        summary: None,
    }
}

async fn next(r: &Receiver) -> Announcement {
    let heard = timeout(Duration::from_secs(5), r.recv())
        .await
        .expect("an announcement within 5 s")
        .unwrap();
    Announcement::decode(&heard.bytes).unwrap()
}

#[tokio::test]
async fn every_listener_on_the_host_hears_the_group() {
    let config = loopback();
    let a = Receiver::bind(&config, None).unwrap();
    let b = Receiver::bind(&config, None).unwrap();
    let sender = Sender::new(&config).unwrap();
    let report = sender.send(&selector("s1").encode().unwrap()).await;
    assert_eq!((report.sent, report.failed.len()), (1, 0));
    assert_eq!(next(&a).await.name, "s1");
    assert_eq!(next(&b).await.name, "s1");
}

#[tokio::test]
async fn unicast_works_with_multicast_off() {
    let base = loopback();
    let listen = Receiver::bind(
        &DiscoveryConfig {
            multicast: false,
            ..base.clone()
        },
        Some("127.0.0.1:0".parse().unwrap()),
    )
    .unwrap();
    let to = listen.unicast_addr().unwrap();
    let config = DiscoveryConfig {
        multicast: false,
        unicast: vec![to],
        ..base.clone()
    };
    let sender = Sender::new(&config).unwrap();
    assert_eq!(sender.targets(), [to]);
    sender.send(&selector("s2").encode().unwrap()).await;
    let a = next(&listen).await;
    assert_eq!(a.name, "s2");
    // Nothing on the group: a group listener hears nothing.
    let group = Receiver::bind(&base, None).unwrap();
    sender.send(&selector("s2").encode().unwrap()).await;
    assert!(
        timeout(Duration::from_millis(300), group.recv())
            .await
            .is_err()
    );
}

#[tokio::test]
async fn the_loop_announces_periodically_and_at_once_on_change() {
    let config = loopback();
    let listen = Receiver::bind(&config, None).unwrap();
    let sender = Sender::new(&config).unwrap();
    let changed = Arc::new(Notify::new());
    let period = Duration::from_secs(5);
    let task = tokio::spawn(announce_loop(sender, period, changed.clone(), || {
        selector("s3")
    }));
    let first = next(&listen).await;
    assert_eq!((first.seq, first.period_ms), (0, 5000));
    assert!(first.incarnation > 1_600_000_000_000_000, "Unix µs");
    // Long before the period is over, a change is announced.
    let t0 = std::time::Instant::now();
    changed.notify_one();
    let second = next(&listen).await;
    assert_eq!(second.seq, 1);
    assert!(second.supersedes(&first));
    assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
    task.abort();
}

#[test]
fn nothing_to_listen_on_is_an_error() {
    let config = DiscoveryConfig {
        multicast: false,
        ..loopback()
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let _guard = rt.enter();
    let err = Receiver::bind(&config, None).unwrap_err();
    assert!(err.to_string().contains("nothing to listen on"), "{err}");
}

#[tokio::test]
async fn a_client_hears_the_services_it_wants_and_stops_soon_after() {
    let config = loopback();
    let sender = Sender::new(&config).unwrap();
    let changed = Arc::new(Notify::new());
    let period = Duration::from_millis(300);
    let task = tokio::spawn(announce_loop(sender, period, changed, || {
        let mut a = selector("s5");
        a.kind = Kind::Account;
        a
    }));
    let other = tokio::spawn({
        let sender = Sender::new(&config).unwrap();
        announce_loop(sender, period, Arc::new(Notify::new()), || selector("s6"))
    });
    let t0 = std::time::Instant::now();
    let heard = discovery::net::hear(
        &config,
        Duration::from_secs(5),
        Duration::from_millis(100),
        |a| a.kind == Kind::Account,
    )
    .await
    .unwrap();
    assert_eq!(heard.len(), 1, "{heard:?}");
    assert_eq!(
        (heard[0].name.as_str(), &heard[0].kind),
        ("s5", &Kind::Account)
    );
    assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
    // Another cluster's announcements are not heard: nothing, after the limit.
    let foreign = DiscoveryConfig {
        cluster: "elsewhere".into(),
        ..config.clone()
    };
    let none = discovery::net::hear(&foreign, Duration::from_millis(700), Duration::ZERO, |_| {
        true
    })
    .await
    .unwrap();
    assert!(none.is_empty(), "{none:?}");
    task.abort();
    other.abort();
}
