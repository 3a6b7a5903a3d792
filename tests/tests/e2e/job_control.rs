//! Ctrl-Z and `fg`: SIGTSTP to the client stops every remote rank (state
//! `T` in /proc) and then the client; SIGCONT resumes both, and a stop
//! longer than the heartbeat timeouts is not mistaken for a dead peer. A
//! Ctrl-Z while the client is still launching takes effect once it is done.

use std::time::Duration;

use nix::sys::signal::Signal::{SIGCONT, SIGTERM, SIGTSTP};
use rexec_tests::cluster::Cluster;
use rexec_tests::proxy::DelayProxy;
use rexec_tests::wait_until;

#[test]
fn ctrl_z_and_fg_stop_and_resume_the_remote_ranks() {
    if !rexec_tests::can_run("ctrl_z_and_fg_stop_and_resume_the_remote_ranks") {
        return;
    }
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

#[test]
fn a_ctrl_z_during_the_launch_stops_the_job_once_every_rank_has_started() {
    if !rexec_tests::can_run("a_ctrl_z_during_the_launch_stops_the_job_once_every_rank_has_started")
    {
        return;
    }
    // n2 answers 3 s late, so rank 0 runs (and prints) while the client is
    // still launching rank 1. A Ctrl-Z then is kept for the run phase (it was
    // dropped): the whole job stops as soon as rank 1 is up.
    let cluster = Cluster::start(2);
    let proxy = DelayProxy::start(cluster.node("n2").addr, Duration::from_secs(3));
    let config = cluster.client_config_via("n2", proxy.addr);
    let script = "echo ready-$REXEC_RANK; while :; do sleep 0.2; done";
    let client = cluster
        .rexec()
        .config(&config)
        .args(["--nodes", "n1,n2", "sh", "-c", script])
        .spawn();
    client.wait_for_stdout("ready-0", Duration::from_secs(10));
    assert!(
        !client.stdout_now().contains("ready-1"),
        "rank 1 started before the delay: {}",
        client.stdout_now()
    );
    client.signal(SIGTSTP);
    let pid = client.pid;
    let job = |cluster: &Cluster| cluster.marked(&[pid]);
    let stopped = wait_until(Duration::from_secs(15), || {
        let procs = job(&cluster);
        // Both ranks' shells (rank 1's may be stopped before it forked a sleep).
        let shells = procs.iter().filter(|p| p.cmd.starts_with("sh -c")).count();
        // A shell that vforked is in D until its child execs; when the stop caught
        // that child before its exec (a third `sh -c`, stopped), the shell cannot run
        // either.
        let held = |p: &rexec_tests::procs::Proc| {
            p.state == 'D'
                && procs
                    .iter()
                    .any(|c| c.state == 'T' && rexec_tests::procs::parent(c.pid) == Some(p.pid))
        };
        shells >= 2
            && procs.iter().all(|p| p.state == 'T' || held(p))
            && client.state() == Some('T')
    });
    assert!(
        stopped.is_some(),
        "ranks {:?}, client {:?}, stderr {}",
        job(&cluster),
        client.state(),
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
    client.signal(SIGTERM);
    let out = client.wait(Duration::from_secs(10));
    assert_eq!(out.code, Some(143), "{out:?}");
    assert!(out.out().contains("ready-1"), "{out:?}");
}
