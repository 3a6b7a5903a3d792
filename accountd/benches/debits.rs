//! Durable debits per second and latency percentiles with 1, 8 and 64
//! concurrent node connections, for group commit against one transaction per
//! debit (`max_batch = 1`), in the same run. Real TLS, real SQLite file with
//! `synchronous=FULL`, the real server entry point; each connection is one
//! node sending debits back to back (a debit is counted when its durable
//! acknowledgement arrives). Run with `cargo bench -p accountd --bench debits`.
//!
//! `DEBITS_POSTGRES=1` measures, in the same run, group commit at 64
//! connections on SQLite, on PostgreSQL behind one accountd, and behind two
//! accountd sharing the database (32 connections each), on a real PostgreSQL
//! server of the benchmark's own (`testhost::postgres`, fsync on).
//!
//! With `DEBITS_POSTGRES=1` the same three ledgers are also measured with
//! many debits to a frame: each connection sends `Debits` requests of
//! [`FRAME`] debits back to back (each debit counted when its frame's durable
//! answer arrives; its latency is the frame's). The target
//! (PostgreSQL, two accountd) is judged on that mode, and the single-debit
//! figure printed beside it.
//!
//! The hash chain's cost is measured on its own (SHA-256 of one debit's
//! canonical content, as the writer computes it) and printed as a share of
//! each mode's time per debit. Each mode also prints the CPU time per debit
//! of the benchmark's threads and of PostgreSQL's processes ([`cpu`]).

use std::sync::Arc;
use std::time::{Duration, Instant};

use testhost::postgres as pgserver;

#[path = "support/cpu.rs"]
mod cpu;

use accountd::server::{Server, ServerConfig};
use accountd::store::StoreConfig;
use certs::Role;
use certs::testing::TestPki;
use clients::account::AccountClient;
use money::MICROS_PER_CREDIT;
use proto::account::*;

const RUN: Duration = Duration::from_millis(2500);
const REPEAT: usize = 3;
const USERS: u64 = 64;
/// The target: group commit sustains at least this many durable
/// debits per second with 64 concurrent node connections (median run).
const TARGET_PER_SEC: f64 = 20_000.0;
const TARGET_CONNS: u64 = 64;
const TARGET_BATCH: usize = 1024;
/// Debits per `Debits` frame in the frames modes.
const FRAME: usize = 16;

struct Result_ {
    debits: u64,
    secs: f64,
    p50_us: u64,
    p99_us: u64,
    /// CPU seconds used during the load, by thread or process group.
    cpu: cpu::Cpu,
    /// Group commits that wrote the debits.
    commits: u64,
}

impl Result_ {
    fn rate(&self) -> f64 {
        self.debits as f64 / self.secs
    }
}

/// Where the ledger is: SQLite, or PostgreSQL behind this many accountd.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Ledger {
    Lite,
    Pg(usize),
}

/// Starts an accountd on `store`; its address, and the stop switch and task.
async fn serve(
    pki: &TestPki,
    store: StoreConfig,
) -> (
    String,
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<()>,
) {
    let cfg = ServerConfig {
        tls: pki.tls_paths(Role::Service, "accountd"),
        store,
        max_connections: 1024,
        idle_timeout: Duration::from_secs(60),
        max_frame: proto::DEFAULT_MAX_FRAME,
        max_request: proto::limits::MAX_ACCOUNT_REQUEST,
        peers: Default::default(),
    };
    let server = Server::open(cfg).expect("open server");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr").to_string();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(server.run(listener, async move {
        let _ = stop_rx.await;
    }));
    (addr, stop_tx, task)
}

/// One debit of node `n`'s load.
fn bench_debit(n: usize, seq: u64) -> Debit {
    Debit {
        key: DebitKey {
            node: format!("n{n}"),
            job: "bench".into(),
            seq,
        },
        user: format!("u{}", (seq + n as u64) % USERS),
        amount: 1_000,
        rank: 0,
        interval: MeterInterval {
            start_us: seq,
            end_us: seq + 1,
        },
        cpu_us: 1,
    }
}

