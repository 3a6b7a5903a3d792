//! Finding the selectors to ask: the `[selectors]` table of the
//! configuration when it has one (asked in file order; a configured list
//! always wins), else the selectors heard announcing on the group of its
//! `[discovery]` table, completed by one selector's `Services` answer.
//!
//! Listening lasts at most [`LISTEN_PERIODS`] announcement periods and ends
//! [`GRACE`] after the first selector is heard (to collect others that
//! announce at about the same time). Selectors found this way are asked in
//! the order of a hash of their name mixed with a seed each client draws at
//! random, so clients spread over the selectors while each one's order is
//! fixed for its run.
//!
//! What was found is remembered for the next run ([`discovery::cache`], at most
//! [`discovery::cache::MAX_AGE`] old): a run with a cache asks the remembered
//! selectors for the live ones (`Services`) at once and listens on the group only
//! when the cache is missing, stale, damaged, or none of its selectors answers.
//! A remembered entry is checked like any address (the selector's certificate
//! must carry the name), so a stale or planted one costs a refused connection.
//! The connection that answered `Services` stays open in the [`Selectors`]
//! returned, so the question that follows (the nodes of a job) costs no second
//! handshake.

use std::time::{Duration, SystemTime};

use clients::selector::{Selectors, Services};
use discovery::cache::{Cache, MAX_AGE, Remembered};
use discovery::config::DiscoveryConfig;
use discovery::hash::{fnv1a, fnv1a_extend};
use proto::announce::{Announcement, Kind};
use proto::select::ServiceKind;
use tokio_rustls::TlsConnector;

use crate::config::{Config, SelectorEntry};
use crate::select::ASK_TIMEOUT;

/// How many announcement periods the client listens for a first selector.
pub const LISTEN_PERIODS: f64 = 1.5;

/// How long the client keeps listening after the first selector is heard.
pub const GRACE: Duration = Duration::from_millis(200);

/// Why no selector was found.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FindError {
    /// Neither `[selectors]` nor `[discovery]` in the configuration.
    #[error(
        "no selector to ask: {config} has no [selectors] and no [discovery] table; add a \
         [selectors] table (name = \"host:port\" of each vexecd selector) or a [discovery] table \
         (the cluster's announcement group, to hear the selectors by multicast)"
    )]
    NothingConfigured {
        /// The configuration file.
        config: String,
    },
    /// The client cannot listen for announcements.
    #[error("cannot listen for selector announcements ({config} [discovery]): {reason}")]
    Listen {
        /// The configuration file.
        config: String,
        /// Why.
        reason: String,
    },
    /// No selector announced itself in time.
    #[error(
        "no selector heard on {group}:{port} (cluster {cluster}) within {waited:?}; is vexecd running? \
         List selectors in a [selectors] table of {config} where multicast does not reach"
    )]
    NoneHeard {
        /// The configuration file.
        config: String,
        /// The group listened on.
        group: std::net::Ipv4Addr,
        /// Its port.
        port: u16,
        /// The cluster.
        cluster: String,
        /// How long the client listened.
        waited: Duration,
    },
}

/// The selectors to ask, in order, by the rule in the module docs, with the
/// connection of the one that answered open. `note` hears what a `-v` user
/// should read.
pub async fn selectors(
    config: &Config,
    connector: &TlsConnector,
    note: &dyn Fn(&str),
) -> Result<Selectors, FindError> {
    if !config.selectors.is_empty() {
        return Ok(Selectors::new(config.selectors.clone()));
    }
    let Some(d) = &config.discovery else {
        return Err(FindError::NothingConfigured {
            config: config.path.display().to_string(),
        });
    };
    let seed = getrandom::u64().unwrap_or_else(|_| u64::from(std::process::id()));
    let cache = Cache::for_user("selectors", d);
    if let Some(cache) = &cache
        && let Some((remembered, written)) = cache.load(MAX_AGE, SystemTime::now())
    {
        let known: Vec<SelectorEntry> = remembered
            .into_iter()
            .filter(|r| certs::check_name(certs::Role::Service, &r.name).is_ok())
            .map(|r| SelectorEntry {
                name: r.name,
                addr: r.addr,
            })
            .collect();
        let known = order(known, seed);
        note(&format!(
            "asking the selectors remembered in {}: {}",
            cache.path().display(),
            describe(&known)
        ));
        let mut asked = Selectors::new(known);
        if let Some((by, live)) = live_selectors(connector, &mut asked).await {
            // The one that answered, and the live ones it knows.
            let known = asked.list();
            let found = order(merge(vec![known[by].clone()], live), seed);
            remember(cache, &found, Some((known, written)), note);
            asked.set_list(found);
            return Ok(asked);
        }
        note("none of the remembered selectors answered; listening on the group");
        cache.forget();
    }
    let heard = listen(d, config).await?;
    let heard = order(heard, seed);
    note(&format!(
        "heard selector{} {}",
        if heard.len() == 1 { "" } else { "s" },
        describe(&heard)
    ));
    // Those not heard yet (announcing later in their period) are known to
    // the ones heard; failing that, the ones heard will do.
    let mut found = Selectors::new(heard);
    if let Some((_, live)) = live_selectors(connector, &mut found).await {
        let all = order(merge(found.list().to_vec(), live), seed);
        found.set_list(all);
    }
    if let Some(cache) = &cache {
        remember(cache, found.list(), None, note);
    }
    Ok(found)
}

