//! Real-kernel tests of rexecd's cgroup and spawn layers: real cgroups on the host's
//! hierarchy, real processes, a real unprivileged user; and, in a VM booted by `vm`,
//! the v2 backend and the real rexecd on a real cgroup2 kernel. They need root and a
//! cpu controller (the VM test needs QEMU, a kernel and busybox); where they cannot
//! run they fail, unless `REXEC_TESTS_ALLOW_SKIP=1` makes them skip. `guest_list`
//! checks that every in-VM test is on the list the VM runs.

mod cgroup_real;
mod cpuset_real;
// The daemon suite's harness (the real rexecd binary, a raw TLS client), used as is by
// `rexecd_vm` inside the VM; much of it is unused here.
#[allow(dead_code, unused_imports)]
#[path = "../daemon/util/mod.rs"]
mod daemon_util;
mod guest_list;
mod initramfs;
mod rexecd_vm;
mod spawn_real;
mod util;
mod v2_core;
mod v2_vm;
mod vm;
