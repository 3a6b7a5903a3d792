//! vexecd's node table and policies under 10,000 simulated nodes, as a
//! daemon runs them: a child process (the simulated nodes) sends every
//! node's announcement, with its 507-byte availability summary, every 2 s
//! over UDP on loopback; in this process a receiving thread takes each
//! datagram through `NodeTable::ingest` under a write lock (and `expire`
//! once a period), while the main thread answers selects under a read lock.
//!
//! Prints the process's CPU use (getrusage: user + system time over wall
//! time, as % of one CPU) and resident memory (VmRSS) with the feed alone,
//! then select latency (median, p99; wall time including the lock, and the
//! thread's CPU time) per policy with the feed running, and what was lost.
//! `cargo bench -p vexecd --bench table`.

use std::hint::black_box;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, UdpSocket};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use proto::announce::{Announcement, Kind, NodeStatus};
use vexecd::clock::Now;
use vexecd::policy::PolicyName;
use vexecd::profile::SLOTS;
use vexecd::profile::summary::{Job, Summary};
use vexecd::rng::{RandomSource, SeedableRng, SplitMix64};
use vexecd::select::SelectRequest;
use vexecd::table::{NodeTable, TableConfig};

const NODES: usize = 10_000;
const PERIOD: Duration = Duration::from_secs(2);
/// Datagrams the sender sends back to back before pausing.
const BURST: usize = 10;
/// Periods with the feed alone (after one period of warm-up).
const FEED_PERIODS: u32 = 5;
/// Rounds of selects; each round asks every case once.
const ROUNDS: usize = 1_000;
/// Pause between two selects (a selector is not asked back to back).
const PAUSE: Duration = Duration::from_micros(500);
/// Each node's summary changes once in this many periods (a node's
/// profile moves a slot every ten minutes, 300 periods; this is 6 times
/// as often, to make the table decode some summaries every period).
const SUMMARY_CHANGE_PERIODS: u64 = 50;

// ---------------------------------------------------------------------------
// The simulated nodes (child process).

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

struct SimNode {
    name: String,
    addr: SocketAddr,
    cpus: u32,
    summary: Vec<u8>,
}

/// Send every node's announcement once a period, spread evenly over the
/// period, until stdin closes; then print how many were sent.
fn sender(target: SocketAddr) {
    let mut rng = SplitMix64::seed_from_u64(2026);
    let mut nodes: Vec<SimNode> = (0..NODES)
        .map(|i| SimNode {
            name: format!("node{i:05}.cluster.example"),
            addr: format!("10.{}.{}.{}:7400", i / 65536, (i / 256) % 256, i % 256)
                .parse()
                .unwrap(),
            cpus: [1, 2, 4, 8, 16, 32][rng.below(6)],
            summary: profile(&mut rng).encode(),
        })
        .collect();
    let stop = Arc::new(AtomicBool::new(false));
    std::thread::spawn({
        let stop = stop.clone();
        move || {
            let _ = std::io::stdin().read_to_end(&mut Vec::new());
            stop.store(true, Ordering::Relaxed);
        }
    });
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    let (mut sent, mut failed) = (0u64, 0u64);
    let start = Instant::now();
    let bursts = NODES.div_ceil(BURST);
    'periods: for seq in 0u64.. {
        for b in 0..bursts {
            if stop.load(Ordering::Relaxed) {
                break 'periods;
            }
            for (i, n) in nodes.iter_mut().enumerate().skip(b * BURST).take(BURST) {
                if (i as u64 + seq).is_multiple_of(SUMMARY_CHANGE_PERIODS) && seq > 0 {
                    // The node's profile moved: one slot's level changes.
                    let byte = 3 + rng.below(SLOTS / 2);
                    n.summary[byte] ^= 0x11;
                }
                let load = rng.below(n.cpus as usize * 1500) as u32;
                let datagram = Announcement {
                    cluster: proto::announce::DEFAULT_CLUSTER.into(),
                    summary: Some(n.summary.clone()),
                    name: n.name.clone(),
                    addr: n.addr,
                    incarnation: 1_700_000_000_000_000 + i as u64,
                    seq,
                    period_ms: PERIOD.as_millis() as u32,
                    kind: Kind::Node(NodeStatus {
                        cpus: n.cpus,
                        price: rng.below(20) as i64 * 250_000,
                        charging: 0,
                        contended: false,
                        running_jobs: rng.below(4) as u32,
                        runnable: rng.below(n.cpus as usize + 2) as u32,
                        load_milli: load,
                        idle_milli: n.cpus * 1000 - load.min(n.cpus * 1000),
                        free_mem_mib: 4096,
                    }),
                }
                .encode()
                .unwrap();
                match socket.send_to(&datagram, target) {
                    Ok(_) => sent += 1,
                    Err(_) => failed += 1,
                }
            }
            let due = start + PERIOD * seq as u32 + PERIOD * (b + 1) as u32 / bursts as u32;
            std::thread::sleep(due.saturating_duration_since(Instant::now()));
        }
    }
    println!("sent {sent} failed {failed}");
}

