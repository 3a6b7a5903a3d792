//! Several hosts on one machine: network namespaces joined by veth pairs to
//! a bridge (which lives in a namespace of its own), each host with its own
//! address on 10.213.0.0/24, loopback up and a route for multicast, so
//! announcements cross the bridge as on a real LAN. The bridge floods
//! multicast (snooping off).
//!
//! Every name is local to the test: namespaces are called
//! `rxt-<pid>-<n>-<host>`, and interface names live inside them, so
//! concurrent tests never meet. A host's link is cut and restored from the
//! bridge side ([`Net::cut`], [`Net::restore`]). Processes run in a host
//! with [`Net::command`], through `nsenter --net` (which, unlike `ip netns
//! exec`, leaves the mount namespace alone, so cgroups stay visible).
//! Dropping the [`Net`] deletes every namespace it made; anything still
//! running in one loses its network.

use std::net::Ipv4Addr;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// One host of a [`Net`].
#[derive(Debug, Clone)]
pub struct Host {
    /// Its namespace's name.
    pub ns: String,
    /// Its address.
    pub addr: Ipv4Addr,
    /// The bridge-side end of its link (in the bridge's namespace).
    bridge_port: String,
}

/// Hosts on one bridge; see the module docs.
#[derive(Debug)]
pub struct Net {
    /// The bridge's namespace.
    pub bridge_ns: String,
    /// The hosts, index 0 first (address 10.213.0.1).
    pub hosts: Vec<Host>,
}

fn ip(args: &[&str]) {
    let out = Command::new("ip")
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run ip (iproute2): {e}"));
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr).trim()
    );
}

impl Net {
    /// Make `hosts` hosts on a bridge.
    pub fn create(hosts: usize) -> Net {
        assert!((1..=250).contains(&hosts), "1 to 250 hosts");
        let base = format!(
            "rxt-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::SeqCst)
        );
        let mut net = Net {
            bridge_ns: format!("{base}-br"),
            hosts: Vec::new(),
        };
        ip(&["netns", "add", &net.bridge_ns]);
        let br = net.bridge_ns.clone();
        ip(&["-n", &br, "link", "set", "lo", "up"]);
        ip(&[
            "-n",
            &br,
            "link",
            "add",
            "br0",
            "type",
            "bridge",
            "mcast_snooping",
            "0",
        ]);
        ip(&["-n", &br, "link", "set", "br0", "up"]);
        for i in 0..hosts {
            let ns = format!("{base}-h{}", i + 1);
            let addr = Ipv4Addr::new(10, 213, 0, (i + 1) as u8);
            let port = format!("p{}", i + 1);
            ip(&["netns", "add", &ns]);
            // The host is pushed before its link exists, so a failure below
            // still deletes its namespace on drop.
            net.hosts.push(Host {
                ns: ns.clone(),
                addr,
                bridge_port: port.clone(),
            });
            ip(&[
                "link", "add", "eth0", "netns", &ns, "type", "veth", "peer", "name", &port,
                "netns", &br,
            ]);
            ip(&["-n", &br, "link", "set", &port, "master", "br0"]);
            ip(&["-n", &br, "link", "set", &port, "up"]);
            ip(&["-n", &ns, "link", "set", "lo", "up"]);
            ip(&[
                "-n",
                &ns,
                "addr",
                "add",
                &format!("{addr}/24"),
                "dev",
                "eth0",
            ]);
            ip(&["-n", &ns, "link", "set", "eth0", "up"]);
            ip(&["-n", &ns, "route", "add", "224.0.0.0/4", "dev", "eth0"]);
        }
        net
    }

    /// The host at `index`.
    pub fn host(&self, index: usize) -> &Host {
        &self.hosts[index]
    }

    /// A command that runs `program` in host `index`'s network namespace.
    pub fn command(&self, index: usize, program: &Path) -> Command {
        command_in(Some(&self.hosts[index].ns), program)
    }

    /// Cut host `index` off the bridge (its end stays up: it sees no
    /// carrier loss, only silence, like a pulled cable further away).
    pub fn cut(&self, index: usize) {
        let port = &self.hosts[index].bridge_port;
        ip(&["-n", &self.bridge_ns, "link", "set", port, "nomaster"]);
    }

    /// Join host `index` to the bridge again.
    pub fn restore(&self, index: usize) {
        let port = &self.hosts[index].bridge_port;
        ip(&["-n", &self.bridge_ns, "link", "set", port, "master", "br0"]);
        ip(&["-n", &self.bridge_ns, "link", "set", port, "up"]);
    }
}

/// A command that runs `program` in the network namespace `ns` (named as
/// under /run/netns), or in the test's own when `None`.
pub fn command_in(ns: Option<&str>, program: impl AsRef<std::ffi::OsStr>) -> Command {
    match ns {
        Some(ns) => {
            let mut c = Command::new("nsenter");
            c.arg(format!("--net=/run/netns/{ns}"))
                .arg("--")
                .arg(program);
            c
        }
        None => Command::new(program),
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        for ns in self
            .hosts
            .iter()
            .map(|h| h.ns.as_str())
            .chain([self.bridge_ns.as_str()])
        {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
    }
}
