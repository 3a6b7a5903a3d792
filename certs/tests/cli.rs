//! `rexec-certs` end to end: the real binary, a real CA directory.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use certs::{CertError, Role, TlsPaths};

fn rexec_certs(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rexec-certs"))
        .args(args)
        .env_remove("REXEC_CA_DIR")
        .output()
        .expect("run rexec-certs")
}

fn ok(args: &[&str]) -> String {
    let out = rexec_certs(args);
    assert!(
        out.status.success(),
        "rexec-certs {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn fails(args: &[&str]) -> String {
    let out = rexec_certs(args);
    assert!(
        !out.status.success(),
        "rexec-certs {args:?} should have failed"
    );
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(stderr.lines().count(), 1, "one line of error: {stderr}");
    stderr
}

fn mode(p: &Path) -> u32 {
    fs::metadata(p).unwrap().permissions().mode() & 0o777
}

const DAY: i64 = 86_400;

fn unix_now() -> i64 {
    i64::try_from(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs(),
    )
    .unwrap()
}

/// Seconds since the epoch in `show`'s format (`Nov  3 09:05:00 2026 +00:00`), as
/// GNU `date -u` writes it: a check of the printed times that shares no code with them.
fn utc_by_date(secs: i64) -> String {
    let out = Command::new("date")
        .args(["-u", "-d", &format!("@{secs}"), "+%b %e %H:%M:%S %Y +00:00"])
        .env("LC_ALL", "C")
        .output()
        .expect("run date");
    assert!(out.status.success(), "date: {out:?}");
    String::from_utf8(out.stdout)
        .unwrap()
        .trim_end()
        .to_string()
}

/// Every file under `dir` with its contents, to show that a refusal wrote nothing.
fn snapshot(dir: &Path) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    let mut files: Vec<_> = fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let p = e.unwrap().path();
            let bytes = fs::read(&p).unwrap();
            (p, bytes)
        })
        .collect();
    files.sort();
    files
}

