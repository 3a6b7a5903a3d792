//! The sandbox the guide's commands run in: a temporary root into which a fixed list of
//! path prefixes is rewritten, rewritten copies of the files the guide installs from
//! `deploy/`, a free loopback port for accountd's example addresses, and accountd
//! processes started, signalled and stopped as systemd or a terminal would.

use std::fs;
use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;
use rexec_tests::cluster::bin_dir;
use rexec_tests::wait_until;

/// Path prefixes rewritten into the sandbox root, as the guide's section 12 says.
const PREFIXES: [&str; 4] = [
    "/etc/systemd/system",
    "/etc/rexec",
    "/var/lib/rexec",
    "/root",
];
/// accountd's addresses in the guide and the example configs.
const ACCOUNTD_ADDRESSES: [&str; 2] = ["10.0.0.9:7071", "0.0.0.0:7071"];

/// The sandbox root and its substitutions.
pub struct Sandbox {
    dir: tempfile::TempDir,
    rules: Vec<(String, String)>,
}

impl Sandbox {
    /// A fresh root (searchable by the service users), the prefixes' parents, and the
    /// rewritten copies of `deploy/etc/*.toml` and `deploy/systemd/*.service`.
    pub fn new() -> Sandbox {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_path_buf();
        fs::set_permissions(&root, fs::Permissions::from_mode(0o755)).unwrap();
        for parent in ["etc/systemd/system", "var/lib"] {
            fs::create_dir_all(root.join(parent)).unwrap();
        }
        fs::create_dir(root.join("root")).unwrap();
        fs::set_permissions(root.join("root"), fs::Permissions::from_mode(0o700)).unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let at = |p: &str| format!("{}{p}", root.display());
        let mut rules: Vec<(String, String)> = vec![
            ("deploy/etc/".into(), at("/deploy/etc/")),
            ("deploy/systemd/".into(), at("/deploy/systemd/")),
        ];
        rules.extend(PREFIXES.iter().map(|p| (p.to_string(), at(p))));
        for a in ACCOUNTD_ADDRESSES {
            rules.push((a.to_string(), format!("127.0.0.1:{port}")));
        }
        let sandbox = Sandbox { dir, rules };
        let deploy = crate::workspace().join("deploy");
        for (sub, ext) in [("etc", ".toml"), ("systemd", ".service")] {
            fs::create_dir_all(root.join("deploy").join(sub)).unwrap();
            for entry in fs::read_dir(deploy.join(sub)).unwrap() {
                let path = entry.unwrap().path();
                let name = path.file_name().unwrap().to_string_lossy().into_owned();
                if !name.ends_with(ext) {
                    continue;
                }
                let mut text = sandbox.rewrite(&fs::read_to_string(&path).unwrap());
                if sub == "systemd" {
                    text = crate::units::with_built_binaries(&text);
                }
                fs::write(root.join("deploy").join(sub).join(&name), text).unwrap();
            }
        }
        sandbox
    }

    /// The sandbox root.
    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    /// The text with every rule applied in one left-to-right pass (the leftmost, then
    /// the first listed, match wins; replaced text is not looked at again).
    pub fn rewrite(&self, text: &str) -> String {
        let mut out = String::with_capacity(text.len() + 64);
        let mut rest = text;
        'scan: while !rest.is_empty() {
            for (from, to) in &self.rules {
                if rest.starts_with(from.as_str()) {
                    out.push_str(to);
                    rest = &rest[from.len()..];
                    continue 'scan;
                }
            }
            let c = rest.chars().next().unwrap();
            out.push(c);
            rest = &rest[c.len_utf8()..];
        }
        out
    }

    /// A shell for one command: `sh -c 'set -e; ...'` with the built binaries first on
    /// `PATH`, `HOME` the sandbox's `/root`, no config variables from outside, and
    /// the workspace as working directory.
    pub fn shell(&self, command: &str) -> Command {
        let mut sh = Command::new("sh");
        sh.arg("-c").arg(format!("set -e\n{command}"));
        self.environment(&mut sh);
        sh
    }

    fn environment(&self, cmd: &mut Command) {
        let path = std::env::var("PATH").unwrap_or_default();
        cmd.env("PATH", format!("{}:{path}", bin_dir().display()))
            .env("HOME", self.root().join("root"))
            .env("RUST_LOG", "info")
            .env_remove("XDG_CONFIG_HOME")
            .env_remove("REXEC_CONFIG")
            .env_remove("ACCOUNTD_CONFIG")
            .env_remove("REXEC_CA_DIR")
            .current_dir(crate::workspace());
    }
}

