//! MPI job start-up: from starting the launcher to MPI_Init returned on every rank, for
//! `rexec --mpi` (all ranks on one node, so shared memory as under mpiexec) against
//! MPICH's own `mpiexec.hydra` on this host (fork launcher), 4 and 16 ranks.
//!
//! `cargo bench -p rexec-tests --bench mpi_startup` (needs root, MPICH from
//! deploy/setup-host, and the rexec and rexecd binaries built next to this benchmark).
//!
//! Each rank of tests/mpi/init_time.c prints the wall-clock time its MPI_Init returned;
//! a run's start-up is the latest of those minus the time the launcher was spawned.
//! Median and 90th percentile of [`RUNS`] runs; the whole run (to the launcher's exit,
//! finalize and teardown included) beside it.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rexec_tests::cluster::{Cluster, bin};

const RUNS: usize = 15;

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
    let cluster = Cluster::start(1);

    println!(
        "MPI start-up to MPI_Init on every rank ({RUNS} runs)   median      p90   whole run (median)"
    );
    for n in [4usize, 16] {
        let nodes = vec!["n1"; n].join(",");
        let rexec = measure(n, || {
            let mut c = Command::new(bin("rexec"));
            c.args(["--mpi", "--nodes", &nodes, &prog])
                .env("REXEC_CONFIG", &cluster.config);
            c
        });
        row(&format!("rexec --mpi, {n} ranks"), rexec);
        let hydra = measure(n, || {
            let mut c = Command::new("mpiexec.hydra");
            c.args(["-launcher", "fork", "-n", &n.to_string(), &prog]);
            c
        });
        row(&format!("mpiexec.hydra (fork), {n} ranks"), hydra);
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

fn row(what: &str, (median, p90, whole): Stats) {
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "  {what:<40} {:>7.1} ms {:>7.1} ms {:>9.1} ms",
        ms(median),
        ms(p90),
        ms(whole)
    );
}
