//! Prometheus metrics for the rexec market daemons: the `[metrics]` table every
//! daemon's config file may hold ([`MetricsFile`]), and the endpoint that serves a
//! [`Registry`] in the Prometheus text format (version 0.0.4) at `GET /metrics`
//! ([`Endpoint`]). The metrics themselves are each daemon's: it registers them, or a
//! collector that reads its live state at every scrape, before serving.
//!
//! The endpoint is plain HTTP on its own address, off unless `listen` is set, and
//! meant for loopback or a monitoring network: it carries counts and prices, never a
//! user's job or data, and answers nothing but `GET` (and `HEAD`) of `/metrics`, the
//! read-only extra [`Route`]s a daemon adds (vexecd's market page), and `/` with a
//! list of them (module `answer`).
//!
//! HTTP/1.1 is hyper's: a request head larger than [`MAX_REQUEST`] gets 431, one not
//! complete within [`REQUEST_TIMEOUT`] of the connection's opening ends it, and a
//! connection lives at most [`CONNECTION_TIMEOUT`]. At most [`MAX_CONNECTIONS`] are
//! open at once, and a new one at the limit sheds the oldest still waiting for its
//! request head (module `admit`), so clients that trickle or send nothing
//! cannot keep a scraper out: they go first, and the scraper's head arrives at once.
//!
//! `prometheus-client` is the Prometheus project's own Rust client (OpenMetrics data
//! model, no global registry, collectors for values read at scrape time).
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

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use prometheus_client::encoding::prometheus_text;
use prometheus_client::metrics::family::{Family, MetricConstructor};
pub use prometheus_client::registry::Registry;
use serde::Deserialize;
use tokio::net::{TcpListener, TcpStream};

mod admit;
mod answer;

use admit::{Admission, Ticket};
use answer::Served;

/// Largest request head read (hyper's smallest read buffer).
pub const MAX_REQUEST: usize = 8 * 1024;
/// Longest wait, from a connection's opening, for its whole request head.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);
/// Longest a connection stays open, its answer included (one request each).
pub const CONNECTION_TIMEOUT: Duration = Duration::from_secs(10);
/// Most connections open at once; at the limit the oldest still waiting for its
/// request head is closed to make room for a new one.
pub const MAX_CONNECTIONS: usize = 256;

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
    let g = prometheus_client::metrics::gauge::ConstGauge::new(v);
    read_at_scrape(e, name, help, &g)
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
    let c = prometheus_client::metrics::counter::ConstCounter::new(v);
    read_at_scrape(e, name, help, &c)
}

/// Writes metric `m` (of its own type) under `name` with `help`.
fn read_at_scrape(
    e: &mut prometheus_client::encoding::DescriptorEncoder,
    name: &str,
    help: &str,
    m: &impl prometheus_client::encoding::EncodeMetric,
) -> Result<(), std::fmt::Error> {
    m.encode(e.encode_descriptor(name, help, None, m.metric_type())?)
}

/// Creates the series of `family` for each label set in `labels`, at zero, so that
/// a scrape lists them before their first event (a dashboard then shows 0 rather
/// than no data). For labels whose values are known at start.
pub fn at_zero<S, M, C>(family: &Family<S, M, C>, labels: impl IntoIterator<Item = S>)
where
    S: Clone + std::hash::Hash + Eq,
    C: MetricConstructor<M>,
{
    for set in labels {
        drop(family.get_or_create(&set));
    }
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
        let admission = Admission::new(MAX_CONNECTIONS);
        let mut http = http1::Builder::new();
        http.timer(TokioTimer::new())
            .header_read_timeout(REQUEST_TIMEOUT)
            .max_buf_size(MAX_REQUEST)
            // `Content-Type`, as the endpoint always wrote it.
            .title_case_headers(true)
            .keep_alive(false);
        tokio::pin!(shutdown);
        loop {
            let (stream, _) = tokio::select! {
                _ = &mut shutdown => return,
                accepted = self.listener.accept() => match accepted {
                    Ok(a) => a,
                    Err(e) => {
                        // Out of descriptors, most likely: wait for some to close.
                        tracing::debug!("metrics endpoint: accept failed: {e}");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                },
            };
            let Some(ticket) = admission.admit() else {
                tracing::debug!("metrics endpoint: every connection is being answered");
                continue;
            };
            tokio::spawn(connection(
                http.clone(),
                stream,
                Arc::clone(&served),
                ticket,
            ));
        }
    }
}

/// Serve one connection until it is answered, fails, times out or is shed.
async fn connection(http: http1::Builder, stream: TcpStream, served: Arc<Served>, ticket: Ticket) {
    let state = Arc::clone(&ticket.state);
    let service = service_fn(move |request| {
        state.answering();
        let response = answer::answer(&served, &request);
        std::future::ready(Ok::<_, std::convert::Infallible>(response))
    });
    let conn = http.serve_connection(TokioIo::new(stream), service);
    tokio::select! {
        done = conn => if let Err(e) = done {
            tracing::debug!("metrics endpoint: connection ended: {e}");
        },
        () = ticket.state.shed() => tracing::debug!("metrics endpoint: shed a waiting connection"),
        () = tokio::time::sleep(CONNECTION_TIMEOUT) => {
            tracing::debug!("metrics endpoint: connection timed out");
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
