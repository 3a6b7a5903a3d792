//! Finding the batch queue without a `[batch]` address: the queue a selector
//! knows of, from its `Services` answer (selectors found as for a run).
//!
//! Until the queue announces itself as a service kind of its own, no selector
//! lists it, and the `[batch]` table is the only way to name it.

use tokio_rustls::TlsConnector;

use crate::config::Config;
use crate::exit::Error;

/// The address of the queue whose certificate is named `name`, if a selector
/// knows of one.
pub async fn find_queue(
    _config: &Config,
    _connector: &TlsConnector,
    _name: &str,
) -> Result<Option<String>, Error> {
    Ok(None)
}
