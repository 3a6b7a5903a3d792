//! Who this client is to a node: the name in its `Hello`, the node's notices shown
//! on stderr (`rexec: node NAME: ...`), and the exit class of a node's refusal. The
//! sessions themselves are [`clients::node`]'s.

use clients::node::{Agent, SessionError};
use proto::node::{ErrorCode, Notice};

use crate::exit::Class;

/// `rexec` as a node sees it.
pub static AGENT: Agent = Agent {
    name: concat!("rexec ", env!("CARGO_PKG_VERSION")),
    on_notice: show_notice,
};

/// A node's notice, one line on stderr.
fn show_notice(node: &str, notice: &Notice) {
    eprintln!("rexec: node {node}: {}", notice.text);
}

/// The class of a launch that fails this way: the program could not
/// be started, the market refused the bid (negative, over the node's
/// `max_rate`, no credit), the request asks more than the node allows a rank
/// (a usage error), or the node failed.
pub fn class(e: &SessionError) -> Class {
    match e.refusal() {
        Some(ErrorCode::SpawnFailed) => Class::NotStarted,
        Some(ErrorCode::NoCredit | ErrorCode::BadBid) => Class::Refused,
        // More than the node allows one rank (--mem above its max_mem_per_rank).
        Some(ErrorCode::OverLimit) => Class::Usage,
        _ => Class::Failed,
    }
}
