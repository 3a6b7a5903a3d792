//! Ctrl-C: one SIGINT reaches the remote program's handler; two within a
//! second abort the job everywhere, daemonised grandchildren included.
//!
//! The jobs read a line of stdin before they say `ready`: the client passes
//! stdin on only once its launch phase is over, so a signal sent after
//! `ready` reaches the running job's coordinator, never the launch (which
//! treats SIGINT as "give up starting").

use std::time::{Duration, Instant};

use nix::sys::signal::Signal::{SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2};
use rexec_tests::cluster::{Cluster, ClusterOptions};
use rexec_tests::wait_until;

#[test]
fn sigint_reaches_the_remote_programs_handler() {
    if !rexec_tests::can_run("sigint_reaches_the_remote_programs_handler") {
        return;
    }
    let cluster = Cluster::start(1);
    let script =
        "trap 'echo got-int; exit 3' INT; read go; echo ready; while :; do sleep 0.1; done";
    let client = cluster
        .rexec()
        .stdin(b"go\n".to_vec())
        .args(["sh", "-c", script])
        .spawn();
    client.wait_for_stdout("ready", Duration::from_secs(10));
    client.signal(SIGINT);
    let out = client.wait(Duration::from_secs(10));
    assert_eq!(out.code, Some(3), "{out:?}");
    assert_eq!(out.out(), "ready\ngot-int\n");
}

#[test]
fn a_double_sigint_leaves_nothing_of_the_job_within_one_second() {
    if !rexec_tests::can_run("a_double_sigint_leaves_nothing_of_the_job_within_one_second") {
        return;
    }
    let cluster = Cluster::start(2);
    // Each rank survives the first SIGINT, and leaves a grandchild that called
    // setsid and double-forked (reparented to init) plus a plain orphan.
    let script = "trap 'echo first-int-$REXEC_RANK' INT; \
                  setsid sh -c 'sleep 1000 &'; (sleep 1000 &); \
                  read go; echo ready-$REXEC_RANK; while :; do sleep 1; done";
    let client = cluster
        .rexec()
        .stdin(b"go\n".to_vec())
        .args(["--nodes", "n1,n2", "sh", "-c", script])
        .spawn();
    client.wait_for_stdout("ready-0", Duration::from_secs(10));
    client.wait_for_stdout("ready-1", Duration::from_secs(10));
    let enough = wait_until(Duration::from_secs(5), || {
        cluster.marked(&[client.pid]).len() >= 8
    });
    assert!(enough.is_some(), "{:?}", cluster.marked(&[client.pid]));
    // Two per rank escaped the process tree: their parent is neither a job
    // process nor rexecd (init, or whatever reaps orphans here).
    let job = cluster.marked(&[client.pid]);
    let daemons: Vec<u32> = cluster.nodes.iter().filter_map(|n| n.pid()).collect();
    let escaped = job
        .iter()
        .filter(|p| {
            let ppid = rexec_tests::procs::parent(p.pid).unwrap_or(0);
            !job.iter().any(|q| q.pid == ppid) && !daemons.contains(&ppid)
        })
        .count();
    assert!(
        escaped >= 4,
        "the grandchildren left the job's process tree: {job:?}"
    );

    // A first SIGINT every rank handled in time, then the second.
    client.first_sigint(2);
    client.signal(SIGINT);
    let second = Instant::now();
    let gone = wait_until(Duration::from_secs(1), || {
        cluster.marked(&[client.pid]).is_empty() && cluster.job_cgroups().is_empty()
    });
    assert!(
        gone.is_some(),
        "one second after the second SIGINT: processes {:?}, cgroups {:?}",
        cluster.marked(&[client.pid]),
        cluster.job_cgroups()
    );
    let out = client.wait(Duration::from_secs(5));
    assert_eq!(out.code, Some(130), "{out:?}");
    assert!(
        out.stderr.contains("rexec: interrupted twice, aborting"),
        "{}",
        out.stderr
    );
    eprintln!("job gone {:?} after the second SIGINT", second.elapsed());
}

