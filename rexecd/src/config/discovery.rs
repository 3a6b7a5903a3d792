//! Being found: the shared `[discovery]` table (see [`::discovery::config`]) and
//! rexecd's own `[announce]` table, resolved into one [`AnnounceConfig`].
//!
//! With a `[discovery]` table rexecd announces itself on the cluster's group (and
//! to its unicast peers) every period and at once when its market changes, keeps
//! its availability history, and, when `[market]` names no accountd, finds accountd
//! from accountd's own announcements. Without the table it does none of these.
//!
//! ```toml
//! [discovery]                      # shared by every daemon and client of the cluster
//! cluster = "rexec"
//! group = "239.255.77.1"
//! port = 7477
//! period = "2s"
//!
//! [announce]                       # rexecd's own (optional; needs [discovery])
//! advertise = "10.0.0.7:7070"      # address clients dial; required when listening on 0.0.0.0
//! speed = 1.0                      # this node's speed relative to the reference machine
//! history_file = "/var/lib/rexecd/availability"   # the weekly availability profile
//! history_weeks = 4                # past weeks merged into the profile
//! find_accountd = true             # without [market] accountd: learn it from announcements
//! ```
//!
//! With `find_accountd = false` and no `[market] accountd`, the node charges nobody
//! (as without discovery). While accountd is to be learnt but none has been heard,
//! positive bids are refused as when accountd is unreachable; bids of 0 run.

use std::net::SocketAddr;
use std::path::PathBuf;

use ::discovery::config::{DiscoveryConfig, DiscoveryFile};
use ::discovery::profile::{DEFAULT_WINDOW_WEEKS, MAX_WINDOW_WEEKS};
use serde::Deserialize;

use super::ConfigError;
use super::market_table::{DEFAULT_JOURNAL, LedgerConfig, MarketConfig, MarketFile};

/// Default availability history file (beside the debit journal).
pub const DEFAULT_HISTORY_FILE: &str = "/var/lib/rexecd/availability";

/// The `[announce]` table as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AnnounceFile {
    /// Address announced instead of the listening one (`host:port`).
    pub advertise: Option<String>,
    /// Relative speed of this node.
    pub speed: Option<f64>,
    /// The availability history file.
    pub history_file: Option<PathBuf>,
    /// Weeks merged into the profile.
    pub history_weeks: Option<usize>,
    /// Learn accountd's address from its announcements when none is configured.
    pub find_accountd: Option<bool>,
}

/// How this node announces itself (present only with a `[discovery]` table).
#[derive(Debug, Clone, PartialEq)]
pub struct AnnounceConfig {
    /// The cluster's discovery settings.
    pub net: DiscoveryConfig,
    /// Address to announce; `None`: the address rexecd is bound to.
    pub advertise: Option<SocketAddr>,
    /// Speed relative to the reference machine (in the availability summary).
    pub speed: f64,
    /// Where the availability history is kept.
    pub history_file: PathBuf,
    /// Past weeks merged into the profile.
    pub history_weeks: usize,
    /// Learn accountd's address from its announcements when none is configured.
    pub find_accountd: bool,
}

fn invalid(key: &'static str, value: impl ToString, reason: impl ToString) -> ConfigError {
    ConfigError::Invalid {
        key,
        value: value.to_string(),
        reason: reason.to_string(),
    }
}

