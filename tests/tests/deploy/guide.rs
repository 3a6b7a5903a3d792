//! Every command in the `sh` blocks of `docs/OPERATIONS.md`, run for real in a
//! [`Sandbox`] in the order of the guide, or listed in [`NOT_RUN`] with what covers it.
//! The rules are written out in the guide's section 12.
//!
//! A command is one line of a block (with the lines of a here-document, up to `EOF`,
//! when it ends in `<<'EOF'`); lines starting with `#` are comments. accountd in the
//! foreground (`... accountd ... --init`) runs until it is listening and is then
//! stopped with SIGINT; `systemctl` for accountd is played by the test from the
//! installed unit ([`Daemon::unit`]).

use std::collections::BTreeSet;
use std::fs;
use std::process::Output;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use crate::sandbox::{Daemon, Sandbox};

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
        "install -m 0755 target/release/rexec-certs target/release/rexecd target/release/accountd target/release/accountctl target/release/vexecd target/release/rexec /usr/local/bin/",
        "would write the test machine's /usr/local/bin; the test puts target/debug on PATH and in the units' ExecStart= instead",
    ),
    (
        "systemctl daemon-reload && systemctl enable --now rexecd",
        "needs systemd as init; rexecd with a [market] table is started by the e2e market_* tests and by deploy/demo, and the unit by units::every_shipped_unit_passes_systemd_analyze_verify",
    ),
    (
        "systemctl daemon-reload && systemctl enable --now vexecd",
        "needs systemd as init; the real vexecd is started from its config by vexecd's daemon tests (vexecd/tests/daemon) and by deploy/demo",
    ),
    (
        "id -u alice >/dev/null 2>&1 || useradd --create-home alice",
        "would add a login account to the test machine; the e2e tests run jobs as the test user testhost::user creates",
    ),
    (
        "rexec nodes                        # the nodes a selector knows, with their CPUs and prices",
        "needs nodes and selectors: e2e select.rs, deploy/demo step 1",
    ),
    (
        "rexec -v -r 2 -n 2 hostname        # two nodes chosen by price, bidding 2 credits a minute on each",
        "needs nodes and selectors: deploy/demo step 1 (rexec -r 2 -n 2 through vexecd), e2e select::jobs_go_to_selected_nodes_and_survive_a_dead_selector_silently",
    ),
    (
        "accountctl balance                 # what the market charged her so far",
        "as alice with her certificate: e2e market tests read users' balances; deploy/demo step 3",
    ),
    (
        "rexec -v -r 2 -n 4 ./sim           # at the end, per node: ranks, CPU seconds, credits charged",
        "needs nodes: e2e market_charges (rexec -v's per-node charges)",
    ),
    (
        "rexec bid 73ac5ab0222d7f27 5       # the job now bids 5 credits a minute on every node it runs on",
        "needs a running job: e2e market_checks and market_dry (rexec bid)",
    ),
    (
        "systemctl reload rexecd     # or kill -HUP PID for a rexecd started by hand",
        "needs systemd as init: e2e revocation::sighup_makes_rexecd_refuse_a_revoked_user_without_touching_running_jobs",
    ),
    (
        "systemctl reload vexecd",
        "needs systemd as init; vexecd reloads through certs::reload_on_sighup, as accountd does in this test",
    ),
    (
        "rexec jobs                         # one row per rank, then one per node; every node in [nodes]",
        "needs nodes: e2e admin::jobs_lists_a_running_job_and_kill_ends_it",
    ),
    (
        "rexec kill 73ac5ab0222d7f27        # SIGKILL to every rank of the job; -s TERM for another signal",
        "needs nodes: e2e admin::jobs_lists_a_running_job_and_kill_ends_it",
    ),
    (
        "rexec kill 73ac5ab0222d7f27 --nodes n1,n2",
        "needs nodes: e2e admin::jobs_lists_a_running_job_and_kill_ends_it",
    ),
];

/// What a command's standard output must contain, by the start of its first line.
const EXPECT: &[(&str, &str)] = &[
    ("accountctl balance alice", "147.500000"),
    ("accountctl audit", "audit passed"),
    ("accountctl whoami", "admin"),
    (
        "rexec-certs show /etc/rexec/ca/service-vexecd1.pem",
        "vexecd1",
    ),
    ("runuser -u rexec-accounts -- sqlite3 -readonly", "ok"),
];

