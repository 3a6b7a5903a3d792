//! Throughput of the wire layer, printed as plain numbers:
//! `cargo bench -p proto --bench codec`.
//!
//! - output streaming: 64 KiB `Stdout` chunks through `FrameWriter` and
//!   `FrameReader` over an in-process duplex pipe (MiB/s);
//! - small messages: heartbeats the same way (messages/s);
//! - message codec alone: encode + decode of a typical `Launch` (per second);
//! - announcements: encode + decode of a node announcement (per second).

use std::hint::black_box;
use std::time::{Duration, Instant};

use proto::announce::{Announcement, Kind, NodeStatus};
use proto::node::{Chunk, FromNode, Heartbeat, JobId, Launch, ToNode, WindowSize};
use proto::{DEFAULT_MAX_FRAME, FrameReader, FrameWriter, encode_frame};

/// Run `f` repeatedly for about `budget`, return calls per second.
fn rate(budget: Duration, mut f: impl FnMut()) -> f64 {
    let start = Instant::now();
    let mut n = 0u64;
    while start.elapsed() < budget {
        for _ in 0..100 {
            f();
        }
        n += 100;
    }
    n as f64 / start.elapsed().as_secs_f64()
}

async fn stream(messages: usize, msg: FromNode) -> Duration {
    let (a, b) = tokio::io::duplex(256 * 1024);
    let start = Instant::now();
    let writer = tokio::spawn(async move {
        let mut w = FrameWriter::new(a, DEFAULT_MAX_FRAME);
        for _ in 0..messages {
            w.send(&msg).await.unwrap();
        }
    });
    let mut r = FrameReader::new(b, DEFAULT_MAX_FRAME);
    let mut got = 0;
    while let Some(m) = r.recv::<FromNode>().await.unwrap() {
        black_box(&m);
        got += 1;
    }
    writer.await.unwrap();
    assert_eq!(got, messages);
    start.elapsed()
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();

    let chunk = FromNode::Stdout(Chunk(vec![b'x'; 64 * 1024]));
    let n = 200_000;
    let t = rt.block_on(stream(n, chunk));
    let mib = (n * 64) as f64 / 1024.0 / t.as_secs_f64();
    println!(
        "stdout streaming, 64 KiB chunks over a duplex pipe: {mib:.0} MiB/s ({n} chunks in {t:.2?})"
    );

    let n = 1_000_000;
    let t = rt.block_on(stream(n, FromNode::Heartbeat(Heartbeat { seq: 12345 })));
    let per_sec = n as f64 / t.as_secs_f64();
    println!(
        "small messages (heartbeats) over a duplex pipe: {per_sec:.0} messages/s ({n} in {t:.2?})"
    );

    let launch = ToNode::Launch(Launch {
        job: JobId(0x1234_5678_9abc_def0),
        rank: 3,
        nranks: 8,
        bid: proto::node::Bid::from_credits(2),
        argv: vec!["./simulate".into(), "--steps".into(), "1000".into()],
        env: (0..30)
            .map(|i| (format!("VAR_{i}"), format!("value number {i}")))
            .collect(),
        cwd: Some("/home/ann/work".into()),
        terminal: Some(WindowSize {
            rows: 50,
            cols: 200,
        }),
        options: Default::default(),
    });
    let frame_len = encode_frame(&launch, DEFAULT_MAX_FRAME).unwrap().len();
    let per_sec = rate(Duration::from_secs(3), || {
        let body = postcard::to_stdvec(black_box(&launch)).unwrap();
        black_box(postcard::from_bytes::<ToNode>(&body).unwrap());
    });
    println!(
        "Launch encode + decode ({frame_len}-byte frame, 30 env vars): {per_sec:.0} per second"
    );

    let a = Announcement {
        cluster: proto::announce::DEFAULT_CLUSTER.into(),
        summary: None,
        name: "node-017.cluster.example".into(),
        addr: "10.1.0.17:7400".parse().unwrap(),
        incarnation: 1_763_700_000_000_000,
        seq: 81_234,
        period_ms: 1000,
        kind: Kind::Node(NodeStatus {
            cpus: 32,
            price: 7_500_000,
            charging: 0,
            contended: false,
            running_jobs: 5,
            runnable: 40,
            load_milli: 38_250,
            idle_milli: 0,
            free_mem_mib: 0,
        }),
    };
    let len = a.encode().unwrap().len();
    let per_sec = rate(Duration::from_secs(3), || {
        let d = black_box(&a).encode().unwrap();
        black_box(Announcement::decode(&d).unwrap());
    });
    println!("node announcement encode + decode ({len}-byte datagram): {per_sec:.0} per second");
}
