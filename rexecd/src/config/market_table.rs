//! The `[market]` table of rexecd's config file: how this node meters, charges and
//! checks bids.
//!
//! ```toml
//! [market]
//! accountd = "10.0.0.9:7071"           # the ledger; unset: learnt from accountd's announcements
//!                                      # with [discovery], else jobs are metered, nobody charged
//! accountd_name = "accountd"           # name in accountd's service certificate
//! journal = "/var/lib/rexecd/debits.journal"  # charges kept here until accountd has them
//! policy = "contention"                # when jobs pay: contention (default) or paper
//! share_control = "closed"             # closed (default): caps and weights toward the model;
//!                                      # weights: corrected weights only; open: bids alone
//! meter_interval = "1s"                # how often usage and demand are measured
//! debit_interval = "10s"               # how often a rank's charges are sent (and at its end)
//! max_rate = "1000"                    # largest bid this node accepts, credits per minute
//! balance_cache = "5s"                 # how long a positive balance from accountd is trusted
//! cpus = 2                             # CPUs the market sells (default: see below)
//! ```
//!
//! The CPUs sold default to the size of the node's pinned set (the top-level `cpus`
//! list) when it has one, else to the CPUs rexecd may use; with a pinned set, selling
//! more CPUs than it holds is refused.

use std::path::PathBuf;
use std::time::Duration;

use clients::instances::AddressList;
use money::Bid;
use serde::Deserialize;
use stride::Policy;

use timespan::parse_duration;

use super::ConfigError;
use crate::cgroup::CpuSet;

/// Default metering tick.
pub const DEFAULT_METER_INTERVAL: Duration = Duration::from_secs(1);
/// Default interval between a rank's debits.
pub const DEFAULT_DEBIT_INTERVAL: Duration = Duration::from_secs(10);
/// Default time a positive balance is trusted without asking accountd again.
pub const DEFAULT_BALANCE_CACHE: Duration = Duration::from_secs(5);
/// Default largest bid, credits per minute.
pub const DEFAULT_MAX_RATE_CREDITS: u32 = 1000;
/// Default journal path.
pub const DEFAULT_JOURNAL: &str = "/var/lib/rexecd/debits.journal";
/// Most CPUs a node may declare.
pub const MAX_CPUS: u32 = 4096;

/// How kernel weights are set from bids.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ShareControl {
    /// Every tick, correct the weights so measured shares converge to the model's;
    /// while the node is contended, confine single-threaded jobs to CPUs on a
    /// schedule (`market::control::placement`) when every job the model gives CPU is
    /// one, else cap each job at its allocation.
    #[default]
    Closed,
    /// `Closed` without the placement: caps whenever contended (for comparison).
    Caps,
    /// The weights corrected as with `Closed`, no caps (for comparison).
    Weights,
    /// Weights proportional to bids, never corrected.
    Open,
}

impl ShareControl {
    /// True when the weights are corrected every tick (`closed` and `weights`).
    pub fn corrects_weights(self) -> bool {
        matches!(
            self,
            ShareControl::Closed | ShareControl::Caps | ShareControl::Weights
        )
    }

    /// True when contended jobs are capped at their allocations (`closed`, `caps`).
    pub fn caps(self) -> bool {
        matches!(self, ShareControl::Closed | ShareControl::Caps)
    }
}

impl std::str::FromStr for ShareControl {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "closed" => Ok(ShareControl::Closed),
            "caps" => Ok(ShareControl::Caps),
            "weights" => Ok(ShareControl::Weights),
            "open" => Ok(ShareControl::Open),
            _ => Err("use closed, caps, weights or open".to_string()),
        }
    }
}

impl std::fmt::Display for ShareControl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(match self {
            ShareControl::Closed => "closed",
            ShareControl::Caps => "caps",
            ShareControl::Weights => "weights",
            ShareControl::Open => "open",
        })
    }
}

/// The `[market]` table as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MarketFile {
    /// accountd's address, or several instances' addresses.
    pub accountd: Option<AddressList>,
    /// Name in accountd's certificate.
    pub accountd_name: Option<String>,
    /// Debit journal.
    pub journal: Option<PathBuf>,
    /// `contention` or `paper`.
    pub policy: Option<String>,
    /// `closed` or `open`.
    pub share_control: Option<String>,
    /// Metering tick.
    pub meter_interval: Option<String>,
    /// Debit interval.
    pub debit_interval: Option<String>,
    /// Largest bid, credits per minute.
    pub max_rate: Option<String>,
    /// Balance cache time.
    pub balance_cache: Option<String>,
    /// CPUs sold.
    pub cpus: Option<u32>,
}

