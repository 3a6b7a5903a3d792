//! Asking selectors (vexecd), as `rexec` does it: the default policy and the time
//! limit of each selector. The asking itself — one selector over mutual TLS, then the
//! next until one answers, with the rule that decides whether a failure moves on — is
//! `clients::selector` ([`clients::selector::ask_any`]), shared with the tests.
//!
//! The client presents the user's certificate (the connector every rexec connection
//! uses) and accepts only a selector whose certificate names the service it dialled,
//! so an address taken from an announcement cannot impersonate a selector. Failing
//! over is silent: callers print which selector answered only when asked to (`-v`).

use std::time::Duration;

/// The policy used when `--policy` is not given.
pub const DEFAULT_POLICY: &str = "lowest-price";

/// How long one selector may take to accept, shake hands and answer.
pub const ASK_TIMEOUT: Duration = Duration::from_secs(2);
