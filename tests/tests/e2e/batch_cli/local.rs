//! What the client refuses before anything is sent, and a queue that cannot
//! be reached: no daemon runs here but the `rexec` binary.

use std::path::{Path, PathBuf};
use std::process::Command;

use certs::Role;
use certs::testing::TestPki;
use rexec_tests::cluster::bin;

use super::one_line_in;

/// The real `rexec` with `config`, and what it printed.
struct Ran {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

fn rexec(config: &Path, args: &[&str]) -> Ran {
    let out = Command::new(bin("rexec"))
        .env("REXEC_CONFIG", config)
        .env_remove("REXEC_CA")
        .env_remove("REXEC_CERT")
        .env_remove("REXEC_KEY")
        .env_remove("REXEC_CRL")
        .args(args)
        .output()
        .expect("cannot run rexec");
    Ran {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

impl std::fmt::Debug for Ran {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exit {:?}\nstdout: {}\nstderr: {}",
            self.code, self.stdout, self.stderr
        )
    }
}

/// Exactly one line on stderr, `rexec: ` first, holding `want`; nothing on stdout.
fn one_line(r: &Ran, code: i32, want: &str) {
    assert_eq!(r.code, Some(code), "{r:?}");
    one_line_in(&r.stderr, want);
    assert!(r.stdout.is_empty(), "{r:?}");
}

/// A client configuration for `role` `name` of `pki`, with `extra` appended.
fn config(pki: &TestPki, dir: &Path, role: Role, name: &str, extra: &str) -> PathBuf {
    let tls = pki.tls_paths(role, name);
    let text = format!(
        "ca = {:?}\ncert = {:?}\nkey = {:?}\nmax_rate = \"100\"\n{extra}",
        tls.ca, tls.cert, tls.key
    );
    let path = dir.join(format!("client-{role}-{name}.toml"));
    std::fs::write(&path, text).expect("cannot write the client config");
    path
}

/// A loopback port nobody listens on.
fn closed_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

#[test]
fn what_the_client_refuses_exits_2_in_one_line_before_anything_is_sent() {
    if !rexec_tests::can_run("what_the_client_refuses_exits_2_in_one_line_before_anything_is_sent")
    {
        return;
    }
    let pki = TestPki::new();
    let dir = tempfile::tempdir().unwrap();
    // The queue's address is a closed port: reaching for it would exit 255.
    let batch = format!("[batch]\naddress = \"127.0.0.1:{}\"\n", closed_port());
    let alice = config(&pki, dir.path(), Role::User, "alice", &batch);
    let submit = |extra: &[&str]| {
        let mut args = vec!["submit", "-n", "2", "--length", "2h"];
        args.extend_from_slice(extra);
        args.push("true");
        rexec(&alice, &args)
    };
    one_line(
        &submit(&["--utility", "0:50,2h:lots,6h:0"]),
        2,
        "--utility: breakpoint 2 `2h:lots`: `lots` is not an amount",
    );
    one_line(
        &submit(&["--utility", "0:50,6h:0,2h:10"]),
        2,
        "2h is not after the breakpoint before (6h)",
    );
    one_line(
        &submit(&["--value", "50", "--deadline", "1h"]),
        2,
        "--deadline 1h must be later than --length (2h)",
    );
    let file = dir.path().join("worth.txt");
    std::fs::write(&file, "# value\n0:50\n2h:fifty\n").unwrap();
    one_line(
        &submit(&["--utility", &format!("@{}", file.display())]),
        2,
        "breakpoint 2 `2h:fifty`",
    );
    // A bid over max_rate is the market's refusal, found here: 254.
    one_line(&submit(&["-r", "101"]), 254, "max_rate = 100");

    // Only a user can sign a job.
    let admin = config(&pki, dir.path(), Role::Admin, "root-admin", &batch);
    let r = rexec(&admin, &["submit", "--length", "1m", "true"]);
    one_line(&r, 2, "only a user certificate can sign a job");

    // No [batch] address and no selector to ask: say what to add.
    let nowhere = config(&pki, dir.path(), Role::User, "bob", "");
    let r = rexec(&nowhere, &["queue"]);
    one_line(&r, 2, "add [batch] address = \"host:port\"");
}

#[test]
fn a_queue_that_cannot_be_reached_exits_255_in_one_line() {
    if !rexec_tests::can_run("a_queue_that_cannot_be_reached_exits_255_in_one_line") {
        return;
    }
    let pki = TestPki::new();
    let dir = tempfile::tempdir().unwrap();
    let port = closed_port();
    let batch = format!("[batch]\naddress = \"127.0.0.1:{port}\"\n");
    let alice = config(&pki, dir.path(), Role::User, "alice", &batch);
    let at = format!("batchd at 127.0.0.1:{port}");
    let r = rexec(&alice, &["submit", "--length", "1m", "-r", "1", "true"]);
    one_line(&r, 255, &at);
    for args in [
        &["queue"][..],
        &["cancel", "00000000000000ab"],
        &["output", "ab"],
        &["wait", "ab"],
    ] {
        one_line(&rexec(&alice, args), 255, &at);
    }
    // A job id that is not one is a usage error, found first.
    one_line(&rexec(&alice, &["wait", "not-a-job"]), 2, "not-a-job");
}