/// accountd's line once it serves, and after a reload.
const LISTENING: &str = "accountd listening";
const RELOADED: &str = "reloaded the TLS configuration";

/// One command of the guide.
#[derive(Debug, Clone)]
pub struct GuideCommand {
    /// Line number of its first line.
    pub line: usize,
    /// The command, here-document included.
    pub text: String,
}

impl GuideCommand {
    fn first_line(&self) -> &str {
        self.text.lines().next().unwrap_or("").trim()
    }
}

/// The commands of every ```` ```sh ```` block, in order.
pub fn commands(markdown: &str) -> Vec<GuideCommand> {
    let mut out = Vec::new();
    let mut in_sh = false;
    let mut heredoc: Option<GuideCommand> = None;
    for (i, raw) in markdown.lines().enumerate() {
        let line = raw.trim_end();
        if let Some(cmd) = heredoc.as_mut() {
            cmd.text.push('\n');
            cmd.text.push_str(line);
            if line.trim() == "EOF" {
                out.push(heredoc.take().unwrap());
            }
            continue;
        }
        let fence = line.trim_start();
        if !in_sh {
            in_sh = fence == "```sh";
            continue;
        }
        if fence.starts_with("```") {
            in_sh = false;
            continue;
        }
        let text = line.trim();
        if text.is_empty() || text.starts_with('#') {
            continue;
        }
        let cmd = GuideCommand {
            line: i + 1,
            text: text.to_string(),
        };
        if text.ends_with("<<'EOF'") || text.ends_with("<<EOF") {
            heredoc = Some(cmd);
        } else {
            out.push(cmd);
        }
    }
    assert!(
        heredoc.is_none(),
        "a here-document in OPERATIONS.md has no EOF"
    );
    assert!(!in_sh, "an sh block in OPERATIONS.md is not closed");
    out
}

