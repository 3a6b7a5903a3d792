//! The guide, `docs/OPERATIONS.md`, followed in order as a new admin would, on the
//! network-namespace hosts of its example cluster ([`Hosts`]): every command of its
//! `sh` blocks runs on the machines named by the "On `HOST`:" line before its block, or is
//! listed in [`NOT_RUN`] with what covers it. At the end a user's job has run through
//! the market and the ledger shows what it paid. The rules are written out in the
//! guide's section 14.
//! The commands are read by [`crate::steps`]. accountd in the
//! foreground (`... accountd ... --init`) runs until it is listening and is then
//! stopped with SIGINT; `systemctl` is played by the test from the installed unit, and
//! `scp HOST:PATH` copies between the hosts' roots ([`Hosts`]).

use std::collections::BTreeSet;
use std::fs;
use std::process::Output;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use crate::hosts::Hosts;
use crate::sandbox::{Daemon, Sandbox};
use crate::steps::{GuideCommand, NODES, commands, guide, systemctl};

/// Commands not run, by their first line, with where they are exercised instead.
const NOT_RUN: &[(&str, &str)] = &[
    (
        "bash deploy/setup-host                # as root: the Debian packages the build and the tests use",
        "installs Debian packages; deploy/check (CI) runs it before every test run",
    ),
    (
        "cargo build --release --locked --bins",
        "deploy/demo builds these release binaries and runs them; tests use target/debug",
    ),
    (
        "install -m 0755 target/release/rexec-certs target/release/rexecd target/release/accountd target/release/accountctl target/release/vexecd target/release/batchd target/release/rexec /usr/local/bin/",
        "would write the test machine's /usr/local/bin; the test links the built binaries into each host's own /usr/local/bin, which is on PATH and in the units' ExecStart=",
    ),
    (
        "rexec -v -r 2 -n 4 ./sim           # at the end, per node: ranks, CPU seconds, credits charged",
        "needs four nodes: e2e market_charges (rexec -v's per-node charges)",
    ),
    (
        "rexec bid 73ac5ab0222d7f27 5       # the job now bids 5 credits a minute on every node it runs on",
        "needs a running job: e2e market_checks and market_dry (rexec bid)",
    ),
    (
        "rexec jobs                         # one row per rank, then one per node; every node in [nodes]",
        "needs a running job: e2e admin::jobs_lists_a_running_job_and_kill_ends_it",
    ),
    (
        "rexec kill 73ac5ab0222d7f27        # SIGKILL to every rank of the job; -s TERM for another signal",
        "needs a running job: e2e admin::jobs_lists_a_running_job_and_kill_ends_it",
    ),
    (
        "rexec kill 73ac5ab0222d7f27 --nodes n1,n2",
        "needs a running job: e2e admin::jobs_lists_a_running_job_and_kill_ends_it",
    ),
];

/// What a command's standard output must contain, by the start of its first line.
/// Commands in [`RETRIED`] are run again until it does.
const EXPECT: &[(&str, &str)] = &[
    ("accountctl balance alice", "147.500000"),
    (
        "accountctl balance                 # nothing charged",
        "147.500000",
    ),
    ("accountctl audit", "audit passed"),
    ("accountctl whoami", "admin"),
    ("rexec-certs init", "cluster = \"mycluster\""),
    (
        "rexec-certs show /etc/rexec/ca/service-vexecd1.pem",
        "vexecd1",
    ),
    ("rexec nodes", "n2"),
    ("rexec -v -r 2 -n 2 hostname", "\n"),
    ("runuser -u rexec-accounts -- sqlite3 -readonly", "ok"),
];

/// Commands run again (every 250 ms, 40 times at most) until they succeed and print
/// what [`EXPECT`] says: `useradd` takes a lock other test processes may hold for a
/// moment, and a selector knows a node from its first announcement on (the guide says
/// the list fills within one announcement period).
const RETRIED: &[&str] = &["useradd", "rexec nodes"];

/// The command after which alice's jobs have competed: the ledger must show charges by
/// both nodes.
const COMPETING_JOBS: &str = "busy=";

/// accountd's line once it serves.
const LISTENING: &str = "accountd listening";

