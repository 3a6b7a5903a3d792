//! The failure model: one rank killed by a signal, a bad exit under
//! `--kill-on-bad-exit`, a client killed or gone silent, a node daemon
//! killed or gone silent — each aborts the whole job and leaves nothing behind; a daemon
//! restarted after a crash removes what the crash left.

use std::time::Duration;

use nix::sys::signal::Signal::{SIGKILL, SIGSTOP};
use rexec_tests::cluster::Cluster;
use rexec_tests::rexec::Running;
use rexec_tests::wait_until;

/// Wait until the job has `n` processes running (besides the client).
fn wait_for_processes(cluster: &Cluster, client: &Running, n: usize) {
    let seen = wait_until(Duration::from_secs(10), || {
        cluster.marked(&[client.pid]).len() >= n
    });
    assert!(
        seen.is_some(),
        "the job never had {n} processes: {:?}; stderr {:?}\n{}",
        cluster.marked(&[client.pid]),
        client.stderr_now(),
        cluster.logs()
    );
}

/// Start `sleep 1000` as the ranks of n1,n2 (each rank first says
/// `ready-RANK`), and return once the client has printed both lines: it then
/// holds every rank's `Started`, so a failure that follows is one of a
/// running job, not of its launch (which is reported in other words).
fn spawn_two_ranks(cluster: &Cluster) -> Running {
    let client = cluster
        .rexec()
        .args([
            "--nodes",
            "n1,n2",
            "sh",
            "-c",
            "echo ready-$REXEC_RANK; exec sleep 1000",
        ])
        .spawn();
    client.wait_for_stdout("ready-0", Duration::from_secs(10));
    client.wait_for_stdout("ready-1", Duration::from_secs(10));
    wait_for_processes(cluster, &client, 2);
    client
}

/// How long a job may take to disappear where no deadline of the product is
/// at stake (a loaded CI machine can be slow to tear a job down).
const TEARDOWN: Duration = Duration::from_secs(10);

fn assert_nothing_left(cluster: &Cluster, except: &[u32], within: Duration, what: &str) {
    let gone = wait_until(within, || {
        cluster.marked(except).is_empty() && cluster.job_cgroups().is_empty()
    });
    assert!(
        gone.is_some(),
        "{what}: still there after {within:?}: processes {:?}, cgroups {:?}\n{}",
        cluster.marked(except),
        cluster.job_cgroups(),
        cluster.logs()
    );
}

#[test]
fn a_rank_killed_by_a_signal_aborts_the_others_with_status_128_plus_n() {
    if !rexec_tests::can_run("a_rank_killed_by_a_signal_aborts_the_others_with_status_128_plus_n") {
        return;
    }
    let cluster = Cluster::start(2);
    let script = "if [ $REXEC_RANK = 1 ]; then sleep 0.3; kill -KILL $$; else sleep 1000; fi";
    let out = cluster
        .rexec()
        .args(["--nodes", "n1,n2", "sh", "-c", script])
        .run();
    assert_eq!(out.code, Some(137), "{out:?}");
    assert!(
        out.stderr.contains("node n2 (rank 1): killed by SIGKILL"),
        "{}",
        out.stderr
    );
    assert!(out.elapsed < Duration::from_secs(10), "{:?}", out.elapsed);
    assert_nothing_left(&cluster, &[], TEARDOWN, "after the abort");
}

#[test]
fn kill_on_bad_exit_aborts_on_a_non_zero_exit() {
    if !rexec_tests::can_run("kill_on_bad_exit_aborts_on_a_non_zero_exit") {
        return;
    }
    let cluster = Cluster::start(2);
    let script = "if [ $REXEC_RANK = 1 ]; then exit 3; else sleep 1000; fi";
    let out = cluster
        .rexec()
        .args(["--kill-on-bad-exit", "--nodes", "n1,n2", "sh", "-c", script])
        .run();
    assert_eq!(out.code, Some(3), "{out:?}");
    assert!(
        out.stderr
            .contains("node n2 (rank 1): exited with status 3"),
        "{}",
        out.stderr
    );
    assert_nothing_left(&cluster, &[], TEARDOWN, "after the abort");
}

#[test]
fn a_killed_client_makes_every_node_kill_the_job_within_the_heartbeat_timeout() {
    if !rexec_tests::can_run(
        "a_killed_client_makes_every_node_kill_the_job_within_the_heartbeat_timeout",
    ) {
        return;
    }
    let cluster = Cluster::start(2);
    let client = cluster
        .rexec()
        .args(["--nodes", "n1,n2", "sleep", "1000"])
        .spawn();
    wait_for_processes(&cluster, &client, 2);
    let mut client = client;
    client.signal(SIGKILL);
    // The deadline is the nodes': it runs from the client's death (when its
    // sockets close), not from the moment the test sent the signal.
    assert!(wait_until(Duration::from_secs(10), || client.exited()).is_some());
    assert_nothing_left(
        &cluster,
        &[client.pid],
        Duration::from_secs(2),
        "after SIGKILL of rexec",
    );
}

