//! Several instances of one service (accountd, batchd) and connecting to whichever
//! answers: [`Instances`] is the configured list of addresses and the one that
//! answered last, which is tried first next time; the others follow in the
//! configured order. With more than one address each gets at most [`FAILOVER_DIAL`]
//! to connect and shake hands, and the next is tried as soon as one fails or,
//! beside it, once it has not connected within [`crate::hedge::HEDGE_AFTER`]
//! ([`crate::hedge::first_ok`]): an instance that died (refused at once) costs
//! nothing, one whose host vanished (no answer) that short delay. With a single
//! address it gets the caller's whole time limit, as before. A connection to one
//! of several instances also gets TCP keepalive and `TCP_USER_TIMEOUT`
//! ([`FAILOVER_LIVENESS`]): when that instance's host vanishes, the kernel gives
//! the connection up within about a second, idle or in a call, and the caller's
//! next attempt dials the others instead of waiting out its call's limit.
//!
//! Failing over is silent; only when every instance failed does the caller hear,
//! and then of the last instance's failure.
//!
//! In configuration files such a list is an [`AddressList`]: one address as a string
//! (as before) or several as an array.
//!
//! ```
//! use clients::instances::Instances;
//! let i = Instances::new(vec!["a:1".into(), "b:2".into(), "c:3".into()]);
//! assert_eq!(i.order(), ["a:1", "b:2", "c:3"]);
//! i.answered("c:3");
//! assert_eq!(i.order(), ["c:3", "a:1", "b:2"]);
//! ```

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio_rustls::TlsConnector;

use crate::hedge::{Failed, HEDGE_AFTER, first_ok};
use crate::rpc::{Client, Protocol, RpcError};

/// Longest time one instance of several gets to accept a connection and finish the
/// TLS handshake before the next is tried.
pub const FAILOVER_DIAL: Duration = Duration::from_secs(1);

/// With several instances, how long data sent to the one connected to may go
/// unacknowledged (and the keepalive period while idle) before the connection is
/// given up, so that the next call fails over instead of waiting out its whole
/// limit on an instance whose host vanished without a word.
pub const FAILOVER_LIVENESS: Duration = Duration::from_secs(1);

/// The addresses of a service's instances, in the order configured, and the one
/// that answered last. Clones share which one answered last.
#[derive(Debug, Clone, Default)]
pub struct Instances {
    list: Vec<String>,
    good: Arc<AtomicUsize>,
}

impl Instances {
    /// `list`, tried in this order until one has answered.
    pub fn new(list: Vec<String>) -> Instances {
        Instances {
            list,
            good: Arc::default(),
        }
    }

    /// The addresses as configured.
    pub fn list(&self) -> &[String] {
        &self.list
    }

    /// Whether there is no address at all.
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// The addresses in the order to try them now: the one that answered last, then
    /// the others in the configured order.
    pub fn order(&self) -> Vec<&str> {
        let good = self.good.load(Ordering::Relaxed).min(self.list.len());
        let first = self.list.get(good).map(String::as_str);
        first
            .into_iter()
            .chain(
                self.list
                    .iter()
                    .enumerate()
                    .filter(|&(i, _)| i != good)
                    .map(|(_, a)| a.as_str()),
            )
            .collect()
    }

    /// Records that the instance at `addr` answered: it is tried first from now on.
    pub fn answered(&self, addr: &str) {
        if let Some(i) = self.list.iter().position(|a| a == addr) {
            self.good.store(i, Ordering::Relaxed);
        }
    }

    /// Connects to the first instance (in [`Instances::order`]) that accepts and
    /// whose certificate is the `service` certificate `server_name`; calls on the
    /// connection are limited by `timeout`. The error is the last instance's, or
    /// [`RpcError::NoAddress`] when the list is empty.
    pub async fn connect<P: Protocol>(
        &self,
        connector: &TlsConnector,
        server_name: &str,
        timeout: Duration,
    ) -> Result<Client<P>, RpcError<P::Refusal>> {
        let order = self.order();
        let dial_limit = if order.len() > 1 {
            timeout.min(FAILOVER_DIAL)
        } else {
            timeout
        };
        let attempt = |i: usize| {
            let addr: &str = order[i];
            async move {
                let attempt = Client::<P>::connect(addr, connector, server_name, dial_limit);
                match tokio::time::timeout(dial_limit, attempt).await {
                    Ok(r) => r,
                    Err(_) => Err(RpcError::Timeout {
                        service: P::SERVICE,
                        addr: addr.to_string(),
                        limit: dial_limit,
                    }),
                }
            }
        };
        match first_ok(order.len(), HEDGE_AFTER, attempt, |_| false).await {
            Ok((i, mut client)) => {
                client.set_timeout(timeout);
                if order.len() > 1 {
                    // Best effort: without it a vanished host costs the call's limit.
                    let _ = client.set_liveness(FAILOVER_LIVENESS, FAILOVER_LIVENESS);
                }
                self.answered(order[i]);
                Ok(client)
            }
            Err(Failed::Stopped(_, e)) => Err(e),
            Err(Failed::All(errors)) => Err(errors.into_iter().last().map_or(
                RpcError::NoAddress {
                    service: P::SERVICE,
                },
                |(_, e)| e,
            )),
        }
    }
}

/// One address or several, as a configuration file writes them: `"h:1"` or
/// `["h:1", "h:2"]`.
///
/// ```
/// use clients::instances::AddressList;
/// #[derive(serde::Deserialize)]
/// struct T { a: AddressList }
/// let one: T = toml::from_str(r#"a = "h:1""#).unwrap();
/// let two: T = toml::from_str(r#"a = ["h:1", "h:2"]"#).unwrap();
/// assert_eq!(one.a.into_vec(), ["h:1"]);
/// assert_eq!(two.a.into_vec(), ["h:1", "h:2"]);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(untagged)]
pub enum AddressList {
    /// One address.
    One(String),
    /// Several, in the order to try them.
    Many(Vec<String>),
}

impl From<&str> for AddressList {
    fn from(a: &str) -> AddressList {
        AddressList::One(a.to_string())
    }
}

impl AddressList {
    /// The addresses, in order.
    pub fn into_vec(self) -> Vec<String> {
        match self {
            AddressList::One(a) => vec![a],
            AddressList::Many(list) => list,
        }
    }

    /// The addresses, in order.
    pub fn as_slice(&self) -> &[String] {
        match self {
            AddressList::One(a) => std::slice::from_ref(a),
            AddressList::Many(list) => list,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_good_goes_first_and_unknown_addresses_change_nothing() {
        let i = Instances::new(vec!["a:1".into(), "b:2".into()]);
        let shared = i.clone();
        shared.answered("b:2");
        assert_eq!(i.order(), ["b:2", "a:1"]);
        i.answered("z:9");
        assert_eq!(i.order(), ["b:2", "a:1"]);
        assert!(Instances::default().order().is_empty());
    }
}
