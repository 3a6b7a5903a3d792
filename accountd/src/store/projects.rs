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

use std::collections::{BTreeMap, HashMap, HashSet};

use proto::account::{
    AccountError, ChargeReceipt, DebitKey, EntryKind, ErrorCode, LedgerEntry, ReportRow,
};
use proto::project::{
    ChangeMembers, ChargedAccount, CreateProject, ForecastRow, Income, LimitPeriod, MemberLimit,
    ProjectDebit, ProjectGrouping, ProjectInfo, ProjectOp, ProjectReply, SetCeiling, SetDefault,
    SetIncome, WhichAccount,
};
use serde::{Deserialize, Serialize};

use super::ledger;
use super::rows::Rows;
use crate::validate::{check_name, check_positive};

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

/// The index of the calendar period (UTC) of `period` that holds `now_us`.
pub fn period_index(period: LimitPeriod, now_us: i64) -> i64 {
    let day = now_us.div_euclid(DAY_US);
    match period {
        LimitPeriod::Day => day,
        // 1970-01-01 was a Thursday: day 4 is the first Monday... minus 7.
        LimitPeriod::Week => (day + 3).div_euclid(7),
        LimitPeriod::Month => {
            let t = time::OffsetDateTime::from_unix_timestamp(now_us.div_euclid(1_000_000))
                .unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
            i64::from(t.year()) * 12 + i64::from(u8::from(t.month())) - 1
        }
    }
}

