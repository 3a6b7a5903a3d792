//! Answers larger than the frame limit become a clear error, not a dropped
//! connection (the server's library entry point with a small limit); requests
//! have their own small limit, so connections holding large frames cannot
//! grow the real accountd.

use std::net::Ipv4Addr;
use std::time::Duration;

use accountd::server::{ServerConfig, run};
use accountd::store::StoreConfig;
use certs::Role;
use certs::testing::TestPki;
use clients::account::AccountClient;
use proto::Framed;
use proto::account::*;
use tokio::io::AsyncWriteExt;

use crate::support::*;

#[tokio::test]
async fn a_report_too_large_for_one_frame_is_refused_with_advice() {
    let pki = TestPki::new();
    let dir = tempfile::tempdir().unwrap();
    let cfg = ServerConfig {
        tls: pki.tls_paths(Role::Service, "accountd"),
        store: StoreConfig {
            path: dir.path().join("l.db"),
            postgres: None,
            anchors: None,
            create: true,
            max_batch: 64,
            max_entry: i64::MAX,
        },
        max_connections: 16,
        idle_timeout: Duration::from_secs(30),
        max_frame: 2048,
        max_request: proto::limits::MAX_ACCOUNT_REQUEST,
        peers: Default::default(),
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(run(listener, cfg, async move {
        let _ = stopped.await;
    }));
    let connector = |role, name| certs::connector(&pki.tls_paths(role, name)).unwrap();
    let t = Duration::from_secs(10);
    let mut admin = AccountClient::connect(&addr, &connector(Role::Admin, "ops"), "accountd", t)
        .await
        .unwrap();
    let mut node = AccountClient::connect(&addr, &connector(Role::Node, "n1"), "accountd", t)
        .await
        .unwrap();
    for u in 0..200 {
        let user = format!("user-with-a-longish-name-{u:04}");
        admin
            .call(AccountOp::CreateAccount(CreateAccount {
                user: user.clone(),
                initial: 1_000_000,
            }))
            .await
            .unwrap();
        node.call(AccountOp::Debit(crate::support::debit(
            "n1", "j", u, &user, 10,
        )))
        .await
        .unwrap();
    }
    let report = AccountOp::Report(ReportQuery {
        by: ReportBy::User,
        since_us: None,
        until_us: None,
    });
    let err = admin.call(report).await.unwrap_err();
    assert!(
        err.to_string().contains("narrower --since/--until"),
        "{err}"
    );
    assert_eq!(code_of(Err(err)), ErrorCode::TooLarge);
    // The connection is still in step.
    let by_node = AccountOp::Report(ReportQuery {
        by: ReportBy::Node,
        since_us: None,
        until_us: None,
    });
    let AccountReply::Report(rows) = admin.call(by_node).await.unwrap() else {
        panic!()
    };
    assert_eq!(
        rows,
        vec![ReportRow {
            key: "n1".into(),
            charged: 2_000,
            cpu_us: 100_000_000,
            jobs: 1
        }]
    );
    let _ = stop.send(());
    server.await.unwrap().unwrap();
}

/// The largest request body accountd accepts now, learnt as a client would:
/// a frame one byte short of the default 1 MiB limit, answered with the limit
/// in force when it is refused.
async fn request_limit_in_force(d: &Accountd) -> usize {
    let mut tls = d.tls_from(Role::User, "probe", Ipv4Addr::LOCALHOST).await;
    let frame = padded_whoami(1, proto::DEFAULT_MAX_FRAME - 1);
    // The server may refuse after the header and close before the body is in.
    let _ = tls.write_all(&frame).await;
    let _ = tls.flush().await;
    let mut f = Framed::new(tls, proto::DEFAULT_MAX_FRAME);
    let r: AccountResponse = f.recv().await.unwrap().unwrap();
    match r.result {
        Ok(_) => proto::DEFAULT_MAX_FRAME - 1,
        Err(e) => {
            assert_eq!(e.code, ErrorCode::Malformed, "{e}");
            e.message
                .split("larger than the limit of ")
                .nth(1)
                .and_then(|rest| rest.split(' ').next())
                .and_then(|n| n.parse().ok())
                .unwrap_or_else(|| panic!("no limit in {e}"))
        }
    }
}

/// Regression: 256 connections each holding a request frame one byte short of
/// the 1 MiB frame limit grew accountd from 9 MB to 272 MB. Requests now have
/// their own small limit; 256 connections (256 certificates, from four
/// addresses, within the per-peer caps) each holding a frame one byte short of
/// the limit in force keep accountd's resident memory under 64 MB, while it is
/// held and after it is released, and every connection is still served.
#[tokio::test]
async fn near_limit_requests_on_256_connections_keep_accountd_under_64_mb() {
    const CONNECTIONS: usize = 256;
    const BOUND_KIB: u64 = 64 * 1024;
    let d = Accountd::start().await;
    let limit = request_limit_in_force(&d).await;
    let names: Vec<String> = (0..CONNECTIONS).map(|i| format!("u{i:03}")).collect();
    for n in &names {
        d.tls(Role::User, n);
    }
    let before = rss_kib(d.pid());
    let mut held = Vec::new();
    for (i, n) in names.iter().enumerate() {
        let source = Ipv4Addr::new(127, 0, 0, 2 + (i % 4) as u8);
        let mut tls = d.tls_from(Role::User, n, source).await;
        let frame = padded_whoami(i as u64 + 1, limit - 1);
        tls.write_all(&frame[..frame.len() - 1]).await.unwrap();
        tls.flush().await.unwrap();
        held.push((tls, frame));
    }
    // The bytes are in the kernel's buffers or accountd's; sample for a while.
    let mut peak = 0;
    for _ in 0..20 {
        peak = peak.max(rss_kib(d.pid()));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    eprintln!(
        "accountd RSS: {before} KiB before, peak {peak} KiB with {CONNECTIONS} connections holding {}-byte frames",
        limit - 1
    );
    assert!(
        peak < BOUND_KIB,
        "accountd grew to {peak} KiB (from {before} KiB) with {CONNECTIONS} near-limit frames held"
    );
    // Every connection was held, not dropped: the last byte completes each
    // frame and each is answered.
    for (tls, frame) in held.iter_mut() {
        tls.write_all(&frame[frame.len() - 1..]).await.unwrap();
        tls.flush().await.unwrap();
    }
    let mut answered = 0;
    for (tls, _) in held {
        let mut f = Framed::new(tls, proto::DEFAULT_MAX_FRAME);
        let r: AccountResponse = f.recv().await.unwrap().expect("the connection was closed");
        assert!(matches!(r.result, Ok(AccountReply::WhoAmI(_))), "{r:?}");
        answered += 1;
    }
    assert_eq!(answered, CONNECTIONS);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let after = rss_kib(d.pid());
    eprintln!("accountd RSS after the connections closed: {after} KiB");
    assert!(
        after < BOUND_KIB,
        "{after} KiB after the connections closed"
    );
    assert!(
        limit <= 64 * 1024,
        "requests may still be {limit} bytes long; no valid request is more than a few KiB"
    );
}
