//! vexecd as a service: it announces itself on the group, lists the
//! selectors and account services it hears, works on the unicast path with
//! multicast off, serves any certificate of the cluster and refuses others,
//! refuses to start without a `[discovery]` table or with another's
//! certificate, and stops cleanly on SIGTERM.

use std::net::UdpSocket;
use std::time::Duration;

use certs::Role;
use certs::testing::TestPki;
use clients::selector::SelectorClient;
use discovery::net::Receiver;
use proto::announce::{Announcement, Kind};
use proto::select::ServiceKind;

use crate::util::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn it_announces_itself_on_the_group_and_lists_services() {
    let cfg = loopback();
    let listener = Receiver::bind(&cfg, None).unwrap();
    let d = Vexecd::start(&Spec::new(cfg.clone()));
    let me = tokio::time::timeout(PATIENCE, async {
        loop {
            let heard = listener.recv().await.unwrap();
            if let Ok(a) = Announcement::decode(&heard.bytes)
                && a.kind == Kind::Selector
            {
                return a;
            }
        }
    })
    .await
    .expect("vexecd's announcement on the group");
    assert_eq!(me.name, SELECTOR);
    assert_eq!(me.addr.to_string(), d.addr);
    assert_eq!(me.period_ms, 500);

    let mut account = node("accountd", 7071, 0, 10_000);
    account.kind = Kind::Account;
    multicast(&cfg, &account.encode().unwrap()).await;
    let mut c = d.client().await;
    let mut listed = Vec::new();
    let mut both = false;
    for _ in 0..200 {
        listed = c.services().await.unwrap();
        both = listed.len() == 2;
        if both {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(both, "{listed:?}; log:\n{}", d.log());
    assert_eq!(
        (listed[0].kind, listed[0].name.as_str()),
        (ServiceKind::Selector, SELECTOR)
    );
    assert_eq!(listed[0].addr.to_string(), d.addr);
    assert_eq!(
        (listed[1].kind, listed[1].name.as_str()),
        (ServiceKind::Account, "accountd")
    );
    // Services are not nodes.
    assert_eq!(nodes(&d, None).await.total, 0);
    let startup = d.log();
    assert!(
        startup.contains("listening on")
            && startup.contains(&format!("{}:{}", cfg.group, cfg.port)),
        "{startup}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_unicast_path_works_with_multicast_off() {
    let peer = UdpSocket::bind("127.0.0.1:0").unwrap();
    peer.set_read_timeout(Some(PATIENCE)).unwrap();
    let mut cfg = loopback();
    cfg.multicast = false;
    cfg.unicast = vec![peer.local_addr().unwrap()];
    let d = Vexecd::start(&Spec::new(cfg.clone()));
    // Sent on the group: nobody listens there.
    let mut on_group = cfg.clone();
    on_group.multicast = true;
    on_group.unicast.clear();
    multicast(
        &on_group,
        &node("by-group", 7440, 1, 10_000).encode().unwrap(),
    )
    .await;
    send_to(
        d.udp.unwrap(),
        &node("by-unicast", 7441, 1, 10_000).encode().unwrap(),
    );
    assert!(eventually(|| async { nodes(&d, None).await.total >= 1 }).await);
    assert_eq!(names(&nodes(&d, None).await), ["by-unicast"]);
    // Its own announcement goes to the unicast peer.
    let mut buf = [0u8; 2048];
    let (n, _) = peer
        .recv_from(&mut buf)
        .expect("vexecd's announcement by unicast");
    let a = Announcement::decode(&buf[..n]).unwrap();
    assert_eq!((a.kind, a.name.as_str()), (Kind::Selector, SELECTOR));
    assert!(d.log().contains("unicast on"), "{}", d.log());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn any_cluster_certificate_is_served_and_others_are_refused() {
    let d = Vexecd::start(&Spec::new(loopback()));
    for (role, name) in [
        (Role::User, USER),
        (Role::Node, "n7"),
        (Role::Admin, "admin1"),
        (Role::Service, "accountd"),
    ] {
        let mut c = d.client_as(&connector(role, name)).await;
        c.stats()
            .await
            .unwrap_or_else(|e| panic!("{role} {name}: {e}"));
    }
    let tls = pki().tls_paths(Role::User, USER);
    let other = TestPki::new();
    let stranger = other.tls_paths(Role::User, USER);
    for (what, conn) in [
        ("no certificate", raw_connector(&tls.ca, None)),
        (
            "another CA's certificate",
            raw_connector(&tls.ca, Some((&stranger.cert, &stranger.key))),
        ),
    ] {
        let served = match SelectorClient::connect(&d.addr, &conn, SELECTOR, PATIENCE).await {
            Err(_) => false,
            Ok(mut c) => c.stats().await.is_ok(),
        };
        assert!(!served, "a client with {what} was served");
    }
    // The client checks the selector's name too.
    let wrong =
        SelectorClient::connect(&d.addr, &connector(Role::User, USER), "vexecd-x", PATIENCE).await;
    assert!(wrong.is_err(), "a selector of another name was accepted");
    assert!(
        eventually(|| async { d.log().matches("TLS handshake refused").count() >= 2 }).await,
        "{}",
        d.log()
    );
    d.client().await.stats().await.unwrap();
}

#[test]
fn it_refuses_to_start_without_discovery_or_with_another_certificate() {
    let spec = Spec::new(loopback());
    let full = spec.toml();
    let no_discovery = full.split("\n[discovery]").next().unwrap();
    let (status, err) = run_to_exit(no_discovery);
    assert!(!status.success());
    assert!(err.contains("no [discovery] table"), "{err}");

    let renamed = full.replace(&format!("name = \"{SELECTOR}\""), "name = \"vexecd-other\"");
    let (status, err) = run_to_exit(&renamed);
    assert!(!status.success());
    assert!(err.contains("configured as service vexecd-other"), "{err}");
}

#[test]
fn sigterm_stops_it_cleanly() {
    let mut d = Vexecd::start(&Spec::new(loopback()));
    std::thread::sleep(Duration::from_millis(200));
    let status = d.stop();
    assert!(status.success(), "{status}; log:\n{}", d.log());
    assert!(d.log().contains("vexecd stopped"), "{}", d.log());
}
