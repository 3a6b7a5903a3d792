//! `mpirun` and `mpiexec` through rexec: Open MPI (`--mca plm_rsh_agent`) and MPICH's
//! Hydra (`-launcher ssh -launcher-exec`) start their per-node daemons with
//! `rexec-agent`, each a one-rank rexec job on the named node (all "hosts" are nodes on
//! this machine). The MPI ranks are the daemons' children: they run in the jobs'
//! cgroups, show in `rexec jobs`, and die with the jobs. On a contended node the agent's
//! job is charged in the ledger at the bid the user gave the launcher (`REXEC_RATE`).

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal::SIGINT;
use rexec_tests::cluster::{Cluster, bin};
use rexec_tests::procs::MARK_VAR;
use rexec_tests::wait_until;

use super::mpi::{assert_nothing_left, assert_ring_ok, ring_cluster};

/// How long a launcher may take to run the ring.
const RUN_LIMIT: Duration = Duration::from_secs(120);

/// A launcher command line with the cluster's client configuration and mark, run in
/// `/tmp`. Both launchers ask their remote daemons to enter the launcher's working
/// directory, and the daemons run as the test user: the test's own directory may be
/// closed to that user (a clone under a `mktemp -d` directory, mode 0700), and the
/// launchers then fail ("unable to change wdir") before any rank starts.
fn launcher(cluster: &Cluster, program: &str, args: &[&str]) -> Command {
    let mut cmd = Command::new(program);
    cmd.args(args)
        .current_dir("/tmp")
        .env("REXEC_CONFIG", &cluster.config)
        .env(MARK_VAR, &cluster.mark)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

/// Waits for `child` at most `limit` (killing it after that) and returns its output.
fn finish(mut child: Child, limit: Duration) -> std::process::Output {
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > limit {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

/// Every node ran a job (the agent's), as its log says.
fn assert_each_node_ran_a_job(cluster: &Cluster) {
    for node in &cluster.nodes {
        let log = std::fs::read_to_string(&node.log).unwrap_or_default();
        assert!(
            log.contains("job started"),
            "node {} started no job: {log}",
            node.name
        );
    }
}

/// Runs a launcher of the 4-rank ring and checks it: right output, every node ran the
/// agent's job, nothing left.
fn run_ring(cluster: &Cluster, mut launcher: Command) {
    let out = finish(launcher.spawn().unwrap(), RUN_LIMIT);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}\n{}", cluster.logs());
    assert_ring_ok(&stdout, 4);
    assert_each_node_ran_a_job(cluster);
    assert_nothing_left(cluster, &[], "after the launcher");
}

/// `mpiexec.hydra` starting its proxies on `hosts` through the agent, `n` ranks of
/// `program` (and its arguments).
fn hydra(cluster: &Cluster, hosts: &str, n: u32, program: &[&str]) -> Command {
    let agent = agent();
    let n = n.to_string();
    let mut args = vec!["-launcher", "ssh", "-launcher-exec", &agent];
    args.extend(["-hosts", hosts, "-n", &n]);
    args.extend(program);
    launcher(cluster, "mpiexec.hydra", &args)
}

fn agent() -> String {
    bin("rexec-agent").display().to_string()
}

/// A wrapper of `rexec-agent` in `dir` that gives each host's Open MPI daemon a
/// tmpdir of its own (`dir/HOST`, through `OMPI_MCA_orte_tmpdir_base` set in the
/// remote command), as separate machines have separate `/tmp`s. Open MPI keeps one
/// session tree per host and user there and expects one daemon per host: here every
/// host is this machine, and daemons sharing the tree sometimes remove a directory
/// another is creating ("A call to mkdir was unable to create the desired
/// directory", about once in 30 runs).
fn per_host_tmpdir_agent(dir: &std::path::Path) -> String {
    use std::os::unix::fs::PermissionsExt;
    let script = dir.join("agent");
    let text = format!(
        r#"#!/bin/sh
# The host is the first argument named like a node; the remote command follows it.
base='{base}'
host=
first=
for a in "$@"; do
    shift
    if [ -z "$host" ]; then
        case $a in n[0-9]*) host=$a ;; esac
        set -- "$@" "$a"
    elif [ -z "$first" ]; then
        first=1
        mkdir -p "$base/$host" && chmod 1777 "$base/$host"
        set -- "$@" "export OMPI_MCA_orte_tmpdir_base=$base/$host;" "$a"
    else
        set -- "$@" "$a"
    fi
done
exec '{agent}' "$@"
"#,
        base = dir.display(),
        agent = agent(),
    );
    std::fs::write(&script, text).unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    // The daemons run as the test user: the directories must be theirs to enter.
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    script.display().to_string()
}

#[test]
fn mpiexec_hydra_starts_its_proxies_through_rexecd() {
    if !rexec_tests::can_run("mpiexec_hydra_starts_its_proxies_through_rexecd") {
        return;
    }
    let (program, cluster) = ring_cluster("mpicc.mpich");
    let prog = program.path.to_str().unwrap();
    run_ring(&cluster, hydra(&cluster, "n1,n2,n3", 4, &[prog]));
}

#[test]
fn mpirun_open_mpi_starts_its_daemons_through_rexecd() {
    if !rexec_tests::can_run("mpirun_open_mpi_starts_its_daemons_through_rexecd") {
        return;
    }
    let (program, cluster) = ring_cluster("mpicc.openmpi");
    let prog = program.path.to_str().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let agent = per_host_tmpdir_agent(tmp.path());
    let args = [
        "--allow-run-as-root",
        "--mca",
        "plm_rsh_agent",
        &agent,
        "--host",
        "n1:2,n2:1,n3:1",
        "-np",
        "4",
        prog,
    ];
    let mut cmd = launcher(&cluster, "mpirun.openmpi", &args);
    cmd.env("OMPI_MCA_plm_rsh_agent", &agent);
    run_ring(&cluster, cmd);
}

#[test]
fn a_launchers_ranks_live_in_the_job_cgroups_and_die_with_them() {
    if !rexec_tests::can_run("a_launchers_ranks_live_in_the_job_cgroups_and_die_with_them") {
        return;
    }
    let (program, cluster) = ring_cluster("mpicc.mpich");
    let prog = program.path.to_str().unwrap();
    let output = tempfile::NamedTempFile::new().unwrap();
    let mut cmd = hydra(&cluster, "n1,n2,n3", 4, &[prog, "hang"]);
    cmd.stdout(output.reopen().unwrap());
    let child = cmd.spawn().unwrap();
    let ready = wait_until(RUN_LIMIT, || {
        let text = std::fs::read_to_string(output.path()).unwrap_or_default();
        (0..4).all(|r| text.contains(&format!("ready {r}\n")))
    });
    assert!(
        ready.is_some(),
        "the ranks never got ready: {:?}\n{}",
        std::fs::read_to_string(output.path()),
        cluster.logs()
    );
    // Every rank is inside one of the nodes' job cgroups.
    let ranks: Vec<_> = cluster
        .marked(&[])
        .into_iter()
        .filter(|p| p.cmd.starts_with(prog))
        .collect();
    assert_eq!(ranks.len(), 4, "{ranks:?}");
    for rank in &ranks {
        let cgroups = std::fs::read_to_string(format!("/proc/{}/cgroup", rank.pid)).unwrap();
        let inside = cluster
            .nodes
            .iter()
            .any(|n| cgroups.contains(&format!("{}/job-", n.cgroup_parent)));
        assert!(inside, "rank {} is in no job cgroup: {cgroups}", rank.pid);
    }
    // Each node lists the agent's job.
    let jobs = cluster.rexec().args(["jobs"]).run();
    for node in ["n1", "n2", "n3"] {
        let listed = jobs
            .out()
            .lines()
            .any(|l| l.starts_with(node) && l.ends_with(" sh"));
        assert!(listed, "no job of the agent on {node}: {jobs:?}");
    }
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), SIGINT).unwrap();
    // Hydra ends its proxies (through the agents) and exits, with status 0 here.
    let out = finish(child, RUN_LIMIT);
    assert!(out.status.code().is_some(), "mpiexec did not exit: {out:?}");
    assert_nothing_left(&cluster, &[], "after mpiexec was interrupted");
}

