//! Nothing is left behind: on client disconnect, bad frames, rexecd's SIGTERM, and
//! after rexecd was SIGKILLed and restarted.

use std::time::Duration;

use nix::sys::signal::Signal as Sig;
use proto::node::{ErrorCode, ExitStatus, FromNode, NoticeKind, Signal};
use tokio::io::AsyncWriteExt;

use crate::util::*;

/// A job whose grandchild escapes into its own session and is reparented to init;
/// prints "escaped <pid> ready" once the grandchild runs.
pub const ESCAPE: &str =
    "setsid sh -c 'sleep 300 & echo escaped $!' ; echo ready; while :; do sleep 0.05; done";

/// Reads the escaped grandchild's pid from the job's output.
pub async fn escaped_pid(c: &mut Client) -> i32 {
    let text = c.read_until("ready").await;
    let pid = text
        .split_whitespace()
        .skip_while(|w| *w != "escaped")
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no pid in {text:?}"));
    assert!(!is_dead(pid));
    pid
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_connection_kills_even_a_double_forked_setsid_grandchild() {
    if !can_run("disconnect") {
        return;
    }
    let d = Daemon::start("disconnect", &[]);
    let mut c = d.user().await;
    let started = c.start(launch(&["/bin/sh", "-c", ESCAPE])).await;
    let grandchild = escaped_pid(&mut c).await;
    drop(c);
    assert_nothing_left(&d, &[started.pid as i32, grandchild]).await;
    // The line is logged after the cgroup is gone and the output drained.
    assert!(
        eventually_async(PATIENCE, || async {
            {
                let log = d.log();
                log.contains("job ended") && log.contains("killed: ")
            }
        })
        .await,
        "{}",
        d.log()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_frame_gets_an_error_and_kills_the_job() {
    if !can_run("malformed") {
        return;
    }
    let d = Daemon::start("malformed", &[]);
    let mut c = d.user().await;
    let started = c.start(launch(&["/bin/sh", "-c", ESCAPE])).await;
    let grandchild = escaped_pid(&mut c).await;
    // A complete frame whose body is not a message: a tag varint that never ends.
    let stream = c.framed.get_mut();
    stream
        .write_all(&[0, 0, 0, 3, 0xff, 0xff, 0xff])
        .await
        .unwrap();
    stream.flush().await.unwrap();
    let out = c.outcome().await;
    let e = out
        .error
        .clone()
        .unwrap_or_else(|| panic!("no Error: {out:?}"));
    assert_eq!(e.code, ErrorCode::BadRequest);
    assert!(e.message.contains("malformed"), "{e:?}");
    assert_nothing_left(&d, &[started.pid as i32, grandchild]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frame_over_the_limit_gets_an_error_and_kills_the_job() {
    if !can_run("too_large") {
        return;
    }
    let d = Daemon::start("toolarge", &[]);
    let mut c = d.user().await;
    let started = c.start(launch(&["/bin/sleep", "300"])).await;
    let stream = c.framed.get_mut();
    stream.write_all(&(1u32 << 30).to_be_bytes()).await.unwrap();
    stream.flush().await.unwrap();
    let out = c.outcome().await;
    let e = out
        .error
        .clone()
        .unwrap_or_else(|| panic!("no Error: {out:?}"));
    assert_eq!(e.code, ErrorCode::BadRequest);
    assert!(e.message.contains("larger than the limit"), "{e:?}");
    assert_nothing_left(&d, &[started.pid as i32]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_hello_gets_an_error() {
    if !can_run("malformed_hello") {
        return;
    }
    let d = Daemon::start("badhello", &[]);
    let mut c = Client::connect(&d.addr, certs::Role::User, USER).await;
    let stream = c.framed.get_mut();
    stream.write_all(&[0, 0, 0, 2, 0x01, 0xff]).await.unwrap();
    stream.flush().await.unwrap();
    match c.recv().await {
        Some(FromNode::Error(e)) => assert!(e.message.contains("malformed"), "{e:?}"),
        other => panic!("expected Error, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_to_rexecd_destroys_running_jobs_and_exits() {
    if !can_run("sigterm") {
        return;
    }
    let mut d = Daemon::start("sigterm", &[]);
    let mut c = d.user().await;
    let started = c.start(launch(&["/bin/sh", "-c", ESCAPE])).await;
    let grandchild = escaped_pid(&mut c).await;
    d.signal(Sig::SIGTERM);
    let out = c.outcome().await;
    assert!(
        out.notices
            .iter()
            .any(|n| n.kind == NoticeKind::ShuttingDown),
        "{out:?}"
    );
    assert!(matches!(
        out.status(),
        ExitStatus::Signaled {
            signal: Signal::Kill,
            ..
        }
    ));
    let status = d.wait_exit(PATIENCE);
    assert!(status.success(), "{status}; log:\n{}", d.log());
    assert_nothing_left(&d, &[started.pid as i32, grandchild]).await;
    assert!(!cpu_dir(&d.parent).unwrap().exists(), "parent cgroup left");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_after_sigkill_removes_the_leftovers() {
    if !can_run("restart") {
        return;
    }
    let mut d = Daemon::start("restart", &[]);
    let mut c = d.user().await;
    let started = c.start(launch(&["/bin/sh", "-c", ESCAPE])).await;
    let grandchild = escaped_pid(&mut c).await;
    d.signal(Sig::SIGKILL);
    d.wait_exit(PATIENCE);
    drop(c);
    // The job outlives the daemon...
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!is_dead(grandchild));
    assert_eq!(d.job_cgroups().len(), 1);
    // ...until the next rexecd on the same parent starts: it is killed and its cgroup
    // gone before the daemon is ready (the process may not be a zombie yet, see
    // `is_dying`; `assert_nothing_left` waits for that).
    d.restart();
    assert!(is_dying(grandchild), "leftover survived the restart");
    assert!(d.job_cgroups().is_empty());
    assert_nothing_left(&d, &[started.pid as i32, grandchild]).await;
    assert!(
        d.log()
            .contains("removed job cgroups left by an earlier run"),
        "{}",
        d.log()
    );
}
