//! The systemd units in `deploy/systemd/` against `systemd-analyze verify`.
//!
//! The units name `/usr/local/bin/...`, which a build machine does not have, so each
//! unit is copied into a temporary directory with `/usr/local/bin/` replaced by the
//! directory of the freshly built binaries. `systemd-analyze verify` exits non-zero on
//! some errors (a missing program) but only warns, exiting 0, on others (an unknown key,
//! a value it cannot parse): so a unit passes only when the tool exits 0 *and* says
//! nothing about it. Two broken copies show that both kinds are caught.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use rexec_tests::cluster::bin_dir;

/// The units shipped, by file name.
pub const UNITS: [&str; 4] = [
    "accountd.service",
    "batchd.service",
    "rexecd.service",
    "vexecd.service",
];

/// A unit's text with its binaries taken from the build directory. Panics when a
/// binary the unit starts has not been built.
pub fn with_built_binaries(text: &str) -> String {
    let dir = format!("{}/", bin_dir().display());
    let out = text.replace("/usr/local/bin/", &dir);
    for line in out.lines() {
        if let Some(cmd) = line.strip_prefix("ExecStart=") {
            let program = cmd.split_whitespace().next().unwrap_or("");
            assert!(
                Path::new(program).exists(),
                "{program} is missing: run `cargo build --workspace --bins` first"
            );
        }
    }
    out
}

/// Runs `systemd-analyze verify` on one unit file: `Err` with what it said when it
/// fails or says anything about the unit.
pub fn verify(unit: &Path) -> Result<(), String> {
    let out = Command::new("systemd-analyze")
        .arg("verify")
        .arg(unit)
        .output()
        .map_err(|e| format!("cannot run systemd-analyze: {e}"))?;
    let name = unit.file_name().unwrap().to_string_lossy().into_owned();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let about_unit: Vec<&str> = said.lines().filter(|l| l.contains(&name)).collect();
    if !said.trim().is_empty() {
        eprintln!("systemd-analyze verify {}:\n{said}", unit.display());
    }
    if !out.status.success() || !about_unit.is_empty() {
        return Err(format!("exit {:?}: {said}", out.status.code()));
    }
    Ok(())
}

fn shipped(name: &str) -> String {
    let path = crate::workspace().join("deploy/systemd").join(name);
    fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    fs::write(&path, text).unwrap();
    path
}

#[test]
fn every_shipped_unit_passes_systemd_analyze_verify() {
    if !crate::have_systemd_analyze("every_shipped_unit_passes_systemd_analyze_verify") {
        return;
    }
    let mut shipped_names: Vec<String> = fs::read_dir(crate::workspace().join("deploy/systemd"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".service"))
        .collect();
    shipped_names.sort();
    assert_eq!(shipped_names, UNITS, "the units this test knows");
    let dir = tempfile::tempdir().unwrap();
    for name in UNITS {
        let unit = write(dir.path(), name, &with_built_binaries(&shipped(name)));
        if let Err(e) = verify(&unit) {
            panic!("deploy/systemd/{name} does not verify: {e}");
        }
    }
}

#[test]
fn a_unit_with_a_real_error_fails_the_check() {
    if !crate::have_systemd_analyze("a_unit_with_a_real_error_fails_the_check") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let good = with_built_binaries(&shipped("accountd.service"));
    assert!(good.contains("\nProtectSystem=strict\n"), "{good}");
    // A misspelt key: systemd ignores it with a warning and exits 0.
    let typo = good.replace("\nProtectSystem=strict\n", "\nProtectSytem=strict\n");
    let unit = write(dir.path(), "accountd.service", &typo);
    let err = verify(&unit).expect_err("a misspelt key must fail the check");
    assert!(err.contains("ProtectSytem"), "{err}");
    // A bad value, also only a warning to systemd.
    let bad = good.replace("\nRestart=on-failure\n", "\nRestart=sometimes\n");
    let unit = write(dir.path(), "accountd.service", &bad);
    let err = verify(&unit).expect_err("an unparsable value must fail the check");
    assert!(err.contains("sometimes"), "{err}");
    // A program that does not exist: systemd-analyze exits non-zero.
    let missing = good.replace(
        &format!("{}/accountd ", bin_dir().display()),
        "/nonexistent/accountd ",
    );
    assert_ne!(missing, good);
    let unit = write(dir.path(), "accountd.service", &missing);
    let err = verify(&unit).expect_err("a missing program must fail the check");
    assert!(err.contains("/nonexistent/accountd"), "{err}");
    // And the unbroken copy passes in the same place.
    let unit = write(dir.path(), "accountd.service", &good);
    verify(&unit).unwrap();
}
