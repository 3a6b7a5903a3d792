//! What a batch job is worth, from the command line: a bid rate (`-r RATE`, the
//! default, like an interactive job's), the batch paper's shape (`--value V
//! --deadline D` with `--length L`: worth V if done within L of submission,
//! falling linearly to 0 at D), or Lee's general piecewise-linear utility
//! (`--utility SPEC` or `--utility @FILE`).
//!
//! A SPEC is `TIME:VALUE,TIME:VALUE,...`: times after submission (`0`, `90m`,
//! `2h`, `1d`; whole seconds), values in credits (`50`, `2.5`, `-1` for a
//! penalty). A FILE holds the same, with breakpoints also allowed one per line
//! and `#` starting a comment. The checks mirror `proto::batch::Worth`: at least
//! one breakpoint, at most [`MAX_UTILITY_POINTS`], times strictly increasing;
//! every error is one line naming the bad item.

use std::path::Path;

use money::{MicroCredits, parse_credits};
use proto::batch::{MAX_UTILITY_POINTS, Worth};
use timespan::parse_offset;

/// Largest utility file read, bytes.
pub const MAX_UTILITY_FILE: u64 = 64 * 1024;

/// Why the worth options do not make a worth; each message is one line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WorthError {
    /// One breakpoint of a utility cannot be read.
    #[error("--utility: breakpoint {index} `{item}`: {why}")]
    Item {
        /// 1-based place of the breakpoint.
        index: usize,
        /// The breakpoint as written.
        item: String,
        /// What is wrong with it.
        why: String,
    },
    /// The utility as a whole breaks a rule.
    #[error("--utility: {0}")]
    Utility(String),
    /// The utility file cannot be read.
    #[error("--utility @{path}: {why}")]
    File {
        /// The file.
        path: String,
        /// Why.
        why: String,
    },
    /// `--value` or `--deadline` is unusable, or they do not fit `--length`.
    #[error("{0}")]
    Shape(String),
}

/// Lee's utility from `SPEC` or `@FILE` (the text after `--utility`).
///
/// ```
/// use rexec::batch::worth::utility;
/// let w = utility("0:50,2h:50,6h:0").unwrap();
/// assert_eq!(w, proto::batch::Worth::Utility(vec![(0, 50_000_000), (7200, 50_000_000), (21600, 0)]));
/// let e = utility("0:50,1h:x").unwrap_err().to_string();
/// assert!(e.starts_with("--utility: breakpoint 2 `1h:x`:"), "{e}");
/// ```
pub fn utility(arg: &str) -> Result<Worth, WorthError> {
    let text;
    let spec = match arg.strip_prefix('@') {
        Some(path) => {
            text = read_file(Path::new(path))?;
            strip_comments(&text)
        }
        None => arg.to_string(),
    };
    Ok(Worth::Utility(parse_points(&spec)?))
}

/// The batch paper's shape: worth `value` until `length_s`, 0 at `deadline`.
///
/// ```
/// use rexec::batch::worth::value_by_deadline;
/// let w = value_by_deadline("50", "6h", 7200).unwrap();
/// assert_eq!(w, proto::batch::Worth::Utility(vec![(7200, 50_000_000), (21600, 0)]));
/// assert!(value_by_deadline("50", "1h", 7200).is_err());
/// ```
pub fn value_by_deadline(value: &str, deadline: &str, length_s: u64) -> Result<Worth, WorthError> {
    let shape = WorthError::Shape;
    let v = parse_credits(value).map_err(|e| shape(format!("--value {value}: {e}")))?;
    if v < 0 {
        return Err(shape(format!(
            "--value {value}: a job's value cannot be negative; give what finishing it is worth \
             to you, in credits"
        )));
    }
    let d =
        timespan::parse_span(deadline).map_err(|e| shape(format!("--deadline {deadline}: {e}")))?;
    if d.as_secs() <= length_s {
        return Err(shape(format!(
            "--deadline {deadline} must be later than --length ({}): the job is worth its value \
             if done within its length, falling to 0 at the deadline",
            seconds_text(length_s as i64)
        )));
    }
    Ok(Worth::Utility(vec![
        (length_s as i64, v),
        (d.as_secs() as i64, 0),
    ]))
}

/// Breakpoints from a spec without comments: items separated by commas or
/// line ends (empty items between them are skipped), checked.
pub fn parse_points(spec: &str) -> Result<Vec<(i64, MicroCredits)>, WorthError> {
    let items: Vec<&str> = spec
        .split([',', '\n'])
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    if items.is_empty() {
        return Err(WorthError::Utility(
            "no breakpoints; write TIME:VALUE pairs such as 0:50,2h:50,6h:0".into(),
        ));
    }
    if items.len() > MAX_UTILITY_POINTS {
        return Err(WorthError::Utility(format!(
            "{} breakpoints; at most {MAX_UTILITY_POINTS}",
            items.len()
        )));
    }
    let mut points: Vec<(i64, MicroCredits)> = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let bad = |why: String| WorthError::Item {
            index: i + 1,
            item: item.to_string(),
            why,
        };
        let Some((time, value)) = item.split_once(':') else {
            return Err(bad("not TIME:VALUE (such as 2h:50)".into()));
        };
        let t = parse_offset(time).map_err(|e| bad(format!("time `{}`: {e}", time.trim())))?;
        if t.subsec_millis() != 0 {
            return Err(bad(format!(
                "time `{}` is not a whole number of seconds",
                time.trim()
            )));
        }
        let v = parse_credits(value).map_err(|e| bad(e.to_string()))?;
        let t = t.as_secs() as i64;
        if let Some(&(prev, _)) = points.last()
            && t <= prev
        {
            return Err(bad(format!(
                "{} is not after the breakpoint before ({}); times must strictly increase",
                seconds_text(t),
                seconds_text(prev)
            )));
        }
        points.push((t, v));
    }
    Ok(points)
}