/// Where charges go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LedgerConfig {
    /// accountd's addresses (`host:port`), the instances tried in turn; empty:
    /// learnt from accountd's announcements (no address configured, a
    /// `[discovery]` table given).
    pub addresses: Vec<String>,
    /// Name in accountd's certificate.
    pub server_name: String,
    /// The debit journal.
    pub journal: PathBuf,
}

/// The resolved market settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MarketConfig {
    /// The ledger; `None` meters without charging anyone.
    pub ledger: Option<LedgerConfig>,
    /// When jobs pay.
    pub policy: Policy,
    /// Closed- or open-loop weights.
    pub share_control: ShareControl,
    /// Metering tick.
    pub meter_interval: Duration,
    /// A rank's charges are sent at least this often.
    pub debit_interval: Duration,
    /// Largest bid accepted.
    pub max_rate: Bid,
    /// How long a positive balance is trusted.
    pub balance_cache: Duration,
    /// CPUs the market sells.
    pub cpus: u32,
    /// The CPUs the node's jobs run on (its `cpus` list); `None`: the whole machine.
    pub cpu_set: Option<CpuSet>,
}

impl Default for MarketConfig {
    fn default() -> Self {
        MarketConfig {
            ledger: None,
            policy: Policy::Contention,
            share_control: ShareControl::Closed,
            meter_interval: DEFAULT_METER_INTERVAL,
            debit_interval: DEFAULT_DEBIT_INTERVAL,
            max_rate: Bid::from_credits(DEFAULT_MAX_RATE_CREDITS),
            balance_cache: DEFAULT_BALANCE_CACHE,
            cpus: available_cpus(),
            cpu_set: None,
        }
    }
}

/// The CPUs this process may run on (affinity and cgroup limits included), at least 1.
pub fn available_cpus() -> u32 {
    std::thread::available_parallelism()
        .map(|n| u32::try_from(n.get()).unwrap_or(MAX_CPUS))
        .unwrap_or(1)
        .min(MAX_CPUS)
}

fn invalid(key: &'static str, value: impl ToString, reason: impl ToString) -> ConfigError {
    ConfigError::Invalid {
        key,
        value: value.to_string(),
        reason: reason.to_string(),
    }
}

