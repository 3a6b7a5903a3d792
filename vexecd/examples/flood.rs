//! Feed a running vexecd the announcements of many simulated nodes by
//! unicast, paced evenly over each period, and print what was sent: a load
//! generator for measuring the daemon (its CPU use from `/proc`, its
//! counters from a `Stats` request or its final log line).
//!
//! ```text
//! cargo run -p vexecd --example flood -- 127.0.0.1:7478 [nodes=10000] [period_ms=2000] [seconds=10] [cluster=rexec]
//! ```
//!
//! Every node sends a summary with its first announcement only (as rexecd
//! may), so most datagrams are the small common case.

use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use discovery::profile::summary::Summary;
use proto::announce::{Announcement, Kind, NodeStatus};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(to) = args.first().and_then(|a| a.parse::<SocketAddr>().ok()) else {
        eprintln!("usage: flood UDP_ADDR [nodes] [period_ms] [seconds] [cluster]");
        std::process::exit(2);
    };
    let arg = |i: usize, d: u64| args.get(i).and_then(|a| a.parse().ok()).unwrap_or(d);
    let nodes = arg(1, 10_000) as usize;
    let period = Duration::from_millis(arg(2, 2000));
    let seconds = arg(3, 10);
    let cluster = args.get(4).cloned().unwrap_or_else(|| "rexec".into());
    let socket = UdpSocket::bind("127.0.0.1:0").expect("a UDP socket");
    let summary = Summary::from_busy(&[0.3; 1008], 1.0).encode();
    let ticks_per_period = (period.as_millis() / 10).max(1) as usize;
    let per_tick = nodes.div_ceil(ticks_per_period);
    let start = Instant::now();
    let end = start + Duration::from_secs(seconds);
    let (mut sent, mut failed, mut round) = (0u64, 0u64, 0u64);
    let mut next = start;
    'outer: loop {
        for tick in 0..ticks_per_period {
            let first = tick * per_tick;
            for i in first..(first + per_tick).min(nodes) {
                let a = Announcement {
                    cluster: cluster.clone(),
                    name: format!("sim{i:05}"),
                    addr: SocketAddr::from(([10, (i >> 16) as u8, (i >> 8) as u8, i as u8], 7070)),
                    incarnation: 1,
                    seq: round,
                    period_ms: period.as_millis() as u32,
                    kind: Kind::Node(NodeStatus {
                        cpus: 8,
                        price: ((i * 7919 + round as usize * 13) % 10_000) as i64 * 1000,
                        charging: 0,
                        contended: false,
                        running_jobs: (i % 4) as u32,
                        runnable: (i % 4) as u32,
                        load_milli: (i % 8000) as u32,
                        idle_milli: 8000 - (i % 8000) as u32,
                        free_mem_mib: 16_384,
                    }),
                    summary: (round == 0).then(|| summary.clone()),
                };
                match socket.send_to(&a.encode().expect("a valid announcement"), to) {
                    Ok(_) => sent += 1,
                    Err(_) => failed += 1,
                }
            }
            next += period / ticks_per_period as u32;
            let now = Instant::now();
            if now >= end {
                break 'outer;
            }
            if next > now {
                std::thread::sleep(next - now);
            }
        }
        round += 1;
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "sent {sent} announcements of {nodes} nodes in {secs:.1} s ({:.0}/s), {failed} send errors",
        sent as f64 / secs
    );
}