/// What `m` spent in the limit's period that holds `now_us`.
fn spent_now(m: &Member, now_us: i64) -> i64 {
    match m.limit {
        Some(l) if m.period == period_index(l.period, now_us) => m.spent,
        _ => 0,
    }
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

fn members(
    db: &mut dyn Rows,
    m: &ChangeMembers,
    actor: &str,
    now_us: i64,
    max: i64,
) -> Result<ProjectReply, AccountError> {
    let mut doc = need(db, &m.project)?;
    if !manages(actor, &doc) {
        return Err(refuse(
            ErrorCode::Forbidden,
            format!(
                "{actor} may not change the members of {:?}: only admins and the project's admin may",
                m.project
            ),
        ));
    }
    for u in m.add.iter().chain(&m.remove) {
        check_name("user", u)?;
    }
    for u in &m.add {
        doc.members.entry(u.clone()).or_default();
    }
    for u in &m.remove {
        doc.members.remove(u);
    }
    for (u, limit) in &m.limits {
        if let Some(l) = limit {
            check_positive(l.amount, max)?;
        }
        let member = doc.members.get_mut(u).ok_or_else(|| {
            refuse(
                ErrorCode::UnknownUser,
                format!("{u:?} is not a member of {:?}: add it first", m.project),
            )
        })?;
        member.limit = *limit;
    }
    // Every check is done: the writes follow.
    for u in &m.remove {
        let key = format!("{DEFAULT}{u}");
        if db.doc(&key)?.as_deref() == Some(m.project.as_str()) {
            db.put_doc(&key, "")?;
        }
    }
    save(db, &m.project, &doc)?;
    info(db, &m.project, &doc, now_us).map(ProjectReply::Project)
}

fn set_default(db: &mut dyn Rows, d: &SetDefault, actor: &str) -> Result<(), AccountError> {
    check_name("user", &d.user)?;
    if !is_admin(actor) && actor != format!("user:{}", d.user) {
        return Err(refuse(
            ErrorCode::Forbidden,
            format!(
                "{actor} may not set the default project of {:?}: only admins and the user may",
                d.user
            ),
        ));
    }
    if let Some(p) = &d.project {
        let doc = need(db, p)?;
        if !doc.members.contains_key(&d.user) {
            return Err(not_member(&d.user, p));
        }
    }
    db.put_doc(
        &format!("{DEFAULT}{}", d.user),
        d.project.as_deref().unwrap_or(""),
    )
}

fn set_income(
    db: &mut dyn Rows,
    s: &SetIncome,
    actor: &str,
    now_us: i64,
    max: i64,
) -> Result<ProjectReply, AccountError> {
    if !is_admin(actor) {
        return Err(refuse(
            ErrorCode::Forbidden,
            format!("{actor} may not set income: only admins may"),
        ));
    }
    let mut doc = need(db, &s.project)?;
    let i = &s.income;
    if i.amount != 0 {
        check_positive(i.amount, max)?;
    }
    if i.every_us < 1_000_000 {
        return Err(refuse(
            ErrorCode::InvalidAmount,
            "an income period is at least one second".into(),
        ));
    }
    if i.cap.is_some_and(|c| c <= 0) {
        return Err(refuse(
            ErrorCode::InvalidAmount,
            "an income cap must be positive".into(),
        ));
    }
    doc.income = (i.amount > 0).then(|| i.clone());
    save(db, &s.project, &doc)?;
    info(db, &s.project, &doc, now_us).map(ProjectReply::Project)
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

fn not_member(user: &str, project: &str) -> AccountError {
    refuse(
        ErrorCode::Forbidden,
        format!("{user} is not a member of project {project}: its admin can add them"),
    )
}

fn debit(
    db: &mut dyn Rows,
    pd: &ProjectDebit,
    actor: &str,
    now_us: i64,
    max: i64,
) -> Result<ChargeReceipt, AccountError> {
    let d = &pd.debit;
    check_name("user", &d.user)?;
    let mut doc = need(db, &pd.project)?;
    let reason = format!("{SPENT_BY}{}", d.user);
    let account = Some((pd.project.as_str(), reason.as_str()));
    // A repeat is answered as the first charge was, limits or not.
    if db
        .charge_by_key(&ledger::key_text(EntryKind::Debit, &d.key))?
        .is_some()
    {
        return ledger::debit_from(db, d, account, actor, now_us, max);
    }
    let member = doc
        .members
        .get_mut(&d.user)
        .ok_or_else(|| not_member(&d.user, &pd.project))?;
    if let Some(l) = member.limit {
        let spent = spent_now(member, now_us);
        let total = spent.checked_add(d.amount).unwrap_or(i64::MAX);
        if total > l.amount {
            return Err(refuse(
                ErrorCode::Forbidden,
                format!(
                    "{} has spent {} of its {}/{} limit in project {}; this charge of {} is over it",
                    d.user,
                    money::format_credits(spent),
                    money::format_credits(l.amount),
                    l.period.as_str(),
                    pd.project,
                    money::format_credits(d.amount),
                ),
            ));
        }
        member.period = period_index(l.period, now_us);
        member.spent = total;
    }
    let receipt = ledger::debit_from(db, d, account, actor, now_us, max)?;
    if doc.members[&d.user].limit.is_some() {
        save(db, &pd.project, &doc)?;
    }
    Ok(receipt)
}

/// Grants each project's income that is due now; returns the entries written.
fn tick(
    db: &mut dyn Rows,
    actor: &str,
    now_us: i64,
    max: i64,
) -> Result<Vec<LedgerEntry>, AccountError> {
    let mut out = Vec::new();
    for (key, text) in db.docs(PROJECT)? {
        let Some(name) = key.strip_prefix(PROJECT) else {
            continue;
        };
        let Ok(doc) = serde_json::from_str::<Doc>(&text) else {
            continue;
        };
        let Some(inc) = doc.income else { continue };
        let period = now_us.div_euclid(inc.every_us.max(1));
        let Ok(seq) = u64::try_from(period) else {
            continue;
        };
        let key = DebitKey {
            node: INCOME_NODE.into(),
            job: name.to_string(),
            seq,
        };
        if db
            .charge_by_key(&ledger::key_text(EntryKind::Grant, &key))?
            .is_some()
        {
            continue;
        }
        let balance = db.balance_of(name)?.unwrap_or(0);
        let room = inc.cap.map_or(i64::MAX, |c| c.saturating_sub(balance));
        let amount = inc.amount.min(room).min(max);
        if amount <= 0 {
            continue;
        }
        let reason = format!("income for period {period}");
        if let Some(r) = ledger::keyed_grant(db, name, amount, &key, &reason, actor, now_us)? {
            out.push(LedgerEntry {
                id: r.entry_id,
                at_us: now_us,
                user: name.to_string(),
                amount,
                kind: EntryKind::Grant,
                key: Some(key),
                rank: None,
                interval: None,
                cpu_us: None,
                actor: actor.to_string(),
                reason: Some(reason),
                balance_after: r.balance_after,
            });
        }
    }
    Ok(out)
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

/// The account a user's job is charged to: the project asked for, else the
/// user's default project, else the personal account.
fn resolve(
    db: &mut dyn Rows,
    w: &WhichAccount,
    now_us: i64,
) -> Result<ChargedAccount, AccountError> {
    check_name("user", &w.user)?;
    let project = match &w.project {
        Some(p) => Some(p.clone()),
        None => db
            .doc(&format!("{DEFAULT}{}", w.user))?
            .filter(|p| !p.is_empty()),
    };
    let Some(p) = project else {
        let b = super::query::balance(db, &w.user)?;
        let burn_per_day = w.burn.then(|| burn(db, &w.user, now_us)).transpose()?;
        return Ok(ChargedAccount {
            project: None,
            balance: b.balance,
            max_cost_per_job: None,
            burn_per_day,
        });
    };
    let doc = need(db, &p)?;
    let m = doc
        .members
        .get(&w.user)
        .ok_or_else(|| not_member(&w.user, &p))?;
    let mut balance = db.balance_of(&p)?.unwrap_or(0);
    if let Some(l) = m.limit {
        balance = balance.min(l.amount - spent_now(m, now_us));
    }
    let burn_per_day = w.burn.then(|| burn(db, &p, now_us)).transpose()?;
    Ok(ChargedAccount {
        project: Some(p),
        balance,
        max_cost_per_job: doc.max_cost_per_job,
        burn_per_day,
    })
}

/// What `account` burnt per day over the 7 days before `now_us` (net of
/// refunds), as the forecast counts it.
fn burn(db: &mut dyn Rows, account: &str, now_us: i64) -> Result<i64, AccountError> {
    let one: HashSet<String> = [account.to_string()].into();
    Ok(burnt(db, &one, now_us)?
        .get(account)
        .copied()
        .unwrap_or(0)
        .saturating_neg()
        / 7)
}

/// Net charges (debits and refunds) of each of `accounts` over the 7 days
/// before `now_us`.
fn burnt(
    db: &mut dyn Rows,
    accounts: &HashSet<String>,
    now_us: i64,
) -> Result<HashMap<String, i64>, AccountError> {
    let since = now_us - 7 * DAY_US;
    let mut net: HashMap<String, i64> = HashMap::new();
    db.each_chained(&mut |e, _, _| {
        if (e.kind == "debit" || e.kind == "refund")
            && e.at_us >= since
            && e.at_us < now_us
            && accounts.contains(&e.user)
        {
            let n = net.entry(e.user.clone()).or_default();
            *n = n.saturating_add(e.amount);
        }
    })?;
    Ok(net)
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

/// Charges in `[since, until)` grouped as asked; by user, a project's
/// debit counts for the member who spent.
pub fn report(
    db: &mut dyn Rows,
    by: ProjectGrouping,
    since: i64,
    until: i64,
) -> Result<Vec<ReportRow>, AccountError> {
    let projects = project_names(db)?;
    let mut rows: BTreeMap<String, (i64, i64, HashSet<String>)> = BTreeMap::new();
    db.each_chained(&mut |e, _, _| {
        if !(e.kind == "debit" || e.kind == "refund") || e.at_us < since || e.at_us >= until {
            return;
        }
        let key = match by {
            ProjectGrouping::Account => e.user.clone(),
            ProjectGrouping::User => {
                match e.reason.as_deref().and_then(|r| r.strip_prefix(SPENT_BY)) {
                    Some(u) if e.kind == "debit" && projects.contains(&e.user) => u.to_string(),
                    _ => e.user.clone(),
                }
            }
            ProjectGrouping::Node => e.node.clone().unwrap_or_default(),
            ProjectGrouping::Day => crate::time::format_time(e.at_us)[..10].to_string(),
        };
        let r = rows.entry(key).or_default();
        r.0 = r.0.saturating_add(e.amount);
        r.1 = r.1.saturating_add(e.cpu_us.unwrap_or(0));
        r.2.insert(format!(
            "{}/{}",
            e.node.as_deref().unwrap_or(""),
            e.job.as_deref().unwrap_or("")
        ));
    })?;
    Ok(rows
        .into_iter()
        .map(|(k, (net, cpu, jobs))| super::lite::report_row(k, net, cpu, jobs.len() as i64))
        .collect())
}

/// Each project's balance, what it burnt per day over the last 7 days, and
/// when it runs dry at that rate.
pub fn forecast(db: &mut dyn Rows, now_us: i64) -> Result<Vec<ForecastRow>, AccountError> {
    let projects = project_names(db)?;
    let net = burnt(db, &projects, now_us)?;
    let mut names: Vec<_> = projects.into_iter().collect();
    names.sort();
    let mut out = Vec::new();
    for p in names {
        let balance = db.balance_of(&p)?.unwrap_or(0);
        let burnt = net.get(&p).copied().unwrap_or(0).saturating_neg();
        let burn_per_day = burnt / 7;
        let dry_at_us = if burnt <= 0 {
            None
        } else if balance <= 0 {
            Some(now_us)
        } else {
            // balance / (burnt per 7 days), in microseconds, without overflow.
            let us = i128::from(balance) * i128::from(7 * DAY_US) / i128::from(burnt);
            Some(now_us.saturating_add(i64::try_from(us).unwrap_or(i64::MAX)))
        };
        out.push(ForecastRow {
            project: p,
            balance,
            burn_per_day,
            dry_at_us,
        });
    }
    Ok(out)
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
