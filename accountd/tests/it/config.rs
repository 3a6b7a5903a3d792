//! Configuration files: accountd from its TOML file alone, accountctl from
//! `~/.config/rexec/config.toml` alone, and one-line errors for bad files.

use std::process::Command;

use certs::Role;
use certs::testing::TestPki;

use crate::support::*;

#[test]
fn both_programs_run_from_their_config_files_alone() {
    let pki = TestPki::new();
    let dir = tempfile::tempdir().unwrap();
    let srv = pki.tls_paths(Role::Service, "accountd");
    let ready = dir.path().join("ready");
    let toml = format!(
        "listen = \"127.0.0.1:0\"\ndatabase = {:?}\nready_file = {:?}\nca = {:?}\ncert = {:?}\nkey = {:?}\n\n[limits]\nmax_entry = \"50\"\nmax_batch = 64\n",
        dir.path().join("ledger.db"),
        ready,
        srv.ca,
        srv.cert,
        srv.key
    );
    let conf = dir.path().join("accountd.toml");
    std::fs::write(&conf, toml).unwrap();
    let (mut child, addr) = start_from_config(&conf, &ready);

    let admin = pki.tls_paths(Role::Admin, "ops");
    let home = dir.path().join("home");
    std::fs::create_dir_all(home.join(".config/rexec")).unwrap();
    // The client config, naming accountd by `address` (TOML).
    let client_config = |address: &str| {
        std::fs::write(
            home.join(".config/rexec/config.toml"),
            format!(
                "ca = {:?}\ncert = {:?}\nkey = {:?}\n\n[accountd]\naddress = {address}\n\n[nodes]\nn1 = \"127.0.0.1:7001\"\n",
                admin.ca, admin.cert, admin.key
            ),
        )
        .unwrap()
    };
    client_config(&format!("{addr:?}"));
    let run = |args: &[&str]| isolated_ctl(&home).args(args).output().unwrap();
    let out = run(&["create", "alice", "--initial", "7.25"]);
    assert!(out.status.success(), "{out:?}");
    let out = run(&["grant", "alice", "51", "--reason", "too much"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("per-entry limit of 50.000000"),
        "{out:?}"
    );
    let out = run(&["balance", "alice"]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "alice 7.250000\n");

    // Several instances listed, the first dead: the next one answers, silently.
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead_addr = dead.local_addr().unwrap().to_string();
    drop(dead);
    client_config(&format!("[{dead_addr:?}, {addr:?}]"));
    let out = run(&["balance", "alice"]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "alice 7.250000\n",
        "{out:?}"
    );
    assert!(out.stderr.is_empty(), "{out:?}");

    // An explicit config file that does not exist is an error; so is a bad key.
    let out = run(&["--config", "/nonexistent/rexec.toml", "balance"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("/nonexistent/rexec.toml"),
        "{out:?}"
    );
    Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(child.wait().unwrap().success());

    std::fs::write(&conf, "listen = \"127.0.0.1:0\"\nmax_batch = 3\n").unwrap();
    let out = Command::new(ACCOUNTD)
        .arg("--config")
        .arg(&conf)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("accountd.toml is invalid") && err.contains("max_batch"),
        "{err}"
    );
}
