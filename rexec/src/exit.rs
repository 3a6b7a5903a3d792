//! The client's exit statuses, in one place: the documented table
//! ([`TABLE`], printed by `rexec --help` and copied in README.md), the
//! error every failure of the client becomes ([`Error`], each variant
//! knowing its [`Class`]), and the one mapping from an outcome to the
//! status the process exits with ([`status`]).
//!
//! Functions return an [`Error`] rather than printing and picking a number;
//! the binary prints it (one line per line of its text, `rexec: ` first) and
//! exits with its class's status. The remote program's own status, and
//! `128+N` for a rank killed by signal N, pass through unchanged.
//!
//! The rule for selectors: a refusal of the request as asked (unknown
//! policy, `--policy history` without `--length`, a malformed request, or
//! every selector answering that fewer nodes qualify than asked for, under
//! `--max-price`) is a usage error, 2, as when the client finds the mistake
//! itself; a selector that cannot be reached, is busy, or fails otherwise is
//! the cluster's state, 255.

use clients::selector::{AskAnyError, ClientError as AskError};
use proto::select::SelectorErrorCode;

/// Exit status for a usage or configuration error.
pub const USAGE: i32 = 2;
/// Exit status when a program cannot be started on a node.
pub const NOT_STARTED: i32 = 127;
/// Exit status after a double Ctrl-C.
pub const INTERRUPTED: i32 = 130;
/// Exit status when stdout's reader went away (as SIGPIPE would).
pub const BROKEN_PIPE: i32 = 141;
/// Exit status when the market refuses the bid (nothing ran).
pub const REFUSED: i32 = 254;
/// Exit status for a lost or failed node or selector, or a local failure.
pub const FAILED: i32 = 255;
/// Exit status of `jobs`, `kill`, `bid` and `nodes` when a node or
/// selector could not answer, or nothing matched (and of `cancel` when some
/// job was not cancelled).
pub const INCOMPLETE: i32 = 1;
/// Exit status of `rexec wait` when the batch job was cancelled, or failed
/// without an exit status of its own.
pub const UNFINISHED: i32 = 253;
/// Exit status when a rank went over its memory (`--mem`) and the kernel killed it
/// (`rexec`), or the batch job ended OUT_OF_MEMORY (`rexec wait`).
pub const OUT_OF_MEMORY: i32 = 252;
/// Exit status of `rexec wait` when the batch job reached its time limit (TIMEOUT).
pub const TIMED_OUT: i32 = 251;

/// The documented exit statuses: (status, meaning). `rexec --help` prints
/// this table and README.md carries the same rows.
pub const TABLE: [(&str, &str); 13] = [
    (
        "0",
        "the program exited 0 on every rank (jobs, kill, bid, nodes: every node answered; submit, queue, cancel, output: done)",
    ),
    (
        "1-125",
        "the program's own status: the first non-zero one, in the order ranks finish (wait: the batch job's)",
    ),
    (
        "1",
        "jobs, kill, bid, nodes: some node or selector could not answer, or nothing matched; cancel: some job was not cancelled",
    ),
    (
        "2",
        "usage: bad option, configuration or request, caught here or by every selector alike",
    ),
    ("127", "the program cannot be started on a node"),
    ("128+N", "a rank was killed by signal N"),
    ("130", "interrupted by a double Ctrl-C"),
    ("141", "standard output's reader went away"),
    (
        "251",
        "wait: the batch job reached its time limit (--length) and ended TIMEOUT",
    ),
    (
        "252",
        "a rank went over its memory (--mem) and the kernel killed it (wait: the job ended OUT_OF_MEMORY)",
    ),
    (
        "253",
        "wait: the batch job was cancelled, or failed without an exit status of its own (why is printed)",
    ),
    (
        "254",
        "the market refused the bid (negative, over max_rate, no credit, no member of the -A project): nothing ran; submit: also wider than the market, or a bad signature",
    ),
    (
        "255",
        "a node, selector or the batch queue was lost, unreachable or failed; nothing left running",
    ),
];

/// The table as `rexec --help` prints it.
pub fn help_table() -> String {
    let mut text = String::from("Exit status:");
    for (status, meaning) in TABLE {
        text.push_str(&format!("\n  {status:<6} {meaning}"));
    }
    text
}

