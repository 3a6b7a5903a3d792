//! Who may see whose jobs: the rule that both the queue's listing
//! ([`super::handle`]) and the history ([`crate::history`]) apply.

use certs::{PeerIdentity, Role};
use proto::batch::{BatchError, BatchErrorCode};

/// Whose jobs `peer` lists when asking for `asked`'s: a user only her own (`None`
/// means hers), an admin anyone's (`None`: everyone's).
pub(crate) fn whose(
    peer: &PeerIdentity,
    asked: Option<&String>,
) -> Result<Option<String>, BatchError> {
    Ok(match (peer.role, asked) {
        (Role::Admin, u) => u.cloned(),
        (Role::User, None) => Some(peer.name.clone()),
        (Role::User, Some(u)) if *u == peer.name => Some(u.clone()),
        (Role::User, Some(u)) => {
            return Err(BatchError::new(
                BatchErrorCode::Forbidden,
                format!(
                    "user {} may list only their own jobs, not {u:?}'s",
                    peer.name
                ),
            ));
        }
        _ => {
            return Err(BatchError::new(
                BatchErrorCode::Forbidden,
                format!("{} {} may not list the queue", peer.role, peer.name),
            ));
        }
    })
}