#[test]
fn an_agents_job_on_a_contended_node_is_charged_at_the_users_bid() {
    if !rexec_tests::can_run("an_agents_job_on_a_contended_node_is_charged_at_the_users_bid") {
        return;
    }
    use rexec_tests::cluster::{ClusterOptions, TEST_USER};
    use rexec_tests::market::{MarketCluster, MarketOptions};
    let program = super::mpi::compile("mpicc.mpich");
    let prog = program.path.to_str().unwrap();
    // One node selling one CPU: the other job's spinning and the MPI rank's contend it.
    let m = MarketCluster::start(MarketOptions {
        cluster: ClusterOptions {
            nodes: 1,
            ..ClusterOptions::default()
        },
        cpus: 1,
        ..MarketOptions::default()
    });
    let spin = "$|=1; print \"$ENV{REXEC_JOB}\\n\"; $e=time+120; 1 while time<$e";
    let other = m
        .rexec()
        .args(["-r", "1", "--nodes", "n1", "perl", "-e", spin])
        .spawn();
    other.wait_for_stdout("\n", Duration::from_secs(60));
    let other_job = other.stdout_now().trim().to_string();
    assert_eq!(other_job.len(), 16, "not a job id: {other_job:?}");
    // Hydra's proxy on n1 through the agent, at a bid of 3; its one rank spins 8 s by
    // time(), so at least 7 s.
    let mut cmd = hydra(&m, "n1", 1, &[prog, "spin", "8"]);
    cmd.env("REXEC_RATE", "3");
    let started = Instant::now();
    let out = finish(cmd.spawn().unwrap(), RUN_LIMIT);
    let wall = started.elapsed().as_secs_f64();
    assert!(out.status.success(), "{out:?}\n{}", m.logs());
    assert_ring_ok(&String::from_utf8_lossy(&out.stdout), 1);
    other.signal(SIGINT);
    let _ = other.wait(RUN_LIMIT);

    // The agent's job is the user's other job on n1 in the ledger. Contended all its
    // life, it pays its bid (3 credits a minute) for about that long: nearly the 7 s its
    // rank spun (a 250 ms tick may be lost at each end), at most the launcher's whole
    // run (a bid of 1 would show a third).
    let mut paid_seconds = 0.0;
    let mut history = Vec::new();
    let charged = wait_until(RUN_LIMIT, || {
        history = m.accountd.history(TEST_USER);
        let micros: i64 = history
            .iter()
            .filter(|e| e.kind == "debit" && e.node == "n1" && e.job != other_job)
            .map(|e| -e.amount)
            .sum();
        paid_seconds = micros as f64 / 1e6 / 3.0 * 60.0;
        paid_seconds >= 6.0
    });
    assert!(
        charged.is_some(),
        "the agent's job paid for {paid_seconds:.2} s at a bid of 3, not its 7 s of spinning: {history:?}\n{}",
        m.logs()
    );
    eprintln!(
        "the agent's job paid for {paid_seconds:.2} s at a bid of 3; the launcher ran {wall:.2} s"
    );
    assert!(
        paid_seconds <= wall + 1.0,
        "the agent's job paid for {paid_seconds:.2} s at a bid of 3, longer than the launcher ran ({wall:.2} s): {history:?}"
    );
    assert_nothing_left(&m, &[], "after the agent's job");
}
