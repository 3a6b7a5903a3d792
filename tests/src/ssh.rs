//! A throwaway OpenSSH server on a free loopback port, for root with a fresh
//! host key and user key, for benchmarks that compare against `ssh`
//! (`ssh localhost`, or an MPI launcher that starts its daemons over ssh).

use std::fs;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// An OpenSSH server on a free loopback port, for root with a fresh key; killed on drop.
pub struct Sshd {
    dir: tempfile::TempDir,
    port: u16,
    child: Child,
}

impl Sshd {
    /// Starts one and checks that `ssh` reaches it; `None` (with a line saying why, when
    /// it is not simply that `/usr/sbin/sshd` is not installed) when it cannot.
    pub fn start() -> Option<Sshd> {
        let sshd = Path::new("/usr/sbin/sshd");
        if !sshd.exists() {
            return None;
        }
        let dir = tempfile::Builder::new()
            .prefix("rexec-bench-ssh-")
            .tempdir()
            .ok()?;
        let d = dir.path();
        for key in ["host_key", "user_key"] {
            let ok = Command::new("ssh-keygen")
                .args(["-q", "-t", "ed25519", "-N", "", "-f"])
                .arg(d.join(key))
                .status()
                .ok()?
                .success();
            if !ok {
                return None;
            }
        }
        fs::copy(d.join("user_key.pub"), d.join("authorized_keys")).ok()?;
        let port = TcpListener::bind("127.0.0.1:0")
            .ok()?
            .local_addr()
            .ok()?
            .port();
        let config = format!(
            "Port {port}\nListenAddress 127.0.0.1\nHostKey {0}/host_key\nAuthorizedKeysFile {0}/authorized_keys\n\
             PasswordAuthentication no\nKbdInteractiveAuthentication no\nPermitRootLogin prohibit-password\n\
             StrictModes no\nUsePAM no\nPidFile {0}/sshd.pid\n",
            d.display()
        );
        fs::write(d.join("sshd_config"), config).ok()?;
        let _ = fs::create_dir_all("/run/sshd");
        let child = Command::new(sshd)
            .arg("-D")
            .arg("-f")
            .arg(d.join("sshd_config"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .ok()?;
        let s = Sshd { dir, port, child };
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            if Instant::now() > deadline {
                println!("sshd did not start; ssh comparisons skipped");
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let ok = s
            .command("true")
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|st| st.success());
        if !ok {
            println!("ssh to the benchmark's sshd failed; ssh comparisons skipped");
            return None;
        }
        Some(s)
    }

    /// `ssh` with the options that reach this server, before the host: the port, the
    /// user key, no host-key checks, batch mode.
    pub fn options(&self) -> Vec<String> {
        let key = self.dir.path().join("user_key");
        [
            "-p",
            &self.port.to_string(),
            "-i",
            &key.display().to_string(),
            "-o",
            "StrictHostKeyChecking=no",
            "-o",
            "UserKnownHostsFile=/dev/null",
            "-o",
            "BatchMode=yes",
            "-o",
            "LogLevel=ERROR",
        ]
        .map(String::from)
        .to_vec()
    }

    /// `ssh root@127.0.0.1 REMOTE` to this server.
    pub fn command(&self, remote: &str) -> Command {
        let mut c = Command::new("ssh");
        c.args(self.options()).args(["root@127.0.0.1", remote]);
        c
    }

    /// A script that runs `ssh` with [`Sshd::options`] and then its own arguments, for
    /// launchers that take an ssh executable (`mpiexec -launcher-exec`). Every host name
    /// reaches this server (`HostName=127.0.0.1`), so a launcher can be given a name it
    /// does not recognise as its own host (Hydra forks, without ssh, for `127.0.0.1`).
    pub fn wrapper(&self) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let path = self.dir.path().join("ssh");
        let script = format!(
            "#!/bin/sh\nexec ssh {} -o HostName=127.0.0.1 \"$@\"\n",
            self.options().join(" ")
        );
        fs::write(&path, script).expect("write the ssh wrapper");
        fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).expect("chmod");
        path
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
