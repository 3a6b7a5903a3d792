//! Prometheus metrics for the rexec market daemons: the `[metrics]` table every
//! daemon's config file may hold ([`MetricsFile`]), and the endpoint that serves a
//! [`Registry`] in the Prometheus text format (version 0.0.4) at `GET /metrics`
//! ([`Endpoint`]). The metrics themselves are each daemon's: it registers them, or a
//! collector that reads its live state at every scrape, before serving.
//!
//! The endpoint is plain HTTP on its own address, off unless `listen` is set, and
//! meant for loopback or a monitoring network: it carries counts and prices, never a
//! user's job or data, and answers nothing but `GET /metrics`, the read-only extra
//! [`Route`]s a daemon adds (vexecd's market page), and `GET /` with a list of
//! them. A request head larger than [`MAX_REQUEST`] or slower than
//! [`REQUEST_TIMEOUT`] is dropped, and at most [`MAX_CONNECTIONS`] are served at once.
//!
//! `prometheus-client` is the Prometheus project's own Rust client (OpenMetrics data
//! model, no global registry, collectors for values read at scrape time); the HTTP
//! side is a few lines here rather than a web framework, since one path is served.
//!
//! ```
//! use exposition::MetricsFile;
//! let m = MetricsFile { listen: Some("127.0.0.1:9478".into()) };
//! assert_eq!(m.address().unwrap(), Some("127.0.0.1:9478".parse().unwrap()));
//! assert!(MetricsFile { listen: Some("nowhere".into()) }.address().is_err());
//! ```

#![deny(missing_docs)]
#![forbid(unsafe_code)]

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use prometheus_client::encoding::prometheus_text;
pub use prometheus_client::registry::Registry;
use serde::Deserialize;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

/// Largest request head read.
pub const MAX_REQUEST: usize = 8 * 1024;
/// Longest wait for a request head.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// Most requests served at once; more wait in the listen queue.
pub const MAX_CONNECTIONS: usize = 16;

/// The `[metrics]` table of a daemon's config file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetricsFile {
    /// Address to serve `/metrics` on (for example `127.0.0.1:9478`); none: off.
    pub listen: Option<String>,
}

/// A `[metrics]` table that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("[metrics] listen = {value:?} is not an address like 127.0.0.1:9478")]
pub struct MetricsConfigError {
    /// The value given.
    pub value: String,
}

impl MetricsFile {
    /// The address to serve on, if metrics are on.
    pub fn address(&self) -> Result<Option<SocketAddr>, MetricsConfigError> {
        self.listen
            .as_deref()
            .map(|v| {
                v.parse().map_err(|_| MetricsConfigError {
                    value: v.to_string(),
                })
            })
            .transpose()
    }
}

/// Writes one gauge read at scrape time (for a `Collector`).
pub fn gauge<N>(
    e: &mut prometheus_client::encoding::DescriptorEncoder,
    name: &str,
    help: &str,
    v: N,
) -> Result<(), std::fmt::Error>
where
    prometheus_client::metrics::gauge::ConstGauge<N>: prometheus_client::encoding::EncodeMetric,
{
    use prometheus_client::encoding::EncodeMetric;
    let g = prometheus_client::metrics::gauge::ConstGauge::new(v);
    g.encode(e.encode_descriptor(
        name,
        help,
        None,
        prometheus_client::metrics::MetricType::Gauge,
    )?)
}

/// Writes one counter read at scrape time (for a `Collector`); the name gets `_total`.
pub fn counter<N>(
    e: &mut prometheus_client::encoding::DescriptorEncoder,
    name: &str,
    help: &str,
    v: N,
) -> Result<(), std::fmt::Error>
where
    prometheus_client::metrics::counter::ConstCounter<N>: prometheus_client::encoding::EncodeMetric,
{
    use prometheus_client::encoding::EncodeMetric;
    let c = prometheus_client::metrics::counter::ConstCounter::new(v);
    c.encode(e.encode_descriptor(
        name,
        help,
        None,
        prometheus_client::metrics::MetricType::Counter,
    )?)
}

/// The text a scrape returns for `registry`.
pub fn render(registry: &Registry) -> String {
    let mut text = String::new();
    // Writing into a String cannot fail; a collector's own error ends the text early,
    // which a scraper reports, rather than ending the daemon.
    if let Err(e) = prometheus_text::encode(&mut text, registry) {
        tracing::warn!("cannot encode the metrics: {e}");
    }
    text
}

