//! Deployment checks, run as root after `cargo build --workspace --bins`:
//! - [`units`]: every systemd unit in `deploy/systemd/` passes `systemd-analyze verify`
//!   (with `ExecStart=` pointing at the freshly built binaries), and deliberately broken
//!   copies do not.
//! - [`guide`]: `docs/OPERATIONS.md` followed in order: every command of its `sh` blocks
//!   runs on the machine its block names, a network-namespace host with a root of its
//!   own ([`hosts`], [`sandbox`]), or is listed with the demo step or test that covers it;
//!   [`steps`] reads the guide's blocks.
//!
//! - [`alerts`]: the alerting rules in `deploy/etc/` pass their `promtool test rules`
//!   unit tests and ask only for exported series.
//!
//! - [`examples`]: every daemon's example config in `deploy/etc` shows every key its
//!   settings struct accepts, and loads.
//!
//! - [`grafana`]: the Grafana dashboard in `deploy/grafana/` imports as it is, its
//!   queries parse, and it covers exactly the metrics the daemons export.
//!
//! Shared here: where the workspace and its binaries are, and the skip rule.

mod alerts;
mod examples;
mod grafana;
mod guide;
mod hosts;
mod sandbox;
mod steps;
mod units;

use std::path::PathBuf;

/// The workspace root (the parent of this package's directory).
pub fn workspace() -> PathBuf {
    let here = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    here.parent().expect("tests/ has a parent").to_path_buf()
}

/// True when `systemd-analyze` can be run; else fails the test, or skips it under
/// `REXEC_TESTS_ALLOW_SKIP=1` (`deploy/setup-host` installs Debian's `systemd` package
/// when the tool is missing).
pub fn have_systemd_analyze(test: &str) -> bool {
    let found = std::process::Command::new("systemd-analyze")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    found
        || testhost::cannot_run(
            test,
            "systemd-analyze is missing (run deploy/setup-host as root)",
        )
}