#[test]
fn init_issue_show_revoke() {
    let tmp = tempfile::tempdir().unwrap();
    let ca = tmp.path().join("ca");
    let out = tmp.path().join("out");
    let (ca_s, out_s) = (ca.to_str().unwrap(), out.to_str().unwrap());

    // init, and init again is refused without --force.
    ok(&["init", "--dir", ca_s, "--cluster", "lab"]);
    assert_eq!(mode(&ca.join("ca.key")), 0o600);
    assert_eq!(mode(&ca.join("ca.pem")), 0o644);
    assert!(ca.join("crl.pem").exists());
    let ca_pem = fs::read(ca.join("ca.pem")).unwrap();
    let err = fails(&["init", "--dir", ca_s, "--cluster", "lab"]);
    assert!(
        err.contains("already exists") && err.contains("--force"),
        "{err}"
    );
    assert_eq!(
        fs::read(ca.join("ca.pem")).unwrap(),
        ca_pem,
        "refusal changed nothing"
    );
    let err = fails(&[
        "init",
        "--dir",
        tmp.path().join("x").to_str().unwrap(),
        "--cluster",
        "Lab!",
    ]);
    assert!(err.contains("invalid name"), "{err}");

    // issue each role.
    ok(&[
        "issue",
        "--dir",
        ca_s,
        "--out",
        out_s,
        "--days",
        "30",
        "node",
        "n1",
        "--san",
        "10.0.0.5",
        "--san",
        "n1.lab.example",
    ]);
    ok(&["issue", "--dir", ca_s, "--out", out_s, "user", "alice"]);
    ok(&[
        "issue",
        "--dir",
        ca_s,
        "--out",
        out_s,
        "service",
        "accountd",
        "--san",
        "127.0.0.1",
    ]);
    ok(&["issue", "--dir", ca_s, "--out", out_s, "service", "vexecd"]);
    ok(&["issue", "--dir", ca_s, "--out", out_s, "service", "vexecd2"]);
    ok(&["issue", "--dir", ca_s, "--out", out_s, "service", "batchd"]);
    ok(&[
        "issue",
        "--dir",
        ca_s,
        "--out",
        out_s,
        "service",
        "ledger-reader-v1",
    ]);
    ok(&["issue", "--dir", ca_s, "--out", out_s, "admin", "ops"]);
    for stem in [
        "node-n1",
        "user-alice",
        "service-accountd",
        "service-vexecd",
        "service-vexecd2",
        "service-batchd",
        "service-ledger-reader-v1",
        "admin-ops",
    ] {
        assert_eq!(mode(&out.join(format!("{stem}.key"))), 0o600, "{stem}");
        assert_eq!(mode(&out.join(format!("{stem}.pem"))), 0o644, "{stem}");
    }
    // Only the cluster's services exist (a clap usage error, with its usual hints).
    for bad in [
        "sshd",
        "batchd-",
        "batchdx",
        "ledger-reader-",
        "ledger-readerx",
    ] {
        let usage = rexec_certs(&["issue", "--dir", ca_s, "--out", out_s, "service", bad]);
        assert!(!usage.status.success(), "{bad}");
        let err = String::from_utf8_lossy(&usage.stderr);
        assert!(
            err.contains(&format!("'{bad}'")) && err.contains("accountd, vexecd"),
            "{err}"
        );
    }
    let err = fails(&["issue", "--dir", ca_s, "--out", out_s, "user", "Alice"]);
    assert!(err.contains("invalid name"), "{err}");
    let before = fs::read(out.join("user-alice.pem")).unwrap();
    let err = fails(&["issue", "--dir", ca_s, "--out", out_s, "user", "alice"]);
    assert!(
        err.contains("already exists") && err.contains("--force"),
        "{err}"
    );
    assert_eq!(fs::read(out.join("user-alice.pem")).unwrap(), before);

    // show.
    let node = ok(&["show", out.join("node-n1.pem").to_str().unwrap()]);
    for want in [
        "role:        node",
        "name:        n1",
        "DNS:n1",
        "DNS:n1.lab.example",
        "IP:10.0.0.5",
        "URI:rexec:node:n1",
        "(valid now)",
        "purposes:    server, client",
        "fingerprint: SHA256:",
        "rexec cluster CA lab",
    ] {
        assert!(node.contains(want), "missing {want:?} in\n{node}");
    }
    let user = ok(&["show", out.join("user-alice.pem").to_str().unwrap()]);
    assert!(
        user.contains("role:        user") && user.contains("name:        alice"),
        "{user}"
    );
    assert!(user.contains("purposes:    client\n"), "{user}");
    assert!(!user.contains("DNS:"), "{user}");
    let ca_show = ok(&["show", ca.join("ca.pem").to_str().unwrap()]);
    assert!(ca_show.contains("certificate authority"), "{ca_show}");
    let err = fails(&["show", tmp.path().join("none.pem").to_str().unwrap()]);
    assert!(err.contains("does not exist"), "{err}");

    // The issued material works for real configs.
    let alice = TlsPaths::in_dirs(&ca, &out, Role::User, "alice");
    certs::client_config(&alice).unwrap();
    certs::server_config(&TlsPaths::in_dirs(&ca, &out, Role::Node, "n1")).unwrap();

    // revoke.
    let said = ok(&[
        "revoke",
        "--dir",
        ca_s,
        out.join("user-alice.pem").to_str().unwrap(),
    ]);
    assert!(said.contains("revoked user alice"), "{said}");
    let state = fs::read_to_string(ca.join("crl.state")).unwrap();
    assert!(
        state.contains("user:alice") && state.contains("number 2"),
        "{state}"
    );
    let err = certs::client_config(&alice).unwrap_err();
    assert!(matches!(err, CertError::Revoked { .. }), "{err}");
    let crl = ok(&["show", ca.join("crl.pem").to_str().unwrap()]);
    assert!(
        crl.contains("revocation list number 2") && crl.contains("revoked:     1"),
        "{crl}"
    );
    // Revoking twice is harmless and keeps one entry.
    ok(&[
        "revoke",
        "--dir",
        ca_s,
        out.join("user-alice.pem").to_str().unwrap(),
    ]);
    let state = fs::read_to_string(ca.join("crl.state")).unwrap();
    assert_eq!(state.matches("user:alice").count(), 1, "{state}");
    // Others are unaffected.
    certs::client_config(&TlsPaths::in_dirs(&ca, &out, Role::Admin, "ops")).unwrap();
    // A certificate from another CA cannot be revoked here.
    let other = tmp.path().join("other");
    ok(&[
        "init",
        "--dir",
        other.to_str().unwrap(),
        "--cluster",
        "other",
    ]);
    ok(&["issue", "--dir", other.to_str().unwrap(), "user", "eve"]);
    let err = fails(&[
        "revoke",
        "--dir",
        ca_s,
        other.join("user-eve.pem").to_str().unwrap(),
    ]);
    assert!(err.contains("not issued by the cluster CA"), "{err}");

    // --force replaces an issued pair.
    ok(&[
        "issue", "--dir", ca_s, "--out", out_s, "--force", "user", "alice",
    ]);
    assert_ne!(fs::read(out.join("user-alice.pem")).unwrap(), before);
    certs::client_config(&alice).unwrap();
}