/// How often a confirmed cache is rewritten when nothing in it changed (so its age
/// stays below [`MAX_AGE`] while it keeps working).
const REFRESH: Duration = Duration::from_secs(60);

/// Ask `selectors` in turn for the live selectors they know: which one answered,
/// and the selectors in its answer.
async fn live_selectors(
    connector: &TlsConnector,
    selectors: &mut Selectors,
) -> Option<(usize, Vec<SelectorEntry>)> {
    let (by, services) = selectors
        .ask(connector, &Services, ASK_TIMEOUT)
        .await
        .ok()?;
    let live = services
        .into_iter()
        .filter(|s| s.kind == ServiceKind::Selector)
        .filter(|s| certs::check_name(certs::Role::Service, &s.name).is_ok())
        .map(|s| SelectorEntry {
            name: s.name,
            addr: s.addr.to_string(),
        })
        .collect();
    Some((by, live))
}

/// Write `found` to the cache unless it holds the same (`before`) and is fresh.
fn remember(
    cache: &Cache,
    found: &[SelectorEntry],
    before: Option<(&[SelectorEntry], SystemTime)>,
    note: &dyn Fn(&str),
) {
    let now = SystemTime::now();
    let same = |old: &[SelectorEntry]| {
        let mut a: Vec<_> = old.iter().map(|e| (&e.name, &e.addr)).collect();
        let mut b: Vec<_> = found.iter().map(|e| (&e.name, &e.addr)).collect();
        a.sort();
        b.sort();
        a == b
    };
    if let Some((old, written)) = before
        && same(old)
        && now.duration_since(written).unwrap_or_default() < REFRESH
    {
        return;
    }
    let entries: Vec<Remembered> = found
        .iter()
        .map(|e| Remembered {
            name: e.name.clone(),
            addr: e.addr.clone(),
        })
        .collect();
    if let Err(e) = cache.store(&entries, now) {
        note(&format!(
            "cannot remember the selectors in {}: {e}",
            cache.path().display()
        ));
    }
}

