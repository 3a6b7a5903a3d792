//! `REXEC_TESTS_ALLOW_SKIP=1` does what the README says for these scenarios: without
//! root every one of them is skipped, saying why, instead of failing; without the
//! variable a scenario fails and says what to set. Proven by running this very test
//! binary as the unprivileged test user.

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Output};

use testhost::ALLOW_SKIP_VAR;

/// A copy of this test binary that the test user may run (the build tree may sit
/// below a directory only root can enter), in a temporary directory.
fn runnable_copy() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::Builder::new()
        .prefix("rexec-e2e-skip-")
        .tempdir()
        .unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let exe = dir.path().join("e2e");
    std::fs::copy(std::env::current_exe().unwrap(), &exe).unwrap();
    std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
    (dir, exe)
}

/// Runs the copy as the test user, with or without `REXEC_TESTS_ALLOW_SKIP=1`.
fn unprivileged(exe: &PathBuf, allow_skip: bool, args: &[&str]) -> Output {
    let user = testhost::user::test_user();
    let mut cmd = Command::new(exe);
    cmd.args(args)
        .current_dir("/")
        .env_remove(ALLOW_SKIP_VAR)
        .uid(user.uid)
        .gid(user.gid);
    if allow_skip {
        cmd.env(ALLOW_SKIP_VAR, "1");
    }
    cmd.output().unwrap()
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn without_root_the_scenarios_skip_when_asked_and_fail_otherwise() {
    if !rexec_tests::can_run("without_root_the_scenarios_skip_when_asked_and_fail_otherwise") {
        return;
    }
    let (_dir, exe) = runnable_copy();
    let count = |args: &[&str]| {
        let list = Command::new(&exe).args(args).output().unwrap();
        String::from_utf8(list.stdout)
            .unwrap()
            .lines()
            .filter(|l| l.ends_with(": test"))
            .count()
    };
    // Ignored scenarios do not run, so they print nothing either way.
    let tests = count(&["--list"]) - count(&["--list", "--ignored"]);
    assert!(tests > 30, "only {tests} tests listed");

    let out = unprivileged(&exe, true, &["--nocapture", "--test-threads=4"]);
    let all = text(&out);
    assert!(out.status.success(), "a skip run failed:\n{all}");
    let skipped = all
        .lines()
        .filter(|l| l.starts_with("skipping ") && l.ends_with(": needs root"))
        .count();
    assert_eq!(skipped, tests, "every scenario says it was skipped:\n{all}");

    let one = "launch::the_program_runs_as_the_certificates_user";
    let out = unprivileged(&exe, false, &["--exact", one]);
    let all = text(&out);
    assert!(!out.status.success(), "ran without root:\n{all}");
    assert!(
        all.contains(
            "the_program_runs_as_the_certificates_user cannot run here: needs root \
             (set REXEC_TESTS_ALLOW_SKIP=1 to skip it)"
        ),
        "{all}"
    );
}