#[test]
fn days_sets_the_validity_shown_and_absurd_values_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let ca = tmp.path().join("ca");
    let out = tmp.path().join("out");
    let (ca_s, out_s) = (ca.to_str().unwrap(), out.to_str().unwrap());
    ok(&["init", "--dir", ca_s, "--cluster", "lab"]);
    let ca_done = unix_now();
    let backdate = i64::try_from(certs::BACKDATE.as_secs()).unwrap();
    // Certificate times are whole seconds, and so are our clock readings taken around the
    // issuing process: allow one second of rounding either way.
    let slack = 1;

    // A client role and a server role with --days 30, an admin with the default (365).
    for (what, days) in [
        (&["user", "alice"][..], Some(30)),
        (&["node", "n1"][..], Some(30)),
        (&["admin", "ops"][..], None),
    ] {
        let mut args = vec!["issue", "--dir", ca_s, "--out", out_s];
        let days_arg = days.map(|d: i64| d.to_string());
        if let Some(d) = &days_arg {
            args.extend(["--days", d.as_str()]);
        }
        args.extend(what);
        let days = days.unwrap_or(365);
        let before = unix_now();
        let said = ok(&args);
        let after = unix_now();
        assert!(said.contains(&format!("valid {days} days")), "{said}");

        let pem = out.join(format!("{}-{}.pem", what[0], what[1]));
        let show = ok(&["show", pem.to_str().unwrap()]);
        let info = certs::CertInfo::load(&pem).unwrap();
        let (not_before, not_after) = (info.not_before, info.not_after);
        // `show` prints the signed times, as `date` (not our code) writes them in UTC.
        let line = |label: &str| {
            show.lines()
                .find(|l| l.starts_with(label))
                .unwrap_or_else(|| panic!("no {label:?} line in\n{show}"))
                .to_string()
        };
        assert_eq!(
            line("not before:"),
            format!("not before:  {}", utc_by_date(not_before))
        );
        assert_eq!(
            line("not after:"),
            format!("not after:   {} (valid now)", utc_by_date(not_after))
        );
        // Valid from BACKDATE before issue to exactly `days` days after it.
        assert!(
            (before - backdate - slack..=after - backdate + slack).contains(&not_before),
            "{what:?}: not before {not_before} outside {before}..={after} minus {backdate} s\n{show}"
        );
        assert!(
            (before + days * DAY - slack..=after + days * DAY + slack).contains(&not_after),
            "{what:?}: not after {not_after} is not {days} days after {before}..={after}\n{show}"
        );
        assert!(
            (not_after - not_before - (days * DAY + backdate)).abs() <= slack,
            "{what:?}: span {} s, want {days} days plus {backdate} s\n{show}",
            not_after - not_before
        );
        assert!(show.contains("(valid now)"), "{show}");
    }

    // Absurd values are refused by the library's rule, in one line, writing nothing: not
    // the output directory, not a file in the CA directory.
    let refused = tmp.path().join("refused");
    let ca_files = snapshot(&ca);
    let (over, huge) = ((certs::MAX_DAYS + 1).to_string(), u32::MAX.to_string());
    for days in ["0", over.as_str(), huge.as_str()] {
        let err = fails(&[
            "issue",
            "--dir",
            ca_s,
            "--out",
            refused.to_str().unwrap(),
            "--days",
            days,
            "user",
            "bob",
        ]);
        assert!(
            err.contains(&format!(
                "invalid validity: --days must be between 1 and {}, not {days}",
                certs::MAX_DAYS
            )),
            "{err}"
        );
        assert!(!refused.exists(), "--days {days} created {refused:?}");
        assert_eq!(
            snapshot(&ca),
            ca_files,
            "--days {days} changed the CA directory"
        );
    }
    // Values that are not a u32 at all are clap usage errors (with its usual hints).
    for days in ["-1", "4294967296", "thirty"] {
        let usage = rexec_certs(&[
            "issue",
            "--dir",
            ca_s,
            "--out",
            refused.to_str().unwrap(),
            &format!("--days={days}"),
            "user",
            "bob",
        ]);
        assert_eq!(usage.status.code(), Some(2), "--days {days}");
        let err = String::from_utf8_lossy(&usage.stderr);
        assert!(
            err.lines()
                .next()
                .unwrap_or("")
                .contains(&format!("invalid value '{days}' for '--days <DAYS>'")),
            "{err}"
        );
        assert!(!refused.exists(), "--days {days} created {refused:?}");
    }
    // Validity is also capped by the CA's own end: once a second has passed since the CA
    // was made, a certificate for the CA's whole life would outlive it.
    while unix_now() <= ca_done {
        std::thread::sleep(Duration::from_millis(100));
    }
    let err = fails(&[
        "issue",
        "--dir",
        ca_s,
        "--out",
        refused.to_str().unwrap(),
        "--days",
        &certs::CA_DAYS.to_string(),
        "user",
        "bob",
    ]);
    assert!(
        err.contains("invalid validity: the CA itself expires on")
            && err.contains(&format!("use --days {} or less", certs::CA_DAYS - 1)),
        "{err}"
    );
    assert!(!refused.exists());
    assert_eq!(snapshot(&ca), ca_files);
}

