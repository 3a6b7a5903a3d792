//! Time selects against a running vexecd over mutual TLS, one connection,
//! one request at a time, and print the latency (median, p99, max) per
//! policy. With `flood` feeding it, this measures selects under ingest.
//!
//! ```text
//! cargo run -p vexecd --example probe -- ADDR CA CERT KEY [requests=2000] [count=4] [name=vexecd]
//! ```

use std::path::PathBuf;
use std::time::{Duration, Instant};

use clients::selector::SelectorClient;
use proto::select::SelectQuery;

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 4 {
        eprintln!("usage: probe ADDR CA CERT KEY [requests] [count] [name]");
        std::process::exit(2);
    }
    let tls = certs::TlsPaths {
        ca: PathBuf::from(&args[1]),
        cert: PathBuf::from(&args[2]),
        key: PathBuf::from(&args[3]),
        crl: None,
    };
    let requests: usize = args.get(4).and_then(|a| a.parse().ok()).unwrap_or(2000);
    let count: u32 = args.get(5).and_then(|a| a.parse().ok()).unwrap_or(4);
    let name = args.get(6).map_or("vexecd", String::as_str);
    let connector = certs::connector(&tls).expect("usable TLS files");
    let mut c = SelectorClient::connect(&args[0], &connector, name, Duration::from_secs(5))
        .await
        .expect("a connection");
    let stats = c.stats().await.expect("stats");
    println!("{} nodes known", stats.nodes);
    for policy in ["lowest-price", "least-loaded", "random", "history"] {
        let mut times = Vec::with_capacity(requests);
        for _ in 0..requests {
            let mut q = SelectQuery::new(count, policy);
            q.expected_cpu_ms = Some(600_000);
            let t = Instant::now();
            c.select(q).await.expect("a selection");
            times.push(t.elapsed());
        }
        times.sort();
        let at = |p: f64| times[((times.len() as f64 * p) as usize).min(times.len() - 1)];
        println!(
            "{policy:>13}: median {:>7.1} µs, p99 {:>7.1} µs, max {:>7.1} µs (round trip over TLS, {requests} requests of {count})",
            at(0.5).as_secs_f64() * 1e6,
            at(0.99).as_secs_f64() * 1e6,
            times[times.len() - 1].as_secs_f64() * 1e6,
        );
    }
}
