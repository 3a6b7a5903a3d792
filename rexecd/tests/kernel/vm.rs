//! Boots a real cgroup2 kernel under QEMU and runs the v2 tests in it. This host's
//! `cpu` controller is on cgroup v1, so the v2 backend would otherwise never meet a
//! kernel that offers `cpu` on cgroup2.
//!
//! The test packs this very test binary (`current_exe`), the `rexecd` binary (both
//! without debug sections), the shared libraries they load and a static busybox into
//! an initramfs, boots the host's Debian kernel with it under TCG emulation (KVM hangs
//! when nested here) with two CPUs (so that pinning a node to one of them means
//! something) and a serial console, and lets a tiny `/init` mount
//! proc, sys, dev and cgroup2, bring up loopback, run the binary on [`GUEST_TESTS`]
//! with `REXEC_IN_VM=1`, print its exit status after a marker and power off. The host
//! reads the console, fails with the whole log on anything but a clean pass of every
//! listed test, and kills QEMU after a hard timeout.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::daemon_util::USER;
use crate::initramfs::{Initramfs, shared_libraries};
use crate::util::cannot_run;
use crate::v2_vm::{GUEST_TESTS, IN_VM};

/// QEMU is killed after this long, whatever the guest does. A whole run takes about
/// 20 s here, and 40 s beside four busy loops.
const HARD_TIMEOUT: Duration = Duration::from_secs(300);
/// How long the guest's tests may run before `/init`'s watchdog reports every task's
/// state and ends them (about 12 s is usual); inside [`HARD_TIMEOUT`], which also
/// covers the boot.
const WATCHDOG: Duration = Duration::from_secs(200);
/// Printed by the watchdog before its report.
const WATCHDOG_MARKER: &str = "REXEC-VM-WATCHDOG";
/// Printed by `/init` before the test binary's exit status.
const EXIT_MARKER: &str = "REXEC-VM-EXIT";
/// Printed by `/init` once the filesystems are mounted.
const BOOT_MARKER: &str = "REXEC-VM-BOOTED";
/// Where the test binary sits in the guest.
const GUEST_EXE: &str = "/rexec/kernel-tests";

const QEMU: &str = "qemu-system-x86_64";

/// What the VM needs from the host, or why it cannot boot here.
struct Host {
    qemu: PathBuf,
    kernel: PathBuf,
    busybox: PathBuf,
    objcopy: PathBuf,
}

impl Host {
    fn find() -> Result<Host, String> {
        let qemu = which(QEMU).ok_or_else(|| {
            format!(
                "{QEMU} not found (Debian package qemu-system-x86; deploy/setup-host installs it)"
            )
        })?;
        let kernel = kernel()?;
        let busybox = ["/bin/busybox", "/usr/bin/busybox"]
            .iter()
            .map(PathBuf::from)
            .find(|p| p.is_file())
            .ok_or("busybox not found (Debian package busybox-static)")?;
        let objcopy = which("objcopy").ok_or("objcopy not found (Debian package binutils)")?;
        Ok(Host {
            qemu,
            kernel,
            busybox,
            objcopy,
        })
    }

    /// A copy of `exe` in `dir` without debug sections: the debug builds are about
    /// six times larger, too much for a quick boot (panics still name file and line).
    fn strip_debug(&self, exe: &Path, dir: &Path) -> std::io::Result<PathBuf> {
        let out = dir.join(exe.file_name().unwrap());
        let status = Command::new(&self.objcopy)
            .arg("--strip-debug")
            .arg(exe)
            .arg(&out)
            .status()?;
        if !status.success() {
            return Err(std::io::Error::other(format!(
                "objcopy --strip-debug {} failed: {status}",
                exe.display()
            )));
        }
        Ok(out)
    }
}

/// `REXEC_VM_KERNEL`, or the newest `/boot/vmlinuz-*` (Debian's linux-image-amd64).
fn kernel() -> Result<PathBuf, String> {
    if let Some(k) = std::env::var_os("REXEC_VM_KERNEL") {
        let k = PathBuf::from(k);
        return match k.is_file() {
            true => Ok(k),
            false => Err(format!("REXEC_VM_KERNEL={} is not a file", k.display())),
        };
    }
    let mut found: Vec<(Vec<u64>, PathBuf)> = std::fs::read_dir("/boot")
        .map_err(|e| format!("/boot: {e}"))?
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let version = name.strip_prefix("vmlinuz-")?;
            let key = version
                .split(|c: char| !c.is_ascii_digit())
                .filter_map(|n| n.parse().ok())
                .collect();
            Some((key, e.path()))
        })
        .collect();
    found.sort();
    found.pop().map(|(_, p)| p).ok_or_else(|| {
        "no /boot/vmlinuz-* kernel (Debian package linux-image-amd64; deploy/setup-host installs it)"
            .to_string()
    })
}

fn which(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(program))
        .find(|p| p.is_file())
}