/// Sends node `n`'s debits until `deadline`, `frame` to a request (1: single
/// `Debit`s); the latency of each debit, microseconds.
async fn load(mut c: AccountClient, n: usize, frame: usize, deadline: Instant) -> Vec<u64> {
    let mut lat = Vec::with_capacity(50_000);
    let mut seq = 0u64;
    while Instant::now() < deadline {
        let t = Instant::now();
        if frame == 1 {
            match c.call(AccountOp::Debit(bench_debit(n, seq))).await {
                Ok(AccountReply::Charged(_)) => {}
                other => panic!("debit failed: {other:?}"),
            }
        } else {
            let debits = (seq..seq + frame as u64)
                .map(|s| bench_debit(n, s))
                .collect();
            let outcomes = c.debits(debits).await.expect("Debits failed");
            assert!(
                outcomes.iter().all(|o| matches!(o, Ok(r) if !r.duplicate)),
                "a debit of a frame failed: {outcomes:?}"
            );
        }
        let us = t.elapsed().as_micros() as u64;
        lat.extend(std::iter::repeat_n(us, frame));
        seq += frame as u64;
    }
    lat
}

async fn measure(
    pki: &TestPki,
    conns: u64,
    max_batch: usize,
    ledger: Ledger,
    frame: usize,
) -> Result_ {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("bench.db");
    let pg = match ledger {
        Ledger::Lite => None,
        Ledger::Pg(_) => {
            let s = pgserver::Postgres::start();
            s.create_db("ledger");
            Some(s)
        }
    };
    let store = StoreConfig {
        path: db.clone(),
        postgres: pg.as_ref().map(|s| accountd::store::pg::PgConfig {
            conninfo: s.conninfo("ledger"),
            password_file: None,
            ca: None,
        }),
        anchors: None,
        create: true,
        max_batch,
        max_entry: i64::MAX,
    };
    let instances = match ledger {
        Ledger::Lite => 1,
        Ledger::Pg(n) => n,
    };
    let mut servers = Vec::new();
    for _ in 0..instances {
        servers.push(serve(pki, store.clone()).await);
    }
    let addrs: Vec<String> = servers.iter().map(|s| s.0.clone()).collect();
    let addr = addrs[0].clone();
    let admin = certs::connector(&pki.tls_paths(Role::Admin, "ops")).expect("admin tls");
    let mut a = AccountClient::connect(&addr, &admin, "accountd", Duration::from_secs(10))
        .await
        .expect("connect");
    for u in 0..USERS {
        a.call(AccountOp::CreateAccount(CreateAccount {
            user: format!("u{u}"),
            initial: 1_000_000 * MICROS_PER_CREDIT,
        }))
        .await
        .expect("create");
    }
    let mut clients = Vec::new();
    for n in 0..conns {
        let tls = certs::connector(&pki.tls_paths(Role::Node, &format!("n{n}"))).expect("node tls");
        let addr = &addrs[n as usize % addrs.len()];
        clients.push(
            AccountClient::connect(addr, &tls, "accountd", Duration::from_secs(30))
                .await
                .expect("connect"),
        );
    }
    let pg_data = pg.as_ref().map(|s| s.socket_dir().join("data"));
    let cpu_before = cpu::snapshot(pg_data.as_deref());
    let start = Instant::now();
    let deadline = start + RUN;
    let mut tasks = Vec::new();
    for (n, c) in clients.into_iter().enumerate() {
        tasks.push(tokio::spawn(load(c, n, frame, deadline)));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.expect("client task"));
    }
    let secs = start.elapsed().as_secs_f64();
    let cpu = cpu::used(&cpu_before, &cpu::snapshot(pg_data.as_deref()));
    for (_, stop, task) in servers {
        let _ = stop.send(());
        task.await.expect("server task");
    }
    // Every acknowledged debit is in the ledger. The entries of one group
    // commit share its time, so distinct times count the commits.
    let count = "SELECT COUNT(*) || ' ' || COUNT(DISTINCT at_us) FROM entries WHERE kind = 'debit'";
    let counted: String = match &pg {
        Some(s) => s.psql("ledger", count),
        None => rusqlite::Connection::open(&db)
            .expect("reopen")
            .query_row(count, [], |r| r.get(0))
            .expect("count"),
    };
    let (n, commits) = counted.split_once(' ').expect("two counts");
    let (n, commits): (i64, u64) = (n.parse().expect("count"), commits.parse().expect("count"));
    assert_eq!(
        n as usize,
        all.len(),
        "acknowledged debits missing from the ledger"
    );
    all.sort_unstable();
    let pct = |p: f64| {
        all.get(((all.len() as f64 * p) as usize).min(all.len().saturating_sub(1)))
            .copied()
            .unwrap_or(0)
    };
    Result_ {
        debits: all.len() as u64,
        secs,
        p50_us: pct(0.50),
        p99_us: pct(0.99),
        cpu,
        commits,
    }
}

