//! What `accountctl` needs besides its argument parser: where its settings
//! come from, and how ledger data is printed (table, JSON or CSV).
//!
//! Settings, strongest first: command-line flags, environment variables
//! (`ACCOUNTD_ADDR`, `REXEC_CA`, `REXEC_CERT`, `REXEC_KEY`, `REXEC_CRL`), then
//! the config file (`--config`, `REXEC_CONFIG`, or
//! `$XDG_CONFIG_HOME/rexec/config.toml`, else `~/.config/rexec/config.toml`):
//!
//! ```toml
//! ca = "/etc/rexec/ca.pem"
//! cert = "/home/alice/.config/rexec/user-alice.pem"
//! key = "/home/alice/.config/rexec/user-alice.key"
//! crl = "/etc/rexec/crl.pem"
//!
//! [accountd]
//! address = "accounts.example.org:7071"
//! server_name = "accountd"      # name in accountd's certificate
//!
//! [discovery]                   # without an address: hear accountd announce itself
//! cluster = "mycluster"
//! ```
//!
//! This is the one client file every rexec tool reads: the certificate keys at
//! the top are shared with `rexec` (relative paths name files beside the config
//! file, for both), and other keys and sections (such as
//! `[nodes]`) belong to other tools and are ignored here.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use proto::account::{LedgerEntry, ReportRow};
use serde::Deserialize;

use crate::amount::format_credits;
use crate::time::format_time;

/// The parts of the shared rexec config file accountctl reads.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct CtlFile {
    /// `[accountd]`.
    #[serde(default)]
    pub accountd: CtlServer,
    /// Cluster CA certificate (top-level `ca`).
    pub ca: Option<PathBuf>,
    /// Your certificate (top-level `cert`).
    pub cert: Option<PathBuf>,
    /// Your private key (top-level `key`).
    pub key: Option<PathBuf>,
    /// Certificate revocation list (top-level `crl`).
    pub crl: Option<PathBuf>,
    /// `[discovery]`: with no accountd address anywhere, listen for
    /// accountd's announcements on this group.
    pub discovery: Option<discovery::config::DiscoveryFile>,
}

/// `[accountd]` in the client config.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct CtlServer {
    /// `host:port`.
    pub address: Option<String>,
    /// Name in accountd's certificate.
    pub server_name: Option<String>,
}

/// The default config file path, if a home directory is known.
pub fn default_config_path() -> Option<PathBuf> {
    if let Some(x) = std::env::var_os("XDG_CONFIG_HOME").filter(|x| !x.is_empty()) {
        return Some(PathBuf::from(x).join("rexec/config.toml"));
    }
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config/rexec/config.toml"))
}

/// Reads the client config; a missing default file is not an error.
pub fn load_ctl_file(path: &Path, explicit: bool) -> Result<CtlFile, crate::config::ConfigError> {
    use daemon::config::FileError;
    match std::fs::read_to_string(path) {
        Ok(text) => {
            let mut file: CtlFile = toml::from_str(&text).map_err(|e| FileError::Parse {
                path: path.to_path_buf(),
                detail: e.to_string().replace('\n', " ").trim().to_string(),
            })?;
            // Relative paths name files beside the config file, as rexec reads them.
            let base = path.parent().unwrap_or(Path::new("."));
            for p in [&mut file.ca, &mut file.cert, &mut file.key, &mut file.crl] {
                if let Some(rel) = p.as_mut().filter(|p| p.is_relative()) {
                    *rel = base.join(&*rel);
                }
            }
            Ok(file)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && !explicit => Ok(CtlFile::default()),
        Err(cause) => Err(FileError::Read {
            path: path.to_path_buf(),
            cause,
        }
        .into()),
    }
}

/// Output format of listings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Aligned columns for people.
    Table,
    /// A JSON array of objects.
    Json,
    /// RFC 4180 CSV with a header line.
    Csv,
}

