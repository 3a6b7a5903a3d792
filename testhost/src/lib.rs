//! What every test suite that needs the real machine shares, so each suite behaves
//! alike whichever ran first:
//!
//! - [`can_run`] / [`cannot_run`]: the rule for a test that cannot run here (not root,
//!   no cpu controller). It fails, so nothing passes untested, unless
//!   `REXEC_TESTS_ALLOW_SKIP=1` asks for a skip (a developer without root).
//! - [`user`]: the one unprivileged Unix user jobs run as in tests, `rexectest`, with
//!   one definition ([`user::TEST_USER_SPEC`]) that an existing account is brought to.
//! - [`wait`]: waiting for a condition instead of a fixed sleep, in a sync and an
//!   async form; neither blocks a thread an async test's tasks need.
//! - [`net`]: ports and multicast groups no other test on this machine uses.
//! - [`postgres`]: a real PostgreSQL server of the test's own in a temporary
//!   directory (the ledger's and the queue's second backend).
//! - [`both`]: one test body proved on both of a store's backends, SQLite and
//!   PostgreSQL ([`both!`], [`both_async!`]).
//!
//! ```
//! // A suite's own readiness check (here: none) on top of the root check.
//! let here = testhost::is_root();
//! if testhost::can_run("doc example", || Ok(())) {
//!     assert!(here);
//! }
//! # // (without root this doctest needs REXEC_TESTS_ALLOW_SKIP=1, like every such test)
//! ```

#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod both;
pub mod net;
pub mod postgres;
pub mod user;
pub mod wait;

/// The environment variable that turns "cannot run here" into a skip when set to `1`.
pub const ALLOW_SKIP_VAR: &str = "REXEC_TESTS_ALLOW_SKIP";

/// Whether this process runs as root (effective user id 0).
pub fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// True when `test` can run here: as root, and `ready` (the suite's own check, such
/// as finding a cpu cgroup controller) says yes. Otherwise see [`cannot_run`].
///
/// A test starts with `if !can_run("name", ready) { return; }`.
pub fn can_run(test: &str, ready: impl FnOnce() -> Result<(), String>) -> bool {
    if !is_root() {
        return cannot_run(test, "needs root");
    }
    match ready() {
        Ok(()) => true,
        Err(why) => cannot_run(test, &why),
    }
}

/// What to do when a test cannot run here: fail, unless `REXEC_TESTS_ALLOW_SKIP=1`
/// says a skip is wanted (then say so on stderr and return false). A silent skip in CI
/// would pass without testing anything.
///
/// # Panics
/// Unless skipping is allowed: that is how the test fails.
pub fn cannot_run(test: &str, why: &str) -> bool {
    if skip_allowed() {
        eprintln!("skipping {test}: {why}");
        return false;
    }
    panic!("{test} cannot run here: {why} (set {ALLOW_SKIP_VAR}=1 to skip it)");
}

/// Whether `REXEC_TESTS_ALLOW_SKIP=1` is set.
pub fn skip_allowed() -> bool {
    std::env::var_os(ALLOW_SKIP_VAR).is_some_and(|v| v == "1")
}
