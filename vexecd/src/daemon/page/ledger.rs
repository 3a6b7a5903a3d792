//! The market page's ledger panel: each project's spend per hour over the last
//! hours, read from accountd. It is on only when `[ledger]` is configured, with a
//! certificate accountd lets read the spend summary and nothing else (a service
//! certificate named `ledger-reader` or `ledger-reader-*`, see
//! accountd's `authz`): the summary holds every project's spend, which only
//! admins may see, so a selector is given one only where its page is for admins.
//!
//! [`poll`] asks accountd every `every` (each try limited to [`TRY_LIMIT`]) and
//! keeps the last answer, or why there is none, in a [`Ledger`]; the page renders
//! what is kept ([`render`]) and never waits for accountd, so the page works the
//! same while accountd is down, and the panel says the ledger is unreachable.
//! Project names come from the ledger and go through [`super::escape::escape`].

use std::fmt::Write;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use clients::account::AccountClient;
use proto::account::{AccountOp, AccountReply};
use proto::spend::{HOUR_US, HourlySpend, MAX_SPEND_HOURS, SpendQuery};
use serde::Deserialize;
use tokio_rustls::TlsConnector;

use super::chart::{clock, nice_ceiling};
use super::escape::escape;

/// Longest one try (connect and ask) may take.
pub const TRY_LIMIT: Duration = Duration::from_secs(5);
/// Default hours shown.
pub const DEFAULT_HOURS: u32 = 24;
/// Default time between two reads.
pub const DEFAULT_EVERY: Duration = Duration::from_secs(10);
/// Width of a project's bars, pixels.
pub const BARS_WIDTH: f64 = 240.0;
/// Height of a project's bars, pixels.
pub const BARS_HEIGHT: f64 = 24.0;

/// `[ledger]` as the file has it.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LedgerFile {
    /// accountd's address, `host:port`.
    pub accountd: Option<String>,
    /// The certificate shown to accountd (a service certificate named
    /// `ledger-reader` or `ledger-reader-*`).
    pub cert: Option<PathBuf>,
    /// Its key.
    pub key: Option<PathBuf>,
    /// The name in accountd's certificate (default `accountd`).
    pub server_name: Option<String>,
    /// Hours shown, 1 to 168 (default 24).
    pub hours: Option<u32>,
    /// Time between two reads (`10s`, default 10 s).
    pub every: Option<String>,
}

/// The panel's settings, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct LedgerConfig {
    /// accountd's address.
    pub accountd: String,
    /// The client's TLS material (the selector's CA and revocation list).
    pub tls: certs::TlsPaths,
    /// The name in accountd's certificate.
    pub server_name: String,
    /// Hours shown.
    pub hours: u32,
    /// Time between two reads.
    pub every: Duration,
}

impl LedgerFile {
    /// Checks the table; `ca` and `crl` are the selector's own.
    pub fn resolve(
        &self,
        ca: PathBuf,
        crl: Option<PathBuf>,
    ) -> Result<LedgerConfig, (&'static str, String)> {
        let need = |what: &'static str, v: &Option<PathBuf>| {
            v.clone().ok_or((
                what,
                format!("[ledger] needs {what} (a service certificate named ledger-reader)"),
            ))
        };
        let accountd = self
            .accountd
            .clone()
            .filter(|a| !a.trim().is_empty())
            .ok_or(("accountd", "[ledger] needs accountd = \"host:port\"".into()))?;
        let hours = self.hours.unwrap_or(DEFAULT_HOURS);
        if !(1..=MAX_SPEND_HOURS).contains(&hours) {
            return Err(("hours", format!("must be 1 to {MAX_SPEND_HOURS}")));
        }
        let every = match &self.every {
            Some(t) => timespan::parse_duration(t).map_err(|e| ("every", e.to_string()))?,
            None => DEFAULT_EVERY,
        };
        if every < Duration::from_secs(1) {
            return Err(("every", "must be at least 1s".into()));
        }
        Ok(LedgerConfig {
            accountd,
            tls: certs::TlsPaths {
                ca,
                cert: need("cert", &self.cert)?,
                key: need("key", &self.key)?,
                crl,
            },
            server_name: self
                .server_name
                .clone()
                .unwrap_or_else(|| clients::account::DEFAULT_SERVER_NAME.into()),
            hours,
            every,
        })
    }
}