/// Checks both tables; `listen` is the listening address (an unspecified address
/// such as `0.0.0.0` cannot be announced: then `advertise` is required).
pub fn resolve(
    discovery: Option<DiscoveryFile>,
    announce: Option<AnnounceFile>,
    listen: &str,
) -> Result<Option<AnnounceConfig>, ConfigError> {
    let Some(discovery) = discovery else {
        if announce.is_some() {
            return Err(invalid(
                "announce",
                "[announce]",
                "an [announce] table needs a [discovery] table (which cluster, group and port)",
            ));
        }
        return Ok(None);
    };
    let net = discovery.resolve()?;
    let a = announce.unwrap_or_default();
    let advertise =
        daemon::announce::advertised(a.advertise.as_deref(), listen, "rexecd", "in [announce]")
            .map_err(|e| invalid("announce.advertise", e.given.unwrap_or_default(), e.reason))?;
    let speed = a.speed.unwrap_or(1.0);
    if !(speed.is_finite() && (0.001..=65.535).contains(&speed)) {
        return Err(invalid("announce.speed", speed, "must be 0.001 to 65.535"));
    }
    let history_weeks = a.history_weeks.unwrap_or(DEFAULT_WINDOW_WEEKS);
    if !(1..=MAX_WINDOW_WEEKS).contains(&history_weeks) {
        return Err(invalid(
            "announce.history_weeks",
            history_weeks,
            format!("must be 1 to {MAX_WINDOW_WEEKS}"),
        ));
    }
    Ok(Some(AnnounceConfig {
        net,
        advertise,
        speed,
        history_file: a
            .history_file
            .unwrap_or_else(|| PathBuf::from(DEFAULT_HISTORY_FILE)),
        history_weeks,
        find_accountd: a.find_accountd.unwrap_or(true),
    }))
}

