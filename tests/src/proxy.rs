//! [`DelayProxy`]: a TCP relay on loopback that holds each new connection
//! for a while before passing it on, to make one node slow to launch.

use std::io;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

/// Relays connections to `target`, each after `delay`.
#[derive(Debug)]
pub struct DelayProxy {
    /// Where clients connect.
    pub addr: SocketAddr,
}

impl DelayProxy {
    /// Start relaying (in background threads, for the life of the test process).
    pub fn start(target: SocketAddr, delay: Duration) -> DelayProxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("cannot bind the proxy");
        let addr = listener.local_addr().expect("proxy address");
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                std::thread::spawn(move || {
                    std::thread::sleep(delay);
                    if let Ok(server) = TcpStream::connect(target) {
                        relay(client, server);
                    }
                });
            }
        });
        DelayProxy { addr }
    }
}

fn relay(a: TcpStream, b: TcpStream) {
    let (Ok(a2), Ok(b2)) = (a.try_clone(), b.try_clone()) else {
        return;
    };
    let one = std::thread::spawn(move || pipe(a, b2));
    pipe(b, a2);
    let _ = one.join();
}

fn pipe(mut from: TcpStream, mut to: TcpStream) {
    let _ = io::copy(&mut from, &mut to);
    let _ = to.shutdown(Shutdown::Write);
}
