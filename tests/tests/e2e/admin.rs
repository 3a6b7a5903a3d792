//! `rexec jobs` and `rexec kill`, and the rule that `--` makes `jobs` a
//! program name.

use std::time::Duration;

use rexec_tests::cluster::{Cluster, TEST_USER};
use rexec_tests::wait_until;

#[test]
fn jobs_lists_a_running_job_and_kill_ends_it() {
    if !rexec_tests::can_run("jobs_lists_a_running_job_and_kill_ends_it") {
        return;
    }
    let cluster = Cluster::start(2);
    let client = cluster
        .rexec()
        .args(["--nodes", "n1,n2", "sleep", "1000"])
        .spawn();
    assert!(
        wait_until(Duration::from_secs(10), || cluster
            .marked(&[client.pid])
            .len()
            >= 2)
        .is_some()
    );

    let list = cluster.rexec().args(["jobs"]).run();
    assert_eq!(list.code, Some(0), "{list:?}");
    let rows: Vec<String> = list
        .out()
        .lines()
        .filter(|l| l.contains(TEST_USER) && l.contains("sleep"))
        .map(str::to_string)
        .collect();
    assert_eq!(rows.len(), 2, "{}", list.out());
    assert!(
        rows[0].starts_with("n1 ") && rows[1].starts_with("n2 "),
        "{rows:?}"
    );
    let job = rows[0].split_whitespace().nth(1).unwrap().to_string();
    assert!(rows[1].contains(&job), "same job on both nodes: {rows:?}");

    let kill = cluster.rexec().args(["kill", &job]).run();
    assert_eq!(kill.code, Some(0), "{kill:?}");
    assert!(
        kill.out().contains("node n1: signalled 1 rank(s)"),
        "{}",
        kill.out()
    );

    let out = client.wait(Duration::from_secs(10));
    assert_eq!(out.code, Some(137), "{out:?}");
    // A node unregisters a rank before it reports the exit, but the client
    // may stop waiting for a rank (after its abort grace) before that.
    let mut after = None;
    wait_until(Duration::from_secs(10), || {
        let out = cluster.rexec().args(["kill", &job]).run();
        let refused = out.code != Some(0);
        after = Some(out);
        refused
    });
    let after = after.expect("kill ran at least once");
    assert_eq!(after.code, Some(1), "{after:?}");
    assert!(after.stderr.contains("is not running"), "{}", after.stderr);
}

#[test]
fn a_program_called_jobs_runs_after_double_dash() {
    if !rexec_tests::can_run("a_program_called_jobs_runs_after_double_dash") {
        return;
    }
    let cluster = Cluster::start(1);
    let out = cluster.rexec().args(["--", "jobs"]).run();
    // There is no program called jobs on the node: the launch is what fails.
    assert_eq!(out.code, Some(127), "{out:?}");
    assert!(out.stderr.contains("node n1 (rank 0)"), "{}", out.stderr);
}
