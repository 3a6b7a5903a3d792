//! The endpoint over real TCP: what each request gets, `HEAD` without a body, and
//! scrapes answered within a second while 200 slow clients each trickle one byte of
//! a request head a second (the slowloris case of issue 40).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use exposition::{Endpoint, MAX_REQUEST, Registry, Route};
use prometheus_client::metrics::counter::Counter;

/// An endpoint serving a registry with `rexec_test_things_total 3` and a page at
/// `/page`, on its own runtime (two workers, as small as a daemon's); stops when
/// the returned sender is dropped.
fn serve() -> (SocketAddr, tokio::sync::oneshot::Sender<()>) {
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let (bound, addr) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let mut registry = Registry::default();
            let c: Counter = Counter::default();
            registry.register("rexec_test_things", "Things counted", c.clone());
            c.inc_by(3);
            let endpoint = Endpoint::bind("127.0.0.1:0".parse().unwrap())
                .await
                .unwrap();
            bound.send(endpoint.addr().unwrap()).unwrap();
            let page = Route {
                path: "/page",
                content_type: "text/html; charset=utf-8",
                render: Arc::new(|| "<p>hello</p>".to_string()),
            };
            endpoint
                .serve_routes(Arc::new(registry), vec![page], stopped)
                .await;
        });
    });
    (addr.recv().unwrap(), stop)
}

/// The whole answer to `request`, waiting at most `limit` for it.
fn ask(addr: SocketAddr, request: &[u8], limit: Duration) -> std::io::Result<String> {
    let mut s = TcpStream::connect_timeout(&addr, limit)?;
    s.set_read_timeout(Some(limit))?;
    s.write_all(request)?;
    let mut out = Vec::new();
    s.read_to_end(&mut out)?;
    Ok(String::from_utf8_lossy(&out).into_owned())
}

fn get(addr: SocketAddr, request: &[u8]) -> String {
    ask(addr, request, Duration::from_secs(10)).unwrap()
}

