//! Bytes in and out: stdout and stderr byte-exact (1 GiB of binary output
//! included), stdin to every rank or only rank 0, and a terminal for rank 0.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use rexec_tests::cluster::{Cluster, bin, shared_bin};
use rexec_tests::pattern::{self, Verifier};

/// The generator, where the test user on the nodes can run it (a regression:
/// from a clone in a root-only directory, every stream scenario exited 126).
fn testgen() -> String {
    static PATH: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    PATH.get_or_init(|| shared_bin("rexec-testgen").display().to_string())
        .clone()
}

#[test]
fn stdout_and_stderr_are_byte_exact() {
    if !rexec_tests::can_run("stdout_and_stderr_are_byte_exact") {
        return;
    }
    let cluster = Cluster::start(1);
    let script = format!("{0} 11 300001 && {0} 12 99999 >&2", testgen());
    let out = cluster.rexec().args(["sh", "-c", &script]).run();
    assert_eq!(out.code, Some(0));
    assert!(out.stdout == pattern::stream(11, 300_001), "stdout differs");
    assert!(
        out.stderr_bytes == pattern::stream(12, 99_999),
        "stderr differs"
    );
}

#[test]
fn one_gib_of_binary_output_arrives_intact() {
    if !rexec_tests::can_run("one_gib_of_binary_output_arrives_intact") {
        return;
    }
    const GIB: u64 = 1 << 30;
    let cluster = Cluster::start(1);
    let check = Arc::new(Mutex::new(Verifier::new(42)));
    let sink = check.clone();
    let start = Instant::now();
    let running = cluster
        .rexec()
        .args([testgen(), "42".into(), GIB.to_string()])
        .spawn_streaming(move |chunk| sink.lock().unwrap().feed(chunk));
    let out = running.wait(rexec_tests::rexec::RUN_LIMIT);
    let secs = start.elapsed().as_secs_f64();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let check = check.lock().unwrap();
    assert_eq!(check.mismatch, None, "first differing byte");
    assert_eq!(check.len(), GIB);
    eprintln!(
        "1 GiB through rexec (debug build, loopback TLS): {secs:.2} s, {:.0} MB/s",
        GIB as f64 / secs / 1e6
    );
}

#[test]
fn a_slow_reader_of_stdout_is_not_taken_for_a_dead_client() {
    if !rexec_tests::can_run("a_slow_reader_of_stdout_is_not_taken_for_a_dead_client") {
        return;
    }
    // Whoever reads rexec's stdout stops for twice the heartbeat timeouts (2s):
    // output waits, heartbeats keep flowing both ways, nothing is lost.
    let cluster = Cluster::start(1);
    let check = Arc::new(Mutex::new(Verifier::new(3)));
    let sink = check.clone();
    let mut first = true;
    let running = cluster
        .rexec()
        .args([testgen(), "3".into(), "50000000".into()])
        .spawn_streaming(move |chunk| {
            if std::mem::take(&mut first) {
                std::thread::sleep(std::time::Duration::from_secs(4));
            }
            sink.lock().unwrap().feed(chunk);
        });
    let out = running.wait(rexec_tests::rexec::RUN_LIMIT);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let check = check.lock().unwrap();
    assert_eq!((check.len(), check.mismatch), (50_000_000, None));
}

fn cksum(data: &[u8]) -> String {
    use std::io::Write;
    let mut child = std::process::Command::new("cksum")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(data).unwrap();
    let out = child.wait_with_output().unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

#[test]
fn stdin_reaches_every_rank() {
    if !rexec_tests::can_run("stdin_reaches_every_rank") {
        return;
    }
    let cluster = Cluster::start(2);
    let data = pattern::stream(5, 3 * 1024 * 1024 + 17);
    let out = cluster
        .rexec()
        .stdin(data.clone())
        .args(["-l", "--nodes", "n1,n2,n1", "cksum"])
        .run();
    assert_eq!(out.code, Some(0), "{out:?}");
    let sum = cksum(&data);
    let mut lines: Vec<String> = out.out().lines().map(str::to_string).collect();
    lines.sort();
    assert_eq!(lines, [0, 1, 2].map(|r| format!("[{r}] {sum}")));
}

#[test]
fn with_stdin_0_only_rank_0_reads_input() {
    if !rexec_tests::can_run("with_stdin_0_only_rank_0_reads_input") {
        return;
    }
    let cluster = Cluster::start(2);
    let data = b"only for rank zero\n".repeat(1000);
    let out = cluster
        .rexec()
        .stdin(data.clone())
        .args(["-l", "--stdin", "0", "--nodes", "n1,n2", "cksum"])
        .run();
    assert_eq!(out.code, Some(0), "{out:?}");
    let mut lines: Vec<String> = out.out().lines().map(str::to_string).collect();
    lines.sort();
    assert_eq!(
        lines,
        [
            format!("[0] {}", cksum(&data)),
            format!("[1] {}", cksum(b""))
        ]
    );

    let out = cluster
        .rexec()
        .stdin(data)
        .args(["--stdin", "none", "cksum"])
        .run();
    assert_eq!(out.out().trim(), cksum(b""));
}

#[test]
fn rank_0_gets_a_terminal_with_t() {
    if !rexec_tests::can_run("rank_0_gets_a_terminal_with_t") {
        return;
    }
    let cluster = Cluster::start(2);
    let script = "if test -t 0 && test -t 1; then echo tty-$REXEC_RANK; else echo pipe-$REXEC_RANK; fi; stty size 2>/dev/null || true";
    let out = cluster
        .rexec()
        .args(["-t", "--nodes", "n1,n2", "sh", "-c", script])
        .run();
    assert_eq!(out.code, Some(0), "{out:?}");
    let text = out.out();
    assert!(text.contains("tty-0\r\n"), "{text:?}");
    assert!(
        text.contains("24 80\r\n"),
        "no terminal here, so the default size: {text:?}"
    );
    assert!(text.contains("pipe-1\n"), "{text:?}");
}

#[test]
fn a_closed_stdout_ends_the_job_quietly_as_sigpipe_would() {
    if !rexec_tests::can_run("a_closed_stdout_ends_the_job_quietly_as_sigpipe_would") {
        return;
    }
    let cluster = Cluster::start(1);
    let line = format!(
        "set -o pipefail; {} yes | head -n 2",
        bin("rexec").display()
    );
    let out = std::process::Command::new("bash")
        .args(["-c", &line])
        // A directory the job's user can enter, as `Rexec` uses: from a clone
        // in a root-only folder, the node would otherwise say where it ran.
        .current_dir("/tmp")
        .env("REXEC_CONFIG", &cluster.config)
        .env(rexec_tests::procs::MARK_VAR, &cluster.mark)
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "y\ny\n");
    assert_eq!(String::from_utf8_lossy(&out.stderr), "", "quiet");
    assert_eq!(
        out.status.code(),
        Some(141),
        "128 + SIGPIPE, like a local `yes`"
    );
    let gone = rexec_tests::wait_until(std::time::Duration::from_secs(2), || {
        cluster.marked(&[]).is_empty() && cluster.job_cgroups().is_empty()
    });
    assert!(
        gone.is_some(),
        "the remote yes was stopped: {:?}",
        cluster.marked(&[])
    );
}
