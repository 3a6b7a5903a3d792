//! A real Prometheus server (Debian's `prometheus` package, installed by
//! `deploy/setup-host`) on loopback, scraping the daemons of a test every second
//! with the example scrape configuration (`deploy/etc/prometheus.yml`, its targets
//! replaced by the test's addresses), and PromQL queries through its HTTP API.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

/// The server binary.
pub const PROMETHEUS: &str = "/usr/bin/prometheus";

/// A running Prometheus, killed on drop.
pub struct Prometheus {
    child: Child,
    /// Its HTTP address.
    pub addr: SocketAddr,
    log: PathBuf,
}

/// One series of a query's answer: its labels and value.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// Labels, `__name__` included.
    pub labels: serde_json::Map<String, Value>,
    /// The value.
    pub value: f64,
}

/// The example scrape configuration with `targets` (job name, address) in place of
/// the example's, every job scraped each second.
pub fn scrape_config(targets: &[(&str, SocketAddr)]) -> String {
    let example = include_str!("../../deploy/etc/prometheus.yml");
    let mut out = String::new();
    let mut job = None;
    for line in example.lines() {
        let t = line.trim_start();
        if let Some(name) = t.strip_prefix("- job_name:") {
            job = Some(name.trim().to_string());
        }
        if t.starts_with("scrape_interval:") || t.starts_with("evaluation_interval:") {
            let indent = &line[..line.len() - t.len()];
            let key = t.split(':').next().unwrap_or_default();
            out.push_str(&format!("{indent}{key}: 1s\n"));
            continue;
        }
        if t.starts_with("- targets:")
            && let Some(j) = &job
        {
            let indent = &line[..line.len() - t.len()];
            let addrs: Vec<String> = targets
                .iter()
                .filter(|(name, _)| name == j)
                .map(|(_, a)| format!("'{a}'"))
                .collect();
            out.push_str(&format!("{indent}- targets: [{}]\n", addrs.join(", ")));
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

impl Prometheus {
    /// Whether the server is installed here.
    pub fn installed() -> bool {
        Path::new(PROMETHEUS).exists()
    }

    /// Start Prometheus in `dir` scraping `targets`; wait until it is ready.
    pub fn start(dir: &Path, targets: &[(&str, SocketAddr)]) -> Prometheus {
        let config = dir.join("prometheus.yml");
        std::fs::write(&config, scrape_config(targets)).expect("cannot write prometheus.yml");
        let addr = SocketAddr::from(([127, 0, 0, 1], testhost::net::port()));
        let log = dir.join("prometheus.log");
        let child = Command::new(PROMETHEUS)
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("tsdb").display()
            ))
            .arg(format!("--web.listen-address={addr}"))
            .arg("--log.level=warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("cannot create the prometheus log"))
            .spawn()
            .expect("cannot start prometheus");
        let mut p = Prometheus { child, addr, log };
        let ready = testhost::wait::until(Duration::from_secs(30), || {
            if let Ok(Some(status)) = p.child.try_wait() {
                panic!("prometheus exited with {status}:\n{}", p.log());
            }
            get(addr, "/-/ready").ok().filter(|(code, _)| *code == 200)
        });
        assert!(ready.is_some(), "prometheus not ready:\n{}", p.log());
        p
    }

    /// What the server logged.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The series an instant PromQL query returns.
    pub fn query(&self, promql: &str) -> Result<Vec<Sample>, String> {
        let (code, body) = get(
            self.addr,
            &format!("/api/v1/query?query={}", encode(promql)),
        )
        .map_err(|e| e.to_string())?;
        let v: Value = serde_json::from_str(&body).map_err(|e| format!("{e}: {body}"))?;
        if code != 200 || v["status"] != "success" {
            return Err(format!("HTTP {code}: {body}"));
        }
        let result = v["data"]["result"].as_array().cloned().unwrap_or_default();
        Ok(result
            .into_iter()
            .filter_map(|s| {
                let labels = s["metric"].as_object()?.clone();
                let value = s["value"][1].as_str()?.parse().ok()?;
                Some(Sample { labels, value })
            })
            .collect())
    }

    /// Waits up to `limit` until `promql` returns a series whose value passes `ok`.
    pub fn wait_for(&self, promql: &str, limit: Duration, ok: impl Fn(f64) -> bool) -> Vec<Sample> {
        let mut last = Ok(Vec::new());
        let found = testhost::wait::until(limit, || {
            last = self.query(promql);
            match &last {
                Ok(s) if s.iter().any(|s| ok(s.value)) => Some(s.clone()),
                _ => None,
            }
        });
        found.unwrap_or_else(|| {
            panic!(
                "{promql} never passed within {limit:?}: last answer {last:?}\n{}",
                self.log()
            )
        })
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Percent-encodes a query parameter.
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// A plain HTTP/1.0 GET on loopback: status code and body.
pub fn get(addr: SocketAddr, path: &str) -> std::io::Result<(u16, String)> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n")?;
    let mut out = Vec::new();
    s.read_to_end(&mut out)?;
    let text = String::from_utf8_lossy(&out).to_string();
    let code = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .to_string();
    Ok((code, body))
}