fn guide() -> String {
    let path = crate::workspace().join("docs/OPERATIONS.md");
    fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

#[test]
fn the_parser_sees_blocks_here_documents_and_comments() {
    let md = "text\n```sh\n# a comment\nls /etc/rexec   # trailing\n\ncat > f <<'EOF'\na = 1\nEOF\n```\n```toml\nx = 1\n```\n```sh\necho hi\n```\n";
    let cmds = commands(md);
    let texts: Vec<&str> = cmds.iter().map(|c| c.text.as_str()).collect();
    assert_eq!(
        texts,
        [
            "ls /etc/rexec   # trailing",
            "cat > f <<'EOF'\na = 1\nEOF",
            "echo hi"
        ]
    );
    assert_eq!(cmds.iter().map(|c| c.line).collect::<Vec<_>>(), [4, 6, 14]);
}

/// What the test does with one command.
enum Action {
    /// Listed in [`NOT_RUN`].
    Listed,
    /// accountd in the foreground: until it listens, then Ctrl-C.
    Foreground,
    /// `systemctl ...` for accountd, played by the test.
    Systemctl(&'static str),
    /// Run with `sh -c`.
    Run,
}

fn action(cmd: &GuideCommand) -> Action {
    let first = cmd.first_line();
    if NOT_RUN.iter().any(|(c, _)| *c == first) {
        return Action::Listed;
    }
    let systemctl = [
        (
            "systemctl daemon-reload && systemctl enable --now accountd",
            "start",
        ),
        ("systemctl start accountd", "start"),
        ("systemctl stop accountd", "stop"),
        ("systemctl reload accountd", "reload"),
    ];
    if let Some((_, what)) = systemctl.iter().find(|(c, _)| *c == first) {
        return Action::Systemctl(what);
    }
    let program = first
        .split("--")
        .nth(1)
        .filter(|_| first.starts_with("runuser "))
        .unwrap_or(first);
    if program.trim_start().starts_with("accountd ") && first.contains("--init") {
        return Action::Foreground;
    }
    Action::Run
}

fn run(sandbox: &Sandbox, cmd: &GuideCommand, text: &str) -> Output {
    // useradd takes a lock other test processes may hold for a moment.
    let tries = if text.contains("useradd") { 20 } else { 1 };
    let mut last = None;
    for _ in 0..tries {
        let out = sandbox
            .shell(text)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("OPERATIONS.md:{}: cannot run sh: {e}", cmd.line));
        if out.status.success() {
            return out;
        }
        last = Some(out);
        std::thread::sleep(Duration::from_millis(250));
    }
    let out = last.unwrap();
    panic!(
        "OPERATIONS.md:{}: {}\nran as: {text}\nexit: {:?}\nstdout:\n{}\nstderr:\n{}",
        cmd.line,
        cmd.text,
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn every_command_in_operations_md_runs_or_is_listed() {
    if !rexec_tests::can_run("every_command_in_operations_md_runs_or_is_listed")
        || !crate::have_systemd_analyze("every_command_in_operations_md_runs_or_is_listed")
    {
        return;
    }
    let started = Instant::now();
    let sandbox = Sandbox::new();
    let cmds = commands(&guide());
    let unit = sandbox.root().join("etc/systemd/system/accountd.service");
    let mut accountd: Option<Daemon> = None;
    let mut reloads = 0;
    let mut listed = BTreeSet::new();
    let mut ran = 0;
    let mut expected = BTreeSet::new();
    for cmd in &cmds {
        let text = sandbox.rewrite(&cmd.text);
        let at = format!("OPERATIONS.md:{}: {}", cmd.line, cmd.first_line());
        match action(cmd) {
            Action::Listed => {
                listed.insert(cmd.first_line().to_string());
                continue;
            }
            Action::Foreground => {
                assert!(accountd.is_none(), "{at}: accountd already runs");
                let daemon = Daemon::shell(&sandbox, &text, LISTENING);
                let (log, status) = daemon.stop(Signal::SIGINT);
                assert!(status.success(), "{at}: exit {status} after Ctrl-C:\n{log}");
            }
            Action::Systemctl("start") => {
                assert!(accountd.is_none(), "{at}: accountd already runs");
                accountd = Some(Daemon::unit(&sandbox, &unit, LISTENING));
                reloads = 0;
            }
            Action::Systemctl("stop") => {
                let daemon = accountd
                    .take()
                    .unwrap_or_else(|| panic!("{at}: not running"));
                let (log, status) = daemon.stop(Signal::SIGTERM);
                assert!(status.success(), "{at}: exit {status}:\n{log}");
            }
            Action::Systemctl(_) => {
                let daemon = accountd
                    .as_ref()
                    .unwrap_or_else(|| panic!("{at}: not running"));
                daemon.signal(Signal::SIGHUP);
                reloads += 1;
                daemon.wait_for(RELOADED, reloads);
                assert!(!daemon.log().contains("keeping the old one"), "{at}");
            }
            Action::Run => {
                let out = run(&sandbox, cmd, &text);
                let stdout = String::from_utf8_lossy(&out.stdout);
                for (start, want) in EXPECT {
                    if cmd.first_line().starts_with(start) {
                        assert!(stdout.contains(want), "{at}: no {want:?} in:\n{stdout}");
                        expected.insert(*start);
                    }
                }
                if cmd.first_line().starts_with("systemd-analyze verify") {
                    let said = format!("{stdout}{}", String::from_utf8_lossy(&out.stderr));
                    assert!(
                        said.trim().is_empty(),
                        "{at}: the units are not clean:\n{said}"
                    );
                }
            }
        }
        ran += 1;
    }
    if let Some(daemon) = accountd.take() {
        let (log, status) = daemon.stop(Signal::SIGTERM);
        assert!(status.success(), "accountd did not stop cleanly:\n{log}");
    }
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
    // The guide's sandbox really holds what the commands made.
    let ledger = sandbox.root().join("var/lib/rexec/ledger.db");
    assert!(
        ledger.exists(),
        "no restored ledger at {}",
        ledger.display()
    );
    assert!(
        ran >= 30,
        "only {ran} commands ran: is the parser still finding them?"
    );
    eprintln!(
        "{ran} commands of OPERATIONS.md ran, {} are listed as covered elsewhere, in {:.1} s",
        listed.len(),
        started.elapsed().as_secs_f64()
    );
}
