//! The config keys that harden how jobs are spawned and how long a client is trusted:
//! `no_new_privs`, `umask`, `[rlimits]`, `stopped_client_limit` and `tcp_user_timeout`,
//! parsed into [`crate::spawn::JobLimits`] and durations.

use std::collections::BTreeMap;

use nix::sys::resource::Resource;
use serde::Deserialize;

use super::ConfigError;
use crate::spawn::JobLimits;

/// One `[rlimits]` value: a number (soft and hard), `"unlimited"`, or `[soft, hard]`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub enum RlimitValue {
    /// Soft and hard limit alike.
    Both(Limit),
    /// `[soft, hard]`.
    Pair([Limit; 2]),
}

/// A limit: a number or `"unlimited"`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub enum Limit {
    /// A count (bytes, seconds, files, processes... as the resource measures).
    Number(u64),
    /// `"unlimited"` (any other text is refused when resolved).
    Text(String),
}

/// The resource names `[rlimits]` accepts, as in `prlimit(1)` and `ulimit`.
const RESOURCES: [(&str, Resource); 15] = [
    ("as", Resource::RLIMIT_AS),
    ("core", Resource::RLIMIT_CORE),
    ("cpu", Resource::RLIMIT_CPU),
    ("data", Resource::RLIMIT_DATA),
    ("fsize", Resource::RLIMIT_FSIZE),
    ("locks", Resource::RLIMIT_LOCKS),
    ("memlock", Resource::RLIMIT_MEMLOCK),
    ("msgqueue", Resource::RLIMIT_MSGQUEUE),
    ("nice", Resource::RLIMIT_NICE),
    ("nofile", Resource::RLIMIT_NOFILE),
    ("nproc", Resource::RLIMIT_NPROC),
    ("rss", Resource::RLIMIT_RSS),
    ("rtprio", Resource::RLIMIT_RTPRIO),
    ("sigpending", Resource::RLIMIT_SIGPENDING),
    ("stack", Resource::RLIMIT_STACK),
];

/// Resolves `no_new_privs` (default true), `umask` (octal text, default `"022"`) and
/// `[rlimits]` (default: none, so jobs inherit rexecd's limits).
///
/// ```
/// use rexecd::config::job::{job_limits, Limit, RlimitValue};
/// let mut rl = std::collections::BTreeMap::new();
/// rl.insert("nofile".to_string(), RlimitValue::Pair([Limit::Number(256), Limit::Number(512)]));
/// rl.insert("core".to_string(), RlimitValue::Both(Limit::Number(0)));
/// let limits = job_limits(None, Some("027".into()), Some(rl)).unwrap();
/// assert!(limits.no_new_privs);
/// assert_eq!(limits.umask, 0o027);
/// assert_eq!(limits.rlimits.len(), 2);
/// assert!(job_limits(None, Some("999".into()), None).is_err());
/// ```
pub fn job_limits(
    no_new_privs: Option<bool>,
    umask: Option<String>,
    rlimits: Option<BTreeMap<String, RlimitValue>>,
) -> Result<JobLimits, ConfigError> {
    let mut limits = JobLimits {
        no_new_privs: no_new_privs.unwrap_or(true),
        ..JobLimits::default()
    };
    if let Some(text) = umask {
        limits.umask = u32::from_str_radix(text.trim(), 8)
            .ok()
            .filter(|m| *m <= 0o777)
            .ok_or_else(|| ConfigError::Invalid {
                key: "umask",
                value: text.clone(),
                reason: "must be an octal mode from 000 to 777, such as \"022\"".to_string(),
            })?;
    }
    for (name, value) in rlimits.unwrap_or_default() {
        let invalid = |reason: String| ConfigError::Invalid {
            key: "rlimits",
            value: name.clone(),
            reason,
        };
        let resource = RESOURCES
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, r)| *r)
            .ok_or_else(|| {
                let known: Vec<&str> = RESOURCES.iter().map(|(n, _)| *n).collect();
                invalid(format!("unknown resource; use one of {}", known.join(", ")))
            })?;
        let number = |limit: &Limit| match limit {
            Limit::Number(n) => Ok(*n),
            Limit::Text(t) if t == "unlimited" => Ok(nix::libc::RLIM_INFINITY),
            Limit::Text(t) => Err(invalid(format!(
                "{t:?} is not a limit; use a number or \"unlimited\""
            ))),
        };
        let (soft, hard) = match &value {
            RlimitValue::Both(l) => (number(l)?, number(l)?),
            RlimitValue::Pair([s, h]) => (number(s)?, number(h)?),
        };
        if soft > hard {
            return Err(invalid(format!(
                "the soft limit {soft} is above the hard limit {hard}"
            )));
        }
        limits.rlimits.push((resource, soft, hard));
    }
    Ok(limits)
}
