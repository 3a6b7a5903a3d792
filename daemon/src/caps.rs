//! Per-peer connection caps, below a daemon's global connection limit: how many
//! connections one remote address may hold (counted from `accept`, so TLS
//! handshakes that never finish count too) and how many one certificate
//! identity may hold (counted once its handshake has named it). Without them
//! a single client, or a single certificate holder, could take every slot of
//! rexecd or accountd.
//!
//! A slot is an RAII guard: dropping it (when the connection ends) gives the
//! slot back. Addresses are counted exactly (one IPv4 or IPv6 address each).

use std::collections::HashMap;
use std::hash::Hash;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard};

use certs::PeerIdentity;

/// Counts of open connections per remote address and per identity, with their caps.
#[derive(Debug)]
pub struct ConnectionCaps {
    per_address: usize,
    per_identity: usize,
    counts: Mutex<Counts>,
}

#[derive(Debug, Default)]
struct Counts {
    by_address: HashMap<IpAddr, usize>,
    by_identity: HashMap<PeerIdentity, usize>,
}

/// A connection over one of the caps.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{who} already holds {limit} connections, its limit ({key}); close some and retry")]
pub struct CapExceeded {
    /// The address or identity, as a user would recognise it.
    pub who: String,
    /// The cap in force.
    pub limit: usize,
    /// The config key that sets it.
    pub key: &'static str,
}

/// A connection's place under its address's cap; dropping it gives the place back.
#[derive(Debug)]
pub struct AddressSlot {
    caps: Arc<ConnectionCaps>,
    address: IpAddr,
}

/// A connection's place under its identity's cap; dropping it gives the place back.
#[derive(Debug)]
pub struct IdentitySlot {
    caps: Arc<ConnectionCaps>,
    identity: PeerIdentity,
}

fn take<K: Hash + Eq + Clone>(map: &mut HashMap<K, usize>, key: &K, limit: usize) -> bool {
    let n = map.entry(key.clone()).or_insert(0);
    if *n >= limit {
        return false;
    }
    *n += 1;
    true
}

fn give_back<K: Hash + Eq>(map: &mut HashMap<K, usize>, key: &K) {
    if let Some(n) = map.get_mut(key) {
        *n = n.saturating_sub(1);
        if *n == 0 {
            map.remove(key);
        }
    }
}

impl ConnectionCaps {
    /// Caps of `per_address` connections per remote address and `per_identity`
    /// per certificate identity (each at least 1).
    ///
    /// ```
    /// use certs::{PeerIdentity, Role};
    /// use daemon::ConnectionCaps;
    /// let caps = ConnectionCaps::new(2, 1);
    /// let ip = "192.0.2.7".parse().unwrap();
    /// let a = caps.admit_address(ip).unwrap();
    /// let _b = caps.admit_address(ip).unwrap();
    /// assert!(caps.admit_address(ip).is_err());
    /// drop(a);
    /// assert!(caps.admit_address(ip).is_ok());
    /// let alice = PeerIdentity::new(Role::User, "alice").unwrap();
    /// let _one = caps.admit_identity(&alice).unwrap();
    /// let err = caps.admit_identity(&alice).unwrap_err();
    /// assert_eq!(err.to_string(), "user alice already holds 1 connections, its limit \
    ///     (max_connections_per_identity); close some and retry");
    /// ```
    pub fn new(per_address: usize, per_identity: usize) -> Arc<ConnectionCaps> {
        Arc::new(ConnectionCaps {
            per_address: per_address.max(1),
            per_identity: per_identity.max(1),
            counts: Mutex::new(Counts::default()),
        })
    }

    fn counts(&self) -> MutexGuard<'_, Counts> {
        // The counts stay consistent even if a holder panicked: each update is one step.
        self.counts.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes a place for a new connection from `address`, or says why not.
    pub fn admit_address(self: &Arc<Self>, address: IpAddr) -> Result<AddressSlot, CapExceeded> {
        if !take(&mut self.counts().by_address, &address, self.per_address) {
            return Err(CapExceeded {
                who: format!("address {address}"),
                limit: self.per_address,
                key: "max_connections_per_address",
            });
        }
        Ok(AddressSlot {
            caps: Arc::clone(self),
            address,
        })
    }

    /// Takes a place for a connection authenticated as `identity`, or says why not.
    pub fn admit_identity(
        self: &Arc<Self>,
        identity: &PeerIdentity,
    ) -> Result<IdentitySlot, CapExceeded> {
        if !take(&mut self.counts().by_identity, identity, self.per_identity) {
            return Err(CapExceeded {
                who: identity.to_string(),
                limit: self.per_identity,
                key: "max_connections_per_identity",
            });
        }
        Ok(IdentitySlot {
            caps: Arc::clone(self),
            identity: identity.clone(),
        })
    }
}

impl Drop for AddressSlot {
    fn drop(&mut self) {
        give_back(&mut self.caps.counts().by_address, &self.address);
    }
}

impl Drop for IdentitySlot {
    fn drop(&mut self) {
        give_back(&mut self.caps.counts().by_identity, &self.identity);
    }
}
