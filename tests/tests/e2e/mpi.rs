//! MPI programs through the market with `rexec --mpi`: a real MPICH program (Debian's
//! `mpich`, installed by deploy/setup-host), compiled here from tests/mpi/ring.c, finds
//! its peers through rexec's PMI server over the rank sessions: rank and size right,
//! an MPI_Allreduce right, a barrier, 4 MiB MPI_Sendrecv between ranks on different
//! nodes, on loopback and across network-namespace hosts. MPI_Abort, a rank killed with
//! SIGKILL and Ctrl-C at the client each end the job on every node, leaving no process
//! and no job cgroup; ranks that exit 0 without MPI_Finalize fail it. Two MPI jobs bidding 3 and 1 on one node get CPU and pay in about
//! that ratio. An Open MPI program (no PMI-1) under `--mpi` is told in one line that
//! its ranks ran alone.

use std::path::{Path, PathBuf};
use std::time::Duration;

use nix::sys::signal::Signal::{SIGINT, SIGKILL};
use rexec_tests::cluster::Cluster;
use rexec_tests::wait_until;

/// How long a job may take to disappear (a loaded machine can be slow).
const TEARDOWN: Duration = Duration::from_secs(15);

/// An MPI program compiled into a directory every user may enter.
pub struct Program {
    _dir: tempfile::TempDir,
    /// The executable.
    pub path: PathBuf,
}

/// Compiles tests/mpi/ring.c with `compiler` (`mpicc.mpich` or `mpicc.openmpi`).
pub fn compile(compiler: &str) -> Program {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::Builder::new()
        .prefix("rexec-mpi-")
        .tempdir()
        .unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("mpi/ring.c");
    let path = dir.path().join("ring");
    let out = std::process::Command::new(compiler)
        .arg("-O2")
        .arg("-o")
        .arg(&path)
        .arg(&source)
        .output()
        .unwrap_or_else(|e| {
            panic!("cannot run {compiler}: {e}; deploy/setup-host installs it (mpich, openmpi-bin)")
        });
    assert!(out.status.success(), "{compiler} failed: {out:?}");
    Program { _dir: dir, path }
}

/// The ring compiled with `compiler`, and three nodes to run it on.
pub fn ring_cluster(compiler: &str) -> (Program, Cluster) {
    (compile(compiler), Cluster::start(3))
}

/// Checks that every rank of the ring reported itself once with the right size.
pub fn assert_ranks_reported(stdout: &str, n: usize) {
    for rank in 0..n {
        let said = format!("rank {rank} of {n} on ");
        assert_eq!(
            stdout.lines().filter(|l| l.starts_with(&said)).count(),
            1,
            "rank {rank} should report itself once as one of {n}: {stdout}"
        );
    }
}

/// Checks the ring's output: every rank once with the right size, every check passed.
pub fn assert_ring_ok(stdout: &str, n: usize) {
    assert_ranks_reported(stdout, n);
    for rank in 0..n {
        let ok = format!("ok {rank} sum {}", n * (n - 1) / 2);
        assert!(stdout.lines().any(|l| l == ok), "no {ok:?}: {stdout}");
    }
}

pub fn assert_nothing_left(cluster: &Cluster, except: &[u32], what: &str) {
    let gone = wait_until(TEARDOWN, || {
        cluster.marked(except).is_empty() && cluster.job_cgroups().is_empty()
    });
    assert!(
        gone.is_some(),
        "{what}: still there after {TEARDOWN:?}: processes {:?}, cgroups {:?}\n{}",
        cluster.marked(except),
        cluster.job_cgroups(),
        cluster.logs()
    );
}

#[test]
fn an_mpich_job_of_four_ranks_on_three_nodes_finds_its_peers() {
    if !rexec_tests::can_run("an_mpich_job_of_four_ranks_on_three_nodes_finds_its_peers") {
        return;
    }
    let (program, cluster) = ring_cluster("mpicc.mpich");
    let prog = program.path.to_str().unwrap();
    let out = cluster
        .rexec()
        .args(["--mpi", "--nodes", "n1,n2,n3,n1", prog])
        .run();
    assert_eq!(out.code, Some(0), "{out:?}\n{}", cluster.logs());
    assert_ring_ok(&out.out(), 4);
    assert_nothing_left(&cluster, &[], "after the job");

    // Without --mpi the same program is four singletons: each believes it is rank 0 of 1.
    let out = cluster.rexec().args(["--nodes", "n1,n2,n3,n1", prog]).run();
    assert_singletons(&out, 4);
}

/// Checks that a run ended 0 with `n` singletons, each rank 0 of 1.
fn assert_singletons(out: &rexec_tests::rexec::Outcome, n: usize) {
    assert_eq!(out.code, Some(0), "{out:?}");
    let singletons = out
        .out()
        .lines()
        .filter(|l| l.starts_with("rank 0 of 1 "))
        .count();
    assert_eq!(singletons, n, "{out:?}");
}

