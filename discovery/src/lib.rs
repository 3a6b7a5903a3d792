//! Being found and finding others. Every service (rexecd, vexecd, accountd)
//! announces itself in [`proto::announce`] datagrams; selectors and clients
//! listen. This crate owns what they share beyond the datagram's layout:
//!
//! - [`config`]: the `[discovery]` table every config file shares.
//! - [`cache`]: what a client heard, remembered for its next run.
//! - [`net`]: the sockets (multicast and unicast) and the announcing loop.
//! - [`hash`]: FNV-1a 64 (the profile file's checksum, the clients' order of
//!   selectors).
//! - [`clock`]: the time a caller passes in (monotonic instant and the
//!   wall-clock position in the week).
//! - [`profile`]: a node's availability history after HP's Ring Leader: the
//!   weekly profile of 1008 ten-minute slots, its file, its compact summary
//!   (carried in announcements), and the completion-time prediction.

#![deny(missing_docs)]

pub mod cache;
pub mod clock;
pub mod config;
pub mod hash;
pub mod net;
pub mod profile;
