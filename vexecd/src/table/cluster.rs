//! Cluster membership: which senders' announcements a table accepts: those
//! naming the table's cluster and, optionally, with a name suffix and within
//! networks (of the datagram's source and of the announced address).

use std::net::IpAddr;

use proto::announce::Announcement;

/// Which cluster's announcements the table accepts; everything else is
/// counted as [`DropReason::ForeignCluster`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterFilter {
    /// The cluster name announcements must carry.
    pub cluster: String,
    /// Accept only senders whose name ends with this (e.g. `.lab.example`).
    pub name_suffix: Option<String>,
    /// When not empty, both the datagram's source address (when known) and
    /// the announced address must lie in one of these networks.
    pub networks: Vec<Network>,
}

/// An IP network: address and prefix length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Network {
    /// Network address.
    pub addr: IpAddr,
    /// Prefix length in bits.
    pub prefix: u8,
}

impl Network {
    /// True when `ip` is in this network (never across address families).
    pub fn contains(&self, ip: IpAddr) -> bool {
        fn masked(a: u128, b: u128, bits: u32, prefix: u8) -> bool {
            let p = (prefix as u32).min(bits);
            p == 0 || (a ^ b) >> (bits - p) == 0
        }
        match (self.addr, ip) {
            (IpAddr::V4(n), IpAddr::V4(i)) => {
                masked(u32::from(n) as u128, u32::from(i) as u128, 32, self.prefix)
            }
            (IpAddr::V6(n), IpAddr::V6(i)) => {
                masked(u128::from(n), u128::from(i), 128, self.prefix)
            }
            _ => false,
        }
    }
}

impl Default for ClusterFilter {
    fn default() -> Self {
        ClusterFilter {
            cluster: proto::announce::DEFAULT_CLUSTER.into(),
            name_suffix: None,
            networks: Vec::new(),
        }
    }
}

impl ClusterFilter {
    pub(crate) fn admits(&self, a: &Announcement, source: Option<IpAddr>) -> bool {
        if a.cluster != self.cluster {
            return false;
        }
        if let Some(suffix) = &self.name_suffix
            && !a.name.ends_with(suffix.as_str())
        {
            return false;
        }
        if self.networks.is_empty() {
            return true;
        }
        let inside = |ip: IpAddr| self.networks.iter().any(|n| n.contains(ip));
        inside(a.addr.ip()) && source.is_none_or(inside)
    }
}