/// The cluster's client file with `[mpi] default = true`, beside it (so that its
/// relative certificate paths still hold).
fn mpi_default_config(cluster: &Cluster) -> PathBuf {
    let text = std::fs::read_to_string(&cluster.config).unwrap();
    let config = cluster.config.with_file_name("client-mpi-default.toml");
    std::fs::write(&config, format!("{text}\n[mpi]\ndefault = true\n")).unwrap();
    config
}

/// The lines of `stderr` in which rexec speaks of `--mpi`.
fn mpi_lines(stderr: &str) -> Vec<&str> {
    stderr
        .lines()
        .filter(|l| l.starts_with("rexec: --mpi: "))
        .collect()
}

/// Open MPI does not speak PMI-1: under `--mpi` its ranks never open their PMI channel
/// and each runs alone, rank 0 of 1. rexec says so in one line naming the library, as
/// `--mpi` was typed or came from the client file's default; a program that opens the
/// channel (MPICH) gets no such line, nor does a plain program under the default, while
/// a plain program under a typed `--mpi` is told that no rank opened it.
#[test]
fn an_open_mpi_program_under_mpi_is_told_in_one_line_that_its_ranks_ran_alone() {
    if !rexec_tests::can_run(
        "an_open_mpi_program_under_mpi_is_told_in_one_line_that_its_ranks_ran_alone",
    ) {
        return;
    }
    let ompi = compile("mpicc.openmpi");
    let mpich = compile("mpicc.mpich");
    let cluster = Cluster::start(2);
    let default = mpi_default_config(&cluster);
    let prog = ompi.path.to_str().unwrap();

    for config in [&cluster.config, &default] {
        let mut args = vec!["--nodes", "n1,n2", prog];
        if *config == cluster.config {
            args.insert(0, "--mpi");
        }
        let out = cluster.rexec().config(config).args(&args).run();
        assert_singletons(&out, 2);
        let told = mpi_lines(&out.stderr);
        assert_eq!(told.len(), 1, "{args:?}: one line: {out:?}");
        eprintln!("{args:?}: {}", told[0]);
        for words in [
            "links Open MPI (libmpi.so.40), which does not speak PMI-1",
            "the 2 ranks ran as 2 separate one-rank MPI jobs",
            "mpirun.openmpi --mca plm_rsh_agent rexec-agent",
        ] {
            assert!(told[0].contains(words), "{words:?} in {out:?}");
        }
    }

    // MPICH opens the channel: one job of 2, nothing said.
    let out = cluster
        .rexec()
        .args(["--mpi", "--nodes", "n1,n2", mpich.path.to_str().unwrap()])
        .run();
    assert_eq!(out.code, Some(0), "{out:?}\n{}", cluster.logs());
    assert_ring_ok(&out.out(), 2);
    assert!(mpi_lines(&out.stderr).is_empty(), "{out:?}");

    // A program that is no MPI program: told only when --mpi was typed.
    let out = cluster
        .rexec()
        .args(["--mpi", "--nodes", "n1,n2", "/bin/true"])
        .run();
    assert_eq!(out.code, Some(0), "{out:?}");
    let told = mpi_lines(&out.stderr);
    assert_eq!(told.len(), 1, "{out:?}");
    assert!(
        told[0].contains("no rank of /bin/true opened its PMI channel"),
        "{out:?}"
    );
    let out = cluster
        .rexec()
        .config(&default)
        .args(["--nodes", "n1,n2", "/bin/true"])
        .run();
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(out.stderr.is_empty(), "{out:?}");
    assert_nothing_left(&cluster, &[], "after the jobs");
}

#[test]
fn the_client_files_mpi_default_makes_every_run_an_mpi_job() {
    if !rexec_tests::can_run("the_client_files_mpi_default_makes_every_run_an_mpi_job") {
        return;
    }
    let (program, cluster) = ring_cluster("mpicc.mpich");
    let prog = program.path.to_str().unwrap();
    let config = mpi_default_config(&cluster);
    let out = cluster
        .rexec()
        .config(&config)
        .args(["--nodes", "n1,n2,n3", prog])
        .run();
    assert_eq!(out.code, Some(0), "{out:?}\n{}", cluster.logs());
    assert_ring_ok(&out.out(), 3);
    // --no-mpi: three singletons, each rank 0 of 1.
    let out = cluster
        .rexec()
        .config(&config)
        .args(["--no-mpi", "--nodes", "n1,n2,n3", prog])
        .run();
    assert_singletons(&out, 3);
    assert_nothing_left(&cluster, &[], "after the jobs");
}

