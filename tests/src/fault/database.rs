//! The fault test's PostgreSQL (issue 42): a primary and a synchronous
//! streaming standby, each on a database host of its own. A server listens on
//! a Unix socket only; a relay bound inside its host's namespace carries TCP
//! from the bridge to it, so a control host that is cut off loses its database
//! too. The daemons name both relays in one connection string with
//! `target_session_attrs=read-write`, so they use whichever server takes
//! writes.
//!
//! The fault: [`Database::hold_back_standby`] stops the standby's WAL receiver
//! for a moment first, so that it lags as a standby on a slow link would (with a
//! synchronous standby the primary's commits wait meanwhile; with an
//! asynchronous one they go on and the standby misses them); then
//! [`Database::fail_over`] kills the primary as a crash would (`pg_ctl stop -m
//! immediate`) and promotes the standby. The standby was made
//! before the primary began to wait for it (`synchronous_standby_names`), so the
//! promoted server does not wait for a standby it lacks. [`Database::replace_standby`]
//! then builds a new standby of it on the dead server's host, so the next round
//! starts as the first did.

use std::fs;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, Shutdown, TcpListener, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::DB_HOSTS;
use crate::netns::Net;
use crate::postgres::Postgres;

/// The relays' port on the database hosts.
const DB_PORT: u16 = 5432;

/// The two servers and their relays; see the module docs.
pub struct Database {
    /// The servers, one per database host ([`DB_HOSTS`]).
    servers: [Postgres; 2],
    /// The index of the server that takes writes.
    primary: AtomicUsize,
    /// The socket each host's relay connects to.
    targets: [Arc<Mutex<PathBuf>>; 2],
    /// The relays' addresses.
    addrs: [Ipv4Addr; 2],
}

fn socket(pg: &Postgres) -> PathBuf {
    pg.socket_dir().join(format!(".s.PGSQL.{}", pg.port()))
}

impl Database {
    /// A primary holding the empty databases `ledger` and `queue` on the first
    /// database host, its synchronous standby on the second.
    pub fn start(net: &Net) -> Database {
        let primary = Postgres::start();
        primary.create_db("ledger");
        primary.create_db("queue");
        let standby = Postgres::standby_of(&primary);
        primary.require_synchronous_standby();
        let servers = [primary, standby];
        let targets = [0, 1].map(|i| Arc::new(Mutex::new(socket(&servers[i]))));
        let addrs = DB_HOSTS.map(|h| net.host(h).addr);
        for (i, &h) in DB_HOSTS.iter().enumerate() {
            relay_in(&net.host(h).ns, addrs[i], DB_PORT, targets[i].clone());
        }
        Database {
            servers,
            primary: AtomicUsize::new(0),
            targets,
            addrs,
        }
    }

    /// The connection string of database `name` naming both relays; the
    /// client uses the server that takes writes.
    pub fn conninfo(&self, name: &str) -> String {
        let [a, b] = self.addrs;
        format!(
            "host={a},{b} port={DB_PORT},{DB_PORT} dbname={name} user=postgres \
             target_session_attrs=read-write"
        )
    }

    /// The server that takes writes.
    pub fn primary(&self) -> &Postgres {
        &self.servers[self.primary.load(Ordering::SeqCst)]
    }

    /// The other server.
    pub fn standby(&self) -> &Postgres {
        &self.servers[1 - self.primary.load(Ordering::SeqCst)]
    }

    /// Stops the standby's WAL receiver (`primary_conninfo` emptied) and waits
    /// until the primary sees no standby: whatever the primary commits from now
    /// on reaches the standby only if the primary waits for it, which it does not.
    pub fn hold_back_standby(&self) {
        let standby = self.standby();
        standby.psql("postgres", "ALTER SYSTEM SET primary_conninfo = ''");
        standby.psql("postgres", "SELECT pg_reload_conf()");
        let gone = crate::wait_until(Duration::from_secs(30), || {
            self.primary()
                .try_psql("postgres", "SELECT COUNT(*) FROM pg_stat_replication")
                .is_ok_and(|n| n == "0")
        });
        assert!(gone.is_some(), "the standby kept streaming");
    }

    /// The fault: kills the primary at once and promotes the standby; how long
    /// the promotion took.
    pub fn fail_over(&self) -> Duration {
        let old = self.primary.load(Ordering::SeqCst);
        self.servers[old].crash();
        let start = Instant::now();
        let new = &self.servers[1 - old];
        new.promote();
        self.primary.store(1 - old, Ordering::SeqCst);
        let took = start.elapsed();
        // What `hold_back_standby` set must not reach the next standby's copy.
        new.psql("postgres", "ALTER SYSTEM RESET primary_conninfo");
        took
    }

    /// Builds a new synchronous standby of the primary on the host of the
    /// server that died (its relay now leads to the new one); how long it took.
    pub fn replace_standby(&mut self) -> Duration {
        let start = Instant::now();
        let p = self.primary.load(Ordering::SeqCst);
        let standby = Postgres::standby_of(&self.servers[p]);
        *self.targets[1 - p].lock().expect("relay target") = socket(&standby);
        self.servers[1 - p] = standby;
        self.servers[p].require_synchronous_standby();
        start.elapsed()
    }
}

/// Relays TCP connections to `addr:port` inside namespace `ns` to the Unix
/// socket `target` names at the time, in background threads for the life of
/// the test process.
fn relay_in(ns: &str, addr: Ipv4Addr, port: u16, target: Arc<Mutex<PathBuf>>) {
    let ns_file = fs::File::open(format!("/run/netns/{ns}")).expect("cannot open the namespace");
    // setns moves only the calling thread; the socket it binds stays there.
    let listener = std::thread::spawn(move || {
        nix::sched::setns(&ns_file, nix::sched::CloneFlags::CLONE_NEWNET)
            .expect("cannot enter the database host's namespace");
        TcpListener::bind((addr, port)).expect("cannot bind the database relay")
    })
    .join()
    .expect("relay binding thread");
    std::thread::spawn(move || {
        for client in listener.incoming().flatten() {
            let Ok(socket) = target.lock().map(|t| t.clone()) else {
                return;
            };
            std::thread::spawn(move || {
                let Ok(server) = UnixStream::connect(&socket) else {
                    return;
                };
                let (Ok(c2), Ok(s2)) = (client.try_clone(), server.try_clone()) else {
                    return;
                };
                let up = std::thread::spawn(move || {
                    copy(client, s2);
                });
                copy(server, c2);
                let _ = up.join();
            });
        }
    });
}

/// Copies until either side ends, then closes both ways.
fn copy(mut from: impl Read + Shut, mut to: impl Write + Shut) {
    let _ = std::io::copy(&mut from, &mut to);
    to.shut();
    from.shut();
}

/// Closing a stream both ways.
trait Shut {
    fn shut(&self);
}

impl Shut for TcpStream {
    fn shut(&self) {
        let _ = self.shutdown(Shutdown::Both);
    }
}

impl Shut for UnixStream {
    fn shut(&self) {
        let _ = self.shutdown(Shutdown::Both);
    }
}