/// Seconds as the shortest of `d`, `h`, `m` or `s` that says them exactly.
///
/// ```
/// use rexec::batch::worth::seconds_text;
/// assert_eq!(seconds_text(7200), "2h");
/// assert_eq!(seconds_text(90), "90s");
/// assert_eq!(seconds_text(0), "0");
/// ```
pub fn seconds_text(s: i64) -> String {
    match s {
        0 => "0".into(),
        s if s % 86_400 == 0 => format!("{}d", s / 86_400),
        s if s % 3_600 == 0 => format!("{}h", s / 3_600),
        s if s % 60 == 0 => format!("{}m", s / 60),
        s => format!("{s}s"),
    }
}

fn read_file(path: &Path) -> Result<String, WorthError> {
    let bad = |why: String| WorthError::File {
        path: path.display().to_string(),
        why,
    };
    let meta = std::fs::metadata(path).map_err(|e| bad(e.to_string()))?;
    if meta.len() > MAX_UTILITY_FILE {
        return Err(bad(format!(
            "{} bytes; a utility file holds at most {MAX_UTILITY_FILE}",
            meta.len()
        )));
    }
    std::fs::read_to_string(path).map_err(|e| bad(e.to_string()))
}

/// The text without `#` comments, one line per line.
fn strip_comments(text: &str) -> String {
    text.lines()
        .map(|l| l.split_once('#').map_or(l, |(keep, _)| keep))
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(spec: &str) -> String {
        utility(spec).unwrap_err().to_string()
    }

    #[test]
    fn specs_read_times_and_credits_exactly() {
        assert_eq!(
            parse_points("0:50, 90m:2.5 ,1d:-1").unwrap(),
            [(0, 50_000_000), (5400, 2_500_000), (86_400, -1_000_000)]
        );
        assert_eq!(parse_points("30s:0.000001").unwrap(), [(30, 1)]);
    }

    #[test]
    fn every_bad_item_is_named_on_one_line() {
        let cases = [
            ("", "no breakpoints"),
            (" , ", "no breakpoints"),
            ("2h", "breakpoint 1 `2h`: not TIME:VALUE"),
            ("0:1,x:1", "breakpoint 2 `x:1`: time `x`"),
            ("-1s:1", "breakpoint 1 `-1s:1`: time `-1s`"),
            ("1500ms:1", "not a whole number of seconds"),
            (
                "0:1,1h:1.0000001",
                "breakpoint 2 `1h:1.0000001`: `1.0000001` has more",
            ),
            (
                "1h:5,1h:4",
                "breakpoint 2 `1h:4`: 1h is not after the breakpoint before (1h)",
            ),
            ("2h:5,1h:4", "1h is not after the breakpoint before (2h)"),
            ("400d:1", "longer than 366 days"),
        ];
        for (spec, want) in cases {
            let e = err(spec);
            assert!(e.contains(want), "{spec:?}: {e}");
            assert!(!e.contains('\n'), "one line: {e}");
        }
        let many: Vec<String> = (0..=MAX_UTILITY_POINTS).map(|i| format!("{i}:1")).collect();
        assert!(err(&many.join(",")).contains("65 breakpoints; at most 64"));
    }

    #[test]
    fn a_file_takes_lines_commas_and_comments() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("u.txt");
        std::fs::write(
            &path,
            "# worth 50 until 2h\n0:50\n2h:50, # still\n\n6h:0 # nothing\n",
        )
        .unwrap();
        let w = utility(&format!("@{}", path.display())).unwrap();
        assert_eq!(
            w,
            Worth::Utility(vec![(0, 50_000_000), (7200, 50_000_000), (21_600, 0)])
        );
        std::fs::write(&path, "0:50\n1h:oops\n").unwrap();
        let e = utility(&format!("@{}", path.display()))
            .unwrap_err()
            .to_string();
        assert!(e.contains("breakpoint 2 `1h:oops`"), "{e}");
        let e = err("@/nonexistent/u.txt");
        assert!(e.starts_with("--utility @/nonexistent/u.txt: "), "{e}");
        std::fs::write(&path, vec![b'#'; MAX_UTILITY_FILE as usize + 1]).unwrap();
        assert!(utility(&format!("@{}", path.display())).is_err());
    }

    #[test]
    fn the_papers_shape_needs_a_deadline_after_the_length() {
        let e = value_by_deadline("50", "2h", 7200).unwrap_err().to_string();
        assert!(
            e.contains("--deadline 2h must be later than --length (2h)"),
            "{e}"
        );
        let e = value_by_deadline("-5", "6h", 7200).unwrap_err().to_string();
        assert!(e.contains("cannot be negative"), "{e}");
        let e = value_by_deadline("lots", "6h", 7200)
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("--value lots: "), "{e}");
        let e = value_by_deadline("5", "soon", 7200)
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("--deadline soon: "), "{e}");
        assert_eq!(
            value_by_deadline("0.5", "2d", 60).unwrap(),
            Worth::Utility(vec![(60, 500_000), (172_800, 0)])
        );
    }
}
