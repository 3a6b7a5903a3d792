//! Per-peer connection caps below the global one: one certificate, or one
//! address (its unfinished TLS handshakes included), cannot take every slot.
//! Regression: a single user certificate could hold all `max_connections`.

use std::net::Ipv4Addr;
use std::time::Duration;

use certs::Role;
use proto::account::*;
use proto::{DEFAULT_MAX_FRAME, Framed};
use testhost::wait::until_async_every;
use tokio::io::AsyncReadExt;

use crate::support::*;

/// How long a slot given back may take to be usable again (the tries 100 ms
/// apart; it was 50 tries, 5 s plus the tries themselves).
const PATIENCE: Duration = Duration::from_secs(10);

#[tokio::test]
async fn one_certificate_cannot_hold_more_than_its_share_of_connections() {
    let d = Accountd::start_with(&["--max-connections-per-identity", "3"]).await;
    let mut held = Vec::new();
    for _ in 0..3 {
        let (r, f) = whoami(d.tls_from(Role::User, "alice", Ipv4Addr::LOCALHOST).await).await;
        assert!(r.is_ok(), "{r:?}");
        held.push(f);
    }
    let (r, mut f) = whoami(d.tls_from(Role::User, "alice", Ipv4Addr::LOCALHOST).await).await;
    let e = r.unwrap_err();
    assert_eq!(e.code, ErrorCode::Unavailable);
    assert!(
        e.message.contains("user alice already holds 3 connections")
            && e.message.contains("max_connections_per_identity"),
        "{e}"
    );
    assert!(matches!(
        f.recv::<AccountResponse>().await,
        Ok(None) | Err(_)
    ));
    // Another certificate from the same address is served.
    let (r, _bob) = whoami(d.tls_from(Role::User, "bob", Ipv4Addr::LOCALHOST).await).await;
    assert!(r.is_ok(), "{r:?}");
    // A slot given back is a slot alice can use again.
    drop(held.pop());
    let served = until_async_every(PATIENCE, Duration::from_millis(100), || async {
        let (r, _f) = whoami(d.tls_from(Role::User, "alice", Ipv4Addr::LOCALHOST).await).await;
        r.is_ok().then_some(())
    })
    .await;
    assert!(served.is_some(), "alice's slot never came back");
}

#[tokio::test]
async fn one_address_cannot_hold_more_than_its_share_even_without_handshaking() {
    let d = Accountd::start_with(&["--max-connections-per-address", "4"]).await;
    let addr: std::net::SocketAddr = d.addr.parse().unwrap();
    let from = |ip: Ipv4Addr| async move {
        let s = tokio::net::TcpSocket::new_v4().unwrap();
        s.bind((ip, 0).into()).unwrap();
        s.connect(addr).await.unwrap()
    };
    let squatter = Ipv4Addr::new(127, 0, 0, 7);
    // Four silent connections that never start TLS hold that address's slots.
    let mut silent = Vec::new();
    for _ in 0..4 {
        silent.push(from(squatter).await);
    }
    // A fifth from the same address is closed at once (retried: accountd may
    // not have accepted all four yet), well before the 10 s handshake limit.
    let mut closed = false;
    for _ in 0..20 {
        let mut tcp = from(squatter).await;
        let mut buf = [0u8; 16];
        if let Ok(Ok(0) | Err(_)) =
            tokio::time::timeout(Duration::from_secs(2), tcp.read(&mut buf)).await
        {
            closed = true;
            break;
        }
    }
    assert!(closed, "a fifth connection from one address was kept");
    // Other addresses are served meanwhile.
    let (r, _f) = whoami(
        d.tls_from(Role::User, "alice", Ipv4Addr::new(127, 0, 0, 8))
            .await,
    )
    .await;
    assert!(r.is_ok(), "{r:?}");
    // Closing the silent ones gives the address its slots back.
    drop(silent);
    let served = until_async_every(PATIENCE, Duration::from_millis(100), || async {
        // Until accountd has seen them close, the handshake itself is cut short.
        let mut f = Framed::new(
            d.try_tls_from(Role::User, "alice", squatter).await.ok()?,
            DEFAULT_MAX_FRAME,
        );
        f.send(&AccountRequest::new(1, AccountOp::WhoAmI))
            .await
            .ok()?;
        match f.recv::<AccountResponse>().await {
            Ok(Some(AccountResponse { result: Ok(_), .. })) => Some(()),
            _ => None,
        }
    })
    .await;
    assert!(served.is_some(), "the address's slots never came back");
}
