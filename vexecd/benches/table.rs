//! The node table under 10,000 simulated nodes announcing every 2 s:
//! CPU time to ingest one period of announcements (decode, check, update),
//! resident memory, and select latency (median, p99) per policy.
//! `cargo bench -p vexecd --bench table`.

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use proto::announce::{Announcement, Kind, NodeStatus};
use vexecd::clock::Now;
use vexecd::policy::PolicyName;
use vexecd::profile::SLOTS;
use vexecd::profile::summary::Summary;
use vexecd::rng::{RandomSource, SplitMix64};
use vexecd::select::SelectRequest;
use vexecd::table::{NodeTable, TableConfig};

const NODES: usize = 10_000;
const PERIOD: Duration = Duration::from_secs(2);
const PERIODS: u64 = 20;
const SELECTS: usize = 2_000;

/// CPU time this thread has used (CLOCK_THREAD_CPUTIME_ID): unlike wall
/// time, it leaves out the time other processes on a shared machine hold
/// the CPU.
fn thread_cpu() -> Option<Duration> {
    let t = nix::time::clock_gettime(nix::time::ClockId::CLOCK_THREAD_CPUTIME_ID).ok()?;
    Some(Duration::new(t.tv_sec() as u64, t.tv_nsec() as u32))
}

fn rss_kib() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn announcement(i: usize, seq: u64, rng: &mut SplitMix64) -> Vec<u8> {
    let cpus = [1, 2, 4, 8, 16, 32][rng.below(6)];
    let load = rng.below(cpus as usize * 1500) as u32;
    Announcement {
        cluster: proto::announce::DEFAULT_CLUSTER.into(),
        summary: None,
        name: format!("node{i:05}.cluster.example"),
        addr: format!("10.{}.{}.{}:7400", i / 65536, (i / 256) % 256, i % 256)
            .parse()
            .unwrap(),
        incarnation: 1_700_000_000_000_000 + i as u64,
        seq,
        period_ms: PERIOD.as_millis() as u32,
        kind: Kind::Node(NodeStatus {
            cpus,
            price: rng.below(20) as i64 * 250_000,
            running_jobs: rng.below(4) as u32,
            runnable: rng.below(cpus as usize + 2) as u32,
            load_milli: load,
            idle_milli: cpus * 1000 - load.min(cpus * 1000),
            free_mem_mib: 0,
        }),
    }
    .encode()
    .unwrap()
}

fn profile(rng: &mut SplitMix64) -> Summary {
    let base = rng.unit() * 0.6;
    let busy: Vec<f64> = (0..SLOTS)
        .map(|s| {
            let hour = (s % 144) / 6;
            let work = s / 144 < 5 && (8..18).contains(&hour);
            if work {
                (base + rng.unit() * 0.4).min(1.0)
            } else {
                rng.unit() * 0.1
            }
        })
        .collect();
    Summary::from_busy(&busy, 0.5 + rng.unit())
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 * p) as usize).min(sorted.len() - 1)]
}

