//! Durable submissions per second: `N` job records written by `N` concurrent
//! callers through the store's group commit (each acknowledged only once its
//! transaction is committed with `synchronous = FULL`), as the server writes
//! submissions. Prints the rate; the target is at least 1,000 per second.
//!
//! `nice -n 19 cargo run -p batchd --example submit_rate -- [N] [MAX_BATCH]` (a debug
//! build: the rate is bounded by the commits, not by the code).

use std::time::Instant;

use batchd::store::{JobRecord, Store, Write};
use proto::batch::SignedJob;

fn record(seq: i64) -> JobRecord {
    // About the size of a real signed job (spec, signature, certificate).
    let signed = SignedJob {
        spec: vec![7; 300],
        signature: vec![1; 72],
        cert: vec![2; 600],
    };
    JobRecord::queued(seq, seq as u64 + 1, "alice".into(), signed.into(), 0)
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let n: i64 = args.first().and_then(|a| a.parse().ok()).unwrap_or(10_000);
    let max_batch: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(1024);
    let dir =
        tempfile::tempdir_in(std::env::var("BENCH_DIR").unwrap_or_else(|_| "/var/tmp".into()))
            .expect("temp dir");
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let (store, _) = Store::open(&dir.path().join("q.db"), max_batch, 0).expect("store");
    let store = std::sync::Arc::new(store);
    let t = Instant::now();
    rt.block_on(async {
        let mut tasks = tokio::task::JoinSet::new();
        for seq in 0..n {
            let s = store.clone();
            tasks.spawn(async move { s.write(Write::Insert(Box::new(record(seq)))).await });
        }
        while let Some(r) = tasks.join_next().await {
            r.expect("task").expect("write");
        }
    });
    let secs = t.elapsed().as_secs_f64();
    println!(
        "{n} durable submissions in {secs:.3} s: {:.0}/s (max_batch {max_batch}, {})",
        n as f64 / secs,
        dir.path().display()
    );
}
