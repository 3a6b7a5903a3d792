//! The market as the queue sees it: the live nodes the selectors know (name,
//! address, CPUs, price), each giving the queue its CPUs or the share an admin
//! set aside (`processors`), one rank per processor. Refreshed every few ticks
//! by asking the selectors in turn (`clients::selector::ask_any`); the same
//! answer's `Services` part names accountd when it is not configured. Without a
//! `[selectors]` table the queue hears the selectors on its `[discovery]` group.

use std::net::SocketAddr;
use std::time::Duration;

use clients::selector::{SelectorEntry, Services, ask_any};
use proto::announce::Kind;
use proto::select::{NodesQuery, ServiceKind};
use tokio_rustls::TlsConnector;

/// How long one selector may take to answer.
pub const ASK_TIMEOUT: Duration = Duration::from_secs(2);

/// One node's part of the queue's machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    /// Its name (its certificate names it).
    pub name: String,
    /// Where its rexecd listens.
    pub addr: SocketAddr,
    /// Processors it gives the queue.
    pub procs: u32,
    /// Its announced price, micro-credits per minute.
    pub price: i64,
}

/// The nodes, as last learnt.
#[derive(Debug, Clone, Default)]
pub struct Market {
    /// Live nodes, by name.
    pub nodes: Vec<Node>,
    /// Whether the selectors ever answered.
    pub known: bool,
}

impl Market {
    /// Processors in all.
    pub fn procs(&self) -> u32 {
        self.nodes.iter().map(|n| n.procs).sum()
    }
}

/// What one refresh learnt.
#[derive(Debug)]
pub struct Learnt {
    /// The nodes.
    pub nodes: Vec<Node>,
    /// accountd's address, when a selector knows one.
    pub accountd: Option<String>,
}

/// The selectors to ask: the configured ones, else those heard on the group.
pub async fn selectors(cfg: &crate::config::Config) -> Vec<SelectorEntry> {
    if !cfg.selectors.is_empty() {
        return cfg.selectors.clone();
    }
    let Some(d) = &cfg.discovery else {
        return Vec::new();
    };
    let cluster = d.cluster.clone();
    let want = |a: &proto::announce::Announcement| a.cluster == cluster && a.kind == Kind::Selector;
    match discovery::net::hear(d, d.period.mul_f64(1.5), Duration::from_millis(200), want).await {
        Ok(heard) => heard
            .into_iter()
            .filter(want)
            .map(|a| SelectorEntry {
                name: a.name,
                addr: a.addr.to_string(),
            })
            .collect(),
        Err(e) => {
            tracing::warn!(error = %e, "cannot hear selectors on the discovery group");
            Vec::new()
        }
    }
}

/// Asks the selectors for the live nodes (and accountd's address);
/// `set_aside` is the processors per node the queue may use (0 = all CPUs).
pub async fn learn(
    connector: &TlsConnector,
    selectors: &[SelectorEntry],
    set_aside: u32,
) -> Result<Learnt, clients::selector::AskAnyError> {
    let (_, list) = ask_any(connector, selectors, &NodesQuery::default(), ASK_TIMEOUT).await?;
    let mut nodes: Vec<Node> = list
        .nodes
        .into_iter()
        .map(|n| Node {
            procs: if set_aside == 0 {
                n.status.cpus
            } else {
                set_aside.min(n.status.cpus)
            },
            price: n.status.price,
            name: n.name,
            addr: n.addr,
        })
        .collect();
    nodes.sort_by(|a, b| a.name.cmp(&b.name));
    let accountd = ask_any(connector, selectors, &Services, ASK_TIMEOUT)
        .await
        .ok()
        .and_then(|(_, s)| s.into_iter().find(|s| s.kind == ServiceKind::Account))
        .map(|s| s.addr.to_string());
    Ok(Learnt { nodes, accountd })
}
