//! Being found and finding others. Every service (rexecd, vexecd, accountd)
//! announces itself in [`proto::announce`] datagrams; selectors and clients
//! listen. This crate owns what they share beyond the datagram's layout:
//!
//! - [`clock`]: the time a caller passes in (monotonic instant and the
//!   wall-clock position in the week).
//! - [`profile`]: a node's availability history after HP's Ring Leader: the
//!   weekly profile of 1008 ten-minute slots, its file, its compact summary
//!   (carried in announcements), and the completion-time prediction.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod clock;
pub mod profile;
