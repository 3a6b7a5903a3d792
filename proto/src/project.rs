//! Project accounts and their income, as accountd's [`crate::account::AccountOp::Project`]
//! carries them: an account several users (its members) spend from, an
//! optional project admin who manages the members, per-member spending
//! limits, each user's default project, and a schedule of income (credits
//! granted once per period, up to a cap).
//!
//! [`ProjectOp`] and [`ProjectReply`] are tagged message enums (see
//! [`crate::tagged`]): an older accountd answers a newer operation
//! `Unsupported`.

use serde::{Deserialize, Serialize};

use crate::ledger::{ChargeReceipt, Debit, LedgerEntry, ReportRow};

/// The period of a member's limit: calendar periods in UTC.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum LimitPeriod {
    /// A UTC day.
    Day,
    /// A UTC week, Monday to Sunday.
    Week,
    /// A UTC calendar month.
    Month,
}

impl LimitPeriod {
    /// The name people type (`day`, `week`, `month`).
    pub fn as_str(self) -> &'static str {
        match self {
            LimitPeriod::Day => "day",
            LimitPeriod::Week => "week",
            LimitPeriod::Month => "month",
        }
    }

    /// Parses [`LimitPeriod::as_str`] back.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "day" => LimitPeriod::Day,
            "week" => LimitPeriod::Week,
            "month" => LimitPeriod::Month,
            _ => return None,
        })
    }
}

/// How much one member may spend from a project per period.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberLimit {
    /// Micro-credits per period.
    pub amount: i64,
    /// The period.
    pub period: LimitPeriod,
}

/// Open a project account.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreateProject {
    /// The project's name (also its account's name; no user may hold it).
    pub name: String,
    /// Users who may spend from it.
    pub members: Vec<String>,
    /// A user who may manage its members and limits (besides admins).
    pub admin: Option<String>,
}

/// Change a project's members (and their limits).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChangeMembers {
    /// The project.
    pub project: String,
    /// Users to add (a member already there stays, with its limit).
    pub add: Vec<String>,
    /// Users to remove (also clears them as their default's project).
    pub remove: Vec<String>,
    /// Limits to set: `(user, None)` lifts a member's limit.
    pub limits: Vec<(String, Option<MemberLimit>)>,
}

/// Set or clear a user's default project.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SetDefault {
    /// The user.
    pub user: String,
    /// The project charged when the user names none; `None` for the personal account.
    pub project: Option<String>,
}

/// Income of a project: `amount` every `every_us`, the balance kept at most `cap`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Income {
    /// Micro-credits per period (0 stops the income).
    pub amount: i64,
    /// Length of a period, microseconds.
    pub every_us: i64,
    /// A grant never lifts the balance above this many micro-credits.
    pub cap: Option<i64>,
}

/// Set a project's income.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SetIncome {
    /// The project.
    pub project: String,
    /// The schedule.
    pub income: Income,
}

/// A node's charge to a project on behalf of one of its members.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProjectDebit {
    /// The project charged.
    pub project: String,
    /// The charge; its `user` is the member who spent (the job's owner).
    pub debit: Debit,
}

/// Which account a user's job is charged to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WhichAccount {
    /// The job's owner.
    pub user: String,
    /// The project asked for (`-A`), `None` for the user's default.
    pub project: Option<String>,
    /// Also tell the account's burn rate ([`ChargedAccount::burn_per_day`]),
    /// which reads the last 7 days of the ledger (`rexec estimate` asks; a
    /// node's launch does not). Appended after the first release.
    #[serde(default, deserialize_with = "crate::limits::trailing")]
    pub burn: bool,
}

/// Set or lift a project's spending ceiling per job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SetCeiling {
    /// The project.
    pub project: String,
    /// The most one job charged to the project may cost, micro-credits
    /// (`None` lifts it).
    pub max_cost_per_job: Option<i64>,
}

