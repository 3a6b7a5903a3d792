//! Dispatch throughput of the stride scheduler: decisions (one CPU for one quantum) per second
//! on one thread, for 10, 1,000 and 100,000 clients with mixed demands and ticket counts, on
//! one and on two CPUs. Also the one-off cost of a membership change at each size.
//!
//! Run with `cargo bench -p stride`. Targets: 10 million decisions per second at 10 clients,
//! 2 million at 100,000 clients.

use std::hint::black_box;
use std::time::{Duration, Instant};

use stride::{ClientId, MAX_TICKETS, Scheduler};

/// Time spent measuring each configuration.
const RUN: Duration = Duration::from_millis(1500);

fn build(clients: u64, cpus: u32) -> Scheduler {
    let mut s = Scheduler::new(cpus).expect("at least one CPU");
    // A fixed linear congruential sequence: the same clients every run.
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    for id in 0..clients {
        x = x
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        let tickets = 1 + (x >> 33) % MAX_TICKETS;
        let demand = 1 + (id % 4) as u32; // mixed: 1 to 4 runnable threads
        s.join(ClientId(id), tickets, demand).expect("valid client");
    }
    s
}

fn measure(clients: u64, cpus: u32) {
    let mut s = build(clients, cpus);
    let mut out = Vec::with_capacity(cpus as usize);
    let t0 = Instant::now();
    s.run_quantum(&mut out); // pays the one-off rebuild after the joins
    let first = t0.elapsed();

    let mut decisions: u64 = 0;
    let start = Instant::now();
    let elapsed = loop {
        for _ in 0..4096 {
            s.run_quantum(&mut out);
            decisions += out.len() as u64;
            black_box(&out);
        }
        let e = start.elapsed();
        if e >= RUN {
            break e;
        }
    };

    // One membership change: a client leaves and comes back, then the next quantum.
    let t1 = Instant::now();
    let d = s.leave(ClientId(0)).expect("client 0 is present");
    s.rejoin(d, 1).expect("rejoin");
    s.run_quantum(&mut out);
    let change = t1.elapsed();

    let per_sec = decisions as f64 / elapsed.as_secs_f64();
    println!(
        "{clients:>7} clients  {cpus} CPU{}  {:>7.2} M decisions/s  {:>6.1} ns/decision  \
         first quantum {:>8.3} ms  membership change {:>8.3} ms",
        if cpus == 1 { " " } else { "s" },
        per_sec / 1e6,
        1e9 / per_sec,
        first.as_secs_f64() * 1e3,
        change.as_secs_f64() * 1e3,
    );
}

fn main() {
    // `cargo bench` passes `--bench`; anything else (such as a test filter) is ignored.
    println!(
        "stride dispatch benchmark (one thread, {} s per row)",
        RUN.as_secs_f64()
    );
    for clients in [10, 1_000, 100_000] {
        for cpus in [1, 2] {
            measure(clients, cpus);
        }
    }
}
