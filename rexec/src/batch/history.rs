//! `rexec history`: the queue's record of ended jobs, after Slurm's `sacct`. One
//! row per job, most recently ended first:
//!
//! ```text
//! JOBID             USER   NAME  STATE     EXIT  SUBMIT               START                END                  ELAPSED   CPU  MAXMEM  CHARGED  UTILITY
//! 3f09c2a17b5e4d01  alice  sim   FINISHED  0     2026-11-25T22:40:01  2026-11-25T22:40:03  2026-11-25T22:41:03    60.00  240.01    1.5G      8        20
//! ```
//!
//! ELAPSED is the time its ranks ran (its last attempt, suspensions excluded) and
//! CPU their CPU time (user plus system, every rank), both in seconds; MAXMEM the
//! largest peak memory of a rank, `-` unless every rank's node counted it (the memory
//! controller); CHARGED the credits it was charged; UTILITY the utility it achieved,
//! in credits (its utility function at its completion; 0 if cancelled or failed).
//! `--format` picks and orders the columns ([`FIELDS`]); `--since` keeps the jobs
//! that ended at or after a time ([`parse_since`]); `-u` one user's jobs (an admin
//! may name anyone), `--all` everyone's (an admin).

use proto::batch::{BatchOp, BatchReply};
use proto::history::{HistoryEntry, HistoryQuery};
use proto::node::ExitStatus;

use super::link::{self, Queue};
use crate::cli::batch::HistoryArgs;
use crate::config::Config;
use crate::exit::Error;

/// The columns `--format` may name, in the default order.
pub const FIELDS: [&str; 13] = [
    "jobid", "user", "name", "state", "exit", "submit", "start", "end", "elapsed", "cpu", "maxmem",
    "charged", "utility",
];

/// Columns `--format` may name besides the default ones.
pub const MORE_FIELDS: [&str; 4] = ["width", "nodes", "attempts", "reason"];

/// `rexec history`.
pub async fn history(args: &HistoryArgs, config: &Config) -> Result<(), Error> {
    let fields = parse_format(args.format.as_deref())?;
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    let since_ms = args
        .since
        .as_deref()
        .map(|s| parse_since(s, now_ms, &crate::sys::local_offset))
        .transpose()?;
    let user = match (&args.user, args.all) {
        (Some(u), _) => Some(u.clone()),
        (None, true) => None,
        (None, false) => super::list::own_name(config),
    };
    let mut q = Queue::open(config).await?;
    let op = BatchOp::History(HistoryQuery { user, since_ms });
    match q.call(op).await.map_err(link::error)? {
        BatchReply::History(entries) => {
            print!("{}", table(&entries, &fields, &crate::sys::local_offset));
            Ok(())
        }
        other => Err(q.wrong_reply("History", &other)),
    }
}

/// The columns `--format` names (comma-separated, any case), or the default ones.
pub fn parse_format(format: Option<&str>) -> Result<Vec<&'static str>, Error> {
    let Some(format) = format else {
        return Ok(FIELDS.to_vec());
    };
    format
        .split(',')
        .map(|f| {
            let f = f.trim().to_ascii_lowercase();
            FIELDS
                .iter()
                .chain(&MORE_FIELDS)
                .find(|k| **k == f)
                .copied()
                .ok_or_else(|| {
                    Error::Usage(format!(
                        "--format: unknown field {f:?}; the fields are {}, {}",
                        FIELDS.join(","),
                        MORE_FIELDS.join(",")
                    ))
                })
        })
        .collect()
}