/// A daemon the guide starts: its own process group, its stderr collected.
pub struct Daemon {
    child: Child,
    log: Arc<Mutex<String>>,
    what: String,
}

impl Daemon {
    /// Runs `command` (already rewritten) in its own process group and waits until its
    /// stderr has `ready`.
    pub fn shell(sandbox: &Sandbox, command: &str, ready: &str) -> Daemon {
        let mut sh = sandbox.shell(&format!("exec {command}"));
        sh.process_group(0);
        Daemon::spawn(sh, command, ready)
    }

    /// Runs a unit's `ExecStart=` as its `User=` and `Group=`, as systemd would (without
    /// the sandbox options, which need systemd as init).
    pub fn unit(sandbox: &Sandbox, unit: &Path, ready: &str) -> Daemon {
        let text = fs::read_to_string(unit).unwrap();
        let value = |key: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(key).map(str::to_string))
                .unwrap_or_else(|| panic!("{} has no {key}", unit.display()))
        };
        let exec = value("ExecStart=");
        let user = value("User=");
        let group = value("Group=");
        // setpriv (util-linux) changes user, group and supplementary groups and then
        // execs the program in place, as systemd does: the pid is the daemon's.
        let mut cmd = Command::new("setpriv");
        cmd.args(["--reuid", &user, "--regid", &group, "--init-groups", "--"]);
        cmd.args(exec.split_whitespace());
        sandbox.environment(&mut cmd);
        cmd.process_group(0);
        Daemon::spawn(cmd, &exec, ready)
    }

    fn spawn(mut cmd: Command, what: &str, ready: &str) -> Daemon {
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {what}: {e}"));
        let log = Arc::new(Mutex::new(String::new()));
        let stderr = child.stderr.take().unwrap();
        let sink = log.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                let mut log = sink.lock().unwrap();
                log.push_str(&line);
                log.push('\n');
            }
        });
        let daemon = Daemon {
            child,
            log,
            what: what.to_string(),
        };
        daemon.wait_for(ready, 1);
        daemon
    }

    /// Waits until `needle` has appeared `count` times in stderr.
    pub fn wait_for(&self, needle: &str, count: usize) {
        let seen = || self.log().matches(needle).count() >= count;
        if wait_until(Duration::from_secs(20), seen).is_none() {
            panic!(
                "{}: no {needle:?} (#{count}) within 20 s; stderr:\n{}",
                self.what,
                self.log()
            );
        }
    }

    /// What it has written to stderr so far.
    pub fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    /// Sends `signal` to its process group.
    pub fn signal(&self, signal: Signal) {
        let group = Pid::from_raw(self.child.id() as i32);
        killpg(group, signal).unwrap_or_else(|e| panic!("{}: {signal}: {e}", self.what));
    }

    /// Sends `signal` and waits (20 s at most) for it to exit; its log and status.
    pub fn stop(mut self, signal: Signal) -> (String, std::process::ExitStatus) {
        self.signal(signal);
        let mut status = None;
        let exited = wait_until(Duration::from_secs(20), || {
            status = self.child.try_wait().unwrap();
            status.is_some()
        });
        assert!(exited.is_some(), "{} did not stop on {signal}", self.what);
        // Let the reader thread take the last lines.
        std::thread::sleep(Duration::from_millis(50));
        (self.log(), status.unwrap())
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = kill(Pid::from_raw(self.child.id() as i32), Signal::SIGKILL);
            let _ = killpg(Pid::from_raw(self.child.id() as i32), Signal::SIGKILL);
            let _ = self.child.wait();
        }
    }
}