impl MarketConfig {
    /// Checks every value of the table (`--accountd` and `--journal` already laid over
    /// it); absent keys take their defaults. `pinned` is the node's CPU set, if it has
    /// one: `cpus` then defaults to its size and may not exceed it.
    pub fn resolve(file: MarketFile, pinned: Option<&CpuSet>) -> Result<MarketConfig, ConfigError> {
        let d = MarketConfig::default();
        let duration = |key, value: Option<String>, default| match value {
            None => Ok(default),
            Some(text) => parse_duration(&text).map_err(|e| invalid(key, text, e)),
        };
        let ledger = file.accountd.map(|list| LedgerConfig {
            addresses: list.into_vec(),
            server_name: file
                .accountd_name
                .clone()
                .unwrap_or_else(|| "accountd".to_string()),
            journal: file
                .journal
                .clone()
                .unwrap_or_else(|| PathBuf::from(DEFAULT_JOURNAL)),
        });
        if let Some(l) = &ledger {
            if l.addresses.is_empty() {
                return Err(invalid(
                    "market.accountd",
                    "[]",
                    "expected host:port, or a list of them, such as [\"10.0.0.9:7071\", \"10.0.0.10:7071\"]",
                ));
            }
            if let Some(address) = l.addresses.iter().find(|a| !a.contains(':')) {
                return Err(invalid(
                    "market.accountd",
                    address,
                    "expected host:port, such as 10.0.0.9:7071",
                ));
            }
        }
        let policy = match file.policy {
            None => d.policy,
            Some(p) => p.parse().map_err(|e| invalid("market.policy", &p, e))?,
        };
        let share_control = match file.share_control {
            None => d.share_control,
            Some(s) => s
                .parse()
                .map_err(|e| invalid("market.share_control", &s, e))?,
        };
        let meter_interval = duration(
            "market.meter_interval",
            file.meter_interval,
            d.meter_interval,
        )?;
        if meter_interval < Duration::from_millis(50) {
            return Err(invalid(
                "market.meter_interval",
                format!("{meter_interval:?}"),
                "must be at least 50ms",
            ));
        }
        let debit_interval = duration(
            "market.debit_interval",
            file.debit_interval,
            d.debit_interval,
        )?;
        let balance_cache = duration("market.balance_cache", file.balance_cache, d.balance_cache)?;
        let max_rate = match file.max_rate {
            None => d.max_rate,
            Some(text) => text
                .parse::<Bid>()
                .map_err(|e| invalid("market.max_rate", &text, e))?,
        };
        let pinned_count =
            pinned.map(|set| u32::try_from(set.len()).map_or(MAX_CPUS, |n| n.min(MAX_CPUS)));
        let cpus = match (file.cpus, pinned_count) {
            (None, None) => d.cpus,
            (None, Some(count)) => count,
            (Some(n), _) if !(1..=MAX_CPUS).contains(&n) => {
                return Err(invalid(
                    "market.cpus",
                    n,
                    format!("must be 1 to {MAX_CPUS}"),
                ));
            }
            (Some(n), Some(count)) if n > count => {
                let set = pinned.map(ToString::to_string).unwrap_or_default();
                return Err(invalid(
                    "market.cpus",
                    n,
                    format!(
                        "the node is pinned to {count} CPUs (cpus = \"{set}\"); sell at most {count}"
                    ),
                ));
            }
            (Some(n), _) => n,
        };
        Ok(MarketConfig {
            ledger,
            policy,
            share_control,
            meter_interval,
            debit_interval,
            max_rate,
            balance_cache,
            cpus,
            cpu_set: pinned.cloned(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<MarketConfig, ConfigError> {
        let file: MarketFile = toml::from_str(text).unwrap();
        MarketConfig::resolve(file, None)
    }

    #[test]
    fn share_control_has_three_modes() {
        for (text, mode) in [
            ("closed", ShareControl::Closed),
            ("weights", ShareControl::Weights),
            ("open", ShareControl::Open),
        ] {
            let c = parse(&format!("share_control = \"{text}\"")).unwrap();
            assert_eq!(c.share_control, mode);
            assert_eq!(mode.to_string(), text);
        }
        assert!(ShareControl::Weights.corrects_weights() && !ShareControl::Open.corrects_weights());
    }

    #[test]
    fn defaults_and_every_key() {
        let d = parse("").unwrap();
        assert_eq!(d.ledger, None);
        assert_eq!(d.policy, Policy::Contention);
        assert_eq!(d.share_control, ShareControl::Closed);
        let all = parse(
            r#"accountd = "127.0.0.1:7071"
               journal = "/tmp/j"
               policy = "paper"
               share_control = "open"
               meter_interval = "250ms"
               debit_interval = "2s"
               max_rate = "2.5"
               balance_cache = "1s"
               cpus = 3"#,
        )
        .unwrap();
        let ledger = all.ledger.unwrap();
        assert_eq!(ledger.addresses, ["127.0.0.1:7071"]);
        assert_eq!(ledger.server_name, "accountd");
        assert_eq!(ledger.journal, PathBuf::from("/tmp/j"));
        assert_eq!(all.policy, Policy::Paper);
        assert_eq!(all.share_control, ShareControl::Open);
        assert_eq!(all.meter_interval, Duration::from_millis(250));
        assert_eq!(all.debit_interval, Duration::from_secs(2));
        assert_eq!(all.max_rate.micros_per_minute(), 2_500_000);
        assert_eq!(all.cpus, 3);
    }

    #[test]
    fn accountd_takes_a_list_of_instances() {
        let two = parse(r#"accountd = ["10.0.0.9:7071", "10.0.0.10:7071"]"#).unwrap();
        assert_eq!(
            two.ledger.unwrap().addresses,
            ["10.0.0.9:7071", "10.0.0.10:7071"]
        );
    }

    #[test]
    fn bad_values_name_their_key() {
        for (text, key) in [
            (r#"policy = "fair""#, "market.policy"),
            (r#"share_control = "pid""#, "market.share_control"),
            (r#"max_rate = "-1""#, "market.max_rate"),
            (r#"meter_interval = "10ms""#, "market.meter_interval"),
            ("cpus = 0", "market.cpus"),
            (r#"accountd = "nohost""#, "market.accountd"),
            (r#"accountd = ["h:1", "nohost"]"#, "market.accountd"),
            ("accountd = []", "market.accountd"),
        ] {
            let err = parse(text).unwrap_err().to_string();
            assert!(err.contains(key), "{text}: {err}");
        }
    }
}
