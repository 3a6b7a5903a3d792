//! rexecd, the per-node daemon of the rexec market (library part; the `rexecd` binary is
//! a thin shell around [`server::run`]).
//!
//! Module map:
//! - [`config`]: the TOML config file, the command-line flags and the resolved
//!   [`config::Config`].
//! - [`server`]: start-up (TLS, cgroups, sweep of stale jobs), the accept loop and the
//!   shutdown that destroys every job.
//! - [`session`]: one connection: handshake, launch or admin requests, and the running
//!   rank's loop (stdin, signals, heartbeats, output, exit, cleanup).
//! - [`registry`]: the running ranks (job id and rank to owner, cgroup, process group,
//!   control queue); registering a rank enters it in the market.
//! - [`signed`]: signed batch launches from a queue: who may send them, the checks
//!   before the claim at accountd, and the record of ranks started here.
//! - [`control`]: what another task may ask a running rank's session (a signal, a
//!   notice for its client).
//! - [`market`]: the node's market: bids checked against `max_rate` and the owner's
//!   balance, metering every tick, charges under the node's policy sent to accountd
//!   through the debit journal, the kernel weights (open or closed loop), running dry.
//! - [`announce`]: with a `[discovery]` table, the node's multicast announcements (name,
//!   address, market state, idle CPUs, load, memory, availability summary), its weekly
//!   availability history, and finding accountd from accountd's announcements.
//! - [`metrics`]: with `[metrics] listen`, the node's Prometheus metrics (market
//!   state read at each scrape, charges, debits, weight writes, launch latency,
//!   refusals by reason).
//! - [`pmi`]: an MPI rank's PMI channel (`LaunchPmi`): the socket pair passed to the
//!   rank as `PMI_FD`, relayed as bytes over the rank's session to the client.
//! - [`pump`]: output pumping, stdin feeding and the frame writer task.
//! - [`pty`]: pseudo-terminals for jobs launched with `-t`.
//! - [`heartbeat`]: when a silent client counts as dead.
//! - [`env`](mod@env): the job environment and its deny list.
//! - [`signals`]: portable signal names to and from this host's numbers.
//! - [`cgroup`]: rexecd's parent cgroup and one child cgroup per job, on cgroup v1 or
//!   v2 (detected from mountinfo): creation, CPU weights from tickets, metering of CPU
//!   usage and runnable threads, teardown that kills everything in the job, and the
//!   start-up sweep of stale job cgroups.
//! - [`spawn`]: resolving the job's Unix user and starting the program as that user,
//!   inside the job cgroup, from an explicit environment, without a `fork` of rexecd.
//! - [`sys`]: the only module with `unsafe` code: newtyped ids, account lookups,
//!   signals, terminal sizes, the vfork-style spawn and the async-signal-safe set-up
//!   its child applies to itself before `exec`.
//!
//! # Protocol behaviour
//!
//! rexecd speaks the session order of `proto::node`. A launch is accepted only from a
//! user certificate and runs as the Unix user of the same name (unknown users refused;
//! root refused unless `allow_root`; `allowed_users` limits who may run jobs). A
//! `LaunchSigned` is accepted only from a queue (`[batch] queues`) and runs as the
//! user who signed the job, once (see [`signed`]). Each rank
//! gets its own cgroup `job-<n>` under the parent; its first process starts a new session
//! (so its pid is the process group signals go to), or, with a terminal, a new session
//! with the pseudo-terminal as controlling terminal. Signals from the client go to that
//! process group, except `KILL`, which destroys the whole cgroup. `TSTP` suspends the
//! heartbeat timeout until `CONT` (a client stopped by Ctrl-Z sends nothing), for at
//! most `stopped_client_limit`. Stdin is flow-controlled (`StdinTaken`, at most
//! `STDIN_WINDOW` in flight), so rexecd keeps reading the session whatever the job does
//! with its input. Client connections carry TCP keepalive and `TCP_USER_TIMEOUT`. A
//! rank ends when its first process exits: the rest of its cgroup is killed,
//! output drained, then exactly one `Exit` is sent with the cgroup's CPU time. A closed
//! connection, missed heartbeats, a malformed or oversized frame, an admin kill or
//! rexecd's shutdown destroy the cgroup; at start-up rexecd destroys every job cgroup an
//! earlier run left.
//!
//! # Details the session contract leaves open, as implemented here
//!
//! - Terminal stop signals (`TSTP`, `TTIN`, `TTOU`) are not sent with a plain
//!   `killpg`: a job's process group is orphaned (its leader's parent, rexecd, is in
//!   another session), and the kernel discards those signals for such groups. rexecd
//!   does what a terminal would have achieved locally: processes of the group that catch
//!   the signal get it, those that ignore it are left alone, the rest get `SIGSTOP` (see
//!   [`signals::stop_group`]). `CONT` resumes them as usual.
//! - Under a terminal, `StdinEnd` is delivered as the terminal's EOF character (Ctrl-D)
//!   rather than by closing the terminal (which would hang the job up).
//! - Besides `TSTP`, the heartbeat timeout is also suspended while rexecd itself stops
//!   reading a client that ignores the stdin window (more than `STDIN_WINDOW` sent and
//!   not yet taken by the job); a client that keeps to the window is always read.
//! - Job processes start with `PR_SET_NO_NEW_PRIVS` (unless `no_new_privs = false`),
//!   the configured `umask` (default 022) and `[rlimits]` (see [`sys::child`]).
//! - After its cgroup is gone a rank's last frames (`Exit`) wait for the client under
//!   the same liveness rules, so a client stopped by Ctrl-Z still gets them on `fg`.
//! - A session of admin requests may carry several `ListJobs`/`Kill` requests, each
//!   within one heartbeat timeout of the last; unknown message tags before a launch are
//!   refused with `Unsupported`, during a job answered with an informational notice.
//! - A job runs in the working directory as sent when its user can enter it, else in
//!   the user's home (then `/`); the child itself reports which directory it entered,
//!   and when that is not the one asked for the client gets an `Info` notice right after
//!   `Started` naming both.
//! - At most `max_connections` connections are open at once (more are closed at once),
//!   at most `max_connections_per_address` from one address (counted from accept, so
//!   unfinished handshakes count) and `max_connections_per_identity` of one
//!   certificate (answered `Busy` after the handshake); a user runs at most
//!   `max_ranks_per_user` ranks (more are refused with `Busy`).
//! - A launch or re-bid is refused before anything is created when its bid is above
//!   the node's `max_rate`, or positive while the owner's balance is not (see
//!   [`market`]); a rank's `Exit.charged` is what the market charged it.
//! - On a lost client (EOF, TLS error, missed heartbeats) no `Exit` is sent; on a
//!   protocol error the last frame is `Error`; at rexecd shutdown the client gets a
//!   `ShuttingDown` notice and then `Exit` with SIGKILL.
#![deny(missing_docs)]

pub mod announce;
pub mod cgroup;
pub mod config;
pub mod control;
pub mod env;
pub mod heartbeat;
pub mod market;
pub mod metrics;
pub mod pmi;
pub mod pty;
pub mod pump;
pub mod registry;
pub mod server;
pub mod session;
pub mod signals;
pub mod signed;
pub mod spawn;
#[allow(unsafe_code)]
pub mod sys;
