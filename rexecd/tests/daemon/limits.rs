//! Resource limits: connections over `max_connections` are closed at once (the
//! listener keeps serving), one address or one certificate cannot hold every slot, a
//! connection that never authenticates costs no read buffer, and a user over
//! `max_ranks_per_user` is refused with `Busy`.

use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use certs::Role;
use proto::node::{ErrorCode, ExitStatus, FromNode, Hello, ToNode};
use testhost::wait::until_async_every;
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

use crate::util::*;

/// How often a connection refused while the daemon has not yet seen a slot freed
/// is tried again (within [`PATIENCE`]; it was 50 tries 100 ms apart).
const RETRY: Duration = Duration::from_millis(100);

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
        eventually_async(PATIENCE, || async {
            d.log().contains("connection limit reached")
        })
        .await,
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
    let session = until_async_every(PATIENCE, RETRY, || d.try_user()).await;
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

/// A TCP connection to the daemon from the loopback address `source`.
async fn tcp_from(addr: &str, source: Ipv4Addr) -> TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind(SocketAddr::from((source, 0))).unwrap();
    socket.connect(addr.parse().unwrap()).await.unwrap()
}

/// A `/proc/PID/status` field, in KiB.
fn status_kib(pid: i32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"))
}

fn open_fds(pid: i32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .count()
}

/// The number of open descriptors once it has stopped changing over 300 ms (or
/// after 5 s).
async fn settled_fds(pid: i32) -> usize {
    let last = std::cell::Cell::new(None);
    until_async_every(Duration::from_secs(5), Duration::from_millis(300), || {
        let now = open_fds(pid);
        std::future::ready((last.replace(Some(now)) == Some(now)).then_some(now))
    })
    .await
    .unwrap_or_else(|| open_fds(pid))
}

/// Regression: every accepted connection got a 256 KiB read buffer before its TLS
/// handshake, so silent connections that never authenticate reserved 256 KiB each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_that_never_authenticate_cost_no_read_buffer() {
    if !can_run("silent handshakes") {
        return;
    }
    const SILENT: usize = 128;
    let d = Daemon::start("lazybuf", &[]);
    // One real session first, so that the runtime's threads and arenas exist.
    let mut c = d.user().await;
    c.start(launch(&["/bin/echo", "warm"])).await;
    assert_eq!(c.outcome().await.status(), ExitStatus::Code(0));
    let fds = settled_fds(d.pid()).await;
    let data = status_kib(d.pid(), "VmData");
    let mut silent = Vec::new();
    for i in 0..SILENT {
        silent.push(tcp_from(&d.addr, Ipv4Addr::new(127, 0, 1, 1 + (i % 4) as u8)).await);
    }
    // Most of them accepted (an earlier session's descriptors may still close
    // meanwhile), then none still arriving.
    assert!(
        eventually_async(PATIENCE, || async {
            open_fds(d.pid()) >= fds + SILENT * 9 / 10
        })
        .await,
        "rexecd did not accept the {SILENT} connections: {} fds open, {fds} before",
        open_fds(d.pid())
    );
    settled_fds(d.pid()).await;
    let grown = status_kib(d.pid(), "VmData").saturating_sub(data);
    eprintln!("rexecd data grew {grown} KiB for {SILENT} silent connections");
    assert!(
        grown < (SILENT as u64) * 64,
        "{SILENT} silent connections took {grown} KiB ({} KiB each)",
        grown / SILENT as u64
    );
    // Authenticated sessions still stream through their buffer.
    drop(silent);
    let out = run(&d, launch(&["/bin/echo", "after"])).await;
    assert_eq!(out.stdout, b"after\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_address_or_one_certificate_cannot_hold_every_slot() {
    if !can_run("per-peer connection caps") {
        return;
    }
    let d = Daemon::start(
        "peercaps",
        &[
            "--max-connections-per-address",
            "3",
            "--max-connections-per-identity",
            "2",
        ],
    );
    // One certificate: two sessions, then `Busy` naming the cap.
    let first = d.user().await;
    let _second = d.user().await;
    let mut third = Client::connect(&d.addr, Role::User, USER).await;
    match third
        .recv_after(ToNode::Hello(Hello::new("daemon-tests")))
        .await
    {
        Some(FromNode::Error(e)) => {
            assert_eq!(e.code, ErrorCode::Busy, "{e:?}");
            assert!(
                e.message.contains("max_connections_per_identity") && e.message.contains(USER),
                "{}",
                e.message
            );
        }
        other => panic!("a third session of one certificate was served: {other:?}"),
    }
    // Another certificate from the same address takes the address's last slot
    // (the refused one has been closed: retried until rexecd has seen it go).
    let admin = until_async_every(PATIENCE, RETRY, || {
        Client::try_connect(&d.addr, Role::Admin, "ops")
    })
    .await;
    let mut admin = admin.expect("the admin was never served");
    match admin
        .recv_after(ToNode::Hello(Hello::new("daemon-tests")))
        .await
    {
        Some(FromNode::Welcome(_)) => {}
        other => panic!("expected Welcome, got {other:?}"),
    }
    // The address is full: a fourth connection from it, even without TLS, is closed
    // at once; another address is served.
    assert!(closed_at_once(&d.addr, Duration::from_secs(2)).await);
    let mut silent = Vec::new();
    for _ in 0..3 {
        silent.push(tcp_from(&d.addr, Ipv4Addr::new(127, 0, 2, 1)).await);
    }
    let mut fourth = tcp_from(&d.addr, Ipv4Addr::new(127, 0, 2, 1)).await;
    let mut buf = [0u8; 16];
    let closed = matches!(
        tokio::time::timeout(Duration::from_secs(2), fourth.read(&mut buf)).await,
        Ok(Ok(0) | Err(_))
    );
    assert!(closed, "a fourth connection from one address was kept");
    // Slots come back when sessions end.
    drop(first);
    let mut again = None;
    for _ in 0..50 {
        again = d.try_user().await;
        if again.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        again.is_some(),
        "the user's slot never came back; log:\n{}",
        d.log()
    );
}
