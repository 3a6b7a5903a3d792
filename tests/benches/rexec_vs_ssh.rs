//! Launch latency and stdout and stdin throughput of `rexec` against a local run
//! and against `ssh localhost`, printed side by side.
//!
//! `cargo build --release -p rexec -p rexecd -p vexecd && cargo bench -p rexec-tests --bench rexec_vs_ssh`
//!
//! Starts four real rexecd (release build, next to this benchmark in
//! `target/release/`) announcing on a loopback multicast group, one vexecd
//! hearing them, and, when `/usr/sbin/sshd` exists, an OpenSSH server on a
//! free loopback port with a fresh host key and key authentication.
//! Launch: the median and 90th percentile of 30 runs of `/bin/true`, with
//! each of the three client set-ups: a `[nodes]` list, a `[selectors]` list,
//! and only `[discovery]` (the selector remembered in a warm cache; the first
//! run on a fresh cache, which listens on the group, is timed alone).
//! Throughput: `cat` of a 1 GiB file to the client's stdout (`/dev/null`),
//! best of 3; a local `cat FILE | cat` shows what one pipe costs on this
//! machine (the job's stdout is a pipe to rexecd). The other direction: the
//! same file fed to the client's stdin and counted by a remote `wc -c` (the
//! count is checked), against a local `cat FILE | wc -c`.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rexec_tests::cluster::{bin, bin_dir};
use rexec_tests::selectors::{self, Channel, Vexecd};
use rexec_tests::ssh::Sshd;

const RUNS: usize = 30;
const GIB: u64 = 1 << 30;