#[test]
fn a_silent_client_is_declared_dead_by_the_nodes() {
    if !rexec_tests::can_run("a_silent_client_is_declared_dead_by_the_nodes") {
        return;
    }
    // SIGSTOP (unlike Ctrl-Z) leaves the connection open and the client mute:
    // only the nodes' heartbeat timeout (2s here) can end the job.
    let cluster = Cluster::start(2);
    let client = cluster
        .rexec()
        .args(["--nodes", "n1,n2", "sleep", "1000"])
        .spawn();
    wait_for_processes(&cluster, &client, 2);
    client.signal(SIGSTOP);
    assert_nothing_left(
        &cluster,
        &[client.pid],
        // Noticed within 1.25 timeouts of the last heartbeat (sent at most 1s
        // before the stop), plus the teardown on a loaded machine.
        Duration::from_secs(8),
        "after the client went silent",
    );
    client.signal(SIGKILL);
}

#[test]
fn a_killed_rexecd_makes_the_client_abort_the_other_ranks_and_name_the_node() {
    if !rexec_tests::can_run(
        "a_killed_rexecd_makes_the_client_abort_the_other_ranks_and_name_the_node",
    ) {
        return;
    }
    let mut cluster = Cluster::start(2);
    let client = spawn_two_ranks(&cluster);
    cluster.crash("n2");
    let out = client.wait(Duration::from_secs(10));
    assert_eq!(out.code, Some(255), "{out:?}");
    assert!(
        out.stderr.contains("node n2 (rank 1): lost connection"),
        "{}",
        out.stderr
    );
    // Rank 0 on n1 is gone; n2's leftovers are for its restart to remove.
    let n1 = cluster.node("n1").cgroup_parent.clone();
    let gone = wait_until(TEARDOWN, || rexec_tests::procs::job_cgroups(&n1).is_empty());
    assert!(gone.is_some(), "rank 0's job cgroup on n1 remains");
    cluster.restart("n2");
}

#[test]
fn a_silent_node_is_declared_dead_by_the_client() {
    if !rexec_tests::can_run("a_silent_node_is_declared_dead_by_the_client") {
        return;
    }
    // A stopped rexecd keeps its connection open but says nothing: only the
    // client's heartbeat timeout (2s here) can tell it from a slow node.
    let cluster = Cluster::start(2);
    let client = spawn_two_ranks(&cluster);
    let n2 = nix::unistd::Pid::from_raw(cluster.node("n2").pid().unwrap() as i32);
    /// Resumes the stopped rexecd however the test ends.
    struct Resume(nix::unistd::Pid);
    impl Drop for Resume {
        fn drop(&mut self) {
            let _ = nix::sys::signal::kill(self.0, nix::sys::signal::Signal::SIGCONT);
        }
    }
    nix::sys::signal::kill(n2, SIGSTOP).unwrap();
    let resume = Resume(n2);
    let out = client.wait(Duration::from_secs(15));
    drop(resume);
    assert_eq!(out.code, Some(255), "{out:?}");
    assert!(
        out.stderr
            .contains("node n2 (rank 1): missed heartbeats for 2s"),
        "{}",
        out.stderr
    );
    // n1 ended its rank when the client aborted; n2, resumed, finds the
    // client gone and ends its own.
    assert_nothing_left(&cluster, &[], TEARDOWN, "after the abort");
}

#[test]
fn a_rexecd_restarted_after_a_crash_removes_the_leftovers() {
    if !rexec_tests::can_run("a_rexecd_restarted_after_a_crash_removes_the_leftovers") {
        return;
    }
    let mut cluster = Cluster::start(1);
    let script = "setsid sh -c 'sleep 1000 &'; sleep 1000";
    let client = cluster.rexec().args(["sh", "-c", script]).spawn();
    wait_for_processes(&cluster, &client, 3);
    cluster.crash("n1");
    let _ = client.wait(Duration::from_secs(10));
    assert!(
        !cluster.marked(&[]).is_empty(),
        "a crash leaves the job behind"
    );
    assert!(!cluster.job_cgroups().is_empty());
    cluster.restart("n1");
    assert_nothing_left(&cluster, &[], TEARDOWN, "after the restart");
}
