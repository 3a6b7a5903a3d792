//! MPI job start-up: from starting the launcher to MPI_Init returned on every rank, for
//! `rexec --mpi` (all ranks on one node, so shared memory as under mpiexec) against
//! MPICH's own `mpiexec.hydra` on this host, forking its ranks and starting its proxy
//! over ssh on loopback, 4 and 16 ranks.
//!
//! `cargo build --profile bench -p rexec -p rexecd && cargo bench -p rexec-tests --bench
//! mpi_startup` (needs root, MPICH from deploy/setup-host, the rexec and rexecd binaries
//! built next to this benchmark, and openssh-server for the ssh rows).
//!
//! Each rank of tests/mpi/init_time.c prints the wall-clock time its MPI_Init returned;
//! a run's start-up is the latest of those minus the time the launcher was spawned.
//! Median and 90th percentile of [`RUNS`] runs; the whole run (to the launcher's exit,
//! finalize and teardown included) beside it.
//!
//! rexec runs twice: on a node with the market's default share control (`closed`: each
//! rank is a job whose CPU is capped at its share of the node, 1/16 of its CPUs with 16
//! ranks), and on one with `share_control = "open"` (weights only, no caps), which
//! isolates what the caps cost a job whose ranks spin while they wait for each other.
//!
//! Hydra forking runs twice too: as a user runs it, and inside a new CPU cgroup of the
//! default weight, as the rexecd node's jobs are (on a loaded host the group's weight,
//! not the launcher, decides how soon 16 ranks spinning in MPI_Init get through).
//!
//! Hydra over ssh: `mpiexec.hydra -launcher ssh -launcher-exec WRAPPER -hosts sshhost`,
//! where the wrapper ([`rexec_tests::ssh::Sshd::wrapper`]) sends every host name to a
//! throwaway sshd on loopback (Hydra forks without ssh when it is named `127.0.0.1`).

use std::path::Path;
use std::process::Command;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rexec_tests::cluster::{Cluster, ClusterOptions, bin};
use rexec_tests::ssh::Sshd;

const RUNS: usize = 15;
const SIZES: [usize; 2] = [4, 16];

fn main() {
    for b in ["rexec", "rexecd"] {
        if !rexec_tests::cluster::bin_dir().join(b).exists() {
            println!("mpi_startup: {b} is not built; run `cargo build -p rexec -p rexecd` first");
            return;
        }
    }
    let dir = tempfile::Builder::new()
        .prefix("rexec-mpi-bench-")
        .tempdir()
        .expect("tempdir");
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .expect("chmod");
    let prog = dir.path().join("init_time");
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("mpi/init_time.c");
    let built = Command::new("mpicc.mpich")
        .arg("-O2")
        .arg("-o")
        .arg(&prog)
        .arg(&source)
        .status()
        .expect("mpicc.mpich (deploy/setup-host installs mpich)");
    assert!(built.success(), "mpicc.mpich failed");
    let prog = prog.display().to_string();

    println!(
        "MPI start-up to MPI_Init on every rank ({RUNS} runs)      median      p90   whole run (median)"
    );
    let mut rexec = Vec::new();
    for share_control in ["closed", "open"] {
        // Clusters run one at a time (a test cluster holds a process-wide lock).
        let cluster = Cluster::start_with_node_config(
            ClusterOptions {
                nodes: 1,
                ..ClusterOptions::default()
            },
            |_, _, _| Some(format!("[market]\nshare_control = {share_control:?}\n")),
        );
        for n in SIZES {
            let nodes = vec!["n1"; n].join(",");
            let stats = measure(n, || {
                let mut c = Command::new(bin("rexec"));
                c.args(["--mpi", "--nodes", &nodes, &prog])
                    .env("REXEC_CONFIG", &cluster.config);
                c
            });
            row(&format!("rexec --mpi ({share_control}), {n} ranks"), stats);
            rexec.push((share_control, n, stats));
        }
    }
    let mut hydra = Vec::new();
    for n in SIZES {
        let stats = measure(n, || {
            let mut c = Command::new("mpiexec.hydra");
            c.args(["-launcher", "fork", "-n", &n.to_string(), &prog]);
            c
        });
        row(&format!("mpiexec.hydra (fork), {n} ranks"), stats);
        hydra.push(("fork", n, stats));
    }
    // The ranks of a rexec job run in the node's cgroup, one group of the default CPU
    // weight among whatever else the host runs; Hydra in such a group is the like for
    // like comparison on a loaded machine.
    if let Some(group) = Group::create() {
        for n in SIZES {
            let stats = measure(n, || {
                let mut c = Command::new("sh");
                c.arg("-c").arg(format!(
                    "echo $$ > {} && exec mpiexec.hydra -launcher fork -n {n} {prog}",
                    group.procs.display()
                ));
                c
            });
            row(
                &format!("mpiexec.hydra (fork, own cgroup), {n} ranks"),
                stats,
            );
            hydra.push(("fork, own cgroup", n, stats));
        }
    }
    let sshd = Sshd::start();
    let mut over_ssh = Vec::new();
    if let Some(sshd) = &sshd {
        let wrapper = sshd.wrapper();
        for n in SIZES {
            let stats = measure(n, || {
                let mut c = Command::new("mpiexec.hydra");
                c.args(["-launcher", "ssh", "-launcher-exec"])
                    .arg(&wrapper)
                    .args(["-hosts", "sshhost", "-n", &n.to_string(), &prog]);
                c
            });
            row(&format!("mpiexec.hydra (ssh), {n} ranks"), stats);
            over_ssh.push((n, stats));
        }
    }

    println!("targets (start-up medians):");
    for &(how, n, (fork, _, _)) in &hydra {
        for &(control, m, (ours, _, _)) in &rexec {
            if m == n {
                let ratio = ms(ours) / ms(fork);
                println!(
                    "  {n} ranks, rexec ({control}) within 2x of mpiexec ({how}): {} ({ratio:.2}x)",
                    verdict(ratio <= 2.0)
                );
            }
        }
    }
    for &(n, (ssh, _, _)) in &over_ssh {
        for &(control, m, (ours, _, _)) in &rexec {
            if m == n {
                let ratio = ms(ssh) / ms(ours);
                println!(
                    "  {n} ranks, rexec ({control}) 10x faster than mpiexec over ssh: {} ({ratio:.2}x)",
                    verdict(ratio >= 10.0)
                );
            }
        }
    }
    if sshd.is_none() {
        println!(
            "  ssh rows skipped: /usr/sbin/sshd is not installed (apt-get install openssh-server)"
        );
    }
}

