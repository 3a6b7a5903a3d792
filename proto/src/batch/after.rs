//! Dependencies between batch jobs (`rexec submit --after JOB[:ok|any|notok]`,
//! Slurm's `--dependency=afterok:JOB`): what the user signs ([`After`]), read
//! from the command line's words. A job with dependencies waits (state
//! `Dependent`) until each parent has ended as asked; a parent that is an array
//! has ended once every task of it has, and ended well only if every task did.
//!
//! ```
//! use proto::batch::after::{After, When};
//! use proto::node::JobId;
//! let a: After = "00000000000000ab".parse().unwrap();
//! assert_eq!((a.job, a.when), (JobId(0xab), When::Ok));
//! let a: After = "00000000000000ab_2:notok".parse().unwrap();
//! assert_eq!((a.job, a.when), (JobId(0xab + 3), When::NotOk));
//! assert!("00000000000000ab:maybe".parse::<After>().is_err());
//! ```

use serde::{Deserialize, Serialize};

use crate::job::JobId;

/// Most dependencies one job may have.
pub const MAX_AFTER: usize = 64;

/// How a parent must end for the job to start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum When {
    /// It finished with exit status 0 (every task of an array did).
    Ok,
    /// It ended, however.
    Any,
    /// It ended without finishing well (failed, cancelled, non-zero exit; for an
    /// array: some task did).
    NotOk,
}

impl When {
    /// The word the command line uses.
    pub fn word(self) -> &'static str {
        match self {
            When::Ok => "ok",
            When::Any => "any",
            When::NotOk => "notok",
        }
    }
}

/// One dependency: start only after job (or array, or task) `job` ended as `when` says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct After {
    /// The parent: a job, an array (all its tasks) or one task (`ARRAY_INDEX`).
    pub job: JobId,
    /// How it must end.
    pub when: When,
}

/// Why a dependency cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "--after {text:?}: {why}; give JOB[:ok|any|notok], JOB as `rexec submit` printed it or ARRAY_INDEX"
)]
pub struct AfterError {
    /// What was given.
    pub text: String,
    /// What is wrong.
    pub why: String,
}

impl std::str::FromStr for After {
    type Err = AfterError;

    fn from_str(text: &str) -> Result<Self, AfterError> {
        let fail = |why: String| AfterError {
            text: text.to_string(),
            why,
        };
        let (job, when) = match text.rsplit_once(':') {
            Some((j, w)) => (j, w),
            None => (text, "ok"),
        };
        let when = match when {
            "ok" => When::Ok,
            "any" => When::Any,
            "notok" => When::NotOk,
            other => return Err(fail(format!("{other:?} is not ok, any or notok"))),
        };
        let id = |s: &str| {
            s.parse::<JobId>()
                .map_err(|_| fail(format!("{s:?} is not a job id (16 hex digits)")))
        };
        let job = match job.split_once('_') {
            Some((a, i)) => {
                let i = i
                    .parse::<u32>()
                    .map_err(|_| fail(format!("{i:?} is not a task index")))?;
                super::array::task_id(id(a)?, i)
            }
            None => id(job)?,
        };
        Ok(After { job, when })
    }
}
