//! rexec, the client of the rexec market: runs a program on several cluster
//! nodes as if it ran here — environment, working directory, stdin, stdout,
//! stderr, signals, Ctrl-C, Ctrl-Z and the exit status all behave as for a
//! local program — and if anything fails, aborts it everywhere.
//!
//! Module map:
//! - [`cli`]: the command line (run form, `jobs`, `kill`, `bid`, `nodes`, and the
//!   batch forms) and the rule that tells them apart (`rexec -- jobs` runs a
//!   program called `jobs`).
//! - [`config`]: the client configuration file and its errors.
//! - [`exit`]: the documented exit statuses, the client's one error type
//!   and the one mapping from an outcome to a status.
//! - [`request`]: the run form's request checked before anything starts
//!   (rate, configuration, where the ranks go).
//! - [`plan`]: rank placement from `--nodes` or `[nodes]`, job id, the
//!   `Launch` message of each rank.
//! - [`find`]: which selectors to ask (`[selectors]`, or announcements heard
//!   on the `[discovery]` group).
//! - [`select`]: the default policy and each selector's time limit (asking one
//!   selector after another until one answers is `clients::selector`).
//! - [`choose`]: nodes chosen through a selector, each checked by opening its
//!   session, and replaced when it fails before anything started.
//! - [`live`]: the live nodes a selector lists, as the entries the admin
//!   commands and `--nodes` address.
//! - [`nodes`]: `rexec nodes`, the table of nodes a selector knows.
//! - [`agent`]: who this client is to a node (the `Hello`, the notices shown);
//!   the sessions themselves are `clients::node`'s.
//! - [`launch`]: all ranks launched at once; all or nothing.
//! - [`rank`]: a running rank's writer (control, stdin, heartbeats) and
//!   reader (output, exit, failure detection).
//! - [`rank_msg`]: the messages to a rank's writer and of its end.
//! - [`mpi`]: `--mpi`, the PMI-1 server that lets MPICH-family ranks find each
//!   other over their sessions.
//! - [`run`]: the coordinator: failure model, signals, exit status.
//! - [`input`]: the stdin pump (`--stdin all|0|none`).
//! - [`output`]: the output thread (raw passthrough or `-l` labels).
//! - [`signals`]: which signals are caught and how each is forwarded.
//! - [`tty`]: raw mode and window size for `-t`, restored on every exit path.
//! - [`clock`]: heartbeat interval and timeout, and excusing the client's own stops.
//! - [`admin`]: `rexec jobs`, `rexec kill` and `rexec bid` (and the dispatch of
//!   `rexec nodes` and `rexec stats`), on the nodes of `[nodes]` or those a selector lists.
//! - [`stats`]: `rexec stats`, the selectors' counters and the nodes' market state.
//! - [`estimate`]: `rexec estimate` (and `rexec submit --estimate`), what a run would
//!   cost before it starts, by stride's rules, beside the caller's balance.
//! - [`reach`]: the configuration, the TLS connector, the nodes an admin
//!   command asks and one short session to each of them.
//! - [`columns`]: the aligned tables the admin commands print.
//! - [`show`]: how numbers and states are shown in those tables and in `-v`.
//! - [`bill`]: what the job used and paid, per node (`rexec -v`), and the
//!   credit and spending-ceiling (`--max-cost`) notices shown once per job rather
//!   than once per rank.
//! - [`batch`]: `rexec submit`, `queue`, `cancel`, `output` and `wait`: signed
//!   batch jobs through the cluster's queue.
//! - [`sys`]: the unsafe calls (`TIOCGWINSZ`, `localtime_r`).
//!
//! # Behaviour in brief
//!
//! - One TLS connection per rank, to the node certificate of the name in
//!   the configuration, speaking the session of `proto::node`.
//! - Each rank gets the client's environment plus `REXEC_RANK`,
//!   `REXEC_NRANKS`, `REXEC_NODES` (names in rank order, comma-separated)
//!   and `REXEC_JOB` (16 hex digits), and the client's working directory.
//! - Without `--nodes`, ranks go to the configuration's `[nodes]` in file
//!   order, cycling; without those too, to N distinct nodes a selector
//!   (vexecd) chooses by `--policy`. N defaults to 1.
//! - Exit status: first non-zero rank status in order of completion
//!   (`128+N` for signal N), 255 for a lost or failed node, 254 when the
//!   market refuses the bid, 127 when the program cannot be started, 130
//!   after a double Ctrl-C, 141 when stdout's reader went away, 2 for usage
//!   and configuration errors: the table is [`exit::TABLE`].
//! - A node silent for `REXEC_HEARTBEAT_TIMEOUT` (default 5s) is dead.
//!
//! # Deviations from the rexec/rexecd session contract
//!
//! - Additions the contract leaves open: exit status 255 for a lost or
//!   failed node, 127 when the program cannot be started, 141 when stdout's
//!   reader went away; `rexec kill` takes `-s SIG` (default KILL).
//!
//! ```
//! use rexec::cli::{Invocation, parse};
//! let argv = ["rexec", "-n", "2", "--", "jobs"].map(std::ffi::OsString::from);
//! let Invocation::Run(args) = parse(argv.to_vec()) else { panic!() };
//! assert_eq!(args.command, ["jobs"]);
//! ```
#![deny(missing_docs)]

pub mod admin;
pub mod agent;
pub mod batch;
pub mod bill;
pub mod choose;
pub mod cli;
pub mod clock;
pub mod columns;
pub mod config;
pub mod estimate;
pub mod exit;
pub mod find;
pub mod input;
pub mod launch;
pub mod live;
pub mod mpi;
pub mod nodes;
pub mod output;
pub mod plan;
pub mod rank;
pub mod rank_msg;
pub mod reach;
pub mod request;
pub mod run;
pub mod select;
pub mod show;
pub mod signals;
pub mod stats;
#[allow(unsafe_code)]
pub mod sys;
pub mod tty;

/// Most ranks one job may have (`-n`, of a run or a batch job): the argument parsers
/// and the placement ([`plan`]) hold a job to it.
pub const MAX_RANKS: u32 = 4096;

/// Print one line `rexec: MESSAGE` on stderr (with `\r\n` in raw mode).
pub fn say(message: &str) {
    use std::io::Write;
    let eol = if tty::is_raw() { "\r\n" } else { "\n" };
    let _ = write!(std::io::stderr(), "rexec: {message}{eol}");
}