/// A CPU cgroup of the default weight beside the others at the top, removed on drop.
struct Group {
    dir: std::path::PathBuf,
    procs: std::path::PathBuf,
}

impl Group {
    fn create() -> Option<Group> {
        let name = format!("rexec-bench-hydra-{}", std::process::id());
        let v1 = Path::new("/sys/fs/cgroup/cpu");
        let (dir, file) = match v1.is_dir() {
            true => (v1.join(name), "tasks"),
            false => (Path::new("/sys/fs/cgroup").join(name), "cgroup.procs"),
        };
        std::fs::create_dir(&dir).ok()?;
        let procs = dir.join(file);
        Some(Group { dir, procs })
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// (median, p90) of start-up, and the median whole run.
type Stats = (Duration, Duration, Duration);

fn measure(n: usize, command: impl Fn() -> Command) -> Stats {
    let mut startup = Vec::with_capacity(RUNS);
    let mut whole = Vec::with_capacity(RUNS);
    for _ in 0..RUNS {
        let began = SystemTime::now();
        let out = command().output().expect("launcher");
        let ended = began.elapsed().unwrap_or_default();
        assert!(out.status.success(), "{out:?}");
        let text = String::from_utf8_lossy(&out.stdout);
        let inits: Vec<u128> = text
            .lines()
            .filter_map(|l| l.strip_prefix("init ")?.parse().ok())
            .collect();
        assert_eq!(inits.len(), n, "{text}");
        let start = began.duration_since(UNIX_EPOCH).unwrap().as_nanos();
        let last = inits.into_iter().max().unwrap_or(start);
        startup.push(Duration::from_nanos(last.saturating_sub(start) as u64));
        whole.push(ended);
    }
    startup.sort();
    whole.sort();
    (startup[RUNS / 2], startup[RUNS * 9 / 10], whole[RUNS / 2])
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn verdict(ok: bool) -> &'static str {
    if ok { "met" } else { "NOT met" }
}

fn row(what: &str, (median, p90, whole): Stats) {
    println!(
        "  {what:<43} {:>7.1} ms {:>7.1} ms {:>9.1} ms",
        ms(median),
        ms(p90),
        ms(whole)
    );
}
