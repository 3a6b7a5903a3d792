//! Job arrays (`rexec submit --array 0-999[:STEP][%MAX]`): one signed
//! submission of many tasks. [`ArraySpec`] is what the user signs (the index
//! range, its step and how many tasks may run at once); each task is a job of
//! its own to the queue and the nodes, with the id [`task_id`] derives from the
//! array's id and the task's index, and a node starts a task only for an index
//! the signed range holds ([`ArraySpec::contains`]).
//!
//! ```
//! use proto::batch::array::{ArraySpec, task_id};
//! use proto::node::JobId;
//! let a: ArraySpec = "0-9:3%2".parse().unwrap();
//! assert_eq!(a.indices().collect::<Vec<_>>(), [0, 3, 6, 9]);
//! assert_eq!((a.count(), a.max_running), (4, 2));
//! assert!(a.contains(6) && !a.contains(7) && !a.contains(12));
//! assert_eq!(task_id(JobId(0x10), 6), JobId(0x17));
//! assert_eq!(proto::batch::array::runs(&[1, 2, 3, 7, 9, 10]), "1-3,7,9-10");
//! ```

use serde::{Deserialize, Serialize};

use crate::job::JobId;

/// Most tasks one array may have (each is a job in the queue's memory and store).
pub const MAX_ARRAY_TASKS: u32 = 100_000;

/// The tasks of an array, as signed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArraySpec {
    /// The first index.
    pub first: u32,
    /// The last index (inclusive; reached only when `step` divides `last - first`).
    pub last: u32,
    /// Distance between two indices (at least 1).
    pub step: u32,
    /// Most tasks running (or suspended) at once; 0 means no bound.
    pub max_running: u32,
}

/// Why an array range cannot be read or used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("array {text:?}: {why}; give FIRST-LAST[:STEP][%MAX], such as 0-999 or 1-99:2%4")]
pub struct ArrayError {
    /// What was given.
    pub text: String,
    /// What is wrong with it.
    pub why: String,
}

impl ArraySpec {
    /// Every index, in order.
    pub fn indices(&self) -> impl Iterator<Item = u32> + use<> {
        (self.first..=self.last).step_by(self.step.max(1) as usize)
    }

    /// How many tasks.
    pub fn count(&self) -> u32 {
        if self.last < self.first {
            0
        } else {
            (self.last - self.first) / self.step.max(1) + 1
        }
    }

    /// Whether `index` is one of the signed indices.
    pub fn contains(&self, index: u32) -> bool {
        index >= self.first
            && index <= self.last
            && (index - self.first).is_multiple_of(self.step.max(1))
    }

    /// Checks what a signed array must be: a non-empty range, a step of at
    /// least 1, at most [`MAX_ARRAY_TASKS`] tasks.
    pub fn check(&self) -> Result<(), String> {
        if self.step == 0 {
            return Err("the step must be at least 1".into());
        }
        if self.last < self.first {
            return Err(format!(
                "the last index {} is below the first {}",
                self.last, self.first
            ));
        }
        if self.count() > MAX_ARRAY_TASKS {
            return Err(format!(
                "{} tasks; an array has at most {MAX_ARRAY_TASKS}",
                self.count()
            ));
        }
        if u64::from(self.last) + 1 > u64::from(u32::MAX) {
            return Err("the last index is too large".into());
        }
        Ok(())
    }
}

impl std::str::FromStr for ArraySpec {
    type Err = ArrayError;

    fn from_str(text: &str) -> Result<Self, ArrayError> {
        let fail = |why: &str| ArrayError {
            text: text.to_string(),
            why: why.to_string(),
        };
        let num = |s: &str, what: &str| {
            s.trim()
                .parse::<u32>()
                .map_err(|_| fail(&format!("{what} {s:?} is not a whole number")))
        };
        let (range, max) = match text.split_once('%') {
            Some((r, m)) => (r, num(m, "the bound")?),
            None => (text, 0),
        };
        if text.contains('%') && max == 0 {
            return Err(fail("the bound %MAX must be at least 1"));
        }
        let (range, step) = match range.split_once(':') {
            Some((r, s)) => (r, num(s, "the step")?),
            None => (range, 1),
        };
        let (first, last) = match range.split_once('-') {
            Some((a, b)) => (num(a, "the first index")?, num(b, "the last index")?),
            None => {
                let i = num(range, "the index")?;
                (i, i)
            }
        };
        let spec = ArraySpec {
            first,
            last,
            step,
            max_running: max,
        };
        spec.check().map_err(|why| fail(&why))?;
        Ok(spec)
    }
}

/// The job id of task `index` of array `array`: the array's id plus one plus
/// the index, so a task's id is distinct from its array's and the tasks of one
/// array are consecutive ids (ids are random, so another job's id falls in an
/// array's range about never, and such a submission is refused as a duplicate).
pub fn task_id(array: JobId, index: u32) -> JobId {
    JobId(array.0.wrapping_add(u64::from(index) + 1))
}

/// Sorted indices as inclusive runs: `[1, 2, 3, 7]` is `[(1, 3), (7, 7)]`.
pub fn runs_of(indices: &[u32]) -> Vec<(u32, u32)> {
    let mut out: Vec<(u32, u32)> = Vec::new();
    for &i in indices {
        match out.last_mut() {
            Some((_, end)) if end.checked_add(1) == Some(i) => *end = i,
            _ => out.push((i, i)),
        }
    }
    out
}

/// Runs written for people: `1-3,7,9-10`.
pub fn format_runs(runs: &[(u32, u32)]) -> String {
    let one = |&(a, b): &(u32, u32)| {
        if a == b {
            a.to_string()
        } else {
            format!("{a}-{b}")
        }
    };
    runs.iter().map(one).collect::<Vec<_>>().join(",")
}

/// Sorted indices written as runs: `1-3,7,9-10`.
pub fn runs(indices: &[u32]) -> String {
    format_runs(&runs_of(indices))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_ranges_are_refused_in_words() {
        for (text, want) in [
            ("5-1", "below the first"),
            ("0-9:0", "step must be at least 1"),
            ("0-9%0", "%MAX must be at least 1"),
            ("a-9", "first index \"a\""),
            ("0-200000", "at most 100000"),
            ("", "index \"\""),
        ] {
            let e = text.parse::<ArraySpec>().unwrap_err();
            assert!(e.to_string().contains(want), "{text}: {e}");
        }
        let one: ArraySpec = "7".parse().unwrap();
        assert_eq!((one.count(), one.contains(7)), (1, true));
    }
}
