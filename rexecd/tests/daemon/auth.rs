//! Who may launch: only user certificates, only existing users, root only when allowed,
//! and a missing program is a clear error that leaves nothing behind.

use certs::Role;
use proto::node::{ErrorCode, ExitStatus};

use crate::util::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_service_and_admin_certificates_cannot_launch() {
    if !can_run("wrong_role") {
        return;
    }
    let d = Daemon::start("roles", &[]);
    for (role, name) in [
        (Role::Node, "n2"),
        (Role::Service, "vexecd"),
        (Role::Admin, "ops"),
    ] {
        let mut c = d.client(role, name).await;
        let e = c.refused(launch(&["/bin/true"])).await;
        assert_eq!(e.code, ErrorCode::NotAuthorized);
        assert_eq!(
            e.message,
            format!("only user certificates may launch jobs; this is a {role} certificate")
        );
    }
    assert!(d.job_cgroups().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn root_is_refused_unless_allowed() {
    if !can_run("root") {
        return;
    }
    let d = Daemon::start("noroot", &[]);
    let mut c = d.client(Role::User, "root").await;
    let e = c.refused(launch(&["/usr/bin/id", "-u"])).await;
    assert_eq!(e.code, ErrorCode::NotAuthorized);
    assert!(
        e.message.contains("uid 0") && e.message.contains("allow root"),
        "{e:?}"
    );
    drop(d);

    let d = Daemon::start("root", &["--allow-root"]);
    let mut c = d.client(Role::User, "root").await;
    c.start(launch(&["/usr/bin/id", "-u"])).await;
    let out = c.outcome().await;
    assert_eq!(out.stdout, b"0\n");
    assert_eq!(out.status(), ExitStatus::Code(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_and_disallowed_users_are_refused() {
    if !can_run("unknown_user") {
        return;
    }
    let d = Daemon::start("unknown", &["--allowed-users", "rexectest,nosuchuser"]);
    let mut c = d.client(Role::User, "nosuchuser").await;
    let e = c.refused(launch(&["/bin/true"])).await;
    assert_eq!(e.code, ErrorCode::UnknownUser);
    assert!(
        e.message.contains("no Unix user named \"nosuchuser\""),
        "{e:?}"
    );

    let mut c = d.client(Role::User, "daemon").await;
    let e = c.refused(launch(&["/bin/true"])).await;
    assert_eq!(e.code, ErrorCode::NotAuthorized);
    assert!(e.message.contains("allowed_users"), "{e:?}");
    assert!(d.job_cgroups().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_program_is_an_error_and_leaves_nothing_running() {
    if !can_run("missing_program") {
        return;
    }
    let d = Daemon::start("missing", &[]);
    let mut c = d.user().await;
    let mut request = launch(&["./no-such-program"]);
    request.cwd = Some("/tmp".into());
    let e = c.refused(request).await;
    assert_eq!(e.code, ErrorCode::SpawnFailed);
    assert_eq!(
        e.message,
        format!("program ./no-such-program not found on node {NODE} (cwd /tmp)")
    );
    assert!(d.job_cgroups().is_empty(), "{:?}", d.job_cgroups());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_launch_is_refused() {
    if !can_run("invalid_launch") {
        return;
    }
    let d = Daemon::start("invalid", &[]);
    let mut c = d.user().await;
    let mut request = launch(&["/bin/true"]);
    request.rank = 3;
    let e = c.refused(request).await;
    assert_eq!(e.code, ErrorCode::BadRequest);
    assert!(e.message.contains("rank 3 is out of range"), "{e:?}");
}
