//! Project accounts and their income, written once against [`Rows`].
//!
//! A project is an ordinary account (a row of `accounts`, its entries in the
//! hash chain like any other) plus a document in `project_docs` under
//! `project/NAME`: its admin user, its members with their limits and what
//! each spent in the limit's current period, and its income schedule. A
//! user's default project is the document `default/USER`. Documents are read
//! and rewritten inside the writer's transaction, which the backends
//! serialise (see [`super::ledger`]), so two changes never interleave, also
//! with several accountd on one PostgreSQL.
//!
//! Who may move which money: admins create projects, set income and manage
//! everything; a project's admin (a user) adds and removes its members and
//! sets their limits; members spend, through the nodes that run their jobs
//! ([`ProjectOp::Debit`]: the entry is the project's, its reason names the
//! member: `spent by alice`); a user may choose its own default project
//! among those it belongs to. Admins and the project's admin set its spending
//! ceiling per job ([`ProjectOp::Ceiling`]); [`ProjectOp::Resolve`] tells it
//! to the nodes and the batch queue beside the account a job pays from, and
//! (asked by a member, for `rexec estimate`) the account's 7-day burn rate.
//!
//! Member limits are per calendar period in UTC (a day; a week from Monday;
//! a month): a debit that would lift what the member spent in the current
//! period above the limit is refused ([`ErrorCode::Forbidden`]), and what
//! was spent starts again from 0 when a new period begins.
//!
//! Income: `amount` every `every_us`, periods counted from the Unix epoch
//! (period `n` covers `[n·every, (n+1)·every)`). The writer's tick
//! ([`ProjectOp::Tick`]) grants each project the current period's income
//! once: the grant carries the idempotency key `income/PROJECT/grant/n`, so
//! the unique index refuses a second grant of the same period whatever
//! happens (a restart, a clock set back and forward, several accountd on one
//! PostgreSQL). A grant never lifts the balance above the cap (it is cut to
//! what fits; when nothing fits, nothing is written and a later tick of the
//! same period may still grant once the balance fell). Periods during which
//! no accountd ran are not paid afterwards.
//!
//! The rooms: `membership` (members, default projects, member limits,
//! which account pays), `income` (setting and granting income) and
//! `burn` (the report, the burn rate and the forecast); this module keeps
//! the documents, who may change them, the ceiling, and the dispatch of
//! [`ProjectOp`]s.

mod burn;
mod income;
mod membership;

use std::collections::{BTreeMap, HashMap, HashSet};

use proto::account::{AccountError, ErrorCode};
use proto::project::{
    CreateProject, Income, MemberLimit, ProjectInfo, ProjectOp, ProjectReply, SetCeiling,
};
use serde::{Deserialize, Serialize};

use super::ledger;
use super::rows::Rows;
use crate::validate::{check_name, check_positive};

pub use burn::{forecast, report};
use income::{set_income, tick};
pub use membership::period_index;
use membership::{debit, members, resolve, set_default, spent_now};

/// The node name in the key of an income grant (no node's charge is a grant,
/// so no key of a charge can be one of these).
pub const INCOME_NODE: &str = "income";

/// The reason of a project's debit: who spent.
pub const SPENT_BY: &str = "spent by ";

const PROJECT: &str = "project/";
const DEFAULT: &str = "default/";
const DAY_US: i64 = 86_400_000_000;

/// A project's document.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Doc {
    admin: Option<String>,
    members: BTreeMap<String, Member>,
    income: Option<Income>,
    /// The most one job charged to the project may cost (absent in documents
    /// written before ceilings: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    max_cost_per_job: Option<i64>,
}

/// One member: its limit and what it spent in the limit's period `period`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Member {
    limit: Option<MemberLimit>,
    period: i64,
    spent: i64,
}

fn refuse(code: ErrorCode, msg: String) -> AccountError {
    AccountError::new(code, msg)
}

fn no_project(name: &str) -> AccountError {
    refuse(
        ErrorCode::UnknownUser,
        format!("no project {name:?}: an admin must run `accountctl project create {name}` first"),
    )
}

fn load(db: &mut dyn Rows, name: &str) -> Result<Option<Doc>, AccountError> {
    match db.doc(&format!("{PROJECT}{name}"))? {
        None => Ok(None),
        Some(text) => serde_json::from_str(&text)
            .map(Some)
            .map_err(|e| ledger::storage(format!("project {name:?} is unreadable: {e}"))),
    }
}

