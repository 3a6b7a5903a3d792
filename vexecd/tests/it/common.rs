//! Announcements and clocks for the scenarios.

use std::time::Instant;

use proto::announce::{Announcement, Kind, NodeStatus};
use vexecd::clock::Now;

pub fn node(name: &str, seq: u64, status: NodeStatus) -> Announcement {
    Announcement {
        cluster: proto::announce::DEFAULT_CLUSTER.into(),
        summary: None,
        name: name.into(),
        addr: "10.1.0.1:7400".parse().unwrap(),
        incarnation: 100,
        seq,
        period_ms: 2000,
        kind: Kind::Node(status),
    }
}

pub fn status(cpus: u32, price: i64, load_milli: u32) -> NodeStatus {
    NodeStatus {
        cpus,
        price,
        charging: 0,
        contended: false,
        running_jobs: 0,
        runnable: 0,
        load_milli,
        // Measured fully idle: the runnable threads decide.
        idle_milli: cpus * 1000,
        free_mem_mib: 0,
    }
}

pub fn datagram(a: &Announcement) -> Vec<u8> {
    a.encode().unwrap()
}

/// A fixed "now": Monday 2024-01-08 09:00 UTC.
pub fn now(instant: Instant) -> Now {
    Now {
        instant,
        unix_secs: 1_704_067_200 + 7 * 86_400 + 9 * 3600,
    }
}