/// With discovery on (and `find_accountd`) and no accountd configured, accountd
/// is learnt from its announcements: the market keeps a ledger (journal, expected
/// certificate name) whose address is filled in at run time. A configured address
/// always wins. Announcements are heard on the multicast group only, so with
/// multicast off an address must be configured (or `find_accountd = false`).
pub fn learn_accountd(
    market: &mut MarketConfig,
    file: &MarketFile,
    announce: Option<&AnnounceConfig>,
) -> Result<(), ConfigError> {
    let Some(a) = announce.filter(|a| a.find_accountd) else {
        return Ok(());
    };
    if market.ledger.is_some() {
        return Ok(());
    }
    if !a.net.multicast {
        return Err(invalid(
            "market.accountd",
            "",
            "with multicast off accountd's announcements are not heard; set [market] accountd \
             to its address (or find_accountd = false in [announce] to charge nobody)",
        ));
    }
    market.ledger = Some(LedgerConfig {
        addresses: Vec::new(),
        server_name: file
            .accountd_name
            .clone()
            .unwrap_or_else(|| clients::account::DEFAULT_SERVER_NAME.to_string()),
        journal: file
            .journal
            .clone()
            .unwrap_or_else(|| PathBuf::from(DEFAULT_JOURNAL)),
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str, listen: &str) -> Result<Option<AnnounceConfig>, ConfigError> {
        #[derive(Deserialize)]
        struct Both {
            discovery: Option<DiscoveryFile>,
            announce: Option<AnnounceFile>,
        }
        let both: Both = toml::from_str(text).unwrap();
        resolve(both.discovery, both.announce, listen)
    }

    #[test]
    fn no_table_no_announcing() {
        assert_eq!(parse("", "0.0.0.0:7070").unwrap(), None);
        let err = parse("[announce]\nspeed = 2.0\n", "127.0.0.1:7070").unwrap_err();
        assert!(err.to_string().contains("[discovery]"), "{err}");
    }

    #[test]
    fn defaults_and_every_key() {
        let c = parse("[discovery]\n", "127.0.0.1:7070").unwrap().unwrap();
        assert_eq!(c.net, DiscoveryConfig::default());
        assert_eq!(c.advertise, None);
        assert_eq!(c.speed, 1.0);
        assert_eq!(c.history_file, PathBuf::from(DEFAULT_HISTORY_FILE));
        assert_eq!(c.history_weeks, DEFAULT_WINDOW_WEEKS);
        assert!(c.find_accountd);
        let c = parse(
            "[discovery]\ncluster = \"lab\"\n[announce]\nadvertise = \"10.0.0.7:7070\"\n\
             speed = 2.5\nhistory_file = \"/tmp/h\"\nhistory_weeks = 2\nfind_accountd = false\n",
            "0.0.0.0:7070",
        )
        .unwrap()
        .unwrap();
        assert_eq!(c.net.cluster, "lab");
        assert_eq!(c.advertise, Some("10.0.0.7:7070".parse().unwrap()));
        assert_eq!((c.speed, c.history_weeks, c.find_accountd), (2.5, 2, false));
        assert_eq!(c.history_file, PathBuf::from("/tmp/h"));
    }

    #[test]
    fn bad_values_name_their_key() {
        for (text, listen, key) in [
            ("[discovery]\n", "0.0.0.0:7070", "announce.advertise"),
            ("[discovery]\n", "[::]:7070", "announce.advertise"),
            (
                "[discovery]\n[announce]\nadvertise = \"0.0.0.0:7070\"\n",
                "0.0.0.0:7070",
                "announce.advertise",
            ),
            (
                "[discovery]\n[announce]\nadvertise = \"nohostport\"\n",
                "127.0.0.1:1",
                "announce.advertise",
            ),
            (
                "[discovery]\n[announce]\nspeed = 0.0\n",
                "127.0.0.1:1",
                "announce.speed",
            ),
            (
                "[discovery]\n[announce]\nhistory_weeks = 0\n",
                "127.0.0.1:1",
                "announce.history_weeks",
            ),
            ("[discovery]\nport = 0\n", "127.0.0.1:1", "port"),
        ] {
            let err = parse(text, listen).unwrap_err().to_string();
            assert!(err.contains(key), "{text}: {err}");
        }
    }

    #[test]
    fn the_commented_example_in_deploy_resolves() {
        let text = include_str!("../../../deploy/etc/rexecd.toml");
        let block: Vec<&str> = text
            .lines()
            .skip_while(|l| *l != "# [discovery]")
            .map(|l| l.strip_prefix("# ").unwrap_or(l))
            .collect();
        let c = parse(&block.join("\n"), "0.0.0.0:7070").unwrap().unwrap();
        assert_eq!(c.net.unicast.len(), 1);
        assert_eq!(c.advertise, Some("10.0.0.7:7070".parse().unwrap()));
        assert!(c.find_accountd);
    }

    #[test]
    fn accountd_is_learnt_only_when_none_is_configured() {
        let file = MarketFile {
            accountd_name: Some("ledger".into()),
            ..MarketFile::default()
        };
        let on = parse("[discovery]\n", "127.0.0.1:1").unwrap().unwrap();
        let off = AnnounceConfig {
            find_accountd: false,
            ..on.clone()
        };
        let mut m = MarketConfig::resolve(file.clone(), None).unwrap();
        learn_accountd(&mut m, &file, None).unwrap();
        learn_accountd(&mut m, &file, Some(&off)).unwrap();
        assert_eq!(m.ledger, None);
        let unicast_only = parse(
            "[discovery]\nmulticast = false\nunicast = [\"127.0.0.1:9\"]\n",
            "127.0.0.1:1",
        )
        .unwrap()
        .unwrap();
        let err = learn_accountd(&mut m, &file, Some(&unicast_only)).unwrap_err();
        assert!(err.to_string().contains("market.accountd"), "{err}");
        learn_accountd(&mut m, &file, Some(&on)).unwrap();
        let l = m.ledger.unwrap();
        assert_eq!((l.addresses.len(), l.server_name.as_str()), (0, "ledger"));
        let configured = MarketFile {
            accountd: Some("10.0.0.9:7071".into()),
            ..file.clone()
        };
        let mut m = MarketConfig::resolve(configured, None).unwrap();
        learn_accountd(&mut m, &file, Some(&on)).unwrap();
        assert_eq!(m.ledger.unwrap().addresses, ["10.0.0.9:7071"]);
    }
}
