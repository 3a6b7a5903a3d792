//! What the projects spend: charges over a window grouped for the report,
//! the 7-day burn rate, and the forecast of when each project runs dry.

use std::collections::{BTreeMap, HashMap, HashSet};

use proto::account::{AccountError, ReportRow};
use proto::project::{ForecastRow, ProjectGrouping};

use super::{DAY_US, Rows, SPENT_BY, project_names};

/// What `account` burnt per day over the 7 days before `now_us` (net of
/// refunds), as the forecast counts it.
pub(super) fn burn(db: &mut dyn Rows, account: &str, now_us: i64) -> Result<i64, AccountError> {
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
pub(super) fn burnt(
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
        .map(|(k, (net, cpu, jobs))| super::super::lite::report_row(k, net, cpu, jobs.len() as i64))
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
