//! Jobs whose stdin is full must not outlive their client. The job never reads
//! its stdin (`sleep`) while the client has endless input to send
//! (`/dev/zero`): control frames and the end of the connection must still
//! reach every node. Double Ctrl-C, a client killed with SIGKILL, and the loss
//! of one node of two each leave no process and no cgroup of the job on the
//! surviving nodes within two seconds of the event.

use std::path::Path;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal::{SIGINT, SIGKILL};
use rexec_tests::cluster::Cluster;
use rexec_tests::rexec::Running;
use rexec_tests::wait_until;

/// The deadline of the issue: everything gone this long after the event.
const GONE_WITHIN: Duration = Duration::from_secs(2);

/// Start `script` as ranks 0 and 1 on n1 and n2, with stdin from /dev/zero
/// that no rank reads, and return once both ranks said `ready-RANK` and their
/// stdin has had time to fill (the client writes as fast as loopback goes).
fn spawn_flooded(cluster: &Cluster, script: &str) -> Running {
    let client = cluster
        .rexec()
        .stdin_file(Path::new("/dev/zero"))
        .args(["--nodes", "n1,n2", "sh", "-c", script])
        .spawn();
    client.wait_for_stdout("ready-0", Duration::from_secs(10));
    client.wait_for_stdout("ready-1", Duration::from_secs(10));
    let two = wait_until(Duration::from_secs(10), || {
        cluster.marked(&[client.pid]).len() >= 2
    });
    assert!(two.is_some(), "{:?}", cluster.marked(&[client.pid]));
    std::thread::sleep(Duration::from_millis(1500));
    client
}

fn assert_gone_within(cluster: &Cluster, except: &[u32], limit: Duration, what: &str) {
    let start = Instant::now();
    let gone = wait_until(limit, || {
        cluster.marked(except).is_empty() && cluster.job_cgroups().is_empty()
    });
    assert!(
        gone.is_some(),
        "{what}: still there after {limit:?}: processes {:?}, cgroups {:?}\n{}",
        cluster.marked(except),
        cluster.job_cgroups(),
        cluster.logs()
    );
    eprintln!("{what}: job gone after {:?}", start.elapsed());
}

#[test]
fn a_signal_reaches_a_job_whose_stdin_is_full() {
    if !rexec_tests::can_run("a_signal_reaches_a_job_whose_stdin_is_full") {
        return;
    }
    let cluster = Cluster::start(2);
    let script = "trap 'echo int-$REXEC_RANK; exit 3' INT; echo ready-$REXEC_RANK; \
                  while :; do sleep 0.1; done";
    let client = spawn_flooded(&cluster, script);
    client.signal(SIGINT);
    let out = client.wait(Duration::from_secs(10));
    assert_eq!(out.code, Some(3), "{out:?}\n{}", cluster.logs());
    assert!(
        out.out().contains("int-0") && out.out().contains("int-1"),
        "{out:?}"
    );
    assert_gone_within(&cluster, &[], Duration::from_secs(10), "after the signal");
}

#[test]
fn a_double_ctrl_c_leaves_nothing_of_a_job_whose_stdin_is_full() {
    if !rexec_tests::can_run("a_double_ctrl_c_leaves_nothing_of_a_job_whose_stdin_is_full") {
        return;
    }
    let cluster = Cluster::start(2);
    // Both ranks survive a first SIGINT, so only the abort can end them; the second
    // SIGINT follows one every rank handled in time (two sent close together can
    // reach the client as one).
    let script = "trap 'echo first-int-$REXEC_RANK' INT; echo ready-$REXEC_RANK; \
                  while :; do sleep 0.1; done";
    let client = spawn_flooded(&cluster, script);
    client.first_sigint(2);
    client.signal(SIGINT);
    assert_gone_within(
        &cluster,
        &[client.pid],
        GONE_WITHIN,
        "after a double SIGINT",
    );
    let out = client.wait(Duration::from_secs(10));
    assert_eq!(out.code, Some(130), "{out:?}");
    assert!(
        out.stderr.contains("interrupted twice, aborting"),
        "{out:?}"
    );
}

#[test]
fn a_client_killed_by_sigkill_leaves_nothing_of_a_job_whose_stdin_is_full() {
    if !rexec_tests::can_run(
        "a_client_killed_by_sigkill_leaves_nothing_of_a_job_whose_stdin_is_full",
    ) {
        return;
    }
    let cluster = Cluster::start(2);
    let script = "echo ready-$REXEC_RANK; exec sleep 1000";
    let mut client = spawn_flooded(&cluster, script);
    client.signal(SIGKILL);
    // The deadline runs from the client's death, when its sockets close.
    assert!(wait_until(Duration::from_secs(10), || client.exited()).is_some());
    assert_gone_within(
        &cluster,
        &[client.pid],
        GONE_WITHIN,
        "after SIGKILL of rexec",
    );
}

#[test]
fn losing_one_node_leaves_nothing_of_a_job_whose_stdin_is_full_on_the_other() {
    if !rexec_tests::can_run(
        "losing_one_node_leaves_nothing_of_a_job_whose_stdin_is_full_on_the_other",
    ) {
        return;
    }
    let mut cluster = Cluster::start(2);
    let script = "echo ready-$REXEC_RANK; exec sleep 1000";
    let client = spawn_flooded(&cluster, script);
    let n1 = cluster.node("n1").cgroup_parent.clone();
    let n1_daemon = cluster.node("n1").pid().expect("n1 runs");
    let on_n1 = |cluster: &Cluster| {
        cluster
            .marked(&[client.pid])
            .into_iter()
            .filter(|p| rexec_tests::procs::parent(p.pid) == Some(n1_daemon))
            .count()
    };
    assert_eq!(on_n1(&cluster), 1, "rank 0 runs under n1's rexecd");
    cluster.crash("n2");
    let start = Instant::now();
    let gone = wait_until(GONE_WITHIN, || {
        on_n1(&cluster) == 0 && rexec_tests::procs::job_cgroups(&n1).is_empty()
    });
    assert!(
        gone.is_some(),
        "rank 0 on n1 still there {GONE_WITHIN:?} after n2 died\n{}",
        cluster.logs()
    );
    eprintln!("rank 0 on n1 gone after {:?}", start.elapsed());
    let out = client.wait(Duration::from_secs(10));
    assert_eq!(out.code, Some(255), "{out:?}");
    assert!(
        out.stderr
            .contains("node n2 (rank 1): lost connection while the job ran"),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains("handshake"), "{}", out.stderr);
    // n2's own leftovers are for its restart to remove.
    cluster.restart("n2");
    assert_gone_within(&cluster, &[], Duration::from_secs(10), "after n2's restart");
}
