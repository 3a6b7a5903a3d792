//! The unprivileged Unix user tests run jobs as. Every suite (rexecd's daemon and
//! kernel tests, the end-to-end scenarios) uses this one definition, so what a test
//! sees does not depend on which suite created the account first: [`ensure`] creates
//! a missing account as [`TEST_USER_SPEC`] says, and brings an existing one (made by
//! an older version of a suite, say) to the properties tests rely on: the
//! supplementary group, the shell, and a home directory that exists and is the
//! user's. (The home's path is left alone: `usermod` refuses to move it while the
//! user runs processes, which other test processes may be doing, and no test
//! depends on where it is.)
//!
//! Several test processes may do this at once: a `useradd`, `groupadd` or `usermod`
//! that fails (another one holds the account files' lock) is tried again.

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use nix::unistd::{Group, User};

/// The test user's name.
pub const TEST_USER: &str = "rexectest";
/// A supplementary group the test user is in.
pub const TEST_GROUP: &str = "rexectestaux";

/// What a test user account looks like.
#[derive(Debug, Clone, Copy)]
pub struct UserSpec {
    /// Login name.
    pub name: &'static str,
    /// A supplementary group it is a member of.
    pub group: &'static str,
    /// Home directory given to a new account (created, owned by the user).
    pub home: &'static str,
    /// Login shell.
    pub shell: &'static str,
}

/// The one definition of the test user: a system account with its own primary group,
/// [`TEST_GROUP`] as a supplementary group, a home of its own and `/bin/sh`.
pub const TEST_USER_SPEC: UserSpec = UserSpec {
    name: TEST_USER,
    group: TEST_GROUP,
    home: "/var/lib/rexectest",
    shell: "/bin/sh",
};

/// The test user as it is after [`ensure`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestUser {
    /// Login name.
    pub name: String,
    /// User id.
    pub uid: u32,
    /// Primary group id.
    pub gid: u32,
    /// Home directory (exists, owned by the user).
    pub home: PathBuf,
}

/// Makes sure [`TEST_USER_SPEC`] holds (once per process) and returns the user.
///
/// # Panics
/// When the account cannot be created or brought to the definition (not root, say).
pub fn test_user() -> &'static TestUser {
    static USER: OnceLock<TestUser> = OnceLock::new();
    USER.get_or_init(|| ensure(&TEST_USER_SPEC).unwrap_or_else(|e| panic!("{e}")))
}

/// Creates the account `spec` describes if it is missing, and brings an existing one
/// to it (supplementary group, shell, an existing home owned by the user).
pub fn ensure(spec: &UserSpec) -> Result<TestUser, String> {
    let group_exists = || matches!(Group::from_name(spec.group), Ok(Some(_)));
    run_retrying(&["groupadd", "-f", "--system", spec.group], group_exists)?;
    let exists = || matches!(lookup(spec.name), Ok(Some(_)));
    run_retrying(
        &[
            "useradd",
            "--system",
            "--user-group",
            "--groups",
            spec.group,
            "--create-home",
            "--home-dir",
            spec.home,
            "--shell",
            spec.shell,
            spec.name,
        ],
        exists,
    )?;
    let in_group = || {
        Group::from_name(spec.group)
            .ok()
            .flatten()
            .is_some_and(|g| g.mem.iter().any(|m| m == spec.name))
    };
    run_retrying(
        &["usermod", "--append", "--groups", spec.group, spec.name],
        in_group,
    )?;
    let has_shell = || {
        lookup(spec.name)
            .ok()
            .flatten()
            .is_some_and(|u| u.shell.as_os_str() == spec.shell)
    };
    run_retrying(&["usermod", "--shell", spec.shell, spec.name], has_shell)?;
    let user = lookup(spec.name)?.ok_or_else(|| format!("user {} vanished", spec.name))?;
    let home = user.dir.clone();
    if !home.is_dir() {
        std::fs::create_dir_all(&home)
            .map_err(|e| format!("cannot create {}: {e}", home.display()))?;
    }
    std::os::unix::fs::chown(&home, Some(user.uid.as_raw()), Some(user.gid.as_raw()))
        .map_err(|e| format!("cannot give {} to {}: {e}", home.display(), spec.name))?;
    Ok(TestUser {
        name: spec.name.to_string(),
        uid: user.uid.as_raw(),
        gid: user.gid.as_raw(),
        home,
    })
}

fn lookup(name: &str) -> Result<Option<User>, String> {
    User::from_name(name).map_err(|e| format!("cannot look up user {name}: {e}"))
}

/// Runs `argv` until `done` holds or it succeeds, up to 50 times 100 ms apart (the
/// account tools fail while another process holds their lock, or when another one
/// just did the same); the last error if neither ever happens.
fn run_retrying(argv: &[&str], done: impl Fn() -> bool) -> Result<(), String> {
    let mut last = String::new();
    for _ in 0..50 {
        if done() {
            return Ok(());
        }
        let out = Command::new(argv[0])
            .args(&argv[1..])
            .output()
            .map_err(|e| format!("cannot run {}: {e}", argv[0]))?;
        if out.status.success() {
            return Ok(());
        }
        last = String::from_utf8_lossy(&out.stderr).trim().to_string();
        std::thread::sleep(Duration::from_millis(100));
    }
    if done() {
        return Ok(());
    }
    Err(format!("{} failed: {last}", argv.join(" ")))
}