/// A bound metrics endpoint.
#[derive(Debug)]
pub struct Endpoint {
    listener: TcpListener,
}

impl Endpoint {
    /// Bind `addr`, and say where in the log (port 0 picks a free one: the log
    /// line is how an operator, or the demo, learns which).
    pub async fn bind(addr: SocketAddr) -> std::io::Result<Endpoint> {
        let listener = TcpListener::bind(addr).await?;
        if let Ok(bound) = listener.local_addr() {
            tracing::info!(addr = %bound, "metrics listening");
        }
        Ok(Endpoint { listener })
    }

    /// The bound address.
    pub fn addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serve `registry` until `shutdown` completes.
    pub async fn serve(self, registry: Arc<Registry>, shutdown: impl Future) {
        self.serve_routes(registry, Vec::new(), shutdown).await
    }

    /// Serve `registry` and the extra `routes` until `shutdown` completes.
    pub async fn serve_routes(
        self,
        registry: Arc<Registry>,
        routes: Vec<Route>,
        shutdown: impl Future,
    ) {
        let served = Arc::new(Served { registry, routes });
        let permits = Arc::new(Semaphore::new(MAX_CONNECTIONS));
        tokio::pin!(shutdown);
        loop {
            let permit = tokio::select! {
                _ = &mut shutdown => return,
                p = permits.clone().acquire_owned() => match p {
                    Ok(p) => p,
                    Err(_) => return,
                },
            };
            let (stream, _) = tokio::select! {
                _ = &mut shutdown => return,
                accepted = self.listener.accept() => match accepted {
                    Ok(a) => a,
                    Err(e) => {
                        tracing::debug!("metrics endpoint: accept failed: {e}");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                },
            };
            let served = served.clone();
            tokio::spawn(async move {
                let _permit = permit;
                let _ = tokio::time::timeout(REQUEST_TIMEOUT, answer(stream, &served)).await;
            });
        }
    }
}

/// One more read-only page the endpoint serves: `GET path` answers what `render`
/// returns, as `content_type`. `render` runs on each request, so it should be cheap
/// and must not block for long.
#[derive(Clone)]
pub struct Route {
    /// The path, starting with `/` (not `/` or `/metrics`).
    pub path: &'static str,
    /// The `Content-Type` of the answer.
    pub content_type: &'static str,
    /// The body, made at each request.
    pub render: Arc<dyn Fn() -> String + Send + Sync>,
}

impl std::fmt::Debug for Route {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Route")
            .field("path", &self.path)
            .field("content_type", &self.content_type)
            .finish_non_exhaustive()
    }
}

/// What the endpoint answers with.
struct Served {
    registry: Arc<Registry>,
    routes: Vec<Route>,
}

/// What a request head asks for.
#[derive(Debug, PartialEq, Eq)]
enum Asked<'a> {
    Metrics,
    Index,
    Other(&'a [u8]),
    NotGet,
}

fn parse(head: &[u8]) -> Asked<'_> {
    let line = head
        .split(|&b| b == b'\r' || b == b'\n')
        .next()
        .unwrap_or(&[]);
    let mut parts = line.split(|&b| b == b' ');
    let (method, target) = (parts.next(), parts.next());
    if method != Some(b"GET".as_slice()) && method != Some(b"HEAD".as_slice()) {
        return Asked::NotGet;
    }
    let path = target
        .map(|t| t.split(|&b| b == b'?').next().unwrap_or(t))
        .unwrap_or(b"");
    match path {
        b"/metrics" => Asked::Metrics,
        b"/" => Asked::Index,
        other => Asked::Other(other),
    }
}

