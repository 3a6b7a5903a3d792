//! The job's environment: exactly what the client sent, minus a deny list, plus the
//! target user's `USER`, `LOGNAME`, `HOME` and `SHELL` when the client sent none.
//!
//! The default deny list is [`DEFAULT_DENY`]: every `LD_*` variable (the dynamic
//! loader's knobs — `LD_PRELOAD`, `LD_LIBRARY_PATH`, `LD_AUDIT` and the rest — name
//! libraries on the client's machine and change what every program of the job loads),
//! and the variables that point at the client's own session and make no sense on a
//! node (`SSH_AUTH_SOCK`, `SSH_AGENT_PID`, `XDG_RUNTIME_DIR`,
//! `DBUS_SESSION_BUS_ADDRESS`). A pattern ending in `*` matches by prefix; any other
//! pattern matches a name exactly. The `env_deny` config key replaces the list.

use crate::spawn::JobUser;

/// Variables dropped from a job's environment unless the config says otherwise.
pub const DEFAULT_DENY: &[&str] = &[
    "LD_*",
    "SSH_AUTH_SOCK",
    "SSH_AGENT_PID",
    "XDG_RUNTIME_DIR",
    "DBUS_SESSION_BUS_ADDRESS",
];

/// Which client variables are dropped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvPolicy {
    deny: Vec<String>,
}

impl Default for EnvPolicy {
    fn default() -> Self {
        EnvPolicy::new(DEFAULT_DENY.iter().map(|s| s.to_string()))
    }
}

impl EnvPolicy {
    /// A policy denying `patterns` (`NAME` exactly, or `PREFIX*`).
    pub fn new(patterns: impl IntoIterator<Item = String>) -> EnvPolicy {
        EnvPolicy {
            deny: patterns.into_iter().collect(),
        }
    }

    /// True when `name` is on the deny list.
    ///
    /// ```
    /// let policy = rexecd::env::EnvPolicy::default();
    /// assert!(policy.denies("LD_PRELOAD") && policy.denies("LD_BIND_NOW"));
    /// assert!(!policy.denies("PATH") && !policy.denies("OLD_PWD"));
    /// ```
    pub fn denies(&self, name: &str) -> bool {
        self.deny.iter().any(|p| match p.strip_suffix('*') {
            Some(prefix) => name.starts_with(prefix),
            None => name == p,
        })
    }

    /// The environment for a job of `user` from what the client sent.
    pub fn job_env(&self, sent: &[(String, String)], user: &JobUser) -> Vec<(String, String)> {
        let mut env: Vec<(String, String)> = sent
            .iter()
            .filter(|(k, _)| !self.denies(k))
            .cloned()
            .collect();
        let mut default = |key: &str, value: String| {
            if !env.iter().any(|(k, _)| k == key) {
                env.push((key.to_string(), value));
            }
        };
        default("USER", user.name().to_string());
        default("LOGNAME", user.name().to_string());
        default("HOME", user.home().display().to_string());
        default("SHELL", user.shell().display().to_string());
        env
    }
}