fn need(db: &mut dyn Rows, name: &str) -> Result<Doc, AccountError> {
    check_name("project", name)?;
    load(db, name)?.ok_or_else(|| no_project(name))
}

fn save(db: &mut dyn Rows, name: &str, doc: &Doc) -> Result<(), AccountError> {
    let text = serde_json::to_string(doc).map_err(ledger::storage)?;
    db.put_doc(&format!("{PROJECT}{name}"), &text)
}

fn is_admin(actor: &str) -> bool {
    actor.starts_with("admin:")
}

fn manages(actor: &str, doc: &Doc) -> bool {
    is_admin(actor)
        || doc
            .admin
            .as_deref()
            .is_some_and(|a| actor == format!("user:{a}"))
}

fn info(
    db: &mut dyn Rows,
    name: &str,
    doc: &Doc,
    now_us: i64,
) -> Result<ProjectInfo, AccountError> {
    Ok(ProjectInfo {
        name: name.to_string(),
        balance: db.balance_of(name)?.unwrap_or(0),
        admin: doc.admin.clone(),
        members: doc
            .members
            .iter()
            .map(|(u, m)| (u.clone(), m.limit, spent_now(m, now_us)))
            .collect(),
        income: doc.income.clone(),
    })
}

/// Applies a write on projects as `actor` (`role:name`).
pub fn write(
    db: &mut dyn Rows,
    op: &ProjectOp,
    actor: &str,
    now_us: i64,
    max: i64,
) -> Result<ProjectReply, AccountError> {
    match op {
        ProjectOp::Create(c) => create(db, c, actor, now_us),
        ProjectOp::Members(m) => members(db, m, actor, now_us, max),
        ProjectOp::Default(d) => set_default(db, d, actor).map(|()| ProjectReply::Done),
        ProjectOp::Income(i) => set_income(db, i, actor, now_us, max),
        ProjectOp::Debit(d) => debit(db, d, actor, now_us, max).map(ProjectReply::Charged),
        ProjectOp::Tick => tick(db, actor, now_us, max).map(ProjectReply::Granted),
        ProjectOp::Ceiling(c) => set_ceiling(db, c, actor, max).map(|()| ProjectReply::Done),
        other => Err(refuse(
            ErrorCode::Malformed,
            format!("{} is not a write", other.name()),
        )),
    }
}

/// Answers a question about projects.
pub fn read(db: &mut dyn Rows, op: &ProjectOp, now_us: i64) -> Result<ProjectReply, AccountError> {
    match op {
        ProjectOp::List => list(db, now_us).map(ProjectReply::Projects),
        ProjectOp::Resolve(w) => resolve(db, w, now_us).map(ProjectReply::Account),
        ProjectOp::Report(r) => report(
            db,
            r.by,
            r.since_us.unwrap_or(i64::MIN),
            r.until_us.unwrap_or(i64::MAX),
        )
        .map(ProjectReply::Report),
        ProjectOp::Forecast => forecast(db, now_us).map(ProjectReply::Forecast),
        other => Err(refuse(
            ErrorCode::Malformed,
            format!("{} is not a query", other.name()),
        )),
    }
}

fn create(
    db: &mut dyn Rows,
    c: &CreateProject,
    actor: &str,
    now_us: i64,
) -> Result<ProjectReply, AccountError> {
    if !is_admin(actor) {
        return Err(refuse(
            ErrorCode::Forbidden,
            format!("{actor} may not create projects: only admins may"),
        ));
    }
    check_name("project", &c.name)?;
    for m in c.members.iter().chain(&c.admin) {
        check_name("user", m)?;
    }
    if !db.insert_account(&c.name, now_us, actor)? {
        return Err(refuse(
            ErrorCode::AccountExists,
            format!("an account named {:?} already exists", c.name),
        ));
    }
    let doc = Doc {
        admin: c.admin.clone(),
        members: c
            .members
            .iter()
            .map(|m| (m.clone(), Member::default()))
            .collect(),
        income: None,
        max_cost_per_job: None,
    };
    save(db, &c.name, &doc)?;
    info(db, &c.name, &doc, now_us).map(ProjectReply::Project)
}

