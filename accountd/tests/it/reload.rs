//! SIGHUP reloads accountd's TLS files: a user revoked after start is refused
//! from then on, while connections already open and everyone else carry on.

use std::time::Duration;

use certs::Role;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use proto::account::*;

use crate::support::*;

#[tokio::test]
async fn sighup_makes_accountd_refuse_a_revoked_user() {
    let d = Accountd::start().await;
    d.admin(&["create", "alice", "--initial", "10"]).ok();
    // Alice's accountctl keeps no CRL of its own, as one that has not heard.
    let mut alice = d.tls(Role::User, "alice");
    alice.crl = None;
    let home = d.dir.path();
    ctl_with(&d.addr, &alice, home, &["balance"]).ok();
    // A node connected before the revocation.
    let mut node = d.client(Role::Node, "n1").await;

    d.pki.revoke(Role::User, "alice").unwrap();
    // The list loaded at start is still the one in force.
    ctl_with(&d.addr, &alice, home, &["balance"]).ok();

    kill(Pid::from_raw(d.pid() as i32), Signal::SIGHUP).unwrap();
    let mut last = None;
    // The reload runs on accountd's own time; a loaded machine may take a while.
    testhost::wait::eventually_async(Duration::from_secs(30), || {
        let out = ctl_with(&d.addr, &alice, home, &["balance"]);
        let refused = out.code != 0;
        last = Some(out);
        std::future::ready(refused)
    })
    .await;
    let refused = last.unwrap();
    refused.fails_with("the peer refused our certificate: it has been revoked");
    assert_eq!(refused.stderr.matches("revoked").count(), 1, "{refused:?}");

    // accountd is still up for everyone else, and the open connection still works.
    assert_eq!(d.admin(&["balance", "alice"]).ok(), "alice 10.000000\n");
    let reply = node
        .call(AccountOp::Debit(debit("n1", "j1", 1, "alice", C)))
        .await
        .unwrap();
    assert!(matches!(reply, AccountReply::Charged(_)), "{reply:?}");
    assert_eq!(d.balance("alice"), 9 * C);
}
