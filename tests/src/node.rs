//! One `rexecd` process of a [`crate::cluster::Cluster`]: its flags, log,
//! ready file and cgroup parent, and starting it until it has written the
//! address it listens on.

use std::fs;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::Duration;

/// One rexecd.
#[derive(Debug)]
pub struct Node {
    /// Its name (`n1`, `n2`, ...).
    pub name: String,
    /// Where it listens.
    pub addr: SocketAddr,
    /// Its parent cgroup name.
    pub cgroup_parent: String,
    /// Its log (rexecd's stderr).
    pub log: PathBuf,
    pub(crate) child: Option<Child>,
    /// The network namespace it runs in (see [`crate::netns`]).
    pub(crate) netns: Option<String>,
    pub(crate) args: Vec<String>,
    pub(crate) ignored_signals: &'static str,
}

impl Node {
    /// rexecd's process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.id())
    }
}

/// Start `rexecd` with `node`'s flags and wait until `ready` holds its address.
pub(crate) fn spawn_node(rexecd: &Path, node: &mut Node, ready: &Path) {
    let _ = fs::remove_file(ready);
    let log = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&node.log)
        .expect("cannot open the node log");
    // `env` execs rexecd in place, so the child's pid is rexecd's.
    // `nsenter` and `env` exec what follows in place too.
    let program: &std::ffi::OsStr = if node.ignored_signals.is_empty() {
        rexecd.as_os_str()
    } else {
        "env".as_ref()
    };
    let mut command = crate::netns::command_in(node.netns.as_deref(), program);
    if !node.ignored_signals.is_empty() {
        command
            .arg(format!("--ignore-signal={}", node.ignored_signals))
            .arg("--")
            .arg(rexecd);
    }
    let mut child = command
        .args(&node.args)
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", rexecd.display()));
    let heard = testhost::wait::until(Duration::from_secs(20), || {
        if let Ok(text) = fs::read_to_string(ready)
            && let Ok(addr) = text.trim().parse::<SocketAddr>()
        {
            return Some(Ok(addr));
        }
        child.try_wait().ok().flatten().map(Err)
    });
    let addr = match heard {
        Some(Ok(addr)) => addr,
        Some(Err(status)) => {
            let log = fs::read_to_string(&node.log).unwrap_or_default();
            panic!(
                "rexecd {} exited with {status} before it was ready:\n{log}",
                node.name
            );
        }
        None => {
            let _ = child.kill();
            panic!(
                "rexecd {} did not write {} in time",
                node.name,
                ready.display()
            );
        }
    };
    node.addr = addr;
    node.child = Some(child);
}
