//! accountctl's project and income commands: their arguments
//! (`--member-limit alice=200/month`, `--every 30d`), the operations they
//! send, and how projects and forecasts are shown.

use clap::Subcommand;
use money::{format_credits_fixed, parse_credits};
use proto::project::{
    ChangeMembers, CreateProject, ForecastRow, Income, LimitPeriod, MemberLimit, ProjectInfo,
    ProjectOp, SetCeiling, SetDefault, SetIncome,
};

use super::format::{Format, render};
use crate::time::format_time;

/// A project argument that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArgError {
    /// A member limit not written `USER=AMOUNT/PERIOD` or `USER=none`.
    #[error(
        "`{0}` is not a member limit: write alice=200/month (day, week or month) or alice=none"
    )]
    Limit(String),
    /// An amount of credits.
    #[error("`{0}`: {1}")]
    Credits(String, String),
    /// A period of income.
    #[error("--every {0}: {1}")]
    Every(String, String),
    /// A limit at `project create` for a user not in `--members`.
    #[error("--member-limit names {0}, who is not in --members")]
    NotAMember(String),
}

/// `accountctl project ...`.
#[derive(Subcommand, Debug)]
pub enum ProjectCmd {
    /// Open a project account (admin).
    Create {
        /// Its name (also its account's: no user may hold it).
        name: String,
        /// Users who may spend from it, comma-separated.
        #[arg(long, value_delimiter = ',')]
        members: Vec<String>,
        /// A user who may manage its members and their limits.
        #[arg(long)]
        admin: Option<String>,
        /// Limits of members: alice=200/month (day, week or month; UTC calendar periods).
        #[arg(long = "member-limit")]
        member_limit: Vec<String>,
    },
    /// Add members (admin or the project's admin).
    AddMember {
        /// The project.
        project: String,
        /// Users to add, comma-separated.
        #[arg(value_delimiter = ',', required = true)]
        users: Vec<String>,
        /// Limits: alice=200/month, or alice=none to lift one.
        #[arg(long = "member-limit")]
        member_limit: Vec<String>,
    },
    /// Remove members (admin or the project's admin).
    RemoveMember {
        /// The project.
        project: String,
        /// Users to remove, comma-separated.
        #[arg(value_delimiter = ',', required = true)]
        users: Vec<String>,
    },
    /// Set members' limits (admin or the project's admin).
    Limit {
        /// The project.
        project: String,
        /// alice=200/month (day, week or month), or alice=none to lift it.
        #[arg(required = true)]
        limits: Vec<String>,
    },
    /// Set a project's terms (admin or the project's admin): its spending
    /// ceiling per job.
    Set {
        /// The project.
        project: String,
        /// The most one job charged to the project may cost, in credits, or
        /// `none` to lift it; each job stops at it, or at its own --max-cost
        /// if lower.
        #[arg(long = "max-cost-per-job")]
        max_cost_per_job: String,
    },
    /// Set a user's default project (admin, or the user itself); `none` for
    /// the personal account.
    Default {
        /// The user.
        user: String,
        /// The project, or `none`.
        project: String,
    },
    /// List projects with members, limits, balances and income (admin).
    List {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

/// `accountctl income ...`.
#[derive(Subcommand, Debug)]
pub enum IncomeCmd {
    /// Grant a project AMOUNT credits once per period (admin); 0 stops it.
    Set {
        /// The project.
        project: String,
        /// Credits per period.
        amount: String,
        /// The period: 30d, 12h, 1h, ... (periods count from the Unix epoch).
        #[arg(long)]
        every: String,
        /// Never lift the balance above this many credits.
        #[arg(long)]
        cap: Option<String>,
    },
    /// List every project's income (admin).
    List,
}

fn credits(text: &str) -> Result<i64, ArgError> {
    parse_credits(text).map_err(|e| ArgError::Credits(text.into(), e.to_string()))
}

/// Parses `alice=200/month` (or `alice=none`).
///
/// ```
/// use accountd::ctl::projects::parse_limit;
/// let (u, l) = parse_limit("alice=200/month").unwrap();
/// assert_eq!((u.as_str(), l.unwrap().amount), ("alice", 200_000_000));
/// assert_eq!(parse_limit("bob=none").unwrap().1, None);
/// assert!(parse_limit("bob=5/fortnight").is_err());
/// ```
pub fn parse_limit(text: &str) -> Result<(String, Option<MemberLimit>), ArgError> {
    let bad = || ArgError::Limit(text.into());
    let (user, rest) = text.split_once('=').ok_or_else(bad)?;
    if user.is_empty() {
        return Err(bad());
    }
    if rest == "none" {
        return Ok((user.into(), None));
    }
    let (amount, period) = rest.split_once('/').ok_or_else(bad)?;
    let period = LimitPeriod::parse(period).ok_or_else(bad)?;
    let amount = credits(amount)?;
    Ok((user.into(), Some(MemberLimit { amount, period })))
}

fn limits(texts: &[String]) -> Result<Vec<(String, Option<MemberLimit>)>, ArgError> {
    texts.iter().map(|t| parse_limit(t)).collect()
}

/// The operation a project command sends (`List` for `list`).
pub fn project_op(cmd: &ProjectCmd) -> Result<ProjectOp, ArgError> {
    let change = |project: &str, add: &[String], remove: &[String], l: &[String]| {
        Ok(ProjectOp::Members(ChangeMembers {
            project: project.into(),
            add: add.to_vec(),
            remove: remove.to_vec(),
            limits: limits(l)?,
        }))
    };
    match cmd {
        ProjectCmd::Create {
            name,
            members,
            admin,
            member_limit,
        } => {
            // Checked before the project is created, so a bad limit leaves nothing.
            for (user, _) in limits(member_limit)? {
                if !members.contains(&user) {
                    return Err(ArgError::NotAMember(user));
                }
            }
            Ok(ProjectOp::Create(CreateProject {
                name: name.clone(),
                members: members.clone(),
                admin: admin.clone(),
            }))
        }
        ProjectCmd::AddMember {
            project,
            users,
            member_limit,
        } => change(project, users, &[], member_limit),
        ProjectCmd::RemoveMember { project, users } => change(project, &[], users, &[]),
        ProjectCmd::Limit { project, limits } => change(project, &[], &[], limits),
        ProjectCmd::Default { user, project } => Ok(ProjectOp::Default(SetDefault {
            user: user.clone(),
            project: (project != "none").then(|| project.clone()),
        })),
        ProjectCmd::Set {
            project,
            max_cost_per_job,
        } => Ok(ProjectOp::Ceiling(SetCeiling {
            project: project.clone(),
            max_cost_per_job: match max_cost_per_job.as_str() {
                "none" => None,
                text => Some(credits(text)?),
            },
        })),
        ProjectCmd::List { .. } => Ok(ProjectOp::List),
    }
}

/// The limits a `create` sets right after opening the project, if any.
pub fn create_limits(cmd: &ProjectCmd) -> Result<Option<ProjectOp>, ArgError> {
    match cmd {
        ProjectCmd::Create {
            name, member_limit, ..
        } if !member_limit.is_empty() => Ok(Some(ProjectOp::Members(ChangeMembers {
            project: name.clone(),
            add: Vec::new(),
            remove: Vec::new(),
            limits: limits(member_limit)?,
        }))),
        _ => Ok(None),
    }
}

/// The operation an income command sends.
pub fn income_op(cmd: &IncomeCmd) -> Result<ProjectOp, ArgError> {
    match cmd {
        IncomeCmd::Set {
            project,
            amount,
            every,
            cap,
        } => {
            let period = timespan::parse_span(every)
                .map_err(|e| ArgError::Every(every.clone(), e.to_string()))?;
            Ok(ProjectOp::Income(SetIncome {
                project: project.clone(),
                income: Income {
                    amount: credits(amount)?,
                    every_us: i64::try_from(period.as_micros()).unwrap_or(i64::MAX),
                    cap: cap.as_deref().map(credits).transpose()?,
                },
            }))
        }
        IncomeCmd::List => Ok(ProjectOp::List),
    }
}

fn limit_text(l: &Option<MemberLimit>) -> String {
    match l {
        Some(l) => format!("{}/{}", format_credits_fixed(l.amount), l.period.as_str()),
        None => "none".into(),
    }
}

fn every_text(every_us: i64) -> String {
    let s = every_us / 1_000_000;
    match s {
        _ if s % 86_400 == 0 => format!("{}d", s / 86_400),
        _ if s % 3_600 == 0 => format!("{}h", s / 3_600),
        _ if s % 60 == 0 => format!("{}m", s / 60),
        _ => format!("{s}s"),
    }
}

/// One line per project and one per member (`project NAME balance B admin A`,
/// then `  member USER limit L spent S`).
pub fn render_projects(projects: &[ProjectInfo]) -> String {
    let mut out = String::new();
    for p in projects {
        out += &format!(
            "project {} balance {} admin {}\n",
            p.name,
            format_credits_fixed(p.balance),
            p.admin.as_deref().unwrap_or("-")
        );
        for (u, l, spent) in &p.members {
            out += &format!(
                "  member {u} limit {} spent {}\n",
                limit_text(l),
                format_credits_fixed(*spent)
            );
        }
    }
    out
}

/// One line per project with income: `NAME AMOUNT every PERIOD cap CAP`.
pub fn render_income(projects: &[ProjectInfo]) -> String {
    let mut out = String::new();
    for p in projects {
        if let Some(i) = &p.income {
            out += &format!(
                "{} {} every {} cap {}\n",
                p.name,
                format_credits_fixed(i.amount),
                every_text(i.every_us),
                i.cap.map_or("none".into(), format_credits_fixed)
            );
        }
    }
    out
}

/// The forecast as a table (or JSON, CSV): balance, burn per day over the
/// last 7 days, and the UTC day the balance runs dry at that rate.
pub fn render_forecast(rows: &[ForecastRow], fmt: Format) -> String {
    let header = ["project", "balance", "burn_per_day", "dry_on"];
    let rows = rows
        .iter()
        .map(|r| {
            vec![
                ("project", r.project.clone(), false),
                ("balance", format_credits_fixed(r.balance), true),
                ("burn_per_day", format_credits_fixed(r.burn_per_day), true),
                (
                    "dry_on",
                    r.dry_at_us
                        .map_or("never".into(), |t| format_time(t)[..10].to_string()),
                    false,
                ),
            ]
        })
        .collect();
    render(rows, &header, fmt)
}
