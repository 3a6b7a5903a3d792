//! The test user's definition holds whichever way the account came to exist: made
//! fresh, or made earlier with other options (as the suites used to, each its own).
//! Uses an account of its own, so the shared `rexectest` is never removed under
//! another test process.

use std::process::Command;

use testhost::user::{UserSpec, ensure};

const SPEC: UserSpec = UserSpec {
    name: "rexectestconv",
    group: "rexectestconvaux",
    home: "/var/lib/rexectestconv",
    shell: "/bin/sh",
};

fn run(argv: &[&str]) {
    let out = Command::new(argv[0]).args(&argv[1..]).output().unwrap();
    assert!(
        out.status.success(),
        "{argv:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn remove() {
    let _ = Command::new("userdel").args(["-r", SPEC.name]).output();
    let _ = Command::new("groupdel").arg(SPEC.group).output();
    let _ = std::fs::remove_dir_all(SPEC.home);
}

/// What a test can observe of the account: supplementary groups by name, shell,
/// whether the home exists and is the user's.
fn observed() -> (Vec<String>, String, bool) {
    let out = Command::new("id")
        .args(["-Gn", SPEC.name])
        .output()
        .unwrap();
    let mut groups: Vec<String> = String::from_utf8(out.stdout)
        .unwrap()
        .split_whitespace()
        .map(str::to_string)
        .collect();
    groups.sort();
    let user = nix::unistd::User::from_name(SPEC.name).unwrap().unwrap();
    let owned = std::fs::metadata(&user.dir)
        .map(|m| std::os::unix::fs::MetadataExt::uid(&m) == user.uid.as_raw() && m.is_dir())
        .unwrap_or(false);
    (groups, user.shell.display().to_string(), owned)
}

#[test]
fn the_test_user_is_the_same_whichever_suite_made_it_first() {
    if !testhost::can_run(
        "the_test_user_is_the_same_whichever_suite_made_it_first",
        || Ok(()),
    ) {
        return;
    }
    remove();
    // Made fresh.
    let fresh = ensure(&SPEC).unwrap();
    let fresh_seen = observed();
    assert_eq!(ensure(&SPEC).unwrap(), fresh, "ensure is idempotent");
    remove();

    // Made before, as one suite used to: no supplementary group, another shell, no home.
    run(&[
        "useradd",
        "--system",
        "--user-group",
        "--no-create-home",
        "--home-dir",
        SPEC.home,
        "--shell",
        "/usr/sbin/nologin",
        SPEC.name,
    ]);
    let old = ensure(&SPEC).unwrap();
    let old_seen = observed();
    remove();

    let want_groups = {
        let mut g = vec![SPEC.name.to_string(), SPEC.group.to_string()];
        g.sort();
        g
    };
    assert_eq!(
        fresh_seen,
        (want_groups, SPEC.shell.to_string(), true),
        "fresh account"
    );
    assert_eq!(
        old_seen, fresh_seen,
        "an older account brought to the definition"
    );
    assert_eq!((old.home, old.name), (fresh.home, fresh.name));
}
