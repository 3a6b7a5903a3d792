//! The `[discovery]` table every daemon's config file (and the client's)
//! shares: which cluster, which multicast group, port, interface and TTL,
//! which unicast peers get the same datagrams, and how often to announce.
//!
//! ```toml
//! [discovery]
//! cluster = "rexec"            # announcements of other clusters are ignored
//! multicast = true             # false where the network blocks multicast
//! group = "239.255.77.1"       # administratively scoped (RFC 2365)
//! port = 7477                  # UDP port of the group
//! interface = "0.0.0.0"        # IPv4 address of the interface to send and join on
//! ttl = 1                      # hops a multicast announcement may cross
//! unicast = ["10.0.0.5:7478"]  # also send every announcement here (normally the vexecd hosts)
//! period = "2s"                # how often to announce (with jitter); also at once on a change
//! ```
//!
//! A daemon without the table neither announces nor listens; the example
//! configs in `deploy/etc` have one.

use std::net::{Ipv4Addr, SocketAddr, ToSocketAddrs};
use std::time::Duration;

use proto::announce::{DEFAULT_CLUSTER, DEFAULT_GROUP, DEFAULT_PORT, MAX_CLUSTER};
use serde::Deserialize;
use timespan::parse_duration;

/// Default announcement period.
pub const DEFAULT_PERIOD: Duration = Duration::from_secs(2);
/// Shortest period accepted.
pub const MIN_PERIOD: Duration = Duration::from_millis(100);
/// Longest period accepted (selectors cap what they believe at 30 s).
pub const MAX_PERIOD: Duration = Duration::from_secs(30);
/// Most unicast peers.
pub const MAX_UNICAST: usize = 256;

/// The `[discovery]` table as written.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DiscoveryFile {
    /// Cluster name.
    pub cluster: Option<String>,
    /// Send to and listen on the multicast group.
    pub multicast: Option<bool>,
    /// Multicast group.
    pub group: Option<String>,
    /// UDP port of the group.
    pub port: Option<u16>,
    /// Interface address.
    pub interface: Option<String>,
    /// Multicast TTL.
    pub ttl: Option<u32>,
    /// Unicast peers, `host:port`.
    pub unicast: Option<Vec<String>>,
    /// Announcement period (`2s`, `500ms`).
    pub period: Option<String>,
}

/// The `[discovery]` table checked and resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiscoveryConfig {
    /// Cluster name.
    pub cluster: String,
    /// Send to and listen on the multicast group.
    pub multicast: bool,
    /// Multicast group (IPv4, 224.0.0.0/4).
    pub group: Ipv4Addr,
    /// UDP port of the group.
    pub port: u16,
    /// Interface to send and join on (`0.0.0.0`: the kernel's choice).
    pub interface: Ipv4Addr,
    /// Multicast TTL (0 keeps announcements on this host).
    pub ttl: u32,
    /// Unicast peers, resolved.
    pub unicast: Vec<SocketAddr>,
    /// Announcement period.
    pub period: Duration,
}

impl Default for DiscoveryConfig {
    fn default() -> Self {
        DiscoveryConfig {
            cluster: DEFAULT_CLUSTER.into(),
            multicast: true,
            group: DEFAULT_GROUP,
            port: DEFAULT_PORT,
            interface: Ipv4Addr::UNSPECIFIED,
            ttl: 1,
            unicast: Vec::new(),
            period: DEFAULT_PERIOD,
        }
    }
}

/// A `[discovery]` value that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("discovery.{key}: {reason}")]
pub struct DiscoveryConfigError {
    /// The key.
    pub key: &'static str,
    /// What is wrong.
    pub reason: String,
}

fn bad(key: &'static str, reason: impl Into<String>) -> DiscoveryConfigError {
    DiscoveryConfigError {
        key,
        reason: reason.into(),
    }
}