// ---------------------------------------------------------------------------
// The daemon side (this process).

fn thread_cpu() -> Duration {
    let t = nix::time::clock_gettime(nix::time::ClockId::CLOCK_THREAD_CPUTIME_ID).unwrap();
    Duration::new(t.tv_sec() as u64, t.tv_nsec() as u32)
}

/// User plus system CPU time of the whole process.
fn process_cpu() -> Duration {
    use nix::sys::resource::{UsageWho, getrusage};
    let u = getrusage(UsageWho::RUSAGE_SELF).unwrap();
    let tv =
        |t: nix::sys::time::TimeVal| Duration::new(t.tv_sec() as u64, t.tv_usec() as u32 * 1000);
    tv(u.user_time()) + tv(u.system_time())
}

fn rss_kib() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 * p) as usize).min(sorted.len() - 1)]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// The receiving thread: what a daemon's listener does.
struct Feed {
    table: Arc<RwLock<NodeTable>>,
    received: Arc<AtomicU64>,
    cpu_nanos: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
}

fn receive(socket: UdpSocket, feed: Feed) {
    let mut buf = [0u8; 2048];
    let mut last_expire = Instant::now();
    while !feed.stop.load(Ordering::Relaxed) {
        let Ok((len, from)) = socket.recv_from(&mut buf) else {
            continue; // read timeout: look at the stop flag
        };
        let now = Instant::now();
        let mut table = feed.table.write().unwrap();
        let _ = black_box(table.ingest(&buf[..len], Some(from.ip()), now));
        if now.duration_since(last_expire) >= PERIOD {
            table.expire(now);
            last_expire = now;
        }
        drop(table);
        feed.received.fetch_add(1, Ordering::Relaxed);
        feed.cpu_nanos
            .store(thread_cpu().as_nanos() as u64, Ordering::Relaxed);
    }
}

