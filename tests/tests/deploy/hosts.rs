//! The guide's example cluster on network-namespace hosts: one [`Net`] on which each
//! machine of the guide's section 1 has the address its example has (`10.0.0.X`
//! becomes `10.213.0.X`), a [`Sandbox`] root per machine, the daemons its `systemctl`
//! lines started, and `scp` between the roots.

use std::collections::BTreeMap;
use std::path::PathBuf;

use nix::sys::signal::Signal;
use rexec_tests::netns::Net;

use crate::sandbox::{Daemon, Sandbox};

/// The guide's machines and the last byte of their example address (`admin` and
/// `login` have none in the guide; they get unused ones).
pub const MACHINES: [(&str, usize); 6] = [
    ("n1", 1),
    ("n2", 2),
    ("admin", 3),
    ("login", 4),
    ("selector", 5),
    ("ledger", 9),
];

/// What a daemon logs once it serves, by unit.
fn ready_line(unit: &str) -> &'static str {
    match unit {
        "accountd" => "accountd listening",
        _ => "listening",
    }
}

/// The hosts, their roots and the daemons running on them.
pub struct Hosts {
    // Dropped after the daemons (fields drop in order), so that they die with their
    // network still there.
    daemons: BTreeMap<(String, String), Daemon>,
    sandboxes: BTreeMap<String, Sandbox>,
    _net: Net,
}

impl Hosts {
    /// A net with every machine of [`MACHINES`] and a fresh root for each.
    pub fn new() -> Hosts {
        let top = MACHINES.iter().map(|(_, a)| *a).max().unwrap();
        let net = Net::create(top);
        let sandboxes = MACHINES
            .iter()
            .map(|(name, addr)| (name.to_string(), Sandbox::new(name, &net.host(addr - 1).ns)))
            .collect();
        Hosts {
            daemons: BTreeMap::new(),
            sandboxes,
            _net: net,
        }
    }

    /// Host `name`'s sandbox.
    pub fn host(&self, name: &str) -> &Sandbox {
        self.sandboxes
            .get(name)
            .unwrap_or_else(|| panic!("the guide names no machine {name:?}"))
    }

    /// `scp [-r] [-p] SRC... HOST:DST` run on `from`: the same copy between the roots,
    /// as a shell command for `from`'s sandbox.
    pub fn scp(&self, from: &str, line: &str) -> String {
        let words: Vec<&str> = line.split('#').next().unwrap().split_whitespace().collect();
        let (flags, paths): (Vec<&str>, Vec<&str>) =
            words[1..].iter().partition(|w| w.starts_with('-'));
        let (dest, sources) = paths.split_last().expect("scp needs a destination");
        let (host, path) = dest
            .split_once(':')
            .unwrap_or_else(|| panic!("scp to {dest:?}: not HOST:PATH"));
        let from = self.host(from);
        let mut cp = vec!["cp".to_string()];
        cp.extend(flags.iter().map(|f| f.to_string()));
        cp.extend(sources.iter().map(|s| from.rewrite(s)));
        cp.push(self.host(host).rewrite(path));
        cp.join(" ")
    }

    /// Plays `systemctl VERB UNIT` on `host`: `enable --now` and `start` run the
    /// installed unit, `stop` sends SIGTERM and waits, `reload` sends SIGHUP and waits
    /// for the reload to be logged.
    pub fn systemctl(&mut self, host: &str, verb: &str, unit: &str) {
        let key = (host.to_string(), unit.to_string());
        let at = format!("{host}: systemctl {verb} {unit}");
        match verb {
            "start" => {
                assert!(!self.daemons.contains_key(&key), "{at}: already runs");
                let sandbox = self.host(host);
                let file = sandbox.path(&format!("/etc/systemd/system/{unit}.service"));
                let daemon = Daemon::unit(sandbox, &file, ready_line(unit));
                self.daemons.insert(key, daemon);
            }
            "stop" => {
                let daemon = self
                    .daemons
                    .remove(&key)
                    .unwrap_or_else(|| panic!("{at}: not running"));
                let (log, status) = daemon.stop(Signal::SIGTERM);
                assert!(status.success(), "{at}: exit {status}:\n{log}");
            }
            "reload" => {
                let daemon = self
                    .daemons
                    .get(&key)
                    .unwrap_or_else(|| panic!("{at}: not running"));
                let before = daemon.log().matches(RELOADED).count();
                daemon.signal(Signal::SIGHUP);
                daemon.wait_for(RELOADED, before + 1);
                assert!(!daemon.log().contains("keeping the old one"), "{at}");
            }
            _ => panic!("{at}: the test does not play this"),
        }
    }

    /// Stops every daemon still running, each with SIGTERM; panics with its log if one
    /// does not exit cleanly.
    pub fn stop_all(&mut self) {
        for ((host, unit), daemon) in std::mem::take(&mut self.daemons) {
            let (log, status) = daemon.stop(Signal::SIGTERM);
            assert!(
                status.success(),
                "{unit} on {host} did not stop cleanly ({status}):\n{log}"
            );
        }
    }

    /// The logs of every daemon, for a failure message.
    pub fn logs(&self) -> String {
        self.daemons
            .iter()
            .map(|((h, u), d)| format!("--- {u} on {h}:\n{}", d.log()))
            .collect()
    }

    /// The root of host `name`, to look at what the commands made.
    pub fn root(&self, name: &str) -> PathBuf {
        self.host(name).root().to_path_buf()
    }
}

impl Drop for Hosts {
    /// A test that failed half-way still stops its daemons as systemd would, so that
    /// each rexecd removes its cgroups.
    fn drop(&mut self) {
        for (_, daemon) in std::mem::take(&mut self.daemons) {
            daemon.signal(Signal::SIGTERM);
            let _ =
                rexec_tests::wait_until(std::time::Duration::from_secs(20), || !daemon.running());
        }
    }
}

/// Logged by every daemon after a SIGHUP reload.
const RELOADED: &str = "reloaded the TLS configuration";
