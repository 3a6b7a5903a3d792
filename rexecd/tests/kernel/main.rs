//! Real-kernel tests of rexecd's cgroup and spawn layers: real cgroups on the host's
//! hierarchy, real processes, a real unprivileged user. They need root and a cpu
//! controller; otherwise each test prints why it skips and passes.

mod cgroup_real;
mod initramfs;
mod spawn_real;
mod util;
mod v2_core;
mod v2_vm;
mod vm;