#[test]
fn key_permissions_are_checked() {
    let tmp = tempfile::tempdir().unwrap();
    let ca = tmp.path().join("ca");
    let ca_s = ca.to_str().unwrap();
    ok(&["init", "--dir", ca_s, "--cluster", "lab"]);
    let key = ca.join("ca.key");
    fs::set_permissions(&key, fs::Permissions::from_mode(0o644)).unwrap();
    let err = fails(&["issue", "--dir", ca_s, "user", "alice"]);
    assert!(
        err.contains(&format!("chmod 600 {}", key.display())),
        "{err}"
    );
    assert!(!ca.join("user-alice.pem").exists());
    fs::set_permissions(&key, fs::Permissions::from_mode(0o600)).unwrap();
    ok(&["issue", "--dir", ca_s, "user", "alice"]);
    // Issue without --dir says how to name the CA.
    let err = fails(&["issue", "user", "bob"]);
    assert!(err.contains("--dir"), "{err}");
}

#[test]
fn concurrent_revocations_from_several_processes_are_all_kept() {
    let tmp = tempfile::tempdir().unwrap();
    let ca = tmp.path().join("ca");
    let out = tmp.path().join("out");
    let (ca_s, out_s) = (ca.to_str().unwrap(), out.to_str().unwrap());
    ok(&["init", "--dir", ca_s, "--cluster", "lab"]);
    let users: Vec<String> = (0..12).map(|i| format!("u{i}")).collect();
    for u in &users {
        ok(&["issue", "--dir", ca_s, "--out", out_s, "user", u]);
    }
    // Start every revocation before waiting for any, so they overlap.
    let children: Vec<_> = users
        .iter()
        .map(|u| {
            Command::new(env!("CARGO_BIN_EXE_rexec-certs"))
                .args(["revoke", "--dir", ca_s])
                .arg(out.join(format!("user-{u}.pem")))
                .env_remove("REXEC_CA_DIR")
                .stdout(std::process::Stdio::null())
                .spawn()
                .expect("run rexec-certs")
        })
        .collect();
    for mut child in children {
        assert!(child.wait().unwrap().success());
    }
    let state = fs::read_to_string(ca.join("crl.state")).unwrap();
    for u in &users {
        assert_eq!(state.matches(&format!("user:{u}\n")).count(), 1, "{state}");
    }
    // One CRL number per change: init's, then one per revocation.
    assert!(
        state.contains(&format!("number {}", 1 + users.len())),
        "{state}"
    );
    for u in &users {
        let paths = TlsPaths::in_dirs(&ca, &out, Role::User, u);
        let err = certs::client_config(&paths).unwrap_err();
        assert!(matches!(err, CertError::Revoked { .. }), "{u}: {err}");
    }
}

#[test]
fn a_revocation_by_a_replaced_ca_is_refused_and_signs_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("ca");
    let old = certs::Ca::init(&dir, "lab", false).unwrap();
    let issued = old.issue(Role::User, "alice", &[], 30, tmp.path()).unwrap();
    // Another admin replaces the CA while this one still holds the old one.
    certs::Ca::init(&dir, "lab", true).unwrap();
    let crl_before = fs::read(dir.join("crl.pem")).unwrap();
    let err = old.revoke(&issued.cert).unwrap_err().to_string();
    assert!(err.contains("the CA was replaced"), "{err}");
    assert_eq!(fs::read(dir.join("crl.pem")).unwrap(), crl_before);
    // The new CA's list is intact and loads.
    let new = certs::Ca::load(&dir).unwrap();
    assert!(new.crl_state().unwrap().revoked.is_empty());
}