#[test]
fn hup_quit_usr1_usr2_and_term_are_forwarded() {
    if !rexec_tests::can_run("hup_quit_usr1_usr2_and_term_are_forwarded") {
        return;
    }
    forwarded_signals_reach_the_handlers(&Cluster::start(2));
}

#[test]
fn signals_rexecd_inherited_as_ignored_are_not_ignored_by_the_job() {
    if !rexec_tests::can_run("signals_rexecd_inherited_as_ignored_are_not_ignored_by_the_job") {
        return;
    }
    // rexecd started under nohup (or by anything that ignores signals) must
    // not pass that on: a shell cannot even trap a signal ignored at its start.
    let cluster = Cluster::start_with(ClusterOptions {
        node_ignored_signals: "HUP,INT,QUIT,USR1,USR2,TERM,RTMIN",
        ..ClusterOptions::default()
    });
    let out = cluster
        .rexec()
        .args(["--nodes", "n1", "grep", "SigIgn", "/proc/self/status"])
        .run();
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(
        out.out().split_whitespace().nth(1),
        Some("0000000000000000"),
        "{out:?}"
    );
    forwarded_signals_reach_the_handlers(&cluster);
}

/// The signals the client forwards as they are, sent one at a time to the client
/// process: each rank's handler runs once per signal, and the user sees exactly the
/// handlers' lines; SIGTERM (not trapped) ends both ranks and the client with 143,
/// and rexec itself prints nothing.
fn forwarded_signals_reach_the_handlers(cluster: &Cluster) {
    // Every trap is set before `ready`. The loop's sleeps run in the background (a
    // non-interactive shell starts them with SIGQUIT ignored, so no sleep dumps core)
    // and the shell's reports of sleeps killed by a signal go to /dev/null, so the
    // job's own stderr is empty. `wait` returns as soon as a trapped signal arrives.
    let script = "trap 'echo hup-$REXEC_RANK' HUP; trap 'echo quit-$REXEC_RANK' QUIT; \
                  trap 'echo usr1-$REXEC_RANK' USR1; trap 'echo usr2-$REXEC_RANK' USR2; \
                  read go; echo ready-$REXEC_RANK; \
                  while :; do sleep 0.05 & wait $!; done 2>/dev/null";
    let client = cluster
        .rexec()
        .stdin(b"go\n".to_vec())
        .args(["-l", "--nodes", "n1,n2", "sh", "-c", script])
        .spawn();
    let phases = [
        ("ready", None),
        ("usr1", Some(SIGUSR1)),
        ("hup", Some(SIGHUP)),
        ("quit", Some(SIGQUIT)),
        ("usr2", Some(SIGUSR2)),
    ];
    for (word, signal) in phases {
        if let Some(signal) = signal {
            client.signal(signal);
        }
        // Both ranks answer before the next signal goes out, so the lines come in
        // phases; within a phase the two ranks' lines may come in either order.
        client.wait_for_stdout(&format!("[0] {word}-0\n"), Duration::from_secs(10));
        client.wait_for_stdout(&format!("[1] {word}-1\n"), Duration::from_secs(10));
    }
    client.signal(SIGTERM);
    let out = client.wait(Duration::from_secs(10));
    assert_eq!(out.code, Some(143), "{out:?}");
    assert_eq!(
        out.stderr, "",
        "the user's own signal is no failure to report"
    );
    let text = out.out();
    let mut lines: Vec<&str> = text.lines().collect();
    for pair in lines.chunks_mut(2) {
        pair.sort_unstable();
    }
    let expected: Vec<String> = phases
        .iter()
        .flat_map(|(word, _)| [format!("[0] {word}-0"), format!("[1] {word}-1")])
        .collect();
    assert_eq!(
        lines, expected,
        "stdout, each phase sorted by rank: {text:?}"
    );
    assert!(text.ends_with('\n'), "{text:?}");
}
