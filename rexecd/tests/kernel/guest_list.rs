//! The guard on the hand-kept list of tests the VM runs ([`GUEST_TESTS`]): a test
//! written for the VM but left off the list would never run anywhere (it is ignored on
//! the host) and nothing would say so. This host test asks the test binary itself for
//! its tests (`--list`) and fails when an in-VM test is missing from the list, or the
//! list names a test that does not exist. It needs neither root nor the VM.

use std::collections::BTreeSet;
use std::process::Command;

use crate::v2_vm::GUEST_TESTS;

/// Modules whose every test runs in the VM: the v2-only and rexecd-on-v2 tests, and
/// the generic real-cgroup tests, which in the VM meet v2 instead of the host's v1.
const GUEST_MODULES: [&str; 4] = ["v2_vm::", "rexecd_vm::", "cgroup_real::", "cpuset_real::"];

/// The tests of this binary (only the ignored ones with `ignored`), by full name.
fn tests_of_this_binary(ignored: bool) -> BTreeSet<String> {
    let exe = std::env::current_exe().expect("the test binary's path");
    let mut cmd = Command::new(&exe);
    cmd.args(["--list", "--format", "terse"]);
    if ignored {
        cmd.arg("--ignored");
    }
    let out = cmd.output().expect("cannot list the tests");
    assert!(
        out.status.success(),
        "{} --list failed: {out:?}",
        exe.display()
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.strip_suffix(": test"))
        .map(str::to_string)
        .collect()
}

#[test]
fn every_in_vm_test_is_on_the_list_the_vm_runs() {
    let listed: BTreeSet<String> = GUEST_TESTS.iter().map(|t| t.to_string()).collect();
    assert_eq!(
        listed.len(),
        GUEST_TESTS.len(),
        "GUEST_TESTS names a test twice"
    );
    let all = tests_of_this_binary(false);
    let unknown: Vec<&String> = listed.difference(&all).collect();
    assert!(
        unknown.is_empty(),
        "GUEST_TESTS names tests that do not exist: {unknown:?}"
    );
    // Every ignored test is ignored because it runs in the VM, and every test of the
    // VM's modules runs there.
    let ignored = tests_of_this_binary(true);
    let in_vm = all
        .iter()
        .filter(|t| ignored.contains(*t) || GUEST_MODULES.iter().any(|m| t.starts_with(m)));
    let unrun: Vec<&String> = in_vm.filter(|t| !listed.contains(*t)).collect();
    assert!(
        unrun.is_empty(),
        "in-VM tests missing from v2_vm::GUEST_TESTS, so the VM would never run them: \
         {unrun:?}"
    );
}