/// Microseconds one chain hash of a debit entry takes (median of 5 rounds).
fn chain_cost_us() -> f64 {
    use accountd::store::chain;
    use accountd::store::query::EntryColumns;
    const N: i64 = 100_000;
    let mut rounds = Vec::new();
    for _ in 0..5 {
        let mut prev = chain::GENESIS;
        let t = Instant::now();
        for id in 1..=N {
            let e = EntryColumns {
                id,
                at_us: 1_700_000_000_000_000 + id,
                user: "u17".into(),
                amount: -1_000,
                kind: "debit".into(),
                node: Some("n42".into()),
                job: Some("bench".into()),
                seq: Some(id),
                rank: Some(0),
                interval: (Some(id), Some(id + 1)),
                cpu_us: Some(1),
                actor: "node:n42".into(),
                reason: None,
                balance_after: -1_000 * id,
            };
            prev = chain::entry_hash(&prev, &e);
        }
        std::hint::black_box(prev);
        rounds.push(t.elapsed().as_secs_f64() * 1e6 / N as f64);
    }
    rounds.sort_by(f64::total_cmp);
    rounds[rounds.len() / 2]
}

/// CPU microseconds per debit of each thread or process group, over all runs
/// of one mode, the largest first.
fn print_cpu(runs: &[Result_]) {
    let debits: u64 = runs.iter().map(|r| r.debits).sum();
    let mut sum = cpu::Cpu::new();
    for r in runs {
        for (k, v) in &r.cpu {
            *sum.entry(k.clone()).or_default() += v;
        }
    }
    let total: f64 = sum.values().sum();
    let commits: u64 = runs.iter().map(|r| r.commits).sum();
    println!(
        "{:<26} debits per group commit: {:.1}",
        "",
        debits as f64 / commits.max(1) as f64
    );
    let mut groups: Vec<_> = sum.into_iter().collect();
    groups.sort_by(|a, b| b.1.total_cmp(&a.1));
    let per = |s: f64| s * 1e6 / debits.max(1) as f64;
    println!(
        "{:<26} CPU per debit: {:.0} us in all, over {:.2} s of load",
        "",
        per(total),
        runs.iter().map(|r| r.secs).sum::<f64>()
    );
    for (k, v) in groups.iter().filter(|(_, v)| per(*v) >= 1.0) {
        println!("{:<28} {:>6.0} us  {k}", "", per(*v));
    }
}

