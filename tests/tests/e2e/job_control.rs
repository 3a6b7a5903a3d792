//! Ctrl-Z and `fg`: SIGTSTP to the client stops every remote rank (state
//! `T` in /proc) and then the client; SIGCONT resumes both, and a stop
//! longer than the heartbeat timeouts is not mistaken for a dead peer.

use std::time::Duration;

use nix::sys::signal::Signal::{SIGCONT, SIGTERM, SIGTSTP};
use rexec_tests::cluster::Cluster;
use rexec_tests::wait_until;

#[test]
fn ctrl_z_and_fg_stop_and_resume_the_remote_ranks() {
    let cluster = Cluster::start(2);
    // The line read from stdin holds `ready` back until the client's launch
    // phase is over (it passes stdin on only then), so SIGTSTP reaches the
    // running job's coordinator.
    let script = "read go; echo ready-$REXEC_RANK; while :; do sleep 0.2; done";
    let mut client = cluster
        .rexec()
        .stdin(b"go\n".to_vec())
        .args(["--nodes", "n1,n2", "sh", "-c", script])
        .spawn();
    client.wait_for_stdout("ready-0", Duration::from_secs(10));
    client.wait_for_stdout("ready-1", Duration::from_secs(10));
    let pid = client.pid;
    let job = |cluster: &Cluster| cluster.marked(&[pid]);
    assert!(wait_until(Duration::from_secs(5), || job(&cluster).len() >= 4).is_some());

    client.signal(SIGTSTP);
    let stopped = wait_until(Duration::from_secs(10), || {
        let procs = job(&cluster);
        !procs.is_empty() && procs.iter().all(|p| p.state == 'T') && client.state() == Some('T')
    });
    assert!(
        stopped.is_some(),
        "ranks {:?}, client {:?}",
        job(&cluster),
        client.state()
    );

    // Stay stopped longer than both heartbeat timeouts (2s).
    std::thread::sleep(Duration::from_secs(3));
    assert!(
        job(&cluster).iter().all(|p| p.state == 'T'),
        "{:?}",
        job(&cluster)
    );
    assert!(
        !client.exited(),
        "the client ended while stopped: {}",
        client.stderr_now()
    );

    client.signal(SIGCONT);
    let resumed = wait_until(Duration::from_secs(10), || {
        let procs = job(&cluster);
        !procs.is_empty() && procs.iter().all(|p| p.state != 'T') && client.state() != Some('T')
    });
    assert!(
        resumed.is_some(),
        "ranks {:?}, client {:?}",
        job(&cluster),
        client.state()
    );

    // Still alive well past the heartbeat timeout after the resume.
    std::thread::sleep(Duration::from_secs(3));
    assert!(
        !client.exited(),
        "the job ended after fg: {}",
        client.stderr_now()
    );
    client.signal(SIGTERM);
    let out = client.wait(Duration::from_secs(10));
    assert_eq!(out.code, Some(143), "{out:?}");
    assert!(!out.stderr.contains("heartbeat"), "{}", out.stderr);
}