async fn answer(mut stream: TcpStream, served: &Served) -> std::io::Result<()> {
    let mut head = Vec::with_capacity(1024);
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && !head.windows(2).any(|w| w == b"\n\n") {
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            return Ok(());
        }
        head.extend_from_slice(&buf[..n]);
        if head.len() > MAX_REQUEST {
            return respond(
                &mut stream,
                "431 Request Header Fields Too Large",
                "text/plain",
                "",
            )
            .await;
        }
    }
    match parse(&head) {
        Asked::Metrics => {
            let body = render(&served.registry);
            respond(&mut stream, "200 OK", prometheus_text::CONTENT_TYPE, &body).await
        }
        Asked::Index => {
            let mut body = String::from("rexec market metrics: GET /metrics\n");
            for r in &served.routes {
                body.push_str(&format!("also: GET {}\n", r.path));
            }
            respond(&mut stream, "200 OK", "text/plain; charset=utf-8", &body).await
        }
        Asked::Other(path) => match served.routes.iter().find(|r| r.path.as_bytes() == path) {
            Some(r) => {
                let body = (r.render)();
                respond(&mut stream, "200 OK", r.content_type, &body).await
            }
            None => {
                respond(
                    &mut stream,
                    "404 Not Found",
                    "text/plain",
                    "only /metrics is served (and what GET / lists)\n",
                )
                .await
            }
        },
        Asked::NotGet => respond(&mut stream, "405 Method Not Allowed", "text/plain", "").await,
    }
}

async fn respond(
    stream: &mut TcpStream,
    status: &str,
    kind: &str,
    body: &str,
) -> std::io::Result<()> {
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body.as_bytes()).await?;
    stream.shutdown().await
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::metrics::counter::Counter;

    #[test]
    fn requests_are_told_apart() {
        assert_eq!(
            parse(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"),
            Asked::Metrics
        );
        assert_eq!(parse(b"GET /metrics?x=1 HTTP/1.0\r\n\r\n"), Asked::Metrics);
        assert_eq!(parse(b"GET / HTTP/1.1\r\n\r\n"), Asked::Index);
        assert_eq!(
            parse(b"GET /etc/passwd HTTP/1.1\r\n\r\n"),
            Asked::Other(b"/etc/passwd")
        );
        assert_eq!(parse(b"POST /metrics HTTP/1.1\r\n\r\n"), Asked::NotGet);
        assert_eq!(parse(b"\x00\xff"), Asked::NotGet);
        assert_eq!(parse(b""), Asked::NotGet);
    }

    async fn get(addr: SocketAddr, request: &[u8]) -> String {
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(request).await.unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).await.unwrap();
        out
    }

    #[tokio::test]
    async fn a_scrape_returns_the_registry_and_bad_requests_get_nothing_else() {
        let mut registry = Registry::default();
        let c: Counter = Counter::default();
        registry.register("rexec_test_things", "Things counted", c.clone());
        c.inc_by(3);
        let endpoint = Endpoint::bind("127.0.0.1:0".parse().unwrap())
            .await
            .unwrap();
        let addr = endpoint.addr().unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let page = Route {
            path: "/page",
            content_type: "text/html; charset=utf-8",
            render: Arc::new(|| "<p>hello</p>".to_string()),
        };
        let served = tokio::spawn(endpoint.serve_routes(Arc::new(registry), vec![page], stopped));
        let out = get(addr, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").await;
        assert!(out.starts_with("HTTP/1.1 200 OK\r\n"), "{out}");
        assert!(out.contains("version=0.0.4"), "{out}");
        assert!(out.contains("\nrexec_test_things_total 3\n"), "{out}");
        let out = get(addr, b"GET /page?refresh=1 HTTP/1.1\r\n\r\n").await;
        assert!(out.starts_with("HTTP/1.1 200 OK\r\n"), "{out}");
        assert!(out.contains("Content-Type: text/html"), "{out}");
        assert!(out.ends_with("\r\n\r\n<p>hello</p>"), "{out}");
        let out = get(addr, b"GET / HTTP/1.1\r\n\r\n").await;
        assert!(out.contains("also: GET /page\n"), "{out}");
        let out = get(addr, b"GET /secret HTTP/1.1\r\n\r\n").await;
        assert!(out.starts_with("HTTP/1.1 404"), "{out}");
        let out = get(addr, b"DELETE /metrics HTTP/1.1\r\n\r\n").await;
        assert!(out.starts_with("HTTP/1.1 405"), "{out}");
        let huge = vec![b'a'; MAX_REQUEST * 2];
        let out = get(addr, &huge).await;
        assert!(out.starts_with("HTTP/1.1 431"), "{out}");
        stop.send(()).unwrap();
        served.await.unwrap();
    }
}
