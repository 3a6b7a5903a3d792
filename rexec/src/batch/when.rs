//! How the batch listings print: instants in local time (`2026-11-25T23:40:12`,
//! the form `squeue` uses) and rows laid out in aligned columns.

use discovery::clock::date_time;

/// UTC seconds since the epoch as local time, `YYYY-MM-DDTHH:MM:SS`; `offset`
/// gives the local zone's offset at an instant (UTC when it cannot say).
///
/// ```
/// use rexec::batch::when::local_time;
/// assert_eq!(local_time(1_764_113_612, &|_| Some(0)), "2025-11-25T23:33:32");
/// assert_eq!(local_time(1_764_113_612, &|_| Some(3600)), "2025-11-26T00:33:32");
/// ```
pub fn local_time(utc_secs: u64, offset: &dyn Fn(i64) -> Option<i64>) -> String {
    let secs = i64::try_from(utc_secs).unwrap_or(i64::MAX);
    let local = secs.saturating_add(offset(secs).unwrap_or(0));
    date_time(local).unwrap_or_else(|| format!("@{utc_secs}"))
}

/// `rows` under `header` in columns two spaces apart, the columns whose
/// index is in `right` aligned right, the last column not padded.
pub fn columns<const N: usize>(
    header: &[&str; N],
    rows: &[[String; N]],
    right: &[usize],
) -> String {
    let rows: Vec<Vec<String>> = rows.iter().map(|r| r.to_vec()).collect();
    columns_of(header, &rows, right)
}

/// [`columns`] for a number of columns known only at run time (`rexec history
/// --format`): every row has as many cells as `header`.
pub fn columns_of(header: &[&str], rows: &[Vec<String>], right: &[usize]) -> String {
    let n = header.len();
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            widths[i] = widths[i].max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let parts: Vec<String> = cells
            .iter()
            .enumerate()
            .map(|(i, c)| match (right.contains(&i), i + 1 == n) {
                (true, _) => format!("{c:>w$}", w = widths[i]),
                (false, true) => c.to_string(),
                (false, false) => format!("{c:<w$}", w = widths[i]),
            })
            .collect();
        parts.join("  ").trim_end().to_string() + "\n"
    };
    let mut out = line(header.to_vec());
    for row in rows {
        out.push_str(&line(row.iter().map(String::as_str).collect()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::list::{table, tests_entry};
    use proto::batch::JobState;
    use proto::node::{ExitStatus, Signal};

    const UTC: &dyn Fn(i64) -> Option<i64> = &|_| Some(0);

    fn cells(text: &str, line: usize) -> Vec<String> {
        text.lines()
            .nth(line)
            .unwrap()
            .split_whitespace()
            .map(str::to_string)
            .collect()
    }

    #[test]
    fn a_queued_job_shows_its_place_rate_and_estimated_start() {
        let t = table(&[tests_entry()], UTC);
        assert_eq!(cells(&t, 0), crate::batch::list::HEADER);
        assert_eq!(
            cells(&t, 1),
            [
                "00000000000000ab",
                "alice",
                "QUEUED",
                "1",
                "4",
                "2.5",
                "~2025-11-25T23:00:00",
                "simulate-wea"
            ]
        );
    }

    #[test]
    fn a_running_job_shows_its_start_and_nodes_once_each() {
        let mut e = tests_entry();
        e.state = JobState::Running;
        e.position = None;
        e.started_at = Some(1_764_111_661);
        e.nodes = ["n2", "n1", "n2", "n3"].map(String::from).to_vec();
        let t = table(&[e], &|_| Some(-5 * 3600));
        let row = cells(&t, 1);
        assert_eq!(
            &row[3..],
            [
                "-",
                "4",
                "2.5",
                "2025-11-25T18:01:01",
                "simulate-wea",
                "n2,n1,n3"
            ]
        );
    }

    #[test]
    fn ended_and_held_jobs_say_why() {
        let mut e = tests_entry();
        e.state = JobState::Held;
        e.reason = Some("balance 1 cannot pay 8".into());
        let t = table(&[e.clone()], UTC);
        assert!(
            t.lines()
                .nth(1)
                .unwrap()
                .ends_with("(balance 1 cannot pay 8)"),
            "{t}"
        );
        e.state = JobState::Finished;
        e.position = None;
        e.reason = None;
        e.exit = Some(ExitStatus::Signaled {
            signal: Signal::Kill,
            core_dumped: false,
        });
        e.started_at = None;
        let t = table(&[e.clone()], UTC);
        let row = cells(&t, 1);
        assert_eq!(row[6], "-", "no estimate once ended: {t}");
        assert!(t.contains("(killed by SIGKILL)"), "{t}");
        e.exit = Some(ExitStatus::Code(3));
        assert!(table(&[e], UTC).contains("(exit 3)"));
    }

    #[test]
    fn columns_align_and_an_empty_listing_is_the_header() {
        let t = columns(
            &["A", "NUM", "LAST"],
            &[["xyz".into(), "7".into(), "z".into()]],
            &[1],
        );
        assert_eq!(t, "A    NUM  LAST\nxyz    7  z\n");
        assert_eq!(table(&[], UTC).lines().count(), 1);
    }
}
