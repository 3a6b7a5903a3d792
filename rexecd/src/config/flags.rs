//! The command line of the `rexecd` binary: the flags every daemon has
//! (`daemon::flags::CommonFlags`: `--config`, `--listen`, `--ready-file`) and its own.
//! Every flag but `--config` overrides the
//! config-file key of the same name (with `_` for `-`; `--accountd` and `--journal`
//! those of the `[market]` table): serialized, the flags given are laid over the file
//! by `daemon::config::layer`.

use std::path::PathBuf;

use clap::Parser;
use daemon::config::TlsFlags;
use daemon::flags::{CommonFlags, DaemonFlags};
use serde::Serialize;

/// rexecd: run rexec jobs on this node, as the certificate's Unix user, inside a cgroup
/// per job, with CPU shared in proportion to the jobs' bids.
#[derive(Debug, Clone, Default, Parser, Serialize)]
#[command(name = "rexecd", version, about, after_help = stride::BID_HELP)]
pub struct Flags {
    /// `--config`, `--listen` (default [`super::DEFAULT_LISTEN`]), `--ready-file`.
    #[command(flatten)]
    #[serde(flatten)]
    pub common: CommonFlags<Rexecd>,
    /// Node name, as in the node certificate.
    #[arg(long)]
    pub name: Option<String>,
    /// `--ca`, `--cert` (the node certificate), `--key`, `--crl`.
    #[command(flatten)]
    #[serde(flatten)]
    pub tls: TlsFlags,
    /// Name of rexecd's parent cgroup (one per rexecd on a machine).
    #[arg(long, value_name = "NAME")]
    pub cgroup_parent: Option<String>,
    /// Confine this node's jobs to these CPUs (cpuset), a list like 0-3 or 0,2,5-7; the
    /// market then sells that many CPUs.
    #[arg(long, value_name = "LIST")]
    pub cpus: Option<String>,
    /// Users allowed to run jobs, comma-separated (default: every existing non-root user).
    #[arg(long, value_name = "USERS", value_delimiter = ',')]
    pub allowed_users: Option<Vec<String>>,
    /// Allow jobs to run as root (uid 0).
    #[arg(long)]
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub allow_root: bool,
    /// A client silent this long is dead and its job is killed (e.g. 5s, 800ms).
    #[arg(long, value_name = "DURATION")]
    pub heartbeat_timeout: Option<String>,
    /// How often rexecd sends heartbeats (e.g. 1s).
    #[arg(long, value_name = "DURATION")]
    pub heartbeat_interval: Option<String>,
    /// Most connections open at once, TLS handshakes included (default 1024); more are
    /// closed at once.
    #[arg(long, value_name = "N")]
    pub max_connections: Option<usize>,
    /// Most ranks one user may run on this node at once (default 256).
    #[arg(long, value_name = "N")]
    pub max_ranks_per_user: Option<usize>,
    /// accountd's address (host:port), the `[market]` table's `accountd`.
    #[arg(long, value_name = "ADDR")]
    #[serde(rename = "market.accountd")]
    pub accountd: Option<String>,
    /// The debit journal (the `[market]` table's `journal`): charges wait there until
    /// accountd has them. One per rexecd.
    #[arg(long, value_name = "PATH")]
    #[serde(rename = "market.journal")]
    pub journal: Option<PathBuf>,
    /// Most connections open at once from one address, TLS handshakes included
    /// (default 512).
    #[arg(long, value_name = "N")]
    pub max_connections_per_address: Option<usize>,
    /// Most connections open at once of one certificate (default 256).
    #[arg(long, value_name = "N")]
    pub max_connections_per_identity: Option<usize>,
    /// How long a client stopped by Ctrl-Z keeps its job (e.g. 60m).
    #[arg(long, value_name = "DURATION")]
    pub stopped_client_limit: Option<String>,
    /// TCP_USER_TIMEOUT of client connections (e.g. 5m): a client that acknowledges
    /// nothing for this long is dropped.
    #[arg(long, value_name = "DURATION")]
    pub tcp_user_timeout: Option<String>,
    /// The most memory one rank may ask for with --mem (e.g. 4G); more is refused.
    #[arg(long, value_name = "SIZE")]
    pub max_mem_per_rank: Option<String>,
    /// Memory of a rank that asks for none (e.g. 1G; default: --max-mem-per-rank,
    /// else no limit).
    #[arg(long, value_name = "SIZE")]
    pub default_mem_per_rank: Option<String>,
}

/// What rexecd's common flags say of it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Rexecd;

impl DaemonFlags for Rexecd {
    const DEFAULT_LISTEN: &'static str = super::DEFAULT_LISTEN;
}