/// What kind of failure an [`Error`] is, which decides the exit status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// A usage or configuration error, 2.
    Usage,
    /// The market refused the bid, 254.
    Refused,
    /// The program could not be started, 127.
    NotStarted,
    /// An admin command got only part of its answers, 1.
    Incomplete,
    /// Interrupted while starting: 130 for Ctrl-C, else `128+N` for signal N.
    Interrupted(i32),
    /// The batch job `rexec wait` waited for was cancelled or failed, 253.
    Unfinished,
    /// A rank ran out of memory, 252.
    OutOfMemory,
    /// The batch job reached its time limit, 251.
    TimedOut,
    /// A node or selector was lost or failed, or something local, 255.
    Failed,
}

impl Class {
    /// The exit status of this class.
    pub fn status(self) -> i32 {
        match self {
            Class::Usage => USAGE,
            Class::Refused => REFUSED,
            Class::NotStarted => NOT_STARTED,
            Class::Incomplete => INCOMPLETE,
            Class::Interrupted(code) => code,
            Class::Unfinished => UNFINISHED,
            Class::OutOfMemory => OUT_OF_MEMORY,
            Class::TimedOut => TIMED_OUT,
            Class::Failed => FAILED,
        }
    }
}

/// Everything the client can fail with, already worded for the user.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A usage or configuration error.
    #[error("{0}")]
    Usage(String),
    /// The bid was refused (by the client's own limits or by a node).
    #[error("{0}")]
    Refused(String),
    /// The program could not be started.
    #[error("{0}")]
    NotStarted(String),
    /// A node or selector failed, or a local resource did.
    #[error("{0}")]
    Failed(String),
    /// Some answers of an admin command are missing (already printed when
    /// the text is empty).
    #[error("{0}")]
    Incomplete(String),
    /// The batch job waited for was cancelled or failed without an exit status.
    #[error("{0}")]
    Unfinished(String),
    /// Several lines (one per node), with the class of the whole.
    #[error("{}", .lines.join("\n"))]
    Lines {
        /// The lines, without the `rexec: ` prefix.
        lines: Vec<String>,
        /// What kind of failure.
        class: Class,
    },
    /// The selectors could not answer.
    #[error("{}", selector_lines(.0, true).join("\n"))]
    Selectors(#[from] AskAnyError),
}

impl Error {
    /// Which class, and so which exit status.
    pub fn class(&self) -> Class {
        match self {
            Error::Usage(_) => Class::Usage,
            Error::Refused(_) => Class::Refused,
            Error::NotStarted(_) => Class::NotStarted,
            Error::Failed(_) => Class::Failed,
            Error::Incomplete(_) => Class::Incomplete,
            Error::Unfinished(_) => Class::Unfinished,
            Error::Lines { class, .. } => *class,
            Error::Selectors(e) => selector_class(e),
        }
    }

    /// The lines to print (without `rexec: `); `verbose` names every
    /// selector even when they all said the same.
    pub fn lines(&self, verbose: bool) -> Vec<String> {
        match self {
            Error::Selectors(e) => selector_lines(e, verbose),
            other => other
                .to_string()
                .lines()
                .map(str::to_string)
                .filter(|l| !l.is_empty())
                .collect(),
        }
    }
}

/// The class of a selectors' failure, by the rule in the module docs.
pub fn selector_class(e: &AskAnyError) -> Class {
    match e {
        AskAnyError::Refused { error, .. } if request_refusal(error.code) => Class::Usage,
        AskAnyError::NoneAnswered(attempts)
            if !attempts.is_empty()
                && attempts.iter().all(|a| {
                    matches!(&a.error, AskError::Server(r)
                        if r.code == SelectorErrorCode::NotEnoughNodes || request_refusal(r.code))
                }) =>
        {
            Class::Usage
        }
        _ => Class::Failed,
    }
}

fn request_refusal(code: SelectorErrorCode) -> bool {
    matches!(
        code,
        SelectorErrorCode::BadRequest
            | SelectorErrorCode::UnknownPolicy
            | SelectorErrorCode::NeedsLength
    )
}

/// What to print for a selectors' failure: one line when every selector
/// refused alike ([`AskAnyError::common_refusal`]: the same refusal of the
/// request, or of our certificate), the selectors named only when
/// `verbose`; else one line per selector.
pub fn selector_lines(e: &AskAnyError, verbose: bool) -> Vec<String> {
    let all = || e.to_string().lines().map(str::to_string).collect();
    if verbose {
        return all();
    }
    match (e, e.common_refusal()) {
        (AskAnyError::NoneAnswered(attempts), Some(refusal)) => {
            let names: Vec<&str> = attempts.iter().map(|a| a.name.as_str()).collect();
            let request = matches!(attempts[0].error, AskError::Server(_));
            vec![match (request, attempts.len()) {
                (true, 1) => refusal,
                (true, n) => format!("{refusal} (all {n} selectors said so)"),
                (false, 1) => format!(
                    "no selector could answer: selector {} at {}: {refusal}",
                    attempts[0].name, attempts[0].addr
                ),
                (false, n) => format!(
                    "no selector could answer: {refusal} (all {n} selectors: {})",
                    names.join(", ")
                ),
            }]
        }
        (AskAnyError::Refused { error, .. }, _) => vec![error.to_string()],
        _ => all(),
    }
}

