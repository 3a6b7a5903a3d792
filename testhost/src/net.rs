//! Ports and multicast groups for tests, handed out in one place so that no two tests
//! on this machine get the same one: not the tests of one binary (run on parallel
//! threads), not several test binaries, not several checkouts running their suites at
//! once.
//!
//! Every allocation takes the next number of one machine-wide counter, a file under
//! the temp directory held under an exclusive file lock while it is read and bumped.
//! Number n names group `239.255.128.0` + n (in the organisation-local scope RFC 2365
//! gives, above the 239.255.77.x the examples use) and a port below the kernel's
//! ephemeral range, so a port the kernel hands to some client socket is never one of
//! ours. A port some other program holds is skipped: it is checked free for TCP and
//! UDP when handed out.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, UdpSocket};
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;

/// The first port handed out.
pub const PORT_BASE: u16 = 20_000;
/// How many ports (and groups) there are before the counter wraps.
pub const SLOTS: u32 = 12_000;

/// A multicast group and port no other test uses: where a test's daemons announce.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Channel {
    /// An organisation-local group, `239.255.128.0` to `239.255.255.255`.
    pub group: Ipv4Addr,
    /// Its UDP port.
    pub port: u16,
}

/// A group and port of the test's own (see the module docs).
pub fn channel() -> Channel {
    let n = free_slot();
    let [_, _, hi, lo] = (n % (128 * 256)).to_be_bytes();
    Channel {
        group: Ipv4Addr::new(239, 255, 128 + hi, lo),
        port: slot_port(n),
    }
}

/// A loopback port of the test's own, free for TCP and UDP when handed out; nothing
/// listens on it unless the test makes something.
pub fn port() -> u16 {
    slot_port(free_slot())
}

/// `127.0.0.1:`[`port`].
pub fn loopback_addr() -> SocketAddr {
    SocketAddr::from((Ipv4Addr::LOCALHOST, port()))
}

fn slot_port(n: u32) -> u16 {
    PORT_BASE + (n % SLOTS) as u16
}

/// The next slot whose port nothing on the machine holds.
fn free_slot() -> u32 {
    loop {
        let n = next_number();
        if is_free(slot_port(n)) {
            return n;
        }
    }
}

/// Whether `port` can be bound for TCP and for UDP (on any address) right now.
fn is_free(port: u16) -> bool {
    let any = SocketAddr::from((Ipv4Addr::UNSPECIFIED, port));
    TcpListener::bind(any).is_ok() && UdpSocket::bind(any).is_ok()
}

/// The machine-wide counter's file.
fn counter_path() -> PathBuf {
    std::env::temp_dir().join("rexec-tests-net.counter")
}

/// Takes the next number of the machine-wide counter (see the module docs).
///
/// # Panics
/// When the counter file cannot be opened, locked or written: a test cannot pick a
/// safe port then.
fn next_number() -> u32 {
    let path = counter_path();
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o666)
        .open(&path)
        .unwrap_or_else(|e| panic!("cannot open {}: {e}", path.display()));
    file.lock()
        .unwrap_or_else(|e| panic!("cannot lock {}: {e}", path.display()));
    let n = read_number(&mut file);
    let write = |file: &mut File| -> std::io::Result<()> {
        file.set_len(0)?;
        file.seek(SeekFrom::Start(0))?;
        write!(file, "{}", n.wrapping_add(1))
    };
    write(&mut file).unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
    // The lock ends when `file` closes.
    n
}

/// The number in the counter file (0 when it is new or unreadable).
fn read_number(file: &mut File) -> u32 {
    let mut text = String::new();
    let _ = file.read_to_string(&mut text);
    text.trim().parse().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn channels_and_ports_handed_out_at_once_are_all_different() {
        let threads: Vec<_> = (0..8)
            .map(|_| {
                std::thread::spawn(|| (0..50).map(|_| (channel(), port())).collect::<Vec<_>>())
            })
            .collect();
        let got: Vec<(Channel, u16)> = threads
            .into_iter()
            .flat_map(|t| t.join().unwrap())
            .collect();
        let groups: HashSet<Ipv4Addr> = got.iter().map(|(c, _)| c.group).collect();
        let ports: HashSet<u16> = got.iter().flat_map(|(c, p)| [c.port, *p]).collect();
        assert_eq!(groups.len(), 400);
        assert_eq!(ports.len(), 800);
        for (c, p) in &got {
            assert!(
                c.group.is_multicast()
                    && c.group.octets()[..2] == [239, 255]
                    && c.group.octets()[2] >= 128
            );
            assert!((PORT_BASE..PORT_BASE + SLOTS as u16).contains(p));
        }
    }

    #[test]
    fn a_port_in_use_is_skipped() {
        // Hold the port the next slot names, then ask: the allocator must pass it by.
        let held = loop {
            let n = {
                let mut f = File::open(counter_path()).ok();
                f.as_mut().map(read_number).unwrap_or(0)
            };
            if let Ok(l) = UdpSocket::bind(("0.0.0.0", slot_port(n))) {
                break l;
            }
            let _ = port();
        };
        let taken = held.local_addr().unwrap().port();
        // Other tests may take numbers meanwhile; whatever comes is not the held one.
        for _ in 0..3 {
            assert_ne!(port(), taken);
        }
    }
}