/// Runs `text` on `sandbox` (as alice when `as_user`), again as [`RETRIED`] says;
/// panics with what it printed when it fails.
fn run(sandbox: &Sandbox, cmd: &GuideCommand, text: &str, want: Option<&str>) -> Output {
    let retried = RETRIED.iter().any(|r| cmd.first_line().contains(r));
    let tries = if retried { 40 } else { 1 };
    let mut last = None;
    for _ in 0..tries {
        let mut sh = if cmd.as_user {
            sandbox.user_shell(text)
        } else {
            sandbox.shell(text)
        };
        let out = sh
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("OPERATIONS.md:{}: cannot run sh: {e}", cmd.line));
        let printed = want.is_none_or(|w| String::from_utf8_lossy(&out.stdout).contains(w));
        if out.status.success() && printed {
            return out;
        }
        last = Some(out);
        std::thread::sleep(Duration::from_millis(250));
    }
    let out = last.unwrap();
    panic!(
        "OPERATIONS.md:{}: {}\nran as: {text}\nexit: {:?}\nstdout (wanted {want:?}):\n{}\nstderr:\n{}",
        cmd.line,
        cmd.text,
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// After alice's competing jobs: the ledger, read by the admin, shows charges by both
/// nodes (they land at each rank's end, a moment after the client exits), and her
/// balance went down.
fn ledger_shows_the_charges(hosts: &Hosts) {
    let admin = hosts.host("admin");
    let report = || {
        let out = admin
            .shell("accountctl report --by node --csv")
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let charged = rexec_tests::wait_until(Duration::from_secs(30), || {
        let r = report();
        NODES
            .iter()
            .all(|n| r.lines().any(|l| l.starts_with(&format!("{n},"))))
    });
    assert!(
        charged.is_some(),
        "no charges by both nodes in the ledger:\n{}\n{}",
        report(),
        hosts.logs()
    );
    let out = admin
        .shell(&admin.rewrite("accountctl balance alice"))
        .output()
        .unwrap();
    let balance = String::from_utf8_lossy(&out.stdout).into_owned();
    let credits: f64 = balance
        .split_whitespace()
        .find_map(|w| w.parse().ok())
        .unwrap_or_else(|| panic!("no balance in {balance:?}"));
    assert!(credits < 147.0, "alice paid nothing: balance {balance}");
    eprintln!(
        "the ledger after alice's competing jobs:\n{}balance: {balance}",
        report()
    );
}

/// Every `Documentation=file://PATH` of the units installed on `host` (PATH already in
/// the host's root, as the sandbox installs rewritten units) names a file the guide
/// installed there.
fn documentation_is_installed(hosts: &Hosts, host: &str) {
    let sandbox = hosts.host(host);
    for unit in crate::units::UNITS {
        let path = sandbox.path(&format!("/etc/systemd/system/{unit}"));
        let text = fs::read_to_string(&path).unwrap();
        for doc in text
            .lines()
            .filter_map(|l| l.strip_prefix("Documentation="))
        {
            let file = doc
                .strip_prefix("file://")
                .unwrap_or_else(|| panic!("{unit}: Documentation={doc} is not a file"));
            assert!(
                std::path::Path::new(file).is_file(),
                "{unit} on {host}: Documentation= names {file}, which the guide does not install"
            );
        }
    }
}

#[test]
fn the_guide_runs_in_order_on_its_hosts() {
    if !rexec_tests::can_run("the_guide_runs_in_order_on_its_hosts")
        || !crate::have_systemd_analyze("the_guide_runs_in_order_on_its_hosts")
    {
        return;
    }
    let started = Instant::now();
    let mut hosts = Hosts::new();
    let cmds = commands(&guide());
    let mut listed = BTreeSet::new();
    let mut expected = BTreeSet::new();
    let mut charged = false;
    let mut ran = 0;
    for cmd in &cmds {
        let first = cmd.first_line();
        if NOT_RUN.iter().any(|(c, _)| *c == first) {
            listed.insert(first.to_string());
            continue;
        }
        for host in &cmd.hosts {
            let at = format!("OPERATIONS.md:{} on {host}: {first}", cmd.line);
            let sandbox = hosts.host(host);
            let text = cmd.on(host);
            if let Some(steps) = systemctl(&text) {
                for (verb, unit) in steps {
                    hosts.systemctl(host, verb, &unit);
                }
            } else if text.starts_with("scp ") {
                let cp = hosts.scp(host, &text);
                run(sandbox, cmd, &cp, None);
            } else if text.contains("accountd ") && text.contains("--init") {
                let daemon = Daemon::shell(sandbox, &sandbox.rewrite(&text), LISTENING);
                let (log, status) = daemon.stop(Signal::SIGINT);
                assert!(status.success(), "{at}: exit {status} after Ctrl-C:\n{log}");
            } else {
                let want = EXPECT.iter().find(|(c, _)| first.starts_with(c));
                let out = run(sandbox, cmd, &sandbox.rewrite(&text), want.map(|w| w.1));
                if let Some((c, _)) = want {
                    expected.insert(*c);
                }
                if first.starts_with("systemd-analyze verify") {
                    let said = format!(
                        "{}{}",
                        String::from_utf8_lossy(&out.stdout),
                        String::from_utf8_lossy(&out.stderr)
                    );
                    assert!(
                        said.trim().is_empty(),
                        "{at}: the units are not clean:\n{said}"
                    );
                }
                if first.starts_with(COMPETING_JOBS) {
                    ledger_shows_the_charges(&hosts);
                    charged = true;
                }
            }
            ran += 1;
        }
    }
    hosts.stop_all();
    let stale: Vec<&str> = NOT_RUN
        .iter()
        .map(|(c, _)| *c)
        .filter(|c| !listed.contains(*c))
        .collect();
    assert!(
        stale.is_empty(),
        "listed as not run but no longer in OPERATIONS.md: {stale:#?}"
    );
    let unchecked: Vec<&str> = EXPECT
        .iter()
        .map(|(c, _)| *c)
        .filter(|c| !expected.contains(c))
        .collect();
    assert!(
        unchecked.is_empty(),
        "expected output of commands no longer in OPERATIONS.md: {unchecked:#?}"
    );
    assert!(
        charged,
        "the guide no longer has alice's competing jobs ({COMPETING_JOBS}...)"
    );
    // The guide's hosts really hold what the commands made.
    for host in ["ledger", "selector", "n1", "n2"] {
        documentation_is_installed(&hosts, host);
    }
    let ledger = hosts.root("ledger").join("var/lib/rexec/ledger.db");
    assert!(
        ledger.exists(),
        "no restored ledger at {}",
        ledger.display()
    );
    // Section 15: the queue started from the installed unit as its own user, with
    // the key the guide gave it, and made its queue file.
    let queue = hosts.root("ledger").join("var/lib/rexec-batch/queue.db");
    assert!(
        queue.exists(),
        "batchd made no queue at {}: section 15 did not run",
        queue.display()
    );
    assert!(
        ran >= 60,
        "only {ran} commands ran: is the parser still finding them?"
    );
    eprintln!(
        "{ran} commands of OPERATIONS.md ran on their hosts, {} are listed as covered elsewhere, in {:.1} s",
        listed.len(),
        started.elapsed().as_secs_f64()
    );
}