/// Sets or lifts a project's spending ceiling per job: admins and the
/// project's admin may, as they manage its members.
fn set_ceiling(
    db: &mut dyn Rows,
    c: &SetCeiling,
    actor: &str,
    max: i64,
) -> Result<(), AccountError> {
    let mut doc = need(db, &c.project)?;
    if !manages(actor, &doc) {
        return Err(refuse(
            ErrorCode::Forbidden,
            format!(
                "{actor} may not set the spending ceiling of {:?}: only admins and the project's \
                 admin may",
                c.project
            ),
        ));
    }
    if let Some(m) = c.max_cost_per_job {
        check_positive(m, max)?;
    }
    doc.max_cost_per_job = c.max_cost_per_job;
    save(db, &c.project, &doc)
}

fn list(db: &mut dyn Rows, now_us: i64) -> Result<Vec<ProjectInfo>, AccountError> {
    let mut out = Vec::new();
    for (key, text) in db.docs(PROJECT)? {
        let Some(name) = key.strip_prefix(PROJECT) else {
            continue;
        };
        let doc: Doc = serde_json::from_str(&text)
            .map_err(|e| ledger::storage(format!("project {name:?} is unreadable: {e}")))?;
        out.push(info(db, name, &doc, now_us)?);
    }
    Ok(out)
}

/// The refusal of a plain debit or refund naming a project's account: a
/// project is charged only for one of its members ([`ProjectOp::Debit`]).
pub fn not_plain(project: &str) -> AccountError {
    refuse(
        ErrorCode::Forbidden,
        format!("{project} is a project: charge it for a member with a project debit"),
    )
}

/// The names of every project.
pub fn names(db: &mut dyn Rows) -> Result<HashSet<String>, AccountError> {
    project_names(db)
}

/// The names of every project.
fn project_names(db: &mut dyn Rows) -> Result<HashSet<String>, AccountError> {
    Ok(db
        .doc_keys(PROJECT)?
        .into_iter()
        .filter_map(|k| k.strip_prefix(PROJECT).map(str::to_string))
        .collect())
}

/// What the audit finds wrong with the project documents: unreadable ones,
/// and projects without an account.
pub fn audit(
    db: &mut dyn Rows,
    accounts: &HashMap<String, i64>,
) -> Result<Vec<(String, String)>, AccountError> {
    let mut out = Vec::new();
    for (key, text) in db.docs(PROJECT)? {
        let Some(name) = key.strip_prefix(PROJECT) else {
            continue;
        };
        if serde_json::from_str::<Doc>(&text).is_err() {
            out.push((format!("project {name:?} is unreadable"), name.to_string()));
        }
        if !accounts.contains_key(name) {
            out.push((format!("project {name:?} has no account"), name.to_string()));
        }
    }
    Ok(out)
}

/// Every project document, for copying a ledger ([`super::migrate`]).
pub fn documents(db: &mut dyn Rows) -> Result<Vec<(String, String)>, AccountError> {
    db.docs("")
}

#[cfg(test)]
mod tests {
    use proto::project::LimitPeriod;

    use super::*;
    use crate::time::parse_time;

    fn at(t: &str) -> i64 {
        parse_time(t).unwrap()
    }

    #[test]
    fn limit_periods_are_utc_calendar_days_weeks_from_monday_and_months() {
        let idx = |p, t| period_index(p, at(t));
        // 2026-11-22 is a Sunday, 2026-11-23 a Monday.
        assert_eq!(
            idx(LimitPeriod::Week, "2026-11-16T00:00Z"),
            idx(LimitPeriod::Week, "2026-11-22T23:59:59Z")
        );
        assert_eq!(
            idx(LimitPeriod::Week, "2026-11-22T23:59:59Z") + 1,
            idx(LimitPeriod::Week, "2026-11-23T00:00Z")
        );
        assert_eq!(
            idx(LimitPeriod::Day, "2026-11-22T23:59:59Z") + 1,
            idx(LimitPeriod::Day, "2026-11-23T00:00Z")
        );
        assert_eq!(
            idx(LimitPeriod::Month, "2026-02-01T00:00Z"),
            idx(LimitPeriod::Month, "2026-02-28T23:59:59Z")
        );
        assert_eq!(
            idx(LimitPeriod::Month, "2026-12-31T23:59:59Z") + 1,
            idx(LimitPeriod::Month, "2027-01-01T00:00Z")
        );
    }

    #[test]
    fn prefix_ranges_hold_exactly_the_keys_with_the_prefix() {
        let (lo, hi) = super::super::rows::prefix_range(PROJECT);
        for (key, inside) in [
            ("project/a", true),
            ("project/zz-9", true),
            ("project", false),
            ("project0", false),
            ("default/alice", false),
        ] {
            assert_eq!(key >= lo.as_str() && key < hi.as_str(), inside, "{key}");
        }
    }
}