#[test]
fn mpi_abort_ends_every_rank_with_its_code() {
    if !rexec_tests::can_run("mpi_abort_ends_every_rank_with_its_code") {
        return;
    }
    let (program, cluster) = ring_cluster("mpicc.mpich");
    let prog = program.path.to_str().unwrap();
    let out = cluster
        .rexec()
        .args(["--mpi", "--nodes", "n1,n2,n3,n1", prog, "abort", "2"])
        .run();
    assert_eq!(out.code, Some(7), "{out:?}\n{}", cluster.logs());
    let err = &out.stderr;
    assert!(
        err.contains("(rank 2): called MPI_Abort (exit code 7)"),
        "{err}"
    );
    assert_nothing_left(&cluster, &[], "after MPI_Abort");
}

/// Regression: a rank that exited 0 without MPI_Finalize could have its exit reach the
/// client before the end of its PMI channel, and the job, its last rank gone, ended 0.
#[test]
fn ranks_that_exit_0_without_mpi_finalize_fail_the_job() {
    if !rexec_tests::can_run("ranks_that_exit_0_without_mpi_finalize_fail_the_job") {
        return;
    }
    let (program, cluster) = ring_cluster("mpicc.mpich");
    let prog = program.path.to_str().unwrap();
    for _ in 0..3 {
        let out = cluster
            .rexec()
            .args(["--mpi", "--nodes", "n1,n2,n3", prog, "nofinalize"])
            .run();
        // Every rank got through MPI_Init and the allreduce. Not every rank's last
        // line is owed, though: the first rank to exit without finalizing fails the
        // job, and the others are ended wherever they are, perhaps before their "ok"
        // line left the stdio buffer (seen once beside load). That first rank's own
        // line went out before its exit.
        let stdout = out.out();
        assert_ranks_reported(&stdout, 3);
        assert!(
            (0..3).any(|rank| stdout.lines().any(|l| l == format!("ok {rank} sum 3"))),
            "no rank finished the ring: {stdout}"
        );
        assert_eq!(out.code, Some(255), "{out:?}\n{}", cluster.logs());
        assert!(out.stderr.contains("MPI_Finalize"), "{out:?}");
        assert_nothing_left(&cluster, &[], "after ranks that did not finalize");
    }
}

#[test]
fn a_rank_killed_with_sigkill_ends_the_mpi_job_everywhere() {
    if !rexec_tests::can_run("a_rank_killed_with_sigkill_ends_the_mpi_job_everywhere") {
        return;
    }
    let (_program, cluster, client) = hanging_job();
    let victim = cluster
        .marked(&[client.pid])
        .into_iter()
        .find(|p| has_env(p.pid, "PMI_RANK=1"))
        .expect("no process of rank 1");
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(victim.pid as i32), SIGKILL).unwrap();
    let out = client.wait(TEARDOWN);
    assert_eq!(out.code, Some(128 + 9), "{out:?}\n{}", cluster.logs());
    assert!(
        out.stderr.contains("(rank 1): killed by SIGKILL"),
        "{out:?}"
    );
    assert_nothing_left(&cluster, &[], "after a rank was killed");
}

/// Four ranks of the ring on three nodes, past MPI_Init and hanging (each said
/// `ready RANK`).
fn hanging_job() -> (Program, Cluster, rexec_tests::rexec::Running) {
    let (program, cluster) = ring_cluster("mpicc.mpich");
    let prog = program.path.to_str().unwrap();
    let client = cluster
        .rexec()
        .args(["--mpi", "--nodes", "n1,n2,n3,n1", prog, "hang"])
        .spawn();
    for rank in 0..4 {
        client.wait_for_stdout(&format!("ready {rank}"), Duration::from_secs(60));
    }
    (program, cluster, client)
}

/// Whether process `pid` has `var` (`NAME=value`) in its environment.
fn has_env(pid: u32, var: &str) -> bool {
    std::fs::read(format!("/proc/{pid}/environ"))
        .is_ok_and(|env| env.split(|&b| b == 0).any(|v| v == var.as_bytes()))
}

#[test]
fn ctrl_c_at_the_client_ends_the_mpi_job_everywhere() {
    if !rexec_tests::can_run("ctrl_c_at_the_client_ends_the_mpi_job_everywhere") {
        return;
    }
    let (_program, cluster, client) = hanging_job();
    client.signal(SIGINT);
    let out = client.wait(TEARDOWN);
    assert_eq!(out.code, Some(130), "{out:?}\n{}", cluster.logs());
    assert_nothing_left(&cluster, &[], "after Ctrl-C");
}