fn main() {
    let rss_start = rss_kib();
    let mut rng = SplitMix64::new(2026);
    let periods: Vec<Vec<Vec<u8>>> = (0..PERIODS)
        .map(|seq| (0..NODES).map(|i| announcement(i, seq, &mut rng)).collect())
        .collect();
    let rss_datagrams = rss_kib();

    let t0 = Instant::now();
    let mut table = NodeTable::new(TableConfig::default());
    let mut ingest_cpu = Vec::new();
    let mut ingest_wall = Vec::new();
    for (k, datagrams) in periods.iter().enumerate() {
        let at = t0 + PERIOD * k as u32;
        let (c, w) = (thread_cpu(), Instant::now());
        for d in datagrams {
            let _ = black_box(table.ingest(d, None, at));
        }
        table.expire(at);
        ingest_wall.push(w.elapsed());
        if let (Some(before), Some(after)) = (c, thread_cpu()) {
            ingest_cpu.push(after - before);
        }
        if k == 0 {
            for i in 0..NODES {
                table.set_summary(
                    &format!("node{i:05}.cluster.example"),
                    Arc::new(profile(&mut rng)),
                );
            }
        }
    }
    assert_eq!(
        table.nodes(t0 + PERIOD * (PERIODS as u32 - 1)).count(),
        NODES
    );
    assert_eq!(table.counters().accepted, NODES as u64 * PERIODS);
    let rss_table = rss_kib();

    // Steady state only (every period after the first updates known nodes).
    let steady = |v: &[Duration]| {
        let mut s = v[1..].to_vec();
        s.sort();
        s
    };
    let cpu = if ingest_cpu.len() == ingest_wall.len() {
        steady(&ingest_cpu)
    } else {
        steady(&ingest_wall)
    };
    let cpu_label = if ingest_cpu.len() == ingest_wall.len() {
        "thread CPU"
    } else {
        "wall"
    };
    println!(
        "vexecd node table, {NODES} nodes announcing every {} s",
        PERIOD.as_secs()
    );
    println!(
        "ingest one period of {NODES} announcements ({cpu_label}): median {:.2} ms, max {:.2} ms = {:.2}% of one CPU (median), first period (all new) {:.2} ms",
        percentile(&cpu, 0.5).as_secs_f64() * 1e3,
        cpu.last().unwrap().as_secs_f64() * 1e3,
        percentile(&cpu, 0.5).as_secs_f64() / PERIOD.as_secs_f64() * 100.0,
        ingest_wall[0].as_secs_f64() * 1e3,
    );
    println!(
        "resident memory: {:.1} MiB total; table with summaries {:.1} MiB (process at start {:.1} MiB, test datagrams {:.1} MiB)",
        rss_table as f64 / 1024.0,
        rss_table.saturating_sub(rss_datagrams) as f64 / 1024.0,
        rss_start as f64 / 1024.0,
        rss_datagrams.saturating_sub(rss_start) as f64 / 1024.0,
    );

    let now_at = t0 + PERIOD * (PERIODS as u32 - 1);
    let cases: Vec<(String, SelectRequest)> = {
        let mut v = Vec::new();
        for p in PolicyName::ALL {
            for (count, length) in [(4usize, 3600u64), (64, 24 * 3600)] {
                let mut r = SelectRequest::new(count, p);
                r.expected_cpu = Some(Duration::from_secs(length));
                r.exclude = vec![
                    "node00001.cluster.example".into(),
                    "node00002.cluster.example".into(),
                ];
                let label = if p == PolicyName::History {
                    format!("{p} n={count} length={}h", length / 3600)
                } else {
                    format!("{p} n={count}")
                };
                v.push((label, r));
            }
        }
        let mut capped = SelectRequest::new(4, PolicyName::LowestPrice);
        capped.max_price = Some(1_000_000);
        v.push(("lowest-price n=4 max-price=1.0".into(), capped));
        v
    };
    let mut pick_rng = SplitMix64::new(7);
    println!("select latency over {SELECTS} requests each, wall and thread CPU (median, p99):");
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    for (label, req) in &cases {
        let mut wall = Vec::with_capacity(SELECTS);
        let mut cpu = Vec::with_capacity(SELECTS);
        for k in 0..SELECTS {
            let now = Now {
                instant: now_at,
                unix_secs: 1_704_067_200 + (k as u64 * 7919) % 604_800,
            };
            let (c, start) = (thread_cpu(), Instant::now());
            let picked = table.select(req, now, &mut pick_rng).unwrap();
            wall.push(start.elapsed());
            if let (Some(a), Some(b)) = (c, thread_cpu()) {
                cpu.push(b - a);
            }
            black_box(picked);
        }
        wall.sort();
        cpu.sort();
        print!(
            "  {label:<32} wall median {:>6.3} ms p99 {:>6.3} ms",
            ms(percentile(&wall, 0.5)),
            ms(percentile(&wall, 0.99))
        );
        if !cpu.is_empty() {
            print!(
                "   cpu median {:>6.3} ms p99 {:>6.3} ms",
                ms(percentile(&cpu, 0.5)),
                ms(percentile(&cpu, 0.99))
            );
        }
        println!();
    }
}