fn main() {
    for b in ["rexec", "rexecd", "vexecd", "rexec-testgen"] {
        if !bin_dir().join(b).exists() {
            println!(
                "rexec_vs_ssh: {b} is not built in {}; run `cargo build --release -p rexec -p rexecd -p vexecd -p rexec-tests` first",
                bin_dir().display()
            );
            return;
        }
    }
    let channel = Channel::loopback();
    let cluster = selectors::announcing_cluster(4, &channel);
    let vexecd = Vexecd::start(&cluster.pki, cluster.dir.path(), "v1", &channel, None);
    let heard = Instant::now() + Duration::from_secs(30);
    while vexecd.node_names().len() < 4 {
        assert!(
            Instant::now() < heard,
            "the selector did not hear all 4 nodes"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let with_selectors = selectors::client_config(
        &cluster,
        "bench-selectors.toml",
        &selectors::selectors_table(&[&vexecd]),
    );
    let with_discovery =
        selectors::client_config(&cluster, "bench-discovery.toml", &channel.table());
    let cache = cluster.dir.path().join("cache");
    let sshd = Sshd::start();
    let rexec_with = |config: &Path, args: &[&str]| {
        let mut c = Command::new(bin("rexec"));
        c.args(args)
            .env("REXEC_CONFIG", config)
            .env("REXEC_CACHE_DIR", &cache);
        c
    };
    let rexec = |args: &[&str]| rexec_with(&cluster.config, args);

    println!("launch latency of /bin/true ({RUNS} runs)       median      p90");
    let local = latency(|| Command::new("/bin/true"));
    row("local /bin/true", local);
    let one = latency(|| rexec(&["-n", "1", "/bin/true"]));
    row("rexec -n 1 /bin/true ([nodes])", one);
    let four = latency(|| rexec(&["-n", "4", "/bin/true"]));
    row("rexec -n 4 /bin/true ([nodes], 4 nodes)", four);
    let via_selector = latency(|| rexec_with(&with_selectors, &["-n", "1", "/bin/true"]));
    row("rexec -n 1 /bin/true ([selectors])", via_selector);
    let _ = fs::remove_dir_all(&cache);
    let first = once(rexec_with(&with_discovery, &["-n", "1", "/bin/true"]));
    println!(
        "  {:<38} {first:>7.2} ms (one run)",
        "rexec -n 1, [discovery], fresh cache"
    );
    let discovered = latency(|| rexec_with(&with_discovery, &["-n", "1", "/bin/true"]));
    row("rexec -n 1 /bin/true ([discovery], warm)", discovered);
    let ssh_launch = sshd.as_ref().map(|s| {
        let l = latency(|| s.command("/bin/true"));
        row("ssh localhost /bin/true", l);
        l
    });

    let dir = tempfile::Builder::new()
        .prefix("rexec-bench-")
        .tempdir()
        .expect("tempdir");
    let file = make_file(dir.path());
    println!("stdout throughput, cat of a 1 GiB file (best of 3)");
    let local = throughput(|| {
        let mut c = Command::new("sh");
        c.arg("-c").arg(format!("cat {} | cat", file.display()));
        c
    });
    println!(
        "  {:<38} {:>7.2} GB/s",
        "local cat FILE | cat (one pipe)", local
    );
    let through_rexec = throughput(|| rexec(&["cat", &file.display().to_string()]));
    println!("  {:<38} {:>7.2} GB/s", "rexec cat FILE", through_rexec);
    let through_ssh = sshd.as_ref().map(|s| {
        let t = throughput(|| s.command(&format!("cat {}", file.display())));
        println!("  {:<38} {:>7.2} GB/s", "ssh localhost cat FILE", t);
        t
    });

    println!("stdin throughput, 1 GiB file into wc -c (best of 3)");
    let local_in = throughput_in(&file, || {
        let mut c = Command::new("sh");
        c.arg("-c").arg("cat | wc -c");
        c
    });
    println!(
        "  {:<38} {:>7.2} GB/s",
        "local cat | wc -c (one pipe)", local_in
    );
    let rexec_in = throughput_in(&file, || rexec(&["wc", "-c"]));
    println!("  {:<38} {:>7.2} GB/s", "rexec wc -c < FILE", rexec_in);
    if let Some(s) = sshd.as_ref() {
        let t = throughput_in(&file, || s.command("wc -c"));
        println!("  {:<38} {:>7.2} GB/s", "ssh localhost wc -c < FILE", t);
    }

    println!("targets:");
    let at_most = |what: &str, (median, _): (f64, f64), limit: f64| {
        println!(
            "  {what} median <= {limit} ms: {} ({median:.2} ms)",
            verdict(median <= limit)
        );
    };
    at_most("rexec -n 1 [nodes]", one, 3.0);
    at_most("rexec -n 1 [selectors]", via_selector, 4.0);
    at_most("rexec -n 1 [discovery] warm", discovered, 4.0);
    at_most("rexec -n 4 [nodes]", four, 6.0);
    match ssh_launch {
        Some(s) => println!(
            "  rexec -n 1 >= 10x faster than ssh: {} ({:.1}x)",
            verdict(s.0 >= 10.0 * one.0),
            s.0 / one.0
        ),
        None => println!(
            "  ssh comparisons skipped: /usr/sbin/sshd is not installed (apt-get install openssh-server)"
        ),
    }
    println!(
        "  throughput >= 1 GB/s: {} ({through_rexec:.2} GB/s)",
        verdict(through_rexec >= 1.0)
    );
    if let Some(t) = through_ssh {
        println!(
            "  throughput >= ssh: {} ({:.2}x ssh)",
            verdict(through_rexec >= t),
            through_rexec / t
        );
    }
    println!(
        "  stdin >= stdout through rexec: {} ({rexec_in:.2} against {through_rexec:.2} GB/s)",
        verdict(rexec_in >= through_rexec)
    );
}

/// One run, in milliseconds.
fn once(mut c: Command) -> f64 {
    c.stdin(Stdio::null()).stdout(Stdio::null());
    let start = Instant::now();
    let status = c.status().expect("cannot run");
    let ms = start.elapsed().as_secs_f64() * 1e3;
    assert!(status.success(), "{c:?} failed: {status}");
    ms
}

fn verdict(ok: bool) -> &'static str {
    if ok { "met" } else { "NOT met" }
}

fn row(what: &str, (median, p90): (f64, f64)) {
    println!("  {what:<38} {median:>7.2} ms {p90:>7.2} ms");
}

/// Median and 90th percentile in milliseconds.
fn latency(mut make: impl FnMut() -> Command) -> (f64, f64) {
    let mut ms: Vec<f64> = (0..RUNS).map(|_| once(make())).collect();
    ms.sort_by(f64::total_cmp);
    (ms[RUNS / 2], ms[RUNS * 9 / 10])
}

/// Best of 3, in GB/s.
fn throughput(mut make: impl FnMut() -> Command) -> f64 {
    let mut best = f64::MAX;
    for _ in 0..3 {
        let mut c = make();
        let null = fs::File::create("/dev/null").expect("/dev/null");
        c.stdin(Stdio::null()).stdout(null);
        let start = Instant::now();
        let status = c.status().expect("cannot run");
        best = best.min(start.elapsed().as_secs_f64());
        assert!(status.success(), "{c:?} failed: {status}");
    }
    GIB as f64 / best / 1e9
}

/// Best of 3, in GB/s, of `make` reading `file` on its stdin; what it prints
/// must be the byte count.
fn throughput_in(file: &Path, mut make: impl FnMut() -> Command) -> f64 {
    let mut best = f64::MAX;
    for _ in 0..3 {
        let mut c = make();
        c.stdin(fs::File::open(file).expect("the test file"))
            .stdout(Stdio::piped());
        let start = Instant::now();
        let out = c.output().expect("cannot run");
        best = best.min(start.elapsed().as_secs_f64());
        assert!(out.status.success(), "{c:?} failed: {}", out.status);
        let counted = String::from_utf8_lossy(&out.stdout);
        assert_eq!(counted.trim(), GIB.to_string(), "{c:?} lost bytes");
    }
    GIB as f64 / best / 1e9
}

fn make_file(dir: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(dir, fs::Permissions::from_mode(0o755)).expect("chmod");
    let path = dir.join("gib");
    let out = fs::File::create(&path).expect("create");
    let status = Command::new(bin("rexec-testgen"))
        .args(["9", &GIB.to_string()])
        .stdout(out)
        .status()
        .expect("rexec-testgen");
    assert!(status.success());
    fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).expect("chmod");
    // Read it once so both contenders find it in the page cache.
    let _ = Command::new("cat")
        .arg(&path)
        .stdout(Stdio::null())
        .status();
    path
}
