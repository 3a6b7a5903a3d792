//! The ledger's spend per project per hour, as accountd's
//! [`crate::account::AccountOp::Spend`] asks for it and
//! [`crate::account::AccountReply::Spend`] answers: aggregates only (each
//! project's net charge in each whole UTC hour), no user, node, job or
//! balance. It is what the market page's ledger panel shows.
//!
//! ```
//! use proto::spend::*;
//! let s = HourlySpend { first_hour_us: 0, hours: 2, projects: vec![
//!     ProjectSpend { project: "chem".into(), charged: vec![0, 1_500_000] },
//! ], more: 0 };
//! assert_eq!(s.hour_start_us(1), 3_600_000_000);
//! assert_eq!(s.projects[0].total(), 1_500_000);
//! ```

use serde::{Deserialize, Serialize};

pub use crate::limits::{MAX_SPEND_HOURS, MAX_SPEND_PROJECTS};

/// One hour, microseconds.
pub const HOUR_US: i64 = 3_600_000_000;

/// Ask for the last `hours` whole UTC hours, the current one included.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpendQuery {
    /// How many hours, 1 to [`MAX_SPEND_HOURS`]; accountd refuses others as
    /// `Malformed`.
    pub hours: u32,
}

/// Each project's net charge per hour.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HourlySpend {
    /// Start of the oldest hour, UTC microseconds (a multiple of [`HOUR_US`]).
    pub first_hour_us: i64,
    /// How many hours each project's `charged` holds (the last is the current one).
    pub hours: u32,
    /// The projects that spent in those hours, the most spent first (ties by
    /// name), at most [`MAX_SPEND_PROJECTS`].
    #[serde(deserialize_with = "crate::limits::spend_projects")]
    pub projects: Vec<ProjectSpend>,
    /// Projects that spent too but are left off (they spent least).
    pub more: u64,
}

impl HourlySpend {
    /// Start of hour `i` (0 the oldest), UTC microseconds.
    pub fn hour_start_us(&self, i: u32) -> i64 {
        self.first_hour_us
            .saturating_add(i64::from(i).saturating_mul(HOUR_US))
    }
}

/// One project's spend.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProjectSpend {
    /// The project.
    pub project: String,
    /// Net micro-credits charged (debits minus refunds) in each hour, oldest
    /// first, as `accountctl report --by project` counts them.
    #[serde(deserialize_with = "crate::limits::spend_hours")]
    pub charged: Vec<i64>,
}

impl ProjectSpend {
    /// What it spent over all the hours.
    pub fn total(&self) -> i64 {
        self.charged.iter().fold(0i64, |t, c| t.saturating_add(*c))
    }
}
