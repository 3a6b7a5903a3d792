//! Stride scheduling and the CPU market rules of rexec market: pure, deterministic, no I/O,
//! integer arithmetic only. The reference every other part of the system is checked against.
//!
//! Bids and amounts are the `money` crate's ([`money::Bid`], micro-credits). Map of the crate:
//!
//! - [`tickets`]: bids to tickets ([`tickets_for_bids`]) and to kernel CPU weights
//!   ([`weights_for_bids`]), with the rules for zero bids.
//! - [`alloc`]: the expected allocation of a node's CPUs by water filling ([`water_fill`]).
//! - [`charge`]: the contention predicate, the two charging [`Policy`]s, and the exact
//!   per-job [`Meter`].
//! - [`price`]: the node price, its charging rate and contention ([`node_market`]), and a
//!   newcomer's [`Quote`].
//! - [`sched`]: the stride [`Scheduler`] on k CPUs with join, leave and re-bid.
//! - [`scenario`]: scripted timelines, starting with the paper's Figure 4.
//!
//! ```
//! use money::Bid;
//! use stride::{tickets_for_bids, water_fill, Claim};
//! // Three single-threaded jobs bidding 40, 30 and 20 credits a minute on two CPUs.
//! let bids = [40, 30, 20].map(Bid::from_credits);
//! let claims: Vec<Claim> = tickets_for_bids(&bids)
//!     .into_iter()
//!     .map(|tickets| Claim { tickets, demand: 1 })
//!     .collect();
//! assert_eq!(water_fill(2, &claims).milli_cpus(), &[889, 667, 444]);
//! ```

#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod alloc;
pub mod charge;
pub mod price;
pub mod scenario;
pub mod sched;
pub mod tickets;

pub use alloc::{Allocation, Claim, MILLI, Ratio, water_fill, water_level};
pub use charge::{
    Job, Meter, Overflow, Policy, UnknownPolicy, charge_for, charge_rates, charging_applies,
    interval_charges, is_contended,
};
pub use price::{NodeMarket, Quote, node_market, node_price, quote};
pub use sched::{
    ClientId, ClientView, Departed, MAX_CLIENT_TICKETS, MAX_CLIENTS, STRIDE1, SchedError, Scheduler,
};
pub use tickets::{
    BID_HELP, MAX_TICKETS, MIN_TICKETS, model_cpus, tickets_for_bids, weights_for_bids,
};