crate::tagged::tagged_enum! {
    /// An operation on projects.
    pub enum ProjectOp {
        /// Admin: open a project (answered `Project`).
        1 => Create(CreateProject),
        /// Admin or the project's admin: change members and limits (answered `Project`).
        2 => Members(ChangeMembers),
        /// Admin, or the user for itself: set a default project (answered `Done`).
        3 => Default(SetDefault),
        /// Admin: set a project's income (answered `Project`).
        4 => Income(SetIncome),
        /// Node or batch queue: charge a project for a member (answered `Charged`).
        5 => Debit(ProjectDebit),
        /// Anyone allowed to read: every project (answered `Projects`).
        6 => List,
        /// Node, batch queue, admin, or the user itself: the account a job
        /// is charged to and its balance, refused when the user is no
        /// member (answered `Account`).
        7 => Resolve(WhichAccount),
        /// Admin: charges grouped by project, spending user, node or day (answered `Report`).
        8 => Report(ProjectReport),
        /// Admin: each project's balance, burn rate and the day it runs dry (answered `Forecast`).
        9 => Forecast,
        /// accountd itself: grant the income that is due (answered `Granted`).
        10 => Tick,
        /// Admin or the project's admin: set the project's spending ceiling
        /// per job (answered `Done`).
        11 => Ceiling(SetCeiling),
    }
}

/// How a project report groups charges.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ProjectGrouping {
    /// By the account charged, a project or a personal account.
    Account,
    /// By the user who spent.
    User,
    /// By node.
    Node,
    /// By UTC day.
    Day,
}

/// Ask for charge totals.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProjectReport {
    /// Grouping.
    pub by: ProjectGrouping,
    /// Only entries at or after this time (UTC microseconds).
    pub since_us: Option<i64>,
    /// Only entries before this time (UTC microseconds).
    pub until_us: Option<i64>,
}

/// A project as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProjectInfo {
    /// Its name.
    pub name: String,
    /// Its balance, micro-credits.
    pub balance: i64,
    /// Its admin user, if any.
    pub admin: Option<String>,
    /// Members with their limits and what each spent in the limit's current period.
    pub members: Vec<(String, Option<MemberLimit>, i64)>,
    /// Its income, if any.
    pub income: Option<Income>,
}

/// One row of a forecast.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForecastRow {
    /// The project.
    pub project: String,
    /// Balance now.
    pub balance: i64,
    /// Net charged over the last 7 days, per day (micro-credits).
    pub burn_per_day: i64,
    /// When the balance reaches 0 at that rate, UTC microseconds; `None` when it does not burn.
    pub dry_at_us: Option<i64>,
}

/// The account a job is charged to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChargedAccount {
    /// The project, `None` for the user's personal account.
    pub project: Option<String>,
    /// The balance the job may spend: the account's, lowered to what is left
    /// of the member's limit in its period.
    pub balance: i64,
    /// The project's spending ceiling per job, micro-credits (`None`: none,
    /// or a personal account). Every job charged to the project stops at it,
    /// or at its own `--max-cost` if lower. Appended after the first release.
    #[serde(default, deserialize_with = "crate::limits::trailing")]
    pub max_cost_per_job: Option<i64>,
    /// What the account burnt per day over the last 7 days (net charges),
    /// micro-credits; `Some` only when [`WhichAccount::burn`] asked. Appended
    /// after the first release.
    #[serde(default, deserialize_with = "crate::limits::trailing")]
    pub burn_per_day: Option<i64>,
}

/// A job's spending ceiling: the lower of its own (`--max-cost`) and its
/// project's ceiling per job, where either is set.
///
/// ```
/// use proto::project::job_ceiling;
/// assert_eq!(job_ceiling(Some(5), Some(3)), Some(3));
/// assert_eq!(job_ceiling(None, Some(3)), Some(3));
/// assert_eq!(job_ceiling(Some(5), None), Some(5));
/// assert_eq!(job_ceiling(None, None), None);
/// ```
pub fn job_ceiling(own: Option<i64>, project: Option<i64>) -> Option<i64> {
    match (own, project) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

crate::tagged::tagged_enum! {
    /// What accountd answers to a [`ProjectOp`].
    pub enum ProjectReply {
        /// The project after the change.
        1 => Project(ProjectInfo),
        /// Done.
        2 => Done,
        /// A charge's receipt.
        3 => Charged(ChargeReceipt),
        /// Every project.
        4 => Projects(Vec<ProjectInfo>),
        /// The account a job is charged to.
        5 => Account(ChargedAccount),
        /// Report rows.
        6 => Report(Vec<ReportRow>),
        /// Forecast rows.
        7 => Forecast(Vec<ForecastRow>),
        /// Income entries written by a tick.
        8 => Granted(Vec<LedgerEntry>),
    }
}
