//! What a launch carries: exit status, environment, working directory, rank
//! variables, the Unix user; and refusals of users and certificates that
//! may not run jobs.

use std::time::Duration;

use certs::Role;
use rexec_tests::cluster::{Cluster, TEST_USER};
use rexec_tests::proxy::DelayProxy;

#[test]
fn exit_codes_propagate_and_the_first_failure_wins() {
    if !rexec_tests::can_run("exit_codes_propagate_and_the_first_failure_wins") {
        return;
    }
    let cluster = Cluster::start(2);
    let out = cluster.rexec().args(["sh", "-c", "exit 7"]).run();
    assert_eq!(out.code, Some(7), "{out:?}");

    // Rank 1 fails first, so its status is the one reported. Rank 0 waits
    // until rank 1 has run (a file it leaves), then a while longer for rank
    // 1's exit to reach the client: the two ranks may start far apart on a
    // loaded machine, so a plain sleep in rank 0 would not order them.
    let shared = tempfile::Builder::new()
        .prefix("rexec-order-")
        .tempdir()
        .unwrap();
    std::fs::set_permissions(
        shared.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    let marker = shared.path().join("rank1-ran");
    let script = format!(
        "if [ $REXEC_RANK = 1 ]; then touch {m}; exit 3; fi; \
         while [ ! -e {m} ]; do sleep 0.05; done; sleep 2; exit 4",
        m = marker.display()
    );
    let out = cluster
        .rexec()
        .args(["--nodes", "n1,n2", "sh", "-c", &script])
        .run();
    assert_eq!(out.code, Some(3), "{out:?}");

    let out = cluster.rexec().args(["-n", "3", "true"]).run();
    assert_eq!(out.code, Some(0), "{out:?}");
}

#[test]
fn environment_working_directory_and_rank_variables_arrive() {
    if !rexec_tests::can_run("environment_working_directory_and_rank_variables_arrive") {
        return;
    }
    let cluster = Cluster::start(2);
    let dir = tempfile::Builder::new()
        .prefix("rexec-cwd-")
        .tempdir()
        .unwrap();
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let script = "echo \"$REXEC_RANK $REXEC_NRANKS $REXEC_NODES $REXEC_JOB $(pwd) $GREETING\"";
    let out = cluster
        .rexec()
        .env("GREETING", "hello there")
        .cwd(dir.path())
        .args(["-l", "--nodes", "n2,n1,n2", "sh", "-c", script])
        .run();
    assert_eq!(out.code, Some(0), "{out:?}");
    let mut lines: Vec<String> = out.out().lines().map(str::to_string).collect();
    lines.sort();
    assert_eq!(lines.len(), 3, "{lines:?}");
    let job = lines[0].split(' ').nth(4).unwrap().to_string();
    assert_eq!(job.len(), 16, "REXEC_JOB is 16 hex digits: {job}");
    for (rank, line) in lines.iter().enumerate() {
        let want = format!(
            "[{rank}] {rank} 3 n2,n1,n2 {job} {} hello there",
            dir.path().display()
        );
        assert_eq!(line, &want);
    }
}

#[test]
fn the_program_runs_as_the_certificates_user() {
    if !rexec_tests::can_run("the_program_runs_as_the_certificates_user") {
        return;
    }
    let cluster = Cluster::start(1);
    let out = cluster.rexec().args(["id", "-un"]).run();
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(out.out(), format!("{TEST_USER}\n"));
}

#[test]
fn a_root_certificate_is_refused_and_nothing_runs() {
    if !rexec_tests::can_run("a_root_certificate_is_refused_and_nothing_runs") {
        return;
    }
    let cluster = Cluster::start(1);
    let config = cluster.client_config(Role::User, "root");
    let out = cluster.rexec().config(&config).args(["sleep", "100"]).run();
    assert_eq!(out.code, Some(255), "{out:?}");
    assert!(out.stderr.contains("node n1 (rank 0)"), "{}", out.stderr);
    assert!(out.stderr.contains("root"), "{}", out.stderr);
    assert_eq!(out.stderr.lines().count(), 1, "one line: {}", out.stderr);
    assert!(cluster.marked(&[]).is_empty());
    assert!(cluster.job_cgroups().is_empty());
}

#[test]
fn an_unknown_user_is_refused() {
    if !rexec_tests::can_run("an_unknown_user_is_refused") {
        return;
    }
    let cluster = Cluster::start(1);
    let config = cluster.client_config(Role::User, "nosuchuser42");
    let out = cluster.rexec().config(&config).args(["sleep", "100"]).run();
    assert_eq!(out.code, Some(255), "{out:?}");
    assert!(out.stderr.contains("node n1 (rank 0)"), "{}", out.stderr);
    assert!(out.stderr.contains("nosuchuser42"), "{}", out.stderr);
    assert_eq!(out.stderr.lines().count(), 1, "one line: {}", out.stderr);
    assert!(cluster.marked(&[]).is_empty());
    assert!(cluster.job_cgroups().is_empty());
}

#[test]
fn a_slow_launch_on_one_node_does_not_starve_the_ranks_already_running() {
    if !rexec_tests::can_run("a_slow_launch_on_one_node_does_not_starve_the_ranks_already_running")
    {
        return;
    }
    // n2 answers 3s late, past both heartbeat timeouts (2s): rank 0 on n1,
    // started at once, must be kept alive by heartbeats meanwhile.
    let cluster = Cluster::start(2);
    let proxy = DelayProxy::start(cluster.node("n2").addr, Duration::from_secs(3));
    let config = cluster.client_config_via("n2", proxy.addr);
    let out = cluster
        .rexec()
        .config(&config)
        .args([
            "-l",
            "--nodes",
            "n1,n2",
            "sh",
            "-c",
            "sleep 4; echo done-$REXEC_RANK",
        ])
        .run();
    assert_eq!(out.code, Some(0), "{out:?}");
    let mut lines: Vec<String> = out.out().lines().map(str::to_string).collect();
    lines.sort();
    assert_eq!(lines, ["[0] done-0", "[1] done-1"]);
}