#[test]
fn a_scrape_returns_the_registry_and_bad_requests_get_nothing_else() {
    let (addr, _stop) = serve();
    let out = get(addr, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
    assert!(out.starts_with("HTTP/1.1 200 OK\r\n"), "{out}");
    assert!(out.contains("version=0.0.4"), "{out}");
    assert!(out.contains("\nrexec_test_things_total 3\n"), "{out}");
    let out = get(addr, b"GET /page?refresh=1 HTTP/1.1\r\n\r\n");
    assert!(out.starts_with("HTTP/1.1 200 OK\r\n"), "{out}");
    assert!(out.contains("Content-Type: text/html"), "{out}");
    assert!(out.ends_with("\r\n\r\n<p>hello</p>"), "{out}");
    let out = get(addr, b"GET / HTTP/1.1\r\n\r\n");
    assert!(out.contains("also: GET /page\n"), "{out}");
    let out = get(addr, b"GET /secret HTTP/1.1\r\n\r\n");
    assert!(out.starts_with("HTTP/1.1 404"), "{out}");
    let out = get(addr, b"DELETE /metrics HTTP/1.1\r\n\r\n");
    assert!(out.starts_with("HTTP/1.1 405"), "{out}");
    let huge = vec![b'a'; MAX_REQUEST * 2];
    let out = get(addr, &huge);
    assert!(out.starts_with("HTTP/1.1 431"), "{out}");
    // HTTP/1.0, as the e2e tests' client speaks it.
    let out = get(addr, b"GET /metrics HTTP/1.0\r\n\r\n");
    assert!(out.contains("\nrexec_test_things_total 3\n"), "{out}");
}

#[test]
fn head_of_metrics_has_the_headers_and_no_body() {
    let (addr, _stop) = serve();
    let full = get(addr, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
    let body = full.split_once("\r\n\r\n").unwrap().1;
    let out = get(addr, b"HEAD /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
    let (head, rest) = out.split_once("\r\n\r\n").expect("a whole head");
    assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{out}");
    assert!(head.contains("version=0.0.4"), "{out}");
    assert!(
        head.contains(&format!("Content-Length: {}", body.len())),
        "HEAD says how long GET's body is: {out}"
    );
    assert_eq!(rest, "", "HEAD has no body");
}

#[test]
fn scrapes_answer_within_a_second_while_200_slow_clients_hold_connections() {
    slow_clients_and_scrapes(200);
}

#[test]
fn slow_clients_beyond_the_connection_limit_are_shed_before_a_scraper() {
    slow_clients_and_scrapes(exposition::MAX_CONNECTIONS + 50);
}

/// `n` slow clients connect and trickle while a scraper asks every 200 ms for
/// 8 s: each scrape must be answered within a second.
fn slow_clients_and_scrapes(n: usize) {
    let (addr, _stop) = serve();
    let stop = Arc::new(AtomicBool::new(false));
    let connected = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    // Each slow client sends a request head one byte a second, and connects again
    // when the endpoint closes it.
    let slow = {
        let (stop, connected, most) = (stop.clone(), connected.clone(), most.clone());
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let mut tasks = Vec::new();
                for _ in 0..n {
                    let (stop, connected, most) = (stop.clone(), connected.clone(), most.clone());
                    tasks.push(tokio::spawn(async move {
                        use tokio::io::AsyncWriteExt;
                        let head = b"GET /metrics HTTP/1.1\r\nHost: slow\r\nX-Slow: 1\r\n\r\n";
                        while !stop.load(Ordering::Relaxed) {
                            let Ok(mut s) = tokio::net::TcpStream::connect(addr).await else {
                                tokio::time::sleep(Duration::from_millis(100)).await;
                                continue;
                            };
                            let now = connected.fetch_add(1, Ordering::Relaxed) + 1;
                            most.fetch_max(now, Ordering::Relaxed);
                            for b in head.iter().cycle() {
                                if stop.load(Ordering::Relaxed)
                                    || s.write_all(std::slice::from_ref(b)).await.is_err()
                                {
                                    break;
                                }
                                tokio::time::sleep(Duration::from_secs(1)).await;
                            }
                            connected.fetch_sub(1, Ordering::Relaxed);
                        }
                    }));
                }
                for c in tasks {
                    let _ = c.await;
                }
            });
        })
    };
    let started = Instant::now();
    while most.load(Ordering::Relaxed) < n {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "only {} slow clients connected",
            most.load(Ordering::Relaxed)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // Scrape for longer than a slow client may keep its connection, so the slow
    // clients are cut off and come back while the scrapes go on.
    let mut slowest = Duration::ZERO;
    let mut scrapes = 0;
    let scraping = Instant::now();
    while scraping.elapsed() < Duration::from_secs(8) {
        let asked = Instant::now();
        let out = ask(
            addr,
            b"GET /metrics HTTP/1.1\r\nHost: prometheus\r\n\r\n",
            Duration::from_secs(1),
        );
        let took = asked.elapsed();
        let out = out.unwrap_or_else(|e| {
            panic!("scrape {scrapes} failed after {took:?} while slow clients wait: {e}")
        });
        assert!(out.contains("\nrexec_test_things_total 3\n"), "{out}");
        assert!(
            took < Duration::from_secs(1),
            "scrape {scrapes} took {took:?}"
        );
        slowest = slowest.max(took);
        scrapes += 1;
        std::thread::sleep(Duration::from_millis(200));
    }
    let holding = connected.load(Ordering::Relaxed);
    stop.store(true, Ordering::Relaxed);
    slow.join().unwrap();
    eprintln!(
        "{scrapes} scrapes, slowest {slowest:?}, {holding} of {n} slow clients connected at the end"
    );
    assert!(scrapes >= 10, "{scrapes} scrapes");
    assert!(
        holding >= n.min(exposition::MAX_CONNECTIONS) * 9 / 10,
        "the slow clients held their connections: {holding}"
    );
}
