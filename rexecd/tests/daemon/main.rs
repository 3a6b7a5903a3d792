//! End-to-end tests of the `rexecd` binary: each test starts the real daemon (real
//! TLS with a test PKI, a real cgroup parent of its own, real processes run as the
//! unprivileged user `rexectest`) and speaks the node protocol to it as a raw client.
//! They need root and a cpu controller; otherwise each test says why it skips.

mod admin;
mod announce;
mod auth;
mod cleanup;
mod cli;
mod hardening;
mod heartbeat;
mod joblog;
mod journal;
mod launch;
mod limits;
mod startup;
mod stdin_window;
mod util;
mod weights;