fn main() {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let pki = Arc::new(TestPki::new());
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "accountd debits: durable (synchronous=FULL), mutual TLS, {USERS} users; \
         {REPEAT} interleaved runs of {} ms per point, the median run shown",
        RUN.as_millis()
    );
    println!(
        "load average before: {}",
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    // DEBITS_ONLY=64 (for example) measures one connection count only, for profiling.
    let only: Option<u64> = std::env::var("DEBITS_ONLY")
        .ok()
        .and_then(|v| v.parse().ok());
    let mut points = Vec::new();
    if std::env::var_os("DEBITS_POSTGRES").is_some() {
        for (mode, ledger) in [
            ("SQLite, group commit", Ledger::Lite),
            ("PostgreSQL, 1 accountd", Ledger::Pg(1)),
            ("PostgreSQL, 2 accountd", Ledger::Pg(2)),
        ] {
            points.push((mode, TARGET_BATCH, TARGET_CONNS, ledger, 1, Vec::new()));
        }
        for (mode, ledger) in [
            ("SQLite, frames", Ledger::Lite),
            ("PostgreSQL, 1, frames", Ledger::Pg(1)),
            ("PostgreSQL, 2, frames", Ledger::Pg(2)),
        ] {
            points.push((mode, TARGET_BATCH, TARGET_CONNS, ledger, FRAME, Vec::new()));
        }
    } else {
        for (mode, batch) in [
            ("group commit (batch 1024)", 1024usize),
            ("one transaction per debit", 1),
        ] {
            for conns in [1u64, 8, 64]
                .into_iter()
                .filter(|c| only.is_none_or(|o| o == *c))
            {
                points.push((mode, batch, conns, Ledger::Lite, 1, Vec::new()));
            }
        }
    }
    // Interleave the repetitions so that a noisy neighbour hurts every mode alike.
    for _ in 0..REPEAT {
        for (_, batch, conns, ledger, frame, runs) in points.iter_mut() {
            runs.push(rt.block_on(measure(&pki, *conns, *batch, *ledger, *frame)));
        }
    }
    println!(
        "{:<26} {:>6} {:>10} {:>12} {:>9} {:>9} {:>12}",
        "mode", "conns", "debits", "debits/s", "p50 ms", "p99 ms", "best/s"
    );
    // The target is judged on PostgreSQL behind two accountd with frames when
    // measured (single debits beside it), else on the 64-connection point.
    let mut target = None;
    let mut target_single = None;
    let hash_us = chain_cost_us();
    println!(
        "hash chain: {:.3} us per entry (SHA-256 of its canonical content)",
        hash_us
    );
    println!("frames: {FRAME} debits to a Debits request (\"1, frames\": PostgreSQL, 1 accountd)");
    for (mode, batch, conns, ledger, frame, mut runs) in points {
        runs.sort_by(|a, b| a.rate().total_cmp(&b.rate()));
        let best = runs.last().map(Result_::rate).unwrap_or(0.0);
        let r = &runs[runs.len() / 2];
        if batch == TARGET_BATCH && conns == TARGET_CONNS {
            match (ledger, frame) {
                (Ledger::Pg(2), 1) => target_single = Some(r.rate()),
                (Ledger::Pg(2), _) => target = Some(r.rate()),
                (_, 1) if target_single.is_none() => target = Some(r.rate()),
                _ => {}
            }
        }
        println!(
            "{:<26} {:>6} {:>10} {:>12.0} {:>9.2} {:>9.2} {:>12.0}",
            mode,
            conns,
            r.debits,
            r.rate(),
            r.p50_us as f64 / 1000.0,
            r.p99_us as f64 / 1000.0,
            best
        );
        println!(
            "{:<26} chain share of a debit's time: {:.2}%",
            "",
            100.0 * hash_us * r.rate() / 1e6
        );
        print_cpu(&runs);
    }
    let judged = match target_single {
        Some(single) => format!(
            ", PostgreSQL behind 2 accountd, {FRAME} debits to a frame; one debit per request: {single:.0}/s"
        ),
        None => String::new(),
    };
    let goal = format!(
        "target (at least {TARGET_PER_SEC:.0} durable debits/s at {TARGET_CONNS} connections, group commit, median run{judged})"
    );
    match target {
        Some(rate) if rate >= TARGET_PER_SEC => println!("{goal} met ({rate:.0}/s)"),
        Some(rate) => println!("{goal} NOT met ({rate:.0}/s)"),
        None => println!("{goal} not measured (DEBITS_ONLY leaves out {TARGET_CONNS} connections)"),
    }
}
