//! The selector (vexecd) client: [`SelectorClient`] is one connection to one
//! selector, with a typed method per question ([`SelectorClient::select`],
//! [`nodes`](SelectorClient::nodes), [`services`](SelectorClient::services),
//! [`stats`](SelectorClient::stats)); an answer of the wrong kind is an
//! [`RpcError::WrongReply`]. [`ask_any`] asks a list of selectors in turn until one
//! answers, as `rexec` does.
//!
//! Each question is an [`Ask`]: the op it sends and the reply kind that answers it,
//! so [`SelectorClient::ask`] and [`ask_any`] return the typed answer.
//!
//! ```no_run
//! # async fn demo(connector: tokio_rustls::TlsConnector) -> Result<(), clients::selector::ClientError> {
//! use std::time::Duration;
//! use proto::select::SelectQuery;
//! let mut c = clients::selector::SelectorClient::connect(
//!     "10.0.0.5:7478", &connector, "vexecd", Duration::from_secs(5)).await?;
//! let picked = c.select(SelectQuery::new(4, "lowest-price")).await?;
//! println!("{:?}", picked.iter().map(|n| &n.name).collect::<Vec<_>>());
//! # Ok(()) }
//! ```

use proto::select::{
    MAX_SELECTOR_REPLY, MAX_SELECTOR_REQUEST, NodeList, NodeView, NodesQuery, SelectQuery,
    SelectorError, SelectorOp, SelectorReply, SelectorRequest, SelectorResponse, SelectorStats,
    ServiceView,
};

use crate::rpc::{Client, Protocol, RpcError};

mod failover;

pub use failover::{
    AskAnyError, Attempt, Next, SelectorEntry, Selectors, after_failure, ask_any, ask_one,
};

/// The selector protocol of `proto::select`.
#[derive(Debug)]
pub enum Selector {}

impl Protocol for Selector {
    const SERVICE: &'static str = "selector";
    const MAX_REPLY: usize = MAX_SELECTOR_REPLY;
    const MAX_REQUEST: usize = MAX_SELECTOR_REQUEST;
    type Op = SelectorOp;
    type Request = SelectorRequest;
    type Response = SelectorResponse;
    type Reply = SelectorReply;
    type Refusal = SelectorError;

    fn request(id: u64, op: SelectorOp) -> SelectorRequest {
        SelectorRequest::new(id, op)
    }

    fn response(r: SelectorResponse) -> (u64, Result<SelectorReply, SelectorError>) {
        (r.id, r.result)
    }
}

/// An open connection to a selector.
pub type SelectorClient = Client<Selector>;

/// Why a selector call failed.
pub type ClientError = RpcError<SelectorError>;

/// A question to a selector and the kind of reply that answers it.
pub trait Ask {
    /// The typed answer.
    type Answer;
    /// The op that asks it.
    fn op(&self) -> SelectorOp;
    /// The answer in `reply`, or the reply back when it is of another kind.
    fn answer(reply: SelectorReply) -> Result<Self::Answer, SelectorReply>;
}

impl Ask for SelectQuery {
    type Answer = Vec<NodeView>;
    fn op(&self) -> SelectorOp {
        SelectorOp::Select(self.clone())
    }
    fn answer(reply: SelectorReply) -> Result<Vec<NodeView>, SelectorReply> {
        match reply {
            SelectorReply::Selected(v) => Ok(v),
            other => Err(other),
        }
    }
}

impl Ask for NodesQuery {
    type Answer = NodeList;
    fn op(&self) -> SelectorOp {
        SelectorOp::Nodes(self.clone())
    }
    fn answer(reply: SelectorReply) -> Result<NodeList, SelectorReply> {
        match reply {
            SelectorReply::Nodes(v) => Ok(v),
            other => Err(other),
        }
    }
}

/// "List the live selectors and account services."
#[derive(Debug, Clone, Copy)]
pub struct Services;

impl Ask for Services {
    type Answer = Vec<ServiceView>;
    fn op(&self) -> SelectorOp {
        SelectorOp::Services
    }
    fn answer(reply: SelectorReply) -> Result<Vec<ServiceView>, SelectorReply> {
        match reply {
            SelectorReply::Services(v) => Ok(v),
            other => Err(other),
        }
    }
}

/// "Your counters."
#[derive(Debug, Clone, Copy)]
pub struct Stats;

impl Ask for Stats {
    type Answer = SelectorStats;
    fn op(&self) -> SelectorOp {
        SelectorOp::Stats
    }
    fn answer(reply: SelectorReply) -> Result<SelectorStats, SelectorReply> {
        match reply {
            SelectorReply::Stats(v) => Ok(v),
            other => Err(other),
        }
    }
}

impl Client<Selector> {
    /// Asks `question` and returns its typed answer.
    pub async fn ask<Q: Ask>(&mut self, question: &Q) -> Result<Q::Answer, ClientError> {
        let op = question.op();
        let asked = op.name();
        let reply = self.call(op).await?;
        Q::answer(reply).map_err(|other| self.wrong_reply(asked, other.name()))
    }

    /// Chooses nodes.
    pub async fn select(&mut self, query: SelectQuery) -> Result<Vec<NodeView>, ClientError> {
        self.ask(&query).await
    }

    /// Lists live nodes.
    pub async fn nodes(&mut self, query: NodesQuery) -> Result<NodeList, ClientError> {
        self.ask(&query).await
    }

    /// Lists live selectors and account services.
    pub async fn services(&mut self) -> Result<Vec<ServiceView>, ClientError> {
        self.ask(&Services).await
    }

    /// The selector's counters.
    pub async fn stats(&mut self) -> Result<SelectorStats, ClientError> {
        self.ask(&Stats).await
    }
}
