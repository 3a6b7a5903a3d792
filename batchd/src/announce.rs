//! Announcing the queue on the discovery group (kind `Batch`, the name in its
//! certificate, its address) every period, as accountd announces itself, so
//! that selectors list it in their `Services` answer and `rexec submit` finds
//! it with no address configured.

use std::net::SocketAddr;
use std::sync::Arc;

use discovery::config::DiscoveryConfig;
use proto::announce::{Announcement, Kind};
use tokio::task::JoinHandle;

/// Starts announcing `name` at `addr`; the task runs until aborted.
pub fn spawn(
    net: &DiscoveryConfig,
    name: String,
    addr: SocketAddr,
) -> Result<JoinHandle<()>, discovery::net::NetError> {
    let sender = discovery::net::Sender::new(net)?;
    let cluster = net.cluster.clone();
    tracing::info!(%addr, %name, cluster = %cluster, group = %net.group, port = net.port, "announcing the queue");
    Ok(tokio::spawn(discovery::net::announce_loop(
        sender,
        net.period,
        Arc::new(tokio::sync::Notify::new()),
        move || Announcement {
            cluster: cluster.clone(),
            name: name.clone(),
            addr,
            incarnation: 0,
            seq: 0,
            period_ms: 0,
            kind: Kind::Batch,
            summary: None,
        },
    )))
}