/// The exit status of a finished invocation: the program's own (or the
/// client's 130/141) on success, else the error's class; the error is
/// printed first.
pub fn status(outcome: Result<i32, Error>, verbose: bool) -> i32 {
    match outcome {
        Ok(code) => code,
        Err(e) => {
            for line in e.lines(verbose) {
                crate::say(&line);
            }
            e.class().status()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clients::selector::Attempt;
    use proto::select::SelectorError;

    fn refused(code: SelectorErrorCode, text: &str) -> AskError {
        AskError::Server(SelectorError::new(code, text))
    }

    fn attempt(name: &str, error: AskError) -> Attempt {
        Attempt {
            name: name.into(),
            addr: "127.0.0.1:1".into(),
            error,
        }
    }

    #[test]
    fn every_class_has_a_documented_status() {
        let documented: Vec<&str> = TABLE.iter().map(|r| r.0).collect();
        for class in [
            Class::Usage,
            Class::Refused,
            Class::NotStarted,
            Class::Incomplete,
            Class::Interrupted(INTERRUPTED),
            Class::Unfinished,
            Class::OutOfMemory,
            Class::TimedOut,
            Class::Failed,
        ] {
            let s = class.status().to_string();
            assert!(documented.contains(&s.as_str()), "{class:?} exits {s}");
        }
        assert!(help_table().contains("254    the market refused"));
    }

    #[test]
    fn help_prints_the_table() {
        use clap::CommandFactory;
        let help = crate::cli::RunArgs::command()
            .render_long_help()
            .to_string();
        for (status, meaning) in TABLE {
            let row = format!("{status:<6} {meaning}");
            assert!(help.contains(&row), "{row:?} in {help}");
        }
    }

    #[test]
    fn the_readme_table_is_the_code_table() {
        let readme = include_str!("../../README.md");
        let rows: Vec<String> = readme
            .lines()
            .skip_while(|l| *l != "| status | meaning |")
            .skip(2)
            .take_while(|l| l.starts_with('|'))
            .map(str::to_string)
            .collect();
        let code: Vec<String> = TABLE
            .iter()
            .map(|(status, meaning)| format!("| {status} | {meaning} |"))
            .collect();
        assert_eq!(
            rows, code,
            "README.md's exit status table drifted from exit::TABLE"
        );
    }

    #[test]
    fn selectors_that_agree_are_one_line_and_a_usage_error() {
        use SelectorErrorCode as C;
        let text = "3 nodes asked for, 1 qualify";
        let e = AskAnyError::NoneAnswered(vec![
            attempt("v1", refused(C::NotEnoughNodes, text)),
            attempt("v2", refused(C::NotEnoughNodes, text)),
        ]);
        assert_eq!(selector_class(&e), Class::Usage);
        let quiet = selector_lines(&e, false);
        assert_eq!(quiet, [format!("{text} (all 2 selectors said so)")]);
        let loud = selector_lines(&e, true);
        assert_eq!(loud.len(), 3, "{loud:?}");
        assert!(loud[1].contains("selector v1") && loud[2].contains("selector v2"));
    }

    #[test]
    fn selectors_in_trouble_are_a_failure_and_a_request_refusal_is_usage() {
        use SelectorErrorCode as C;
        let e = AskAnyError::NoneAnswered(vec![
            attempt("v1", refused(C::NotEnoughNodes, "x")),
            attempt(
                "v2",
                AskError::Closed {
                    service: "selector",
                    addr: "127.0.0.1:2".into(),
                },
            ),
        ]);
        assert_eq!(selector_class(&e), Class::Failed);
        assert_eq!(selector_lines(&e, false).len(), 3);
        let e = AskAnyError::Refused {
            name: "v1".into(),
            error: SelectorError::new(C::UnknownPolicy, "unknown policy \"x\""),
        };
        assert_eq!(selector_class(&e), Class::Usage);
        assert_eq!(selector_lines(&e, false), ["unknown policy \"x\""]);
        assert_eq!(selector_class(&AskAnyError::NoSelectors), Class::Failed);
    }
}
