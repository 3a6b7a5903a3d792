//! End-to-end numbers of the real `rexecd` binary over real mutual TLS on loopback,
//! measured with a raw protocol client (no `rexec` in the way):
//! - launch latency: TCP connect, TLS handshake, Hello, Launch of `/bin/true`, its
//!   `Exit` and the close — one rank's whole life;
//! - stdout throughput: a job writing 1 GiB of zeros (`head -c`), received and counted.
//!
//! Needs root and a cpu controller (it prints why it skips otherwise).
//! Run: `cargo bench -p rexecd --bench session`.

#[allow(dead_code)]
#[path = "../tests/daemon/util/mod.rs"]
mod util;

use std::time::{Duration, Instant};

use proto::node::{FromNode, ToNode};
use util::{Daemon, can_run, launch};

const LAUNCHES: usize = 100;
const BYTES: u64 = 1 << 30;

fn main() {
    if !can_run("session bench") {
        return;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let daemon = Daemon::start("bench", &[]);
    runtime.block_on(async {
        // Warm up (page cache, TLS session state).
        for _ in 0..5 {
            one_launch(&daemon).await;
        }
        let mut times: Vec<Duration> = Vec::with_capacity(LAUNCHES);
        for _ in 0..LAUNCHES {
            let start = Instant::now();
            one_launch(&daemon).await;
            times.push(start.elapsed());
        }
        times.sort();
        let pct = |p: usize| times[(times.len() * p / 100).min(times.len() - 1)];
        println!(
            "launch /bin/true (connect+TLS+launch+exit), {LAUNCHES} runs: median {:.2} ms, p90 {:.2} ms, min {:.2} ms",
            ms(pct(50)),
            ms(pct(90)),
            ms(times[0])
        );

        let mut c = daemon.user().await;
        let count = BYTES.to_string();
        c.start(launch(&["/usr/bin/head", "-c", &count, "/dev/zero"]))
            .await;
        let cpu_before = cpu_seconds(daemon.pid());
        let start = Instant::now();
        let mut received = 0u64;
        loop {
            match c.framed.recv::<FromNode>().await.unwrap() {
                Some(FromNode::Stdout(chunk)) => received += chunk.len() as u64,
                Some(FromNode::Exit(_)) | None => break,
                Some(_) => {}
            }
        }
        let elapsed = start.elapsed();
        let cpu = cpu_seconds(daemon.pid()) - cpu_before;
        assert_eq!(received, BYTES);
        println!(
            "stdout throughput, 1 GiB from head -c: {:.2} GB/s ({:.2} s); rexecd used {:.2} CPU-s per GiB",
            BYTES as f64 / elapsed.as_secs_f64() / 1e9,
            elapsed.as_secs_f64(),
            cpu
        );
    });
}

async fn one_launch(daemon: &Daemon) {
    let mut c = daemon.user().await;
    c.send(ToNode::Launch(launch(&["/bin/true"]))).await;
    loop {
        match c.framed.recv::<FromNode>().await.unwrap() {
            Some(FromNode::Exit(e)) => {
                assert!(e.status.success());
                return;
            }
            Some(FromNode::Error(e)) => panic!("{e}"),
            None => panic!("connection closed before Exit"),
            Some(_) => {}
        }
    }
}

/// User plus system CPU time of a process so far, in seconds.
fn cpu_seconds(pid: i32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = after.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of proc(5), in clock ticks.
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    ticks as f64
        / nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
            .unwrap()
            .unwrap() as f64
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}