#[test]
fn user_kit_hands_a_user_her_files_owned_by_her() {
    use std::os::unix::fs::MetadataExt;
    let tmp = tempfile::tempdir().unwrap();
    let ca = tmp.path().join("ca");
    let ca_s = ca.to_str().unwrap();
    let said = ok(&["init", "--dir", ca_s, "--cluster", "lab"]);
    assert!(said.contains("cluster = \"lab\""), "{said}");
    let template = tmp.path().join("client.toml");
    fs::write(
        &template,
        "ca = \"/etc/rexec/ca.pem\"\nkey = \"/old.key\"\nmax_rate = \"10\"\n\n[selectors]\nvexecd1 = \"10.0.0.5:7478\"\n\n[accountd]\naddress = \"10.0.0.9:7071\"\n",
    )
    .unwrap();
    let kit = tmp.path().join("kit");
    let kit_s = kit.to_str().unwrap();
    // Root can give the files away; anyone else makes a kit of their own.
    let root = nix::unistd::geteuid().is_root();
    let mut args = vec!["user-kit", "--dir", ca_s, "alice", "--config"];
    args.extend([template.to_str().unwrap(), "--out", kit_s]);
    if root {
        args.extend(["--owner", "nobody"]);
    }
    ok(&args);
    assert_eq!(mode(&kit), 0o700);
    assert_eq!(mode(&kit.join("user-alice.key")), 0o600);
    for f in ["user-alice.pem", "ca.pem", "crl.pem", "config.toml"] {
        assert_eq!(mode(&kit.join(f)), 0o644, "{f}");
    }
    assert_eq!(
        fs::read(kit.join("ca.pem")).unwrap(),
        fs::read(ca.join("ca.pem")).unwrap()
    );
    if root {
        let nobody = nix::unistd::User::from_name("nobody").unwrap().unwrap();
        for f in [
            "",
            "user-alice.pem",
            "user-alice.key",
            "ca.pem",
            "crl.pem",
            "config.toml",
        ] {
            let meta = fs::metadata(kit.join(f)).unwrap();
            assert_eq!(meta.uid(), nobody.uid.as_raw(), "owner of {f:?}");
            assert_eq!(meta.gid(), nobody.gid.as_raw(), "group of {f:?}");
        }
    }
    // The CA keeps a copy for revoke.
    assert_eq!(
        fs::read(ca.join("user-alice.pem")).unwrap(),
        fs::read(kit.join("user-alice.pem")).unwrap()
    );
    let shown = ok(&["show", kit.join("user-alice.pem").to_str().unwrap()]);
    assert!(shown.contains("user") && shown.contains("alice"), "{shown}");
    // The config names the kit's files, relative to itself, and keeps the rest.
    let config = fs::read_to_string(kit.join("config.toml")).unwrap();
    for line in [
        "ca = \"ca.pem\"",
        "cert = \"user-alice.pem\"",
        "key = \"user-alice.key\"",
        "crl = \"crl.pem\"",
        "max_rate = \"10\"",
        "[selectors]\nvexecd1 = \"10.0.0.5:7478\"",
        "[accountd]\naddress = \"10.0.0.9:7071\"",
    ] {
        assert!(config.contains(line), "no {line:?} in:\n{config}");
    }
    assert!(
        !config.contains("/etc/rexec/ca.pem") && !config.contains("/old.key"),
        "{config}"
    );
    // The kit's files load together as a client's TLS files.
    certs::client_config(&TlsPaths {
        ca: kit.join("ca.pem"),
        cert: kit.join("user-alice.pem"),
        key: kit.join("user-alice.key"),
        crl: Some(kit.join("crl.pem")),
    })
    .expect("the kit's files make a client config");

    // A second kit is refused without --force, and changes nothing.
    let before = snapshot(&kit);
    let err = fails(&["user-kit", "--dir", ca_s, "alice", "--out", kit_s]);
    assert!(err.contains("--force"), "{err}");
    assert_eq!(snapshot(&kit), before);
    ok(&[
        "user-kit", "--dir", ca_s, "alice", "--out", kit_s, "--force",
    ]);
    assert_ne!(fs::read(kit.join("user-alice.key")).unwrap(), before[3].1);

    assert_eq!(
        fs::read(ca.join("user-alice.pem")).unwrap(),
        fs::read(kit.join("user-alice.pem")).unwrap(),
        "the CA's copy is the new certificate"
    );
    ok(&[
        "revoke",
        "--dir",
        ca_s,
        ca.join("user-alice.pem").to_str().unwrap(),
    ]);

    // Without --out the kit goes to the user's home, so she must exist.
    let err = fails(&["user-kit", "--dir", ca_s, "no-such-user-x"]);
    assert!(
        err.contains("no Unix user") && err.contains("--out"),
        "{err}"
    );
}
