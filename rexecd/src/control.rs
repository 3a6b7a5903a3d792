//! What another task may ask a running rank's session to do ([`Control`]): the
//! registry forwards an admin's signals, the market tells a rank's client that its
//! owner ran out of credit or has it again. Each session reads its own queue (see
//! [`crate::registry::CONTROL_QUEUE`]).

use proto::node::Signal;

/// What another task may ask a running rank's session to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Control {
    /// Deliver this signal (`Kill`: destroy the rank's cgroup).
    Signal(Signal),
    /// Tell the client (out of credit, credit restored).
    Notice(proto::node::Notice),
    /// The queue that started this signed batch rank kills it to start the job
    /// again (a new leader settling its predecessor's runs): killed like `Kill`,
    /// but its end is not recorded at accountd, so the job's next attempt may
    /// still be claimed, as when the rank's client is lost.
    Withdraw,
}
