//! Resource limits: connections over `max_connections` are closed at once (the
//! listener keeps serving), and a user over `max_ranks_per_user` is refused with `Busy`.

use std::time::Duration;

use proto::node::{ErrorCode, ExitStatus, ToNode};
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

use crate::util::*;

/// Whether the daemon closes a fresh TCP connection (without any TLS) within `limit`.
async fn closed_at_once(addr: &str, limit: Duration) -> bool {
    let mut tcp = TcpStream::connect(addr).await.unwrap();
    let mut buf = [0u8; 64];
    match tokio::time::timeout(limit, tcp.read(&mut buf)).await {
        Ok(Ok(0)) | Ok(Err(_)) => true,
        Ok(Ok(_)) | Err(_) => false,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_over_the_limit_are_closed_at_once_and_slots_come_back() {
    if !can_run("max_connections") {
        return;
    }
    let d = Daemon::start("maxconn", &["--max-connections", "2"]);
    // Two silent connections sit in their TLS handshakes and hold both slots.
    let hold1 = TcpStream::connect(&d.addr).await.unwrap();
    let hold2 = TcpStream::connect(&d.addr).await.unwrap();
    // Far below the 10 s a silent handshake may take, a third one is closed at once
    // (retried: the daemon may not have accepted the two holders yet).
    let mut refused = false;
    for _ in 0..20 {
        if closed_at_once(&d.addr, Duration::from_secs(2)).await {
            refused = true;
            break;
        }
    }
    assert!(refused, "a third connection was kept; log:\n{}", d.log());
    assert!(
        eventually(PATIENCE, || d.log().contains("connection limit reached")),
        "{}",
        d.log()
    );
    // Several refusals in a row log one warning, not one each.
    for _ in 0..5 {
        assert!(closed_at_once(&d.addr, Duration::from_secs(2)).await);
    }
    assert_eq!(
        d.log().matches("connection limit reached").count(),
        1,
        "{}",
        d.log()
    );
    // Closing the held connections frees their slots for a real session (once the
    // daemon has seen them close; until then a new connection is still refused).
    drop((hold1, hold2));
    let mut session = None;
    for _ in 0..50 {
        session = d.try_user().await;
        if session.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut c = session.unwrap_or_else(|| panic!("slots never came back; log:\n{}", d.log()));
    c.start(launch(&["/bin/echo", "served"])).await;
    let out = c.outcome().await;
    assert_eq!(out.stdout, b"served\n");
    assert_eq!(out.status(), ExitStatus::Code(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_over_the_rank_limit_is_refused_busy_until_a_rank_ends() {
    if !can_run("max_ranks_per_user") {
        return;
    }
    let d = Daemon::start("maxranks", &["--max-ranks-per-user", "1"]);
    let mut first = d.user().await;
    first.start(launch(&["/bin/cat"])).await;
    let mut second = d.user().await;
    let e = second.refused(launch(&["/bin/true"])).await;
    assert_eq!(e.code, ErrorCode::Busy, "{e:?}");
    assert!(e.message.contains("max_ranks_per_user"), "{}", e.message);
    assert!(e.message.contains(" 1 "), "{}", e.message);
    assert!(e.message.contains(USER), "{}", e.message);
    assert!(d.job_cgroups().len() <= 1, "{:?}", d.job_cgroups());
    first.send(ToNode::StdinEnd).await;
    assert_eq!(first.outcome().await.status(), ExitStatus::Code(0));
    let out = run(&d, launch(&["/bin/echo", "again"])).await;
    assert_eq!(out.stdout, b"again\n");
}