impl DiscoveryFile {
    /// Check every value and resolve the unicast peers (a name is looked
    /// up once, here).
    pub fn resolve(&self) -> Result<DiscoveryConfig, DiscoveryConfigError> {
        let d = DiscoveryConfig::default();
        let cluster = self.cluster.clone().unwrap_or(d.cluster);
        if cluster.is_empty()
            || cluster.len() > MAX_CLUSTER
            || cluster.chars().any(|c| c.is_control() || c.is_whitespace())
        {
            return Err(bad(
                "cluster",
                format!(
                    "{cluster:?} is not a name of 1 to {MAX_CLUSTER} characters without spaces"
                ),
            ));
        }
        let group = match &self.group {
            None => d.group,
            Some(g) => {
                let ip: Ipv4Addr = g
                    .parse()
                    .map_err(|_| bad("group", format!("{g:?} is not an IPv4 address")))?;
                if !ip.is_multicast() {
                    return Err(bad(
                        "group",
                        format!("{ip} is not a multicast address (224.0.0.0 to 239.255.255.255)"),
                    ));
                }
                ip
            }
        };
        let port = self.port.unwrap_or(d.port);
        if port == 0 {
            return Err(bad("port", "0 is not a port"));
        }
        let interface = match &self.interface {
            None => d.interface,
            Some(i) => i.parse().map_err(|_| {
                bad(
                    "interface",
                    format!("{i:?} is not the IPv4 address of an interface"),
                )
            })?,
        };
        let ttl = self.ttl.unwrap_or(d.ttl);
        if ttl > 255 {
            return Err(bad("ttl", format!("{ttl} is over 255")));
        }
        let period = match &self.period {
            None => d.period,
            Some(p) => {
                let p = parse_duration(p).map_err(|e| bad("period", e.to_string()))?;
                if !(MIN_PERIOD..=MAX_PERIOD).contains(&p) {
                    return Err(bad(
                        "period",
                        format!("{p:?} is outside {MIN_PERIOD:?} to {MAX_PERIOD:?}"),
                    ));
                }
                p
            }
        };
        let peers = self.unicast.as_deref().unwrap_or(&[]);
        if peers.len() > MAX_UNICAST {
            return Err(bad(
                "unicast",
                format!("{} peers; at most {MAX_UNICAST}", peers.len()),
            ));
        }
        let mut unicast = Vec::with_capacity(peers.len());
        for peer in peers {
            let addr = peer
                .to_socket_addrs()
                .map_err(|e| bad("unicast", format!("{peer:?}: {e} (write host:port)")))?
                .find(SocketAddr::is_ipv4)
                .ok_or_else(|| bad("unicast", format!("{peer:?} has no IPv4 address")))?;
            if addr.port() == 0 {
                return Err(bad("unicast", format!("{peer:?}: port 0")));
            }
            unicast.push(addr);
        }
        let multicast = self.multicast.unwrap_or(d.multicast);
        if !multicast && unicast.is_empty() {
            return Err(bad(
                "multicast",
                "multicast is off and no unicast peers are given: nothing would be sent or heard",
            ));
        }
        Ok(DiscoveryConfig {
            cluster,
            multicast,
            group,
            port,
            interface,
            ttl,
            unicast,
            period,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(toml_text: &str) -> DiscoveryFile {
        toml::from_str(toml_text).unwrap()
    }

    #[test]
    fn defaults_and_every_key() {
        assert_eq!(
            DiscoveryFile::default().resolve().unwrap(),
            DiscoveryConfig::default()
        );
        let c = file(
            r#"cluster = "lab"
               multicast = false
               group = "239.1.2.3"
               port = 9000
               interface = "127.0.0.1"
               ttl = 0
               unicast = ["127.0.0.1:7478", "localhost:7479"]
               period = "500ms""#,
        )
        .resolve()
        .unwrap();
        assert_eq!(c.cluster, "lab");
        assert!(!c.multicast);
        assert_eq!(c.group, Ipv4Addr::new(239, 1, 2, 3));
        assert_eq!((c.port, c.ttl), (9000, 0));
        assert_eq!(c.interface, Ipv4Addr::LOCALHOST);
        assert_eq!(c.unicast.len(), 2);
        assert_eq!(c.unicast[1].port(), 7479);
        assert_eq!(c.period, Duration::from_millis(500));
    }

    #[test]
    fn bad_values_name_their_key() {
        for (text, key) in [
            (r#"cluster = "a b""#, "cluster"),
            (r#"cluster = """#, "cluster"),
            (r#"group = "10.0.0.1""#, "group"),
            (r#"group = "nonsense""#, "group"),
            ("port = 0", "port"),
            (r#"interface = "eth0""#, "interface"),
            ("ttl = 256", "ttl"),
            (r#"period = "10ms""#, "period"),
            (r#"period = "1h""#, "period"),
            (r#"period = "soon""#, "period"),
            (r#"unicast = ["nohostport"]"#, "unicast"),
            (r#"unicast = ["127.0.0.1:0"]"#, "unicast"),
            ("multicast = false", "multicast"),
        ] {
            let err = file(text).resolve().unwrap_err();
            assert_eq!(err.key, key, "{text}: {err}");
        }
        assert!(toml::from_str::<DiscoveryFile>("colour = 1").is_err());
    }
}