/// The guest's `/init`: mount what the tests read, run them, report, power off. An
/// `/init` that exits would panic the kernel, which `panic=-1` and `-no-reboot` turn
/// into QEMU exiting too, so a broken script cannot hang the test either.
fn init_script(lib_dirs: &str) -> String {
    let filters = GUEST_TESTS.join(" ");
    format!(
        r#"#!/bin/busybox sh
/bin/busybox --install -s
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
mount -t proc proc /proc
# Only emergencies on the console: the kernel's own lines (an OOM kill a test causes
# on purpose) must not cut into the test harness's result lines read below.
echo 1 > /proc/sys/kernel/printk
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
# /tmp stays on the initramfs (a writable tmpfs already): a build tree under /tmp,
# where rexecd is packed at its host path, must stay visible.
chmod 1777 /tmp
mount -t cgroup2 cgroup2 /sys/fs/cgroup
ip link set lo up
echo "{BOOT_MARKER} $(uname -r) cpus=$(nproc) controllers: $(cat /sys/fs/cgroup/cgroup.controllers)"
cd /tmp
env {IN_VM}=1 RUST_BACKTRACE=1 LD_LIBRARY_PATH={lib_dirs} \
  {GUEST_EXE} --include-ignored --exact --test-threads=1 --show-output {filters} 2>&1 &
tests=$!
# A test that hangs says nothing of itself (its output is captured until it ends), so
# before the host's hard timeout the watchdog shows where every task is waiting, the
# logs of any rexecd under test, and the kernel's last words, then ends the tests.
(
  sleep {watchdog}
  echo "{WATCHDOG_MARKER}: the tests still run after {watchdog} s; every task's state and kernel stack:"
  for t in /proc/[0-9]*/task/[0-9]*; do
    readlink "$t/exe" >/dev/null || continue
    echo "--- $t $(cat $t/comm) $(grep State: $t/status) wchan=$(cat $t/wchan)"
    cat "$t/stack" 2>/dev/null
  done
  for l in /tmp/.tmp*/rexecd.log; do
    [ -f "$l" ] && echo "--- $l, its last 80 lines:" && tail -n 80 "$l"
  done
  echo "--- dmesg, its last 20 lines:"
  dmesg | tail -n 20
  kill -9 $tests
) &
watchdog=$!
wait $tests
status=$?
kill $watchdog 2>/dev/null
echo "{EXIT_MARKER} $status"
poweroff -f
"#,
        watchdog = WATCHDOG.as_secs()
    )
}

/// Writes the initramfs: busybox, the test binary with its libraries, the users and
/// groups the tests resolve, and `/init`.
fn build_initramfs(host: &Host, dir: &Path, out: &Path) -> std::io::Result<()> {
    let exe = std::env::current_exe()?;
    let mut cpio = Initramfs::create(out)?;
    for dir in [
        "/proc",
        "/sys",
        "/dev",
        "/tmp",
        "/root",
        "/sbin",
        "/usr/bin",
        "/usr/sbin",
    ] {
        cpio.dir(dir)?;
    }
    cpio.copy("/bin/busybox", &host.busybox)?;
    cpio.copy(GUEST_EXE, &host.strip_debug(&exe, dir)?)?;
    // rexecd where the daemon harness looks for it: the host path cargo built it at.
    let rexecd = Path::new(env!("CARGO_BIN_EXE_rexecd"));
    let path = rexecd.to_str().expect("UTF-8 target path");
    cpio.copy(path, &host.strip_debug(rexecd, dir)?)?;
    let mut libs = shared_libraries(&exe)?;
    libs.extend(shared_libraries(rexecd)?);
    libs.extend(shared_libraries(&host.busybox)?);
    libs.sort();
    libs.dedup();
    let mut lib_dirs: Vec<String> = Vec::new();
    for lib in &libs {
        let path = lib.to_str().expect("library paths are UTF-8");
        cpio.copy(path, lib)?;
        let dir = lib.parent().unwrap().to_string_lossy().into_owned();
        if !lib_dirs.contains(&dir) {
            lib_dirs.push(dir);
        }
    }
    // root, and the unprivileged user the daemon harness runs jobs as.
    let passwd =
        format!("root:x:0:0:root:/root:/bin/sh\n{USER}:x:990:990::/var/lib/rexectest:/bin/sh\n");
    cpio.file("/etc/passwd", 0o644, passwd.as_bytes())?;
    // As `testhost::user::TEST_USER_SPEC` defines the account, so that nothing needs
    // the account tools (busybox has none of them).
    let group = format!(
        "root:x:0:\n{USER}:x:990:\n{}:x:991:{USER}\n",
        testhost::user::TEST_GROUP
    );
    cpio.file("/etc/group", 0o644, group.as_bytes())?;
    cpio.file(
        "/etc/nsswitch.conf",
        0o644,
        b"passwd: files\ngroup: files\n",
    )?;
    cpio.file("/init", 0o755, init_script(&lib_dirs.join(":")).as_bytes())?;
    cpio.finish()
}

