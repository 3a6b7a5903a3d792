//! Where a batch rank's standard output and error go when its owner names files
//! (`rexec submit -o/-e PATTERN`): the patterns and their one expansion,
//! [`expand`], which the node applies to each rank.
//!
//! A pattern is text with `%j` (the job id, 16 hex digits as `rexec queue` shows it),
//! `%a` (the array index; `0` for a job that is not an array), `%r` (the rank), `%n`
//! (the node's name) and `%%` (a `%`). A relative result is relative to the job's
//! working directory (the node opens it there, as the user).

use crate::job::JobId;

/// The longest pattern (and expanded path) accepted, bytes.
pub const MAX_PATTERN: usize = 4096;

/// What one rank's patterns are expanded with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PatternVars<'a> {
    /// The job.
    pub job: JobId,
    /// The array index, `None` for a job that is not an array.
    pub array_index: Option<u64>,
    /// The rank.
    pub rank: u32,
    /// The node's name.
    pub node: &'a str,
}

/// Why a pattern cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatternError {
    /// Empty, or longer than [`MAX_PATTERN`].
    #[error("output pattern must be 1 to {MAX_PATTERN} bytes")]
    Length,
    /// A NUL byte, which no path can hold.
    #[error("output pattern {0:?} contains a NUL byte")]
    Nul(String),
    /// A `%` followed by something else than `j`, `a`, `r`, `n` or `%`.
    #[error(
        "output pattern {pattern:?} has an unknown %{found}; use %j (job), %a (array index), %r (rank), %n (node) or %% (a %)"
    )]
    Unknown {
        /// The pattern.
        pattern: String,
        /// What followed the `%` (empty at the end).
        found: String,
    },
}

/// Checks a pattern without expanding it (what `rexec submit` and the node check).
///
/// ```
/// use proto::output::check;
/// assert!(check("out-%j-%r.txt").is_ok());
/// assert!(check("out-%x").is_err());
/// ```
pub fn check(pattern: &str) -> Result<(), PatternError> {
    let vars = PatternVars {
        job: JobId(0),
        array_index: None,
        rank: 0,
        node: "",
    };
    expand(pattern, &vars).map(|_| ())
}

/// Expands a pattern for one rank; the one place the placeholders are known.
///
/// ```
/// use proto::node::JobId;
/// use proto::output::{PatternVars, expand};
/// let v = PatternVars { job: JobId(0xab), array_index: None, rank: 3, node: "n1" };
/// assert_eq!(expand("%j.%a.%r.%n.%%", &v).unwrap(), "00000000000000ab.0.3.n1.%");
/// ```
pub fn expand(pattern: &str, vars: &PatternVars<'_>) -> Result<String, PatternError> {
    if pattern.is_empty() || pattern.len() > MAX_PATTERN {
        return Err(PatternError::Length);
    }
    if pattern.contains('\0') {
        return Err(PatternError::Nul(pattern.to_string()));
    }
    let mut out = String::with_capacity(pattern.len() + 32);
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('j') => out.push_str(&vars.job.to_string()),
            Some('a') => out.push_str(&vars.array_index.unwrap_or(0).to_string()),
            Some('r') => out.push_str(&vars.rank.to_string()),
            Some('n') => out.push_str(vars.node),
            Some('%') => out.push('%'),
            other => {
                return Err(PatternError::Unknown {
                    pattern: pattern.to_string(),
                    found: other.map(String::from).unwrap_or_default(),
                });
            }
        }
    }
    if out.len() > MAX_PATTERN {
        return Err(PatternError::Length);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_placeholder_expands_and_bad_ones_explain() {
        let v = PatternVars {
            job: JobId(1),
            array_index: Some(7),
            rank: 12,
            node: "node-b",
        };
        assert_eq!(
            expand("/o/%n/%j_%a_r%r", &v).unwrap(),
            "/o/node-b/0000000000000001_7_r12"
        );
        for bad in ["a%", "%q", "", "x\0y"] {
            assert!(check(bad).is_err(), "{bad:?}");
        }
        let err = check("x%z").unwrap_err().to_string();
        assert!(err.contains("%z") && err.contains("%j"), "{err}");
    }
}