fn json_str(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// Formats CPU microseconds as minutes with three decimals, truncated (integer arithmetic).
///
/// ```
/// assert_eq!(accountd::ctl::cpu_minutes(90_000_000), "1.500");
/// ```
pub fn cpu_minutes(cpu_us: u64) -> String {
    let milli_minutes = cpu_us / 60_000;
    format!("{}.{:03}", milli_minutes / 1000, milli_minutes % 1000)
}

/// One entry as (column, text, is_number) triples, in a fixed order.
fn entry_fields(e: &LedgerEntry) -> Vec<(&'static str, String, bool)> {
    let opt = |v: Option<String>| v.unwrap_or_default();
    vec![
        ("id", e.id.to_string(), true),
        ("time", format_time(e.at_us), false),
        ("user", e.user.clone(), false),
        ("kind", e.kind.as_str().to_string(), false),
        ("amount", format_credits(e.amount), true),
        ("balance", format_credits(e.balance_after), true),
        ("node", opt(e.key.as_ref().map(|k| k.node.clone())), false),
        ("job", opt(e.key.as_ref().map(|k| k.job.clone())), false),
        ("seq", opt(e.key.as_ref().map(|k| k.seq.to_string())), true),
        ("rank", opt(e.rank.map(|r| r.to_string())), true),
        (
            "interval_start_us",
            opt(e.interval.map(|i| i.start_us.to_string())),
            true,
        ),
        (
            "interval_end_us",
            opt(e.interval.map(|i| i.end_us.to_string())),
            true,
        ),
        ("cpu_us", opt(e.cpu_us.map(|c| c.to_string())), true),
        ("cpu_s", opt(e.cpu_us.map(cpu_seconds)), true),
        ("actor", e.actor.clone(), false),
        ("reason", opt(e.reason.clone()), false),
    ]
}

fn render(rows: Vec<Vec<(&'static str, String, bool)>>, header: &[&str], fmt: Format) -> String {
    let mut out = String::new();
    match fmt {
        Format::Json => {
            out.push('[');
            for (i, row) in rows.iter().enumerate() {
                out.push_str(if i == 0 { "\n  {" } else { ",\n  {" });
                for (j, (k, v, num)) in row.iter().enumerate() {
                    if j > 0 {
                        out.push_str(", ");
                    }
                    let value = if v.is_empty() {
                        "null".to_string()
                    } else if *num {
                        v.clone()
                    } else {
                        json_str(v)
                    };
                    let _ = write!(out, "{}: {value}", json_str(k));
                }
                out.push('}');
            }
            out.push_str(if rows.is_empty() { "]\n" } else { "\n]\n" });
        }
        Format::Csv => {
            out.push_str(&header.join(","));
            out.push('\n');
            for row in &rows {
                let line: Vec<String> = row.iter().map(|(_, v, _)| csv_field(v)).collect();
                out.push_str(&line.join(","));
                out.push('\n');
            }
        }
        Format::Table => {
            let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
            for row in &rows {
                for (i, (_, v, _)) in row.iter().enumerate() {
                    widths[i] = widths[i].max(v.chars().count());
                }
            }
            let line = |cells: Vec<(&str, bool)>| {
                let parts: Vec<String> = cells
                    .iter()
                    .enumerate()
                    .map(|(i, (v, num))| {
                        if *num {
                            format!("{v:>w$}", w = widths[i])
                        } else {
                            format!("{v:<w$}", w = widths[i])
                        }
                    })
                    .collect();
                parts.join("  ").trim_end().to_string() + "\n"
            };
            out.push_str(&line(header.iter().map(|h| (*h, false)).collect()));
            for row in &rows {
                out.push_str(&line(
                    row.iter().map(|(_, v, n)| (v.as_str(), *n)).collect(),
                ));
            }
        }
    }
    out
}

/// Formats CPU microseconds as seconds with three decimals, truncated.
///
/// ```
/// assert_eq!(accountd::ctl::cpu_seconds(1_234_567), "1.234");
/// ```
pub fn cpu_seconds(cpu_us: u64) -> String {
    format!("{}.{:03}", cpu_us / 1_000_000, cpu_us / 1000 % 1000)
}

/// Columns of an entry the table leaves out: monotonic interval ends mean
/// nothing to a reader, and the CPU time shows in seconds (`cpu_s`). JSON and
/// CSV keep every column.
const TABLE_HIDES: [&str; 3] = ["interval_start_us", "interval_end_us", "cpu_us"];

/// The columns of an entry in format `fmt`.
fn entry_columns(e: &LedgerEntry, fmt: Format) -> Vec<(&'static str, String, bool)> {
    let mut row = entry_fields(e);
    if fmt == Format::Table {
        row.retain(|(k, _, _)| !TABLE_HIDES.contains(k));
    }
    row
}

/// Renders ledger entries: for each debit its node, job, rank and CPU time
/// beside the amount and the balance after it.
pub fn render_entries(entries: &[LedgerEntry], fmt: Format) -> String {
    let rows: Vec<_> = entries.iter().map(|e| entry_columns(e, fmt)).collect();
    let header: Vec<&str> = match rows.first() {
        Some(r) => r.iter().map(|c| c.0).collect(),
        None => entry_columns(
            &LedgerEntry {
                id: 0,
                at_us: 0,
                user: String::new(),
                amount: 0,
                kind: proto::account::EntryKind::Grant,
                key: None,
                rank: None,
                interval: None,
                cpu_us: None,
                actor: String::new(),
                reason: None,
                balance_after: 0,
            },
            fmt,
        )
        .iter()
        .map(|c| c.0)
        .collect(),
    };
    render(rows, &header, fmt)
}

/// Renders report rows; `by` names the first column.
pub fn render_report(rows: &[ReportRow], by: &'static str, fmt: Format) -> String {
    let header = [by, "charged", "cpu_minutes", "jobs"];
    let rows = rows
        .iter()
        .map(|r| {
            vec![
                (by, r.key.clone(), false),
                ("charged", format_credits(r.charged), true),
                ("cpu_minutes", cpu_minutes(r.cpu_us), true),
                ("jobs", r.jobs.to_string(), true),
            ]
        })
        .collect();
    render(rows, &header, fmt)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proto::account::*;

    fn entry() -> LedgerEntry {
        LedgerEntry {
            id: 7,
            at_us: 0,
            user: "alice".into(),
            amount: -1_500_000,
            kind: EntryKind::Debit,
            key: Some(DebitKey {
                node: "n1".into(),
                job: "j,1".into(),
                seq: 3,
            }),
            rank: Some(0),
            interval: Some(MeterInterval {
                start_us: 1,
                end_us: 2,
            }),
            cpu_us: Some(60_000_000),
            actor: "node:n1".into(),
            reason: Some("say \"hi\"".into()),
            balance_after: 500_000,
        }
    }

    #[test]
    fn csv_quotes_and_json_escapes() {
        let csv = render_entries(&[entry()], Format::Csv);
        assert!(
            csv.starts_with("id,time,user,kind,amount,balance,"),
            "{csv}"
        );
        assert!(
            csv.contains(",\"j,1\",") && csv.contains("\"say \"\"hi\"\"\""),
            "{csv}"
        );
        let json = render_entries(&[entry()], Format::Json);
        assert!(json.contains("\"amount\": -1.500000"), "{json}");
        assert!(json.contains("\"reason\": \"say \\\"hi\\\"\""), "{json}");
        assert_eq!(render_entries(&[], Format::Json), "[]\n");
    }

    #[test]
    fn table_and_report() {
        let t = render_entries(&[entry()], Format::Table);
        assert_eq!(t.lines().count(), 2);
        let header: Vec<&str> = t.lines().next().unwrap().split_whitespace().collect();
        let row: Vec<&str> = t.lines().nth(1).unwrap().split_whitespace().collect();
        let col = |name: &str| row[header.iter().position(|h| *h == name).unwrap()];
        assert_eq!(
            (col("node"), col("job"), col("rank"), col("cpu_s")),
            ("n1", "j,1", "0", "60.000")
        );
        assert!(!header.contains(&"cpu_us"), "{t}");
        let r = render_report(
            &[ReportRow {
                key: "n1".into(),
                charged: 2_000_000,
                cpu_us: 120_000_000,
                jobs: 2,
            }],
            "node",
            Format::Csv,
        );
        assert_eq!(r, "node,charged,cpu_minutes,jobs\nn1,2.000000,2.000,2\n");
    }
}