#[test]
fn an_mpich_job_spans_three_hosts_over_their_announced_interface() {
    if !rexec_tests::can_run("an_mpich_job_spans_three_hosts_over_their_announced_interface") {
        return;
    }
    let program = compile("mpicc.mpich");
    let cluster = Cluster::start_with(rexec_tests::cluster::ClusterOptions {
        nodes: 3,
        net: Some(std::sync::Arc::new(rexec_tests::netns::Net::create(4))),
        ..rexec_tests::cluster::ClusterOptions::default()
    });
    let prog = program.path.to_str().unwrap();
    // The hosts' link is eth0 (their loopbacks are their own): UCX is told so, as
    // docs/OPERATIONS.md says to choose the interface.
    let out = cluster
        .rexec()
        .env("UCX_NET_DEVICES", "eth0")
        .args(["--mpi", "--nodes", "n1,n2,n3,n1", prog])
        .run();
    assert_eq!(out.code, Some(0), "{out:?}\n{}", cluster.logs());
    assert_ring_ok(&out.out(), 4);
    assert_nothing_left(&cluster, &[], "after the job");
}

#[test]
fn two_mpi_jobs_bidding_3_and_1_get_cpu_and_pay_in_that_ratio() {
    if !rexec_tests::can_run("two_mpi_jobs_bidding_3_and_1_get_cpu_and_pay_in_that_ratio") {
        return;
    }
    use rexec_tests::market::{MarketCluster, MarketOptions, parse_bills};
    let program = compile("mpicc.mpich");
    // One node selling 2 CPUs; each job puts 2 CPU-bound ranks on it, so the node is
    // contended while both run and the kernel weights decide.
    let m = MarketCluster::start(MarketOptions {
        cluster: rexec_tests::cluster::ClusterOptions {
            nodes: 1,
            ..Default::default()
        },
        ..MarketOptions::default()
    });
    let prog = program.path.to_str().unwrap();
    let job = |rate: &str| {
        m.rexec()
            .args([
                "-v", "--mpi", "-r", rate, "--nodes", "n1,n1", prog, "spin", "8",
            ])
            .spawn()
    };
    let (high, low) = (job("3"), job("1"));
    let (high, low) = (
        high.wait(Duration::from_secs(90)),
        low.wait(Duration::from_secs(90)),
    );
    let bill = |out: &rexec_tests::rexec::Outcome| {
        assert_eq!(out.code, Some(0), "{out:?}\n{}", m.logs());
        assert_ring_ok(&out.out(), 2);
        let bills = parse_bills(&out.stderr);
        assert_eq!(bills.len(), 1, "{out:?}");
        let cpu: f64 = bills[0].cpu_s.parse().unwrap();
        (cpu, bills[0].charged as f64)
    };
    let ((cpu_high, paid_high), (cpu_low, paid_low)) = (bill(&high), bill(&low));
    eprintln!(
        "bids 3:1 -> cpu {cpu_high:.2}:{cpu_low:.2} s, paid {paid_high}:{paid_low} micro-credits"
    );
    // CPU: the node's CPUs are the machine's, shared with whatever else runs on it,
    // which takes from the two jobs unevenly (the kernel weighs other work against
    // rexecd's whole parent group, per CPU). Measured at a load average of 14 to 16 on
    // the 2 shared CPUs: 2.87, 2.76, 2.78 and 1.95 (and 2.1 at 5 to 15 earlier); the
    // window stays where those fall until the caps hold the shares beside other work
    // (issue 41). It still fails jobs weighted alike (1) or the bids inverted (1/3).
    let cpu_ratio = cpu_high / cpu_low;
    assert!(
        (1.8..=4.5).contains(&cpu_ratio),
        "CPU {cpu_high:.2} s against {cpu_low:.2} s (ratio {cpu_ratio:.2}, model 3)"
    );
    // Paid: exact. Each job pays its bid for each of its ranks for as long as the node
    // is contended (three or four ranks on its two CPUs), so both jobs pay for the same
    // rank-seconds but for the moments their ranks join and leave apart: a job whose
    // second rank joins δ after its first pays δ less of 2 × 8 rank-seconds. Measured
    // at a load average of 14 to 16: ratios 2.999, 2.998, 2.993 and 3.089 (there the
    // jobs' paid rank-seconds were 17.22 and 16.72: δ = 0.5 s). 5% is δ up to 0.8 s.
    let per_rank_second = |bid: f64| bid * 1e6 / 60.0;
    let (secs_high, secs_low) = (
        paid_high / per_rank_second(3.0),
        paid_low / per_rank_second(1.0),
    );
    let paid_ratio = paid_high / paid_low;
    eprintln!("paid for {secs_high:.3} and {secs_low:.3} rank-seconds of contention");
    assert!(
        (paid_ratio / 3.0 - 1.0).abs() <= 0.05,
        "paid {paid_high} against {paid_low} (ratio {paid_ratio:.3}, bids 3:1; \
         {secs_high:.3} against {secs_low:.3} rank-seconds)"
    );
}
