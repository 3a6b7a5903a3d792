//! The real `vexecd` binary on loopback: announcements of fake nodes by
//! multicast (group joined on 127.0.0.1, TTL 0, a group and port per test)
//! and by unicast, requests over real mutual TLS with certificates from a
//! test PKI.

mod hostile;
mod select;
mod service;
mod util;
