//! One host of the guide's cluster: a network namespace (see `rexec_tests::netns`) and a
//! temporary root into which a fixed list of path prefixes is rewritten, with rewritten
//! copies of the files the guide installs from `deploy/`; and the daemons the guide
//! starts there, started, signalled and stopped as systemd or a terminal would.

use std::fs;
use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;
use rexec_tests::cluster::bin_dir;
use rexec_tests::netns::command_in;
use rexec_tests::wait_until;
use testhost::user::test_user as user;

/// Path prefixes rewritten into the sandbox root, as the guide's section 14 says.
const PREFIXES: [&str; 6] = [
    "/etc/systemd/system",
    "/etc/rexec",
    "/var/lib/rexec",
    "/usr/share/doc/rexec",
    "/home",
    "/root",
];
/// The guide's example network and the test's (`rexec_tests::netns`).
const EXAMPLE_NET: (&str, &str) = ("10.0.0.", "10.213.0.");
/// The guide's user, played by the test user.
const EXAMPLE_USER: &str = "alice";
/// rexecd's parent cgroup in the guide, made unique per node and test run.
const CGROUP_PARENT: &str = "cgroup_parent = \"rexec\"";

/// The sandbox root, its network namespace and its substitutions.
pub struct Sandbox {
    dir: tempfile::TempDir,
    rules: Vec<(String, String)>,
    ns: String,
}

