//! The command lines of the real `rexec` and `rexec-agent` binaries that need no
//! daemon: an option rexec does not know, before the program, is a usage error naming
//! it (exit 2) for the run form and every other form, never taken for the program;
//! words after the program, and a program after `--`, are the program's; and
//! `rexec-agent --help` is usage text, exit 0.
//!
//! The client file points at loopback ports nobody listens on, so a line that gets
//! past the command line tries to reach a node or the queue and exits 255: that is
//! how "taken for the program" shows without a cluster.

use std::path::{Path, PathBuf};
use std::process::Command;

use certs::Role;
use certs::testing::TestPki;

/// What a binary did.
struct Ran {
    code: Option<i32>,
    stdout: String,
    stderr: String,
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

fn run(binary: &str, config: &Path, args: &[&str]) -> Ran {
    let out = Command::new(binary)
        .env("REXEC_CONFIG", config)
        .env_remove("REXEC_CA")
        .env_remove("REXEC_CERT")
        .env_remove("REXEC_KEY")
        .env_remove("REXEC_CRL")
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {binary}: {e}"));
    Ran {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn rexec(config: &Path, args: &[&str]) -> Ran {
    run(env!("CARGO_BIN_EXE_rexec"), config, args)
}

/// A loopback port nobody listens on.
fn closed_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

/// A user's client file whose node n1 and queue are closed ports.
fn config(pki: &TestPki, dir: &Path) -> PathBuf {
    let tls = pki.tls_paths(Role::User, "alice");
    let text = format!(
        "ca = {:?}\ncert = {:?}\nkey = {:?}\nmax_rate = \"100\"\n\
         [nodes]\nn1 = \"127.0.0.1:{}\"\n[batch]\naddress = \"127.0.0.1:{}\"\n",
        tls.ca,
        tls.cert,
        tls.key,
        closed_port(),
        closed_port()
    );
    let path = dir.join("client.toml");
    std::fs::write(&path, text).expect("cannot write the client file");
    path
}

#[test]
fn unknown_options_before_the_program_exit_2_naming_them_and_run_nothing() {
    let pki = TestPki::new();
    let dir = tempfile::tempdir().unwrap();
    let config = config(&pki, dir.path());
    let lines: [&[&str]; 17] = [
        // The issue's three: a job queued that fails three times, a complaint about
        // the wrong option, a program named --bogus run on a node.
        &["submit", "--length", "10s", "--bogus", "/bin/true"],
        &["submit", "--bogus", "--length", "10s", "/bin/true"],
        &["--bogus", "hostname"],
        &["-n", "1", "--bogus", "hostname"],
        &["--bogus=3", "hostname"],
        &["-lx", "hostname"],
        &["queue", "--bogus"],
        &["cancel", "--bogus", "00000000000000ab"],
        &["output", "--bogus", "00000000000000ab"],
        &["wait", "--bogus", "00000000000000ab"],
        &["nodes", "--bogus"],
        &["jobs", "--bogus"],
        &["kill", "--bogus", "00000000000000ab"],
        &["stats", "--bogus"],
        &["bid", "--bogus", "00000000000000ab", "2"],
        &["bid", "00000000000000ab", "--bogus"],
        &["submit", "--length", "10s", "-r", "--bogus", "/bin/true"],
    ];
    for args in lines {
        let r = rexec(&config, args);
        let option = args
            .iter()
            .find(|a| a.starts_with("--bogus") || **a == "-lx")
            .map(|a| if *a == "-lx" { "-x" } else { "--bogus" })
            .unwrap();
        assert_eq!(r.code, Some(2), "{args:?}: {r:?}");
        assert_eq!(r.stderr.lines().count(), 1, "{args:?}: one line: {r:?}");
        assert!(
            r.stderr
                .starts_with(&format!("rexec: unknown option {option}")),
            "{args:?}: {r:?}"
        );
        assert!(r.stdout.is_empty(), "{args:?}: {r:?}");
    }
    // The program's options and the words after `--` are the program's: these lines
    // get past the command line and reach for the closed node or queue (255).
    for args in [
        &["hostname", "--bogus"][..],
        &["ls", "-l", "--nodes", "n9"],
        &["-l", "--", "-weird-prog"],
        &["-r", "-0", "--", "--bogus"],
        &["submit", "--length", "10s", "/bin/true", "--bogus"],
        &["submit", "--length", "10s", "--", "-weird-prog"],
    ] {
        let r = rexec(&config, args);
        assert_eq!(r.code, Some(255), "{args:?}: {r:?}");
        assert!(!r.stderr.contains("unknown option"), "{args:?}: {r:?}");
    }
    // Negative numbers are still values: the market's refusal of a negative bid (254).
    let r = rexec(&config, &["-r", "-1", "true"]);
    assert_eq!(r.code, Some(254), "{r:?}");
    let r = rexec(&config, &["submit", "--length", "1m", "-r", "-1", "true"]);
    assert_eq!(r.code, Some(254), "{r:?}");
}

#[test]
fn rexec_agent_help_is_usage_text_and_a_bad_line_says_how_to_call_it() {
    let agent = env!("CARGO_BIN_EXE_rexec-agent");
    let nowhere = Path::new("/nonexistent/client.toml");
    for help in ["--help", "-h"] {
        let r = run(agent, nowhere, &[help]);
        assert_eq!(r.code, Some(0), "{help}: {r:?}");
        assert!(r.stderr.is_empty(), "{help}: {r:?}");
        assert!(
            r.stdout
                .starts_with("usage: rexec-agent [ssh options] HOST COMMAND"),
            "{help}: {r:?}"
        );
        assert!(r.stdout.contains("REXEC_RATE"), "{help}: {r:?}");
    }
    // As ssh: an unknown option exits 255, and says how the agent is called.
    let r = run(agent, nowhere, &["-Z", "n1", "true"]);
    assert_eq!(r.code, Some(255), "{r:?}");
    assert!(r.stderr.contains("unknown ssh option -Z"), "{r:?}");
    assert!(r.stderr.contains("usage: rexec-agent"), "{r:?}");
}