fn describe(selectors: &[SelectorEntry]) -> String {
    selectors
        .iter()
        .map(|s| format!("{} ({})", s.name, s.addr))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Listen on `d`'s group until selectors are heard, by the rule in the module docs.
async fn listen(d: &DiscoveryConfig, config: &Config) -> Result<Vec<SelectorEntry>, FindError> {
    let listen_err = |reason: String| FindError::Listen {
        config: config.path.display().to_string(),
        reason,
    };
    if !d.multicast {
        return Err(listen_err(
            "multicast is off there, and a client hears only the group; list selectors in a [selectors] table"
                .into(),
        ));
    }
    let waited = d.period.mul_f64(LISTEN_PERIODS);
    let heard = discovery::net::hear(d, waited, GRACE, |a| selector_of(a, &d.cluster).is_some())
        .await
        .map_err(|e| listen_err(e.to_string()))?;
    let heard: Vec<SelectorEntry> = heard
        .iter()
        .filter_map(|a| selector_of(a, &d.cluster))
        .fold(Vec::new(), |known, e| merge(known, vec![e]));
    if heard.is_empty() {
        return Err(FindError::NoneHeard {
            config: config.path.display().to_string(),
            group: d.group,
            port: d.port,
            cluster: d.cluster.clone(),
            waited,
        });
    }
    Ok(heard)
}

/// The selector a datagram announces, if it is a valid selector
/// announcement of `cluster` with a usable name.
pub fn selector_in(datagram: &[u8], cluster: &str) -> Option<SelectorEntry> {
    selector_of(&Announcement::decode(datagram).ok()?, cluster)
}

/// The selector an announcement announces, if it is one of `cluster` with
/// a usable name.
pub fn selector_of(a: &Announcement, cluster: &str) -> Option<SelectorEntry> {
    if a.cluster != cluster || a.kind != Kind::Selector {
        return None;
    }
    certs::check_name(certs::Role::Service, &a.name).ok()?;
    Some(SelectorEntry {
        name: a.name.clone(),
        addr: a.addr.to_string(),
    })
}

/// `known` followed by those of `more` with a name not in it (a later
/// entry of a known name updates its address).
pub fn merge(mut known: Vec<SelectorEntry>, more: Vec<SelectorEntry>) -> Vec<SelectorEntry> {
    for m in more {
        match known.iter_mut().find(|k| k.name == m.name) {
            Some(k) => k.addr = m.addr,
            None => known.push(m),
        }
    }
    known
}

/// Selectors in the order of [`rank`]`(seed, name)` (ties by name).
///
/// ```
/// use rexec::config::SelectorEntry;
/// let s = |n: &str| SelectorEntry { name: n.into(), addr: "h:1".into() };
/// let a = rexec::find::order(vec![s("v1"), s("v2"), s("v3")], 7);
/// let b = rexec::find::order(vec![s("v3"), s("v1"), s("v2")], 7);
/// assert_eq!(a, b); // the order heard does not matter, only the seed
/// ```
pub fn order(mut selectors: Vec<SelectorEntry>, seed: u64) -> Vec<SelectorEntry> {
    selectors.sort_by(|a, b| (rank(seed, &a.name), &a.name).cmp(&(rank(seed, &b.name), &b.name)));
    selectors
}

/// A selector's place for a client with `seed`: FNV-1a over the seed and
/// the name, then a final mix so close names spread.
pub fn rank(seed: u64, name: &str) -> u64 {
    let mut h = fnv1a_extend(fnv1a(&seed.to_le_bytes()), name.as_bytes());
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^ (h >> 33)
}

/// A node with one idle CPU and no jobs, as the tests' announcements carry.
#[cfg(test)]
pub(crate) fn idle_node_status() -> proto::announce::NodeStatus {
    proto::announce::NodeStatus {
        cpus: 1,
        price: 0,
        charging: 0,
        contended: false,
        running_jobs: 0,
        runnable: 0,
        load_milli: 0,
        idle_milli: 1000,
        free_mem_mib: 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(name: &str, addr: &str) -> SelectorEntry {
        SelectorEntry {
            name: name.into(),
            addr: addr.into(),
        }
    }

    fn announcement(name: &str, cluster: &str, kind: Kind) -> Vec<u8> {
        Announcement {
            cluster: cluster.into(),
            name: name.into(),
            addr: "127.0.0.1:7480".parse().unwrap(),
            incarnation: 1,
            seq: 0,
            period_ms: 1000,
            kind,
            summary: None,
        }
        .encode()
        .unwrap()
    }

    #[test]
    fn only_selectors_of_our_cluster_with_usable_names_count() {
        let got = selector_in(&announcement("v1", "rexec", Kind::Selector), "rexec");
        assert_eq!(got, Some(s("v1", "127.0.0.1:7480")));
        assert_eq!(
            selector_in(&announcement("v1", "other", Kind::Selector), "rexec"),
            None
        );
        assert_eq!(
            selector_in(&announcement("a1", "rexec", Kind::Account), "rexec"),
            None
        );
        let node = Kind::Node(idle_node_status());
        assert_eq!(
            selector_in(&announcement("n1", "rexec", node), "rexec"),
            None
        );
        assert_eq!(
            selector_in(&announcement("Bad_Name", "rexec", Kind::Selector), "rexec"),
            None
        );
        assert_eq!(selector_in(b"junk", "rexec"), None);
    }

    #[test]
    fn merging_keeps_the_first_order_and_takes_new_addresses() {
        let m = merge(
            vec![s("v1", "h:1"), s("v2", "h:2")],
            vec![s("v3", "h:3"), s("v1", "h:9")],
        );
        assert_eq!(m, [s("v1", "h:9"), s("v2", "h:2"), s("v3", "h:3")]);
    }

    #[test]
    fn the_order_is_a_permutation_fixed_by_the_seed_and_spreads_clients() {
        let all: Vec<_> = (1..=5).map(|i| s(&format!("v{i}"), "h:1")).collect();
        let a = order(all.clone(), 1);
        assert_eq!(a.len(), 5);
        let mut names: Vec<_> = a.iter().map(|x| x.name.clone()).collect();
        names.sort();
        assert_eq!(names, ["v1", "v2", "v3", "v4", "v5"]);
        let mut rev = all.clone();
        rev.reverse();
        assert_eq!(order(rev, 1), a);
        // Over many clients, each selector comes first for some of them.
        let mut firsts = std::collections::BTreeMap::new();
        for seed in 0..1000u64 {
            *firsts
                .entry(order(all.clone(), seed)[0].name.clone())
                .or_insert(0) += 1;
        }
        assert_eq!(firsts.len(), 5, "{firsts:?}");
        assert!(firsts.values().all(|&n| n > 100), "{firsts:?}");
    }
}