impl Sandbox {
    /// A fresh root (searchable by the service users) for host `name` in namespace `ns`,
    /// the prefixes' parents, and the rewritten copies of `deploy/etc/*.toml` and
    /// `deploy/systemd/*.service`.
    pub fn new(name: &str, ns: &str) -> Sandbox {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_path_buf();
        fs::set_permissions(&root, fs::Permissions::from_mode(0o755)).unwrap();
        for parent in ["etc/systemd/system", "var/lib"] {
            fs::create_dir_all(root.join(parent)).unwrap();
        }
        fs::create_dir(root.join("root")).unwrap();
        fs::set_permissions(root.join("root"), fs::Permissions::from_mode(0o700)).unwrap();
        install_binaries(&root.join("usr/local/bin"));
        let at = |p: &str| format!("{}{p}", root.display());
        let mut rules: Vec<(String, String)> = vec![
            ("deploy/etc/".into(), at("/deploy/etc/")),
            ("deploy/systemd/".into(), at("/deploy/systemd/")),
        ];
        rules.extend(PREFIXES.iter().map(|p| (p.to_string(), at(p))));
        rules.push((EXAMPLE_NET.0.into(), EXAMPLE_NET.1.into()));
        rules.push((EXAMPLE_USER.into(), user().name.clone()));
        let parent = format!("rexec-guide-{}-{name}", std::process::id());
        rules.push((CGROUP_PARENT.into(), format!("cgroup_parent = {parent:?}")));
        let sandbox = Sandbox {
            dir,
            rules,
            ns: ns.to_string(),
        };
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
                    text = text.replace("/usr/local/bin/", &at("/usr/local/bin/"));
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

    /// Where a path of the guide is in this sandbox.
    pub fn path(&self, guide_path: &str) -> PathBuf {
        PathBuf::from(self.rewrite(guide_path))
    }

    /// A shell for one command in this host's namespace: `sh -c 'set -e; ...'` with the
    /// built binaries first on `PATH`, `HOME` the sandbox's `/root`, no config variables
    /// from outside, and the workspace as working directory.
    pub fn shell(&self, command: &str) -> Command {
        let mut sh = command_in(Some(&self.ns), "sh");
        sh.arg("-c").arg(format!("set -e\n{command}"));
        self.environment(&mut sh, &self.root().join("root"));
        sh
    }

    /// As [`Sandbox::shell`], as the test user (the guide's alice) with her sandbox
    /// home as `HOME` and working directory.
    pub fn user_shell(&self, command: &str) -> Command {
        let u = user();
        let home = self.path(&format!("/home/{EXAMPLE_USER}"));
        let mut sh = command_in(Some(&self.ns), "setpriv");
        let (uid, gid) = (u.uid.to_string(), u.gid.to_string());
        sh.args(["--reuid", &uid, "--regid", &gid, "--init-groups", "--"]);
        sh.args(["sh", "-c", &format!("set -e\n{command}")]);
        self.environment(&mut sh, &home);
        sh.current_dir(home);
        sh
    }

    fn environment(&self, cmd: &mut Command, home: &Path) {
        let path = std::env::var("PATH").unwrap_or_default();
        let bin = self.root().join("usr/local/bin");
        cmd.env("PATH", format!("{}:{path}", bin.display()))
            .env("HOME", home)
            .env("RUST_LOG", "info")
            .env_remove("XDG_CONFIG_HOME")
            .env_remove("REXEC_CONFIG")
            .env_remove("ACCOUNTD_CONFIG")
            .env_remove("REXEC_CA_DIR")
            .current_dir(crate::workspace());
    }
}

/// The binaries the guide installs in `/usr/local/bin`.
const BINARIES: [&str; 7] = [
    "rexec-certs",
    "rexecd",
    "accountd",
    "accountctl",
    "vexecd",
    "batchd",
    "rexec",
];

/// Installs the built binaries in a host's `/usr/local/bin`, as the guide's install
/// step does: hard links (a copy across file systems), in directories every user can
/// search, so the service users can run them wherever the checkout lives (a clone in
/// a 0700 temporary directory is out of their reach).
fn install_binaries(bin: &Path) {
    fs::create_dir_all(bin).unwrap();
    for dir in [
        bin,
        bin.parent().unwrap(),
        bin.parent().unwrap().parent().unwrap(),
    ] {
        fs::set_permissions(dir, fs::Permissions::from_mode(0o755)).unwrap();
    }
    for name in BINARIES {
        let (from, to) = (bin_dir().join(name), bin.join(name));
        if fs::hard_link(&from, &to).is_err() {
            fs::copy(&from, &to).unwrap_or_else(|e| panic!("install {}: {e}", from.display()));
        }
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

    /// Runs a unit's `ExecStart=` as its `User=` and `Group=` (root without them) in
    /// the host's namespace, after making its `StateDirectory=` with its mode and owner,
    /// as systemd would (without the sandbox options, which need systemd as init).
    pub fn unit(sandbox: &Sandbox, unit: &Path, ready: &str) -> Daemon {
        let text = fs::read_to_string(unit).unwrap();
        let value = |key: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(key).map(str::to_string))
        };
        let exec =
            value("ExecStart=").unwrap_or_else(|| panic!("{} has no ExecStart=", unit.display()));
        let user = value("User=").unwrap_or_else(|| "root".into());
        let group = value("Group=").unwrap_or_else(|| "root".into());
        if let Some(state) = value("StateDirectory=") {
            let dir = sandbox.path(&format!("/var/lib/{state}"));
            let mode = value("StateDirectoryMode=").unwrap_or_else(|| "0755".into());
            fs::create_dir_all(&dir).unwrap();
            fs::set_permissions(
                &dir,
                fs::Permissions::from_mode(u32::from_str_radix(&mode, 8).unwrap()),
            )
            .unwrap();
            let owner = nix::unistd::User::from_name(&user)
                .unwrap()
                .expect("the unit's user");
            std::os::unix::fs::chown(&dir, Some(owner.uid.as_raw()), Some(owner.gid.as_raw()))
                .unwrap();
        }
        // setpriv (util-linux) changes user, group and supplementary groups and then
        // execs the program in place, as systemd does; nsenter execs too: the pid is
        // the daemon's.
        let mut cmd = command_in(Some(&sandbox.ns), "setpriv");
        cmd.args(["--reuid", &user, "--regid", &group, "--init-groups", "--"]);
        cmd.args(exec.split_whitespace());
        sandbox.environment(&mut cmd, &sandbox.root().join("root"));
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

    /// Whether it still runs.
    pub fn running(&self) -> bool {
        // A zombie counts as gone; `try_wait` needs `&mut`, so ask the kernel.
        let stat =
            fs::read_to_string(format!("/proc/{}/stat", self.child.id())).unwrap_or_default();
        !stat.is_empty() && !stat.contains(") Z ")
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
