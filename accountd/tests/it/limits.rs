//! Answers larger than the frame limit become a clear error, not a dropped
//! connection. Uses the server's library entry point with a small limit.

use std::time::Duration;

use accountd::client::AccountClient;
use accountd::server::{ServerConfig, run};
use accountd::store::StoreConfig;
use certs::Role;
use certs::testing::TestPki;
use proto::account::*;

use crate::support::code_of;

#[tokio::test]
async fn a_report_too_large_for_one_frame_is_refused_with_advice() {
    let pki = TestPki::new();
    let dir = tempfile::tempdir().unwrap();
    let cfg = ServerConfig {
        tls: pki.tls_paths(Role::Service, "accountd"),
        store: StoreConfig {
            path: dir.path().join("l.db"),
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