/// The reference for `history`: predict every node, keep the `count`
/// earliest (positions in the table).
fn predict_every_node(table: &NodeTable, req: &SelectRequest, now: Now) -> Vec<usize> {
    let cpu = req.expected_cpu.unwrap_or_default().as_secs_f64();
    let job = Job::new(now.week_secs() as f64, cpu);
    let mut all: Vec<(u64, usize)> = table
        .hot(now.instant)
        .filter_map(|(p, h)| Some((h.summary.as_ref()?.predict_of(&job)?.to_bits(), p)))
        .collect();
    let count = req.count.min(all.len());
    all.select_nth_unstable(count - 1);
    all.truncate(count);
    all.sort_unstable();
    black_box(all.into_iter().map(|(_, p)| p).collect())
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--sender") {
        sender(args[i + 1].parse().unwrap());
        return;
    }

    let socket = {
        let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::DGRAM, None).unwrap();
        // As a daemon would: room for a burst while the thread is off the CPU.
        let _ = s.set_recv_buffer_size(4 << 20);
        s.bind(&"127.0.0.1:0".parse::<SocketAddr>().unwrap().into())
            .unwrap();
        UdpSocket::from(s)
    };
    socket
        .set_read_timeout(Some(Duration::from_millis(50)))
        .unwrap();
    let target = socket.local_addr().unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--sender", &target.to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();

    let table = Arc::new(RwLock::new(NodeTable::new(TableConfig::default())));
    let received = Arc::new(AtomicU64::new(0));
    let feed_cpu = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let receiver = std::thread::spawn({
        let feed = Feed {
            table: table.clone(),
            received: received.clone(),
            cpu_nanos: feed_cpu.clone(),
            stop: stop.clone(),
        };
        move || receive(socket, feed)
    });

    // Warm-up: every node known, then one more period (all updates).
    let t0 = Instant::now();
    while table.read().unwrap().nodes(Instant::now()).count() < NODES {
        assert!(
            t0.elapsed() < PERIOD * 10,
            "the table never reached {NODES} nodes"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(PERIOD);

    // The feed alone.
    let (wall0, cpu0, feed0) = (
        Instant::now(),
        process_cpu(),
        feed_cpu.load(Ordering::Relaxed),
    );
    let got0 = received.load(Ordering::Relaxed);
    std::thread::sleep(PERIOD * FEED_PERIODS);
    let wall = wall0.elapsed();
    let cpu = process_cpu() - cpu0;
    let feed_thread = Duration::from_nanos(feed_cpu.load(Ordering::Relaxed) - feed0);
    let got = received.load(Ordering::Relaxed) - got0;
    let rss = rss_kib();
    let pct = |d: Duration| d.as_secs_f64() / wall.as_secs_f64() * 100.0;
    println!(
        "vexecd bench: {NODES} simulated nodes (child process) announcing every {} s over UDP on loopback, summary in every announcement; load average {}",
        PERIOD.as_secs(),
        load_average()
    );
    println!(
        "feed alone, {:.1} s: {got} datagrams ({:.0}/s); process CPU {:.1} ms = {:.2}% of one CPU (receiving thread {:.2}%); resident memory {:.1} MiB",
        wall.as_secs_f64(),
        got as f64 / wall.as_secs_f64(),
        ms(cpu),
        pct(cpu),
        pct(feed_thread),
        rss as f64 / 1024.0,
    );

    // Selects with the feed running.
    let mut cases: Vec<(String, SelectRequest)> = Vec::new();
    for p in PolicyName::ALL {
        let lengths: &[u64] = if p == PolicyName::History {
            &[3600, 24 * 3600]
        } else {
            &[3600]
        };
        for count in [4usize, 64] {
            for &length in lengths {
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
                cases.push((label, r));
            }
        }
    }
    let mut capped = SelectRequest::new(4, PolicyName::LowestPrice);
    capped.max_price = Some(1_000_000);
    cases.push(("lowest-price n=4 max-price=1.0".into(), capped));
    // References, not policies: `history`'s ranking with every node
    // predicted (no bounds), over the same table at the same moments.
    let references = cases.len();
    for length in [3600u64, 24 * 3600] {
        let mut r = SelectRequest::new(4, PolicyName::History);
        r.expected_cpu = Some(Duration::from_secs(length));
        cases.push((
            format!("(every node predicted) n=4 length={}h", length / 3600),
            r,
        ));
    }

    let mut wall_of = vec![Vec::with_capacity(ROUNDS); cases.len()];
    let mut cpu_of = vec![Vec::with_capacity(ROUNDS); cases.len()];
    let mut pick_rng = SplitMix64::seed_from_u64(7);
    let (wall1, cpu1, feed1) = (
        Instant::now(),
        process_cpu(),
        feed_cpu.load(Ordering::Relaxed),
    );
    let select_cpu0 = thread_cpu();
    for k in 0..ROUNDS {
        // A different time of the week each round (work hours and nights).
        let unix_secs = 1_704_067_200 + (k as u64 * 7919) % 604_800;
        for (c, (_, req)) in cases.iter().enumerate() {
            std::thread::sleep(PAUSE);
            let (cpu, start) = (thread_cpu(), Instant::now());
            let table = table.read().unwrap();
            let now = Now {
                instant: Instant::now(),
                unix_secs,
            };
            let picked = if c < references {
                table.select(req, now, &mut pick_rng).unwrap().len()
            } else {
                predict_every_node(&table, req, now).len()
            };
            drop(table);
            wall_of[c].push(start.elapsed());
            cpu_of[c].push(thread_cpu() - cpu);
            assert_eq!(picked, req.count);
        }
    }
    let wall = wall1.elapsed();
    let select_cpu = thread_cpu() - select_cpu0;
    let cpu = process_cpu() - cpu1;
    let feed_thread = Duration::from_nanos(feed_cpu.load(Ordering::Relaxed) - feed1);
    let pct = |d: Duration| d.as_secs_f64() / wall.as_secs_f64() * 100.0;
    println!(
        "selects with the feed running, {:.1} s: {ROUNDS} rounds of {} cases, {} us apart; process CPU {:.2}% of one CPU (selects {:.2}%, receiving thread {:.2}%)",
        wall.as_secs_f64(),
        cases.len(),
        PAUSE.as_micros(),
        pct(cpu),
        pct(select_cpu),
        pct(feed_thread),
    );
    println!(
        "  {:<32} {:>11} {:>9}   {:>10} {:>9}",
        "select latency", "wall median", "wall p99", "cpu median", "cpu p99"
    );
    for (c, (label, _)) in cases.iter().enumerate() {
        wall_of[c].sort();
        cpu_of[c].sort();
        println!(
            "  {label:<32} {:>8.3} ms {:>6.3} ms   {:>7.3} ms {:>6.3} ms",
            ms(percentile(&wall_of[c], 0.5)),
            ms(percentile(&wall_of[c], 0.99)),
            ms(percentile(&cpu_of[c], 0.5)),
            ms(percentile(&cpu_of[c], 0.99)),
        );
    }

    // Stop the nodes, let the last datagrams arrive, then stop receiving.
    drop(child.stdin.take());
    let mut report = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut report)
        .unwrap();
    child.wait().unwrap();
    std::thread::sleep(Duration::from_millis(200));
    stop.store(true, Ordering::Relaxed);
    receiver.join().unwrap();
    let counters = table.read().unwrap().counters();
    let sent: u64 = report
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    let received = received.load(Ordering::Relaxed);
    println!(
        "datagrams: {}, received {received} (lost in the socket {}), accepted {}, dropped {}, nodes forgotten {}",
        report.trim(),
        sent.saturating_sub(received),
        counters.stats.accepted,
        counters.dropped(),
        counters.stats.forgotten,
    );
    if counters.stats.forgotten > 0 || sent > received {
        println!(
            "note: datagrams were lost and nodes forgotten (the receiving thread or the sender was starved of CPU); the table held fewer than {NODES} nodes for a while"
        );
    }
    std::io::stdout().flush().unwrap();
    assert_eq!(
        counters.stats.accepted, received,
        "every datagram is accepted"
    );
}