/// The panel as one page shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct Shown {
    /// accountd's address.
    pub accountd: String,
    /// What was read.
    pub panel: Panel,
}

/// What the panel shows: the last summary read, or why there is none.
#[derive(Debug, Clone, PartialEq)]
pub enum Panel {
    /// No answer yet.
    Waiting,
    /// The summary read at `at_unix`.
    Read {
        /// When it was read, Unix seconds.
        at_unix: u64,
        /// What accountd answered.
        spend: HourlySpend,
    },
    /// The last try failed.
    Unreachable {
        /// Since when the tries fail, Unix seconds.
        since_unix: u64,
        /// Why the last one failed.
        error: String,
    },
}

/// The panel's state, shared by [`poll`] and the page.
#[derive(Debug)]
pub struct Ledger {
    panel: Mutex<Panel>,
    accountd: String,
}

impl Ledger {
    /// A panel reading accountd at `accountd`, waiting for its first answer.
    pub fn new(accountd: &str) -> Ledger {
        Ledger {
            panel: Mutex::new(Panel::Waiting),
            accountd: accountd.to_string(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Panel> {
        // Each update replaces the whole value: a poisoned lock holds a whole one.
        self.panel.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Record the outcome of a try at `now_unix`.
    pub fn record(&self, outcome: Result<HourlySpend, String>, now_unix: u64) {
        let mut panel = self.lock();
        *panel = match outcome {
            Ok(spend) => Panel::Read {
                at_unix: now_unix,
                spend,
            },
            Err(error) => {
                let since_unix = match &*panel {
                    Panel::Unreachable { since_unix, .. } => *since_unix,
                    _ => now_unix,
                };
                Panel::Unreachable { since_unix, error }
            }
        };
    }

    /// The panel as a page shows it now.
    pub fn shown(&self) -> Shown {
        Shown {
            accountd: self.accountd.clone(),
            panel: self.lock().clone(),
        }
    }
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

async fn ask(
    client: &mut Option<AccountClient>,
    config: &LedgerConfig,
    connector: &TlsConnector,
) -> Result<HourlySpend, String> {
    let c = match client {
        Some(c) => c,
        None => client.insert(
            AccountClient::connect(&config.accountd, connector, &config.server_name, TRY_LIMIT)
                .await
                .map_err(|e| e.to_string())?,
        ),
    };
    let op = AccountOp::Spend(SpendQuery {
        hours: config.hours,
    });
    match c.call(op).await.map_err(|e| e.to_string())? {
        AccountReply::Spend(s) => Ok(s),
        other => Err(format!(
            "accountd answered {} to a spend summary",
            other.name()
        )),
    }
}

/// Read the summary every `config.every` into `ledger`, forever.
pub async fn poll(ledger: Arc<Ledger>, config: LedgerConfig, connector: TlsConnector) {
    let mut tick = tokio::time::interval(config.every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut client = None;
    loop {
        tick.tick().await;
        // The client's own limits (connect, each call) say which step failed;
        // this one only bounds the whole try.
        let whole = TRY_LIMIT * 2;
        let outcome = tokio::time::timeout(whole, ask(&mut client, &config, &connector))
            .await
            .unwrap_or_else(|_| Err(format!("accountd did not answer within {whole:?}")));
        if let Err(e) = &outcome {
            // A fresh connection next time.
            client = None;
            tracing::debug!(accountd = %config.accountd, error = %e, "cannot read the spend summary");
        }
        ledger.record(outcome, unix_now());
    }
}

/// The panel's HTML: a heading, then a table with one row per project (what it
/// spent in the current hour, over all the hours shown, and a bar per hour on
/// one scale for every project), or one line saying why there is none.
pub fn render(out: &mut String, shown: &Shown) {
    let Shown { accountd, panel } = shown;
    out.push_str("<h2>Ledger: spend per project per hour</h2>");
    let spend = match panel {
        Panel::Waiting => {
            let _ = write!(
                out,
                "<p id=\"ledger-status\" class=\"note\">waiting for the first answer of accountd at {}</p>",
                escape(accountd)
            );
            return;
        }
        Panel::Unreachable { since_unix, error } => {
            let _ = write!(
                out,
                "<p id=\"ledger-status\" class=\"unreachable\">the ledger is unreachable \
                 (accountd at {}, since {}): {}</p>",
                escape(accountd),
                clock(*since_unix),
                escape(error)
            );
            return;
        }
        Panel::Read { at_unix, spend } => {
            let _ = write!(
                out,
                "<p id=\"ledger-status\" class=\"note\">read from accountd at {} at {}; \
                 net credits charged to each project (debits less refunds, as \
                 <code>accountctl report --by project</code> counts them) in each UTC hour.</p>",
                escape(accountd),
                clock(*at_unix)
            );
            spend
        }
    };
    let hours = spend.hours.max(1);
    let current = spend.hour_start_us(hours - 1);
    let hour_label = |start_us: i64| clock(u64::try_from(start_us / 1_000_000).unwrap_or(0));
    let top = nice_ceiling(
        spend
            .projects
            .iter()
            .flat_map(|p| p.charged.iter().copied())
            .max()
            .unwrap_or(0),
    );
    let _ = write!(
        out,
        "<table id=\"ledger\" data-hour=\"{current}\" data-hours=\"{hours}\" data-top=\"{top}\">\
         <thead><tr><th>project</th><th>this hour, from {} (credits)</th>\
         <th>last {hours} hours (credits)</th><th>per hour, from {} (one scale, top {})</th></tr>\
         </thead><tbody>",
        hour_label(current),
        hour_label(spend.first_hour_us),
        money::format_credits(top),
    );
    if spend.projects.is_empty() {
        let _ = write!(
            out,
            "<tr class=\"empty\"><td colspan=\"4\">no project spent in the last {hours} hours</td></tr>"
        );
    }
    let bar = BARS_WIDTH / f64::from(hours);
    for p in &spend.projects {
        let now = p.charged.last().copied().unwrap_or(0);
        let _ = write!(
            out,
            "<tr class=\"project\" data-project=\"{name}\"><td class=\"name\">{name}</td>\
             <td class=\"hour\">{now}</td><td class=\"total\">{total}</td><td class=\"chart\">\
             <svg class=\"bars\" width=\"{BARS_WIDTH}\" height=\"{BARS_HEIGHT}\" \
             viewBox=\"0 0 {BARS_WIDTH} {BARS_HEIGHT}\" role=\"img\">",
            name = escape(&p.project),
            now = money::format_credits_fixed(now),
            total = money::format_credits_fixed(p.total()),
        );
        for (i, c) in p.charged.iter().enumerate() {
            let h = BARS_HEIGHT * (*c).clamp(0, top) as f64 / top as f64;
            let start = spend.first_hour_us + i as i64 * HOUR_US;
            let _ = write!(
                out,
                "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{h:.1}\" data-charged=\"{c}\">\
                 <title>{}: {}</title></rect>",
                bar * i as f64,
                BARS_HEIGHT - h,
                (bar - 1.0).max(0.5),
                hour_label(start),
                money::format_credits_fixed(*c)
            );
        }
        out.push_str("</svg></td></tr>");
    }
    out.push_str("</tbody></table>");
    if spend.more > 0 {
        let _ = write!(
            out,
            "<p>{} more projects spent less and are not shown; \
             <code>accountctl report --by project</code> lists them all.</p>",
            spend.more
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proto::spend::ProjectSpend;

    fn spend() -> HourlySpend {
        HourlySpend {
            first_hour_us: 10 * HOUR_US,
            hours: 3,
            projects: vec![
                ProjectSpend {
                    project: "chem<b>".into(),
                    charged: vec![0, 4_000_000, 1_500_000],
                },
                ProjectSpend {
                    project: "bio".into(),
                    charged: vec![2_000_000, 0, -1],
                },
            ],
            more: 2,
        }
    }

    #[test]
    fn each_project_shows_this_hour_the_total_and_bars_on_one_scale() {
        let ledger = Ledger::new("10.0.0.2:7475");
        ledger.record(Ok(spend()), 12 * 3600 + 30);
        let mut html = String::new();
        render(&mut html, &ledger.shown());
        assert!(html.contains("data-project=\"chem&lt;b&gt;\""), "{html}");
        assert!(!html.contains("chem<b>"), "{html}");
        assert!(
            html.contains("<td class=\"hour\">1.500000</td><td class=\"total\">5.500000</td>"),
            "{html}"
        );
        assert!(html.contains("<td class=\"hour\">-0.000001</td>"), "{html}");
        // One scale: 4 credits is the top, drawn full height; 2 half as high.
        assert!(html.contains("data-top=\"5000000\""), "{html}");
        assert!(
            html.contains("height=\"19.2\" data-charged=\"4000000\""),
            "{html}"
        );
        assert!(
            html.contains("height=\"9.6\" data-charged=\"2000000\""),
            "{html}"
        );
        assert!(html.contains("this hour, from 12:00:00 UTC"), "{html}");
        assert!(
            html.contains("<title>11:00:00 UTC: 4.000000</title>"),
            "{html}"
        );
        assert!(html.contains("2 more projects"), "{html}");
    }

    #[test]
    fn an_unreachable_ledger_says_so_from_the_first_failure_on() {
        let ledger = Ledger::new("h:1");
        let mut html = String::new();
        render(&mut html, &ledger.shown());
        assert!(html.contains("waiting for the first answer"), "{html}");
        ledger.record(Err("connection refused".into()), 3600);
        ledger.record(Err("timed out <x>".into()), 7200);
        let mut html = String::new();
        render(&mut html, &ledger.shown());
        assert!(
            html.contains("the ledger is unreachable (accountd at h:1, since 01:00:00 UTC): timed out &lt;x&gt;"),
            "{html}"
        );
        assert!(!html.contains("<table"), "{html}");
        ledger.record(Ok(spend()), 7300);
        assert!(matches!(
            ledger.shown().panel,
            Panel::Read { at_unix: 7300, .. }
        ));
    }

    #[test]
    fn the_table_is_checked() {
        let file = |t: &str| -> LedgerFile { toml::from_str(t).unwrap() };
        let base = "accountd = \"h:1\"\ncert = \"/r.pem\"\nkey = \"/r.key\"\n";
        let c = file(base).resolve("/ca.pem".into(), None).unwrap();
        assert_eq!((c.hours, c.every), (DEFAULT_HOURS, DEFAULT_EVERY));
        assert_eq!(c.server_name, "accountd");
        assert_eq!(c.tls.cert, PathBuf::from("/r.pem"));
        for (extra, what) in [
            ("hours = 0", "hours"),
            ("hours = 169", "hours"),
            ("every = \"0s\"", "every"),
        ] {
            let e = file(&format!("{base}{extra}\n")).resolve("/ca.pem".into(), None);
            assert_eq!(e.unwrap_err().0, what);
        }
        assert_eq!(
            file("accountd = \"h:1\"\n")
                .resolve("/ca.pem".into(), None)
                .unwrap_err()
                .0,
            "cert"
        );
        assert!(toml::from_str::<LedgerFile>("acountd = \"h:1\"").is_err());
    }
}