/// The serial console, collected by a thread while QEMU runs (it ends when QEMU does).
fn collect(child: &mut Child) -> (Arc<Mutex<Vec<u8>>>, JoinHandle<()>) {
    let log = Arc::new(Mutex::new(Vec::new()));
    let mut stdout = child.stdout.take().unwrap();
    let sink = Arc::clone(&log);
    let reader = std::thread::spawn(move || {
        let mut buf = [0u8; 8192];
        while let Ok(n) = stdout.read(&mut buf) {
            if n == 0 {
                break;
            }
            sink.lock().unwrap().extend_from_slice(&buf[..n]);
        }
    });
    (log, reader)
}

/// Kills QEMU if the test panics while it runs.
struct Vm(Child);

impl Drop for Vm {
    fn drop(&mut self) {
        if self.0.try_wait().ok().flatten().is_none() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

#[test]
fn v2_suite_passes_inside_a_real_cgroup2_kernel() {
    let test = "v2_suite_passes_inside_a_real_cgroup2_kernel";
    if std::env::var_os(IN_VM).is_some() {
        panic!("{test} does not nest: it is already inside the VM");
    }
    let host = match Host::find() {
        Ok(h) => h,
        Err(why) => {
            cannot_run(test, &why);
            return;
        }
    };
    let dir = tempfile::tempdir().unwrap();
    let image = dir.path().join("initramfs.cpio");
    let started = Instant::now();
    build_initramfs(&host, dir.path(), &image).unwrap();
    let packed = started.elapsed();

    let mut child = Command::new(&host.qemu)
        .args(["-accel", "tcg", "-m", "512", "-smp", "2"])
        .args(["-nodefaults", "-no-user-config", "-display", "none"])
        .args(["-serial", "stdio", "-no-reboot"])
        .arg("-kernel")
        .arg(&host.kernel)
        .arg("-initrd")
        .arg(&image)
        .args(["-append", "console=ttyS0 panic=-1 quiet"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", host.qemu.display()));
    let (log, reader) = collect(&mut child);
    let mut vm = Vm(child);
    let status = loop {
        if let Some(status) = vm.0.try_wait().unwrap() {
            break Some(status);
        }
        if started.elapsed() > HARD_TIMEOUT {
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let took = started.elapsed();
    let mut stderr = String::new();
    if status.is_some() {
        let _ = vm.0.stderr.take().unwrap().read_to_string(&mut stderr);
    }
    drop(vm);
    // QEMU is gone: the reader has seen end of file once it drained the last output.
    reader.join().unwrap();
    let console = String::from_utf8_lossy(&log.lock().unwrap()).replace('\r', "");
    let show = |why: &str| -> String {
        format!(
            "{why}\nkernel {}, after {took:?}; QEMU stderr: {stderr}\n\
             --- VM console ---\n{console}--- end of VM console ---",
            host.kernel.display()
        )
    };

    if let Some(path) = std::env::var_os("REXEC_VM_CONSOLE") {
        std::fs::write(&path, &console).unwrap();
    }

    let Some(status) = status else {
        panic!(
            "{}",
            show(&format!(
                "VM killed after the {HARD_TIMEOUT:?} hard timeout"
            ))
        );
    };
    let booted = console
        .lines()
        .find(|l| l.starts_with(BOOT_MARKER))
        .unwrap_or_else(|| panic!("{}", show("the VM never reached /init")));
    let exit = console
        .lines()
        .find_map(|l| l.strip_prefix(EXIT_MARKER))
        .unwrap_or_else(|| panic!("{}", show("no exit marker: the test binary did not finish")));
    assert!(
        !console.contains(WATCHDOG_MARKER),
        "{}",
        show(&format!(
            "a test hung in the VM: the watchdog ended the tests after {WATCHDOG:?} \
             (the test named last before {WATCHDOG_MARKER} is the one)"
        ))
    );
    assert!(
        exit.trim() == "0",
        "{}",
        show(&format!(
            "the tests failed in the VM (exit status {})",
            exit.trim()
        ))
    );
    for name in GUEST_TESTS {
        let ok = format!("test {name} ... ok");
        assert!(
            console.lines().any(|l| l == ok),
            "{}",
            show(&format!("{name} did not pass in the VM"))
        );
    }
    let summary = format!("test result: ok. {} passed; 0 failed", GUEST_TESTS.len());
    assert!(
        console.lines().any(|l| l.starts_with(&summary)),
        "{}",
        show(&format!("expected {summary:?}"))
    );
    assert!(
        status.success(),
        "{}",
        show(&format!("QEMU exited with {status}"))
    );
    for l in console.lines().filter(|l| {
        l.starts_with(BOOT_MARKER)
            || l.starts_with("bids 1:3")
            || l.starts_with("busy job")
            || l.starts_with("pinned to CPU")
            || l.starts_with("rexecd pinned")
    }) {
        eprintln!("vm: {l}");
    }
    eprintln!(
        "vm: {booted}; initramfs packed in {packed:?}; {} tests passed; VM run {took:?} in all",
        GUEST_TESTS.len()
    );
}
