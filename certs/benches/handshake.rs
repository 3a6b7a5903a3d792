//! Full mutual TLS 1.3 connection setup on loopback: TCP connect, handshake with both
//! certificates verified (ring, ECDSA P-256, CRL loaded, no session resumption), and
//! one byte echoed so the server has verified the client before the clock stops.
//! Prints median and p99 latency and handshakes per second. Target: median <= 2 ms.

use std::time::{Duration, Instant};

use anyhow::Context;
use certs::Role;
use certs::testing::TestPki;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::{TlsAcceptor, TlsConnector};

const WARMUP: usize = 100;
const SEQUENTIAL: usize = 2000;
const CONCURRENT_CLIENTS: usize = 4;
const CONCURRENT_EACH: usize = 250;

fn main() -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(run())
}

async fn run() -> anyhow::Result<()> {
    let pki = TestPki::try_new()?;
    // One revoked certificate so the server's CRL is not empty.
    pki.revoke(Role::User, "mallory")?;
    let acceptor = pki.acceptor(Role::Node, "n1")?;
    let connector = pki.connector(Role::User, "alice")?;
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(serve(listener, acceptor));

    for _ in 0..WARMUP {
        one(&connector, addr).await?;
    }

    let mut handshake = Vec::with_capacity(SEQUENTIAL);
    let mut full = Vec::with_capacity(SEQUENTIAL);
    let start = Instant::now();
    for _ in 0..SEQUENTIAL {
        let (h, f) = one(&connector, addr).await?;
        handshake.push(h);
        full.push(f);
    }
    let sequential_rate = SEQUENTIAL as f64 / start.elapsed().as_secs_f64();

    let start = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..CONCURRENT_CLIENTS {
        let connector = connector.clone();
        tasks.push(tokio::spawn(async move {
            for _ in 0..CONCURRENT_EACH {
                one(&connector, addr).await?;
            }
            Ok::<_, anyhow::Error>(())
        }));
    }
    for t in tasks {
        t.await??;
    }
    let concurrent_rate =
        (CONCURRENT_CLIENTS * CONCURRENT_EACH) as f64 / start.elapsed().as_secs_f64();

    println!(
        "mutual TLS 1.3 on loopback (ring, ECDSA P-256, CRL loaded, no resumption), {SEQUENTIAL} sequential connections"
    );
    report("connect + handshake (client view)", &mut handshake);
    let median = report("connect + handshake + 1-byte echo", &mut full);
    println!("sequential: {sequential_rate:.0} handshakes/s");
    println!(
        "{CONCURRENT_CLIENTS} concurrent clients: {concurrent_rate:.0} handshakes/s ({} connections)",
        CONCURRENT_CLIENTS * CONCURRENT_EACH
    );
    let verdict = if median <= Duration::from_millis(2) {
        "met"
    } else {
        "MISSED"
    };
    println!("target median <= 2 ms: {verdict}");
    Ok(())
}

/// One connection: returns (time to handshake done, time to echo received).
async fn one(
    connector: &TlsConnector,
    addr: std::net::SocketAddr,
) -> anyhow::Result<(Duration, Duration)> {
    let t0 = Instant::now();
    let tcp = TcpStream::connect(addr).await?;
    tcp.set_nodelay(true)?;
    let (mut tls, _peer) = certs::connect(connector, tcp, Role::Node, "n1").await?;
    let handshake = t0.elapsed();
    tls.write_all(b"x").await?;
    let mut b = [0u8; 1];
    tls.read_exact(&mut b)
        .await
        .context("server closed before echoing")?;
    Ok((handshake, t0.elapsed()))
}

async fn serve(listener: TcpListener, acceptor: TlsAcceptor) {
    while let Ok((tcp, _)) = listener.accept().await {
        let acceptor = acceptor.clone();
        tokio::spawn(async move {
            let _ = tcp.set_nodelay(true);
            if let Ok((mut tls, _peer)) = certs::accept(&acceptor, tcp).await {
                let mut b = [0u8; 1];
                if tls.read_exact(&mut b).await.is_ok() {
                    let _ = tls.write_all(&b).await;
                    let _ = tls.shutdown().await;
                }
            }
        });
    }
}

fn report(what: &str, samples: &mut [Duration]) -> Duration {
    samples.sort();
    let at = |q: f64| samples[((samples.len() - 1) as f64 * q).round() as usize];
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let median = at(0.5);
    println!(
        "{what}: median {:.3} ms, p99 {:.3} ms, min {:.3} ms, max {:.3} ms",
        ms(median),
        ms(at(0.99)),
        ms(samples[0]),
        ms(samples[samples.len() - 1])
    );
    median
}