/// `--since`: a local time (`2026-11-25`, `2026-11-25T22:40` or
/// `2026-11-25T22:40:03`), or a span back from now (`90s`, `30m`, `2h`, `7d`), as
/// UTC ms.
///
/// ```
/// use rexec::batch::history::parse_since;
/// let utc = |_| Some(0);
/// assert_eq!(parse_since("1970-01-02", 0, &utc).unwrap(), 86_400_000);
/// assert_eq!(parse_since("1970-01-01T01:00:05", 0, &utc).unwrap(), 3_605_000);
/// assert_eq!(parse_since("1970-01-01T01:00", 0, &|_| Some(3600)).unwrap(), 0);
/// assert_eq!(parse_since("2h", 10_000_000, &utc).unwrap(), 2_800_000);
/// assert!(parse_since("yesterday", 0, &utc).is_err());
/// ```
pub fn parse_since(
    text: &str,
    now_ms: i64,
    offset: &dyn Fn(i64) -> Option<i64>,
) -> Result<i64, Error> {
    let bad = || {
        Error::Usage(format!(
            "--since {text:?}: give a local time (YYYY-MM-DD[THH:MM[:SS]]) or a span back from now (30m, 2h, 7d)"
        ))
    };
    if let Ok(span) = timespan::parse_span(text) {
        return Ok(now_ms.saturating_sub(span.as_millis().min(i64::MAX as u128) as i64));
    }
    let (date, time) = text.split_once('T').unwrap_or((text, "00:00:00"));
    let num = |s: &str| {
        s.parse::<i64>()
            .ok()
            .filter(|_| s.chars().all(|c| c.is_ascii_digit()))
    };
    let d: Vec<i64> = date
        .split('-')
        .map(num)
        .collect::<Option<_>>()
        .ok_or_else(bad)?;
    let mut t: Vec<i64> = time
        .split(':')
        .map(num)
        .collect::<Option<_>>()
        .ok_or_else(bad)?;
    if t.len() == 2 {
        t.push(0);
    }
    let ok = d.len() == 3
        && t.len() == 3
        && (1..=12).contains(&d[1])
        && (1..=31).contains(&d[2])
        && t[0] < 24
        && t[1] < 60
        && t[2] < 61;
    if !ok {
        return Err(bad());
    }
    let local = days_from_civil(d[0], d[1], d[2]) * 86_400 + t[0] * 3600 + t[1] * 60 + t[2];
    // The zone's offset at about that instant (exact but for the hour a clock change repeats).
    let utc = local - offset(local).unwrap_or(0);
    Ok(utc.saturating_mul(1000))
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Seconds with two decimals, from ms.
fn seconds(ms: i64) -> String {
    format!("{:.2}", ms as f64 / 1000.0)
}

/// Bytes as `-`, `512K`, `12.3M`, `1.5G` (powers of 1024, as `sacct`'s MaxRSS).
///
/// ```
/// use rexec::batch::history::memory;
/// assert_eq!(memory(None), "-");
/// assert_eq!(memory(Some(2048)), "2K");
/// assert_eq!(memory(Some(12_900_000)), "12.3M");
/// assert_eq!(memory(Some(3 << 30)), "3.0G");
/// ```
pub fn memory(bytes: Option<u64>) -> String {
    let Some(b) = bytes else {
        return "-".into();
    };
    let (k, m, g) = (1u64 << 10, 1u64 << 20, 1u64 << 30);
    match b {
        b if b >= g => format!("{:.1}G", b as f64 / g as f64),
        b if b >= m => format!("{:.1}M", b as f64 / m as f64),
        b => format!("{}K", b.div_ceil(k)),
    }
}

/// EXIT: the exit code, `SIG` and the signal that killed it, or `-`.
fn exit(e: Option<ExitStatus>) -> String {
    match e {
        Some(ExitStatus::Code(c)) => c.to_string(),
        Some(ExitStatus::Signaled { signal, .. }) => format!("{signal}"),
        None => "-".into(),
    }
}

fn cell(e: &HistoryEntry, field: &str, offset: &dyn Fn(i64) -> Option<i64>) -> String {
    let time = |ms: i64| super::when::local_time(ms.div_euclid(1000).max(0) as u64, offset);
    match field {
        "jobid" => e.job.to_string(),
        "user" => e.user.clone(),
        "name" => {
            let base = e.program.rsplit('/').next().unwrap_or(&e.program);
            base.chars().take(12).collect()
        }
        "state" => super::list::state_name(e.state).into(),
        "exit" => exit(e.exit),
        "submit" => time(e.submitted_ms),
        "start" => e.started_ms.map_or("-".into(), time),
        "end" => time(e.ended_ms),
        "elapsed" => seconds(e.elapsed_ms),
        "cpu" => e.cpu_nanos.map_or("-".into(), |n| {
            seconds(i64::try_from(n / 1_000_000).unwrap_or(i64::MAX))
        }),
        "maxmem" => memory(e.peak_memory),
        "charged" => money::format_credits(e.charged),
        "utility" => money::format_credits(e.utility),
        "width" => e.width.to_string(),
        "nodes" => e.nodes.join(","),
        "attempts" => e.attempts.to_string(),
        "reason" => e.reason.clone().unwrap_or_default(),
        _ => String::new(),
    }
}

/// The listing as `rexec history` prints it, in `fields`' columns.
pub fn table(
    entries: &[HistoryEntry],
    fields: &[&str],
    offset: &dyn Fn(i64) -> Option<i64>,
) -> String {
    let header: Vec<String> = fields.iter().map(|f| f.to_ascii_uppercase()).collect();
    let header: Vec<&str> = header.iter().map(String::as_str).collect();
    let rows: Vec<Vec<String>> = entries
        .iter()
        .map(|e| fields.iter().map(|f| cell(e, f, offset)).collect())
        .collect();
    let numeric = [
        "elapsed", "cpu", "maxmem", "charged", "utility", "width", "attempts",
    ];
    let right: Vec<usize> = (0..fields.len())
        .filter(|i| numeric.contains(&fields[*i]))
        .collect();
    super::when::columns_of(&header, &rows, &right)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proto::batch::JobState;
    use proto::node::JobId;

    fn entry() -> HistoryEntry {
        HistoryEntry {
            job: JobId(0xab),
            user: "alice".into(),
            program: "/bin/sim".into(),
            width: 2,
            state: JobState::Finished,
            submitted_ms: 1_000,
            started_ms: Some(2_000),
            ended_ms: 62_500,
            elapsed_ms: 60_500,
            cpu_nanos: Some(121_000_000_000),
            peak_memory: None,
            exit: Some(ExitStatus::Code(3)),
            reason: None,
            charged: 2_500_000,
            utility: -1_000_000,
            attempts: 1,
            nodes: vec!["n1".into(), "n2".into()],
        }
    }

    #[test]
    fn the_table_shows_each_field_asked() {
        let utc = |_| Some(0);
        let t = table(&[entry()], &parse_format(None).unwrap(), &utc);
        let mut lines = t.lines();
        let head: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
        assert_eq!(head, FIELDS.map(|f| f.to_ascii_uppercase()));
        let row: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
        assert_eq!(
            row,
            [
                "00000000000000ab",
                "alice",
                "sim",
                "FINISHED",
                "3",
                "1970-01-01T00:00:01",
                "1970-01-01T00:00:02",
                "1970-01-01T00:01:02",
                "60.50",
                "121.00",
                "-",
                "2.5",
                "-1"
            ]
        );
        let f = parse_format(Some("JobID,nodes, attempts")).unwrap();
        let t = table(&[entry()], &f, &utc);
        assert_eq!(
            t.lines().nth(1).unwrap(),
            "00000000000000ab  n1,n2         1"
        );
        let e = parse_format(Some("jobid,bogus")).unwrap_err();
        assert!(e.to_string().contains("\"bogus\""), "{e}");
    }
}
