//! Being found: the address a daemon announces ([`advertised`]: its `advertise`
//! setting, else the address it is bound to, which clients must then be able to
//! dial) and the announcement of a service that has nothing to say but where it is
//! ([`announce_service`]: accountd and batchd, every period on the cluster's
//! discovery group). rexecd's and vexecd's announcements carry more (a node's
//! market, a selector's proof of moves) and are their own.

use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;

use discovery::config::DiscoveryConfig;
use discovery::net::NetError;
use proto::announce::{Announcement, Kind};
use tokio::task::JoinHandle;

/// An `advertise` setting (or its absence) that gives clients nothing to dial.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct BadAdvertise {
    /// The value given; `None` when there was none and the listening address will
    /// not do.
    pub given: Option<String>,
    /// What is wrong, and what to write instead.
    pub reason: String,
}

impl BadAdvertise {
    /// The value given (quoted) and the reason, for an error with no field of its
    /// own for the value.
    pub fn described(&self) -> String {
        match &self.given {
            Some(text) => format!("{text:?}: {}", self.reason),
            None => self.reason.clone(),
        }
    }
}

/// The address `text` (`host:port`) names, if clients can dial it: no unspecified
/// address (`0.0.0.0`), no port 0.
pub fn parse_advertise(text: &str) -> Result<SocketAddr, BadAdvertise> {
    let bad = |reason: String| BadAdvertise {
        given: Some(text.to_string()),
        reason,
    };
    let addr = text
        .to_socket_addrs()
        .map_err(|e| bad(format!("{e} (write host:port)")))?
        .next()
        .ok_or_else(|| bad("resolves to no address".to_string()))?;
    if addr.ip().is_unspecified() || addr.port() == 0 {
        return Err(bad(
            "give the address and port clients dial, such as 10.0.0.7:7070".to_string(),
        ));
    }
    Ok(addr)
}

/// What `daemon` announces: `advertise` when given ([`parse_advertise`]), else
/// `None` (its bound address), which `listen` must then allow: listening on an
/// unspecified address (`0.0.0.0:7070`) without `advertise` is refused, saying to
/// set it `place` ("in the config file", "in \[announce\]").
pub fn advertised(
    advertise: Option<&str>,
    listen: &str,
    daemon: &str,
    place: &str,
) -> Result<Option<SocketAddr>, BadAdvertise> {
    if let Some(text) = advertise {
        return parse_advertise(text).map(Some);
    }
    match listen.parse::<SocketAddr>() {
        Ok(addr) if addr.ip().is_unspecified() => Err(BadAdvertise {
            given: None,
            reason: format!(
                "{daemon} listens on {listen}, an address clients cannot dial, so it cannot \
                 announce it; set `advertise = \"host:port\"` {place} to the address clients \
                 should dial"
            ),
        }),
        _ => Ok(None),
    }
}

/// Announces the service `name` of `kind` at `addr` on `net` every period until the
/// task is aborted (its announcements carry no summary). Logs nothing: the daemon
/// says it is announcing under its own log target.
pub fn announce_service(
    net: &DiscoveryConfig,
    kind: Kind,
    name: String,
    addr: SocketAddr,
) -> Result<JoinHandle<()>, NetError> {
    let sender = discovery::net::Sender::new(net)?;
    let cluster = net.cluster.clone();
    Ok(tokio::spawn(discovery::net::announce_loop(
        sender,
        net.period,
        Arc::new(tokio::sync::Notify::new()),
        move || Announcement {
            cluster: cluster.clone(),
            name: name.clone(),
            addr,
            incarnation: 0,
            seq: 0,
            period_ms: 0,
            kind: kind.clone(),
            summary: None,
        },
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_advertised_address_is_one_clients_can_dial() {
        assert_eq!(
            parse_advertise("10.0.0.7:7070"),
            Ok("10.0.0.7:7070".parse().unwrap())
        );
        for text in ["0.0.0.0:7070", "10.0.0.7:0", "[::]:1"] {
            let e = parse_advertise(text).unwrap_err();
            assert!(e.reason.contains("such as 10.0.0.7:7070"), "{text}: {e}");
            assert_eq!(e.described(), format!("{text:?}: {}", e.reason));
        }
        let e = parse_advertise("nohostport").unwrap_err();
        assert!(e.reason.ends_with("(write host:port)"), "{e}");
    }

    #[test]
    fn every_interface_needs_advertise_and_a_dialable_listen_does_not() {
        let e = advertised(None, "0.0.0.0:7071", "accountd", "in the config file").unwrap_err();
        assert_eq!(e.given, None);
        assert!(
            e.to_string()
                .starts_with("accountd listens on 0.0.0.0:7071, an address clients cannot dial"),
            "{e}"
        );
        assert!(e.to_string().contains("in the config file"), "{e}");
        assert_eq!(advertised(None, "127.0.0.1:0", "d", "").unwrap(), None);
        assert_eq!(advertised(None, "localhost:7071", "d", "").unwrap(), None);
        let a = advertised(Some("10.0.0.4:7482"), "0.0.0.0:7482", "d", "").unwrap();
        assert_eq!(a, Some("10.0.0.4:7482".parse().unwrap()));
    }
}
