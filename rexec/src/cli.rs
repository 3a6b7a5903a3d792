//! The command line: the run form `rexec [OPTIONS] [--] PROG [ARGS...]`,
//! the admin forms `rexec jobs`, `rexec kill JOBID`, `rexec bid JOBID RATE`
//! `rexec nodes` and `rexec stats`, the batch forms `rexec submit|queue|cancel|output|wait`
//! (defined in [`batch`]), and the rule that tells them apart.
//!
//! The rule: the first word that is neither an option nor an option's value
//! decides. If it is exactly `jobs`, `kill`, `bid`, `nodes` or `stats` and no `--` came before it, the
//! line is an admin command; `submit`, `queue`, `cancel`, `output` or `wait`, a batch
//! command; otherwise it is the program to run, and every
//! word after it belongs to the program. So a program called `jobs` runs with
//! `rexec -- jobs` (or `rexec ./jobs`).
//!
//! Before the program, every word that starts with `-` is an option of rexec's: one
//! it does not know is a usage error naming it (exit 2), never taken for the program
//! (`rexec --bogus hostname` runs nothing). A program whose name starts with `-`
//! comes after `--` (`rexec -- -weird-prog`). After the program nothing is rexec's:
//! `rexec ls -l` gives `-l` to `ls`. The batch forms follow the same rule
//! (`rexec submit --length 1h --bogus prog` queues nothing). Option values that may
//! be negative (a bid, a price) take a negative number, and nothing else that starts
//! with `-`.

pub mod batch;
mod shared;

pub use shared::{Choice, Spending};

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// The run form's `--policy` help.
const RUN_POLICY_HELP: &str = "How a selector chooses nodes (without --nodes and [nodes]): \
    lowest-price, least-loaded, random or history (history needs --length)";

/// The run form's `--max-price` help.
const RUN_MAX_PRICE_HELP: &str = "Choose only nodes whose price is at most this many credits \
    per minute (decimal, like the bid)";

/// `rexec estimate`'s `--policy` help.
const ESTIMATE_POLICY_HELP: &str = "How a selector would choose the nodes (as for a run)";

/// `rexec estimate`'s `--max-price` help.
const ESTIMATE_MAX_PRICE_HELP: &str =
    "Only nodes whose price is at most this many credits per minute (as for a run)";

/// The run form's `--max-cost` help.
const RUN_MAX_COST_HELP: &str = "A spending ceiling: the most the whole job may be charged, \
    credits (decimal). The nodes enforce it: each rank may be charged its share (CREDITS / \
    ranks), and a rank whose charges reach it runs on at bid 0, where it is free; you are told \
    once. `rexec estimate` says what a run is likely to cost";

/// The run form's `-A` help.
const RUN_ACCOUNT_HELP: &str = "Charge project ACCOUNT (you must be one of its members) rather \
    than your default project, or your personal account when you have no default. The job \
    still runs as you";

/// Which ranks read the client's standard input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum StdinMode {
    /// Every rank gets every byte (the default).
    All,
    /// Only rank 0; the others see end-of-file at once.
    #[value(name = "0")]
    Rank0,
    /// No rank; all see end-of-file at once and the client never reads its input.
    None,
}

fn rate_help() -> String {
    format!(
        "Bid RATE credits per minute of CPU on each node (decimal, e.g. 2 or 0.5; default 0). \
         A zero bid runs on CPU that no bidding job wants, and pays nothing. Negative, malformed \
         or larger than the configured max_rate is refused before anything starts.\n\n{}",
        stride::BID_HELP
    )
}

const RUN_AFTER_HELP: &str = "\
Other forms:
  rexec jobs [--nodes A,B,...]              list your jobs (all jobs for an admin) on the nodes
  rexec kill JOBID [--nodes A,B,...] [-s SIG]  signal every rank of a job (default SIGKILL)
  rexec bid JOBID RATE [--nodes A,B,...]    change a running job's bid on every node it runs on
  rexec nodes [--length DURATION] [--policy P]  list the nodes a selector knows
  rexec stats [--nodes A,B,...] [-v]        the selectors' counters and the nodes' market state
  rexec estimate -r RATE -n N --length D    what a run would cost: worst case, expected now, balance
Batch jobs (through the cluster's queue; `rexec submit --help` and so on for each):
  rexec submit -n W --length D [-r RATE | --value V --deadline D | --utility SPEC] PROG ARGS
                                            queue a signed job; prints its id
  rexec queue [--all] [--ended]             your jobs: state, place, rate, start, nodes
  rexec cancel JOB...                       dequeue jobs, or kill their ranks
  rexec output JOB [--follow] [-o FILE]     a job's stdout and stderr, as the queue kept them
  rexec wait JOB                            wait for a job; exit with its status
  rexec history [--since T] [-u U] [--format F]  ended jobs: times, CPU, memory, credits, utility
The first word that is not an option decides: `jobs`, `kill`, `bid`, `nodes`, `stats`, `estimate`, `submit`,
`queue`, `cancel`, `output`, `wait` or `history` there means that form, unless `--` came before it. To run a
program called jobs, write `rexec -- jobs`. Options go before the program: one rexec does not
know is a usage error (exit 2), and a program whose name starts with - comes after --
(`rexec -- -weird-prog`). Every word after the program is the program's (`rexec ls -l`).

Nodes: with --nodes, ranks go to the listed nodes in order (N defaults to the list length; with
-n N the list is cycled or cut to N). Without --nodes, the first N nodes of the configuration's
[nodes] table are used in file order, cycling if there are fewer than N (N defaults to 1).
Without --nodes and [nodes], a selector (vexecd) chooses N distinct nodes by --policy (under
--max-price): the selectors of the [selectors] table (name = \"host:port\", asked in file order),
else those heard announcing on the group of the [discovery] table. A node that cannot be reached,
refuses, or whose certificate names another node is replaced by the next candidate (3 times at
most); -v says which selector answered and which nodes were chosen, and why. jobs, kill and bid
ask every node of [nodes] (or of --nodes); without [nodes], every live node a selector lists, by
name (or those of them --nodes names).

Configuration: --config PATH, else $REXEC_CONFIG, else $XDG_CONFIG_HOME/rexec/config.toml, else
~/.config/rexec/config.toml (TOML with ca, cert, key, optional crl and max_rate, and a [nodes]
table of name = \"host:port\", or a [selectors] table, or a [discovery] table; sections of other
tools, such as [accountd], are left alone).
REXEC_CA, REXEC_CERT, REXEC_KEY and REXEC_CRL override the file's keys of the same name.
REXEC_HEARTBEAT_TIMEOUT (e.g. 5s, 500ms) sets how long a silent node is trusted (default 5s).
-v prints each rank's job id at start (`rexec: job ID on NODE (rank R)`), for rexec bid and kill.
";

fn after_help() -> String {
    format!("{RUN_AFTER_HELP}\n{}", crate::exit::help_table())
}

/// `rexec [OPTIONS] [--] PROG [ARGS...]`.
#[derive(Debug, Parser)]
#[command(
    name = "rexec",
    version,
    about = "Run a program on several cluster nodes as if it ran here",
    override_usage = "rexec [OPTIONS] [--] PROG [ARGS...]\n       rexec jobs [--nodes A,B,...]\n       rexec kill JOBID [--nodes A,B,...] [-s SIG]\n       rexec bid JOBID RATE [--nodes A,B,...]\n       rexec nodes [--length DURATION] [--policy P]\n       rexec submit|queue|cancel|output|wait ...",
    after_help = after_help(),
    mut_arg("policy", |a| a.help(RUN_POLICY_HELP)),
    mut_arg("max_price", |a| a.help(RUN_MAX_PRICE_HELP)),
    mut_arg("max_cost", |a| a.help(RUN_MAX_COST_HELP)),
    mut_arg("account", |a| a.help(RUN_ACCOUNT_HELP))
)]
pub struct RunArgs {
    /// Bid in credits per minute.
    #[arg(short = 'r', long = "rate", value_name = "RATE", default_value = "0", long_help = rate_help(),
          allow_negative_numbers = true)]
    pub rate: String,
    /// Number of ranks (processes) to start.
    #[arg(short = 'n', long = "nranks", value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..=crate::MAX_RANKS as i64))]
    pub nranks: Option<u32>,
    /// Nodes to run on, in rank order; a node may appear more than once.
    #[arg(long, value_name = "A,B,...", value_delimiter = ',')]
    pub nodes: Option<Vec<String>>,
    /// `--policy` and `--max-price`.
    #[command(flatten)]
    pub choice: Choice,
    /// The job's expected CPU time (e.g. 90s, 20m), for the history policy's
    /// completion predictions.
    #[arg(long, value_name = "DURATION")]
    pub length: Option<String>,
    /// `--max-cost` and `-A`.
    #[command(flatten)]
    pub spending: Spending,
    /// Prefix every output line with the rank that wrote it, as `[R] `.
    #[arg(short = 'l', long = "label")]
    pub label: bool,
    /// Which ranks read standard input.
    #[arg(long, value_enum, default_value = "all", value_name = "all|0|none")]
    pub stdin: StdinMode,
    /// Give rank 0 a pseudo-terminal (for interactive programs); stdout and
    /// stderr of rank 0 then arrive merged. The local terminal is put in raw
    /// mode while the job runs, when stdin is one.
    #[arg(short = 't', long = "tty")]
    pub tty: bool,
    /// Abort every rank as soon as one exits with a non-zero status.
    #[arg(long)]
    pub kill_on_bad_exit: bool,
    /// Say which selector answered and which nodes it chose, and why; at the end, print
    /// per node the CPU time the ranks used and the credits they were charged.
    #[arg(short = 'v', long = "verbose")]
    pub verbose: bool,
    /// Client configuration file.
    #[arg(long, value_name = "PATH", env = "REXEC_CONFIG")]
    pub config: Option<PathBuf>,
    /// Run an MPI program (MPICH-family): rexec answers the ranks' PMI-1 requests, so
    /// they find each other as under mpiexec. The client file's `[mpi] default = true`
    /// makes it the default. Open MPI does not speak PMI-1 (start it with mpirun.openmpi
    /// and rexec-agent): when no rank of several opens its PMI channel, rexec says so.
    #[arg(long, conflicts_with = "no_mpi")]
    pub mpi: bool,
    /// Not an MPI job, whatever the client file's `[mpi]` default says.
    #[arg(long)]
    pub no_mpi: bool,
    /// Memory per rank (e.g. 512M, 4G), enforced by each node's memory controller: a
    /// rank over it is killed by the kernel, rexec says so in one line and exits 252.
    /// Above a node's max_mem_per_rank the launch is refused (exit 2).
    #[arg(long, value_name = "SIZE")]
    pub mem: Option<String>,
    /// The program and its arguments. rexec's options come before it; every word after
    /// it is the program's. A program whose name starts with - comes after --.
    // No `allow_hyphen_values`: with it, an unknown option before the program became
    // the program. `trailing_var_arg` alone gives the program every word after it.
    #[arg(value_name = "PROG [ARGS...]", required = true, num_args = 1.., trailing_var_arg = true)]
    pub command: Vec<String>,
}

/// `rexec jobs ...`, `rexec kill ...` and `rexec bid ...`.
#[derive(Debug, Parser)]
#[command(
    name = "rexec",
    version,
    about = "List, kill or re-bid rexec jobs on the nodes, or list the nodes a selector knows"
)]
pub struct AdminArgs {
    /// The admin command.
    #[command(subcommand)]
    pub command: AdminCommand,
    /// Nodes to ask (default: every node of the configuration's [nodes], or
    /// without [nodes], every live node a selector lists).
    #[arg(long, value_name = "A,B,...", value_delimiter = ',', global = true)]
    pub nodes: Option<Vec<String>>,
    /// Client configuration file.
    #[arg(long, value_name = "PATH", env = "REXEC_CONFIG", global = true)]
    pub config: Option<PathBuf>,
}

/// The admin commands.
#[derive(Debug, Subcommand)]
pub enum AdminCommand {
    /// List your jobs (all jobs with an admin certificate) on the nodes.
    Jobs,
    /// Signal every rank of a job on the nodes.
    Kill(KillArgs),
    /// Change the bid of every rank of a running job on the nodes (checked as a
    /// launch is: the node's max_rate and your balance).
    Bid(BidArgs),
    /// List the nodes a selector knows: price, CPUs, idle CPUs, jobs, load,
    /// predicted completion for --length and the age of the last announcement.
    Nodes(NodesArgs),
    /// Show the selectors' counters (nodes, selects, announcements accepted and
    /// dropped by reason) and the nodes' market state (CPUs, price, contention, and
    /// over the ranks a node shows you: bids, model and used CPUs, charges).
    Stats(StatsArgs),
    /// What a run would cost before it starts: the worst case (bid × ranks × length),
    /// and the expected cost and share now, from the chosen nodes' competing bids and
    /// CPUs under the market's rules (stride's, as the nodes charge); beside your balance.
    Estimate(EstimateArgs),
}

/// Arguments of `rexec estimate`.
#[derive(Debug, Args)]
#[command(
    mut_arg("policy", |a| a.help(ESTIMATE_POLICY_HELP)),
    mut_arg("max_price", |a| a.help(ESTIMATE_MAX_PRICE_HELP))
)]
pub struct EstimateArgs {
    /// The bid, credits per minute of CPU on each node, as for `rexec -r`.
    #[arg(
        short = 'r',
        long = "rate",
        value_name = "RATE",
        default_value = "0",
        allow_negative_numbers = true
    )]
    pub rate: String,
    /// Number of ranks (default 1, or the length of --nodes).
    #[arg(short = 'n', long = "nranks", value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..=crate::MAX_RANKS as i64))]
    pub nranks: Option<u32>,
    /// How long the run lasts (e.g. 90s, 20m, 1h).
    #[arg(long, value_name = "DURATION", required = true)]
    pub length: String,
    /// `--policy` and `--max-price`, as for a run.
    #[command(flatten)]
    pub choice: Choice,
    /// Say which selector answered.
    #[arg(short = 'v', long = "verbose")]
    pub verbose: bool,
    /// The project the run would charge (as for a run): its balance, burn rate
    /// and ceiling per job are shown (default: your default project, or your
    /// personal account).
    #[arg(short = 'A', long = "account", value_name = "ACCOUNT")]
    pub account: Option<String>,
}

/// Arguments of `rexec stats`.
#[derive(Debug, Args)]
pub struct StatsArgs {
    /// Say which selectors were found.
    #[arg(short = 'v', long = "verbose")]
    pub verbose: bool,
}

/// Arguments of `rexec nodes`.
#[derive(Debug, Args)]
pub struct NodesArgs {
    /// Predict each node's completion of a job of this CPU length (e.g. 90s, 20m).
    #[arg(long, value_name = "DURATION")]
    pub length: Option<String>,
    /// List the nodes in the order this policy would choose them (default: by name).
    #[arg(long, value_name = "POLICY")]
    pub policy: Option<String>,
    /// Say which selector answered.
    #[arg(short = 'v', long = "verbose")]
    pub verbose: bool,
}

/// Arguments of `rexec bid`.
#[derive(Debug, Args)]
pub struct BidArgs {
    /// The job id, as printed by `rexec jobs` (16 hex digits).
    #[arg(value_name = "JOBID")]
    pub job: String,
    /// The new bid, credits per minute of CPU (decimal, e.g. 2 or 0.5; 0 runs on CPU that no
    /// bidding job wants).
    #[arg(value_name = "RATE", allow_negative_numbers = true)]
    pub rate: String,
}

/// Arguments of `rexec kill`.
#[derive(Debug, Args)]
pub struct KillArgs {
    /// The job id, as printed by `rexec jobs` (16 hex digits).
    #[arg(value_name = "JOBID")]
    pub job: String,
    /// The signal to send, by name (KILL, TERM, INT, ...).
    #[arg(short = 's', long, default_value = "KILL", value_name = "SIG")]
    pub signal: String,
}

/// What the command line asks for.
#[derive(Debug)]
pub enum Invocation {
    /// Run a program.
    Run(RunArgs),
    /// `jobs`, `kill`, `bid`, `nodes` or `stats`.
    Admin(AdminArgs),
    /// `submit`, `queue`, `cancel`, `output` or `wait`.
    Batch(batch::BatchArgs),
}

/// Which form a command line is, by the rule in the module docs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    /// Run a program.
    Run,
    /// `jobs`, `kill`, `bid`, `nodes` or `stats`.
    Admin,
    /// `submit`, `queue`, `cancel`, `output` or `wait`.
    Batch,
}

/// The words that make a line an admin command.
pub const ADMIN_WORDS: [&str; 6] = ["jobs", "kill", "bid", "nodes", "stats", "estimate"];

/// The words that make a line a batch command.
pub const BATCH_WORDS: [&str; 6] = ["submit", "queue", "cancel", "output", "wait", "history"];

/// Long options of the run form that take a value in the next word.
const LONG_WITH_VALUE: [&str; 9] = [
    "--max-cost",
    "--rate",
    "--nranks",
    "--nodes",
    "--stdin",
    "--config",
    "--policy",
    "--max-price",
    "--length",
];
/// Short options of the run form that take a value.
const SHORT_WITH_VALUE: [char; 2] = ['r', 'n'];

/// Whether `args` (without the program name) is an admin command, by the
/// rule in the module docs.
///
/// ```
/// use rexec::cli::is_admin;
/// let w = |s: &str| s.split(' ').map(std::ffi::OsString::from).collect::<Vec<_>>();
/// assert!(is_admin(&w("jobs")));
/// assert!(is_admin(&w("--nodes a,b kill 1f")));
/// assert!(!is_admin(&w("-- jobs")));
/// assert!(!is_admin(&w("-n 2 ./jobs")));
/// assert!(!is_admin(&w("-r kill ls"))); // `kill` is the rate here
/// ```
pub fn is_admin(args: &[OsString]) -> bool {
    form(args) == Form::Admin
}

/// Which form `args` (without the program name) is, by the rule in the module docs.
///
/// ```
/// use rexec::cli::{Form, form};
/// let w = |s: &str| s.split(' ').map(std::ffi::OsString::from).collect::<Vec<_>>();
/// assert_eq!(form(&w("submit -n 2 --length 1h ./prog")), Form::Batch);
/// assert_eq!(form(&w("--config c.toml wait 00ff")), Form::Batch);
/// assert_eq!(form(&w("-- wait 5")), Form::Run);
/// assert_eq!(form(&w("nodes")), Form::Admin);
/// ```
pub fn form(args: &[OsString]) -> Form {
    deciding_word(args).0
}

/// The form of `args` and the word that decided it (`None` when no word did: only
/// options, or `--`, or a word that is not UTF-8).
fn deciding_word(args: &[OsString]) -> (Form, Option<&str>) {
    let (form, word) = deciding(args);
    (form, word.map(|(_, w)| w))
}

/// [`deciding_word`] with the word's index in `args`.
fn deciding(args: &[OsString]) -> (Form, Option<(usize, &str)>) {
    let mut words = args.iter().enumerate();
    while let Some((at, word)) = words.next() {
        let Some(w) = word.to_str() else {
            return (Form::Run, None);
        };
        if w == "--" {
            return (Form::Run, None);
        }
        if let Some(long) = w.strip_prefix("--") {
            if !long.contains('=') && LONG_WITH_VALUE.contains(&w) {
                words.next();
            }
            continue;
        }
        if let Some(shorts) = w.strip_prefix('-').filter(|s| !s.is_empty()) {
            // A cluster like `-lt` or `-ln4`: a value-taking letter takes the
            // rest of the word, or the next word when it ends the cluster.
            for (i, c) in shorts.char_indices() {
                if SHORT_WITH_VALUE.contains(&c) {
                    if i + c.len_utf8() == shorts.len() {
                        words.next();
                    }
                    break;
                }
            }
            continue;
        }
        let form = if ADMIN_WORDS.contains(&w) {
            Form::Admin
        } else if BATCH_WORDS.contains(&w) {
            Form::Batch
        } else {
            Form::Run
        };
        return (form, Some((at, w)));
    }
    (Form::Run, None)
}

/// Parse the whole command line (including the program name). On a usage error it
/// exits 2: an unknown option with one `rexec: ` line naming it ([`unknown_option`]),
/// a batch script that cannot be submitted with one naming the script and its line,
/// anything else with clap's message (`--help` and `--version` exit 0).
pub fn parse(argv: Vec<OsString>) -> Invocation {
    match try_parse(&argv) {
        Ok(invocation) => invocation,
        Err(e) => match unknown_option(&argv, &e).or_else(|| own_line(&e)) {
            Some(line) => {
                crate::say(&line);
                std::process::exit(crate::exit::USAGE);
            }
            None => e.exit(),
        },
    }
}

/// [`parse`] without exiting: clap's error as it is.
pub fn try_parse(argv: &[OsString]) -> Result<Invocation, clap::Error> {
    Ok(match form(argv.get(1..).unwrap_or(&[])) {
        Form::Admin => Invocation::Admin(AdminArgs::try_parse_from(argv)?),
        Form::Batch => Invocation::Batch(batch_args(argv)?),
        Form::Run => Invocation::Run(RunArgs::try_parse_from(argv)?),
    })
}

/// The batch form of `argv`; for `rexec submit SCRIPT`, with the script's
/// `#REXEC` directives under the command line's options and its bytes kept
/// ([`crate::batch::script`]). A bad directive is a usage error naming its line.
fn batch_args(argv: &[OsString]) -> Result<batch::BatchArgs, clap::Error> {
    use crate::batch::script;
    use clap::CommandFactory;
    let strict = || batch::BatchArgs::try_parse_from(argv);
    let Some((at, "submit")) = deciding(argv.get(1..).unwrap_or(&[])).1 else {
        return strict();
    };
    // A script may give --length itself: ask clap without it first.
    let relaxed = batch::BatchArgs::command()
        .mut_subcommand("submit", |c| c.mut_arg("length", |a| a.required(false)));
    let Ok(matches) = relaxed.try_get_matches_from(argv) else {
        return strict();
    };
    let Some(submit) = matches.subcommand_matches("submit") else {
        return strict();
    };
    let Some(program) = submit.get_one::<String>("command").cloned() else {
        return strict();
    };
    let usage = |e: script::ScriptError| {
        clap::Error::raw(clap::error::ErrorKind::InvalidValue, format!("{e}\n"))
    };
    let Some(bytes) = script::read(&program).map_err(usage)? else {
        return strict();
    };
    let given = script::explicit(submit);
    let merged = script::merge(argv, at + 1, &program, &bytes, &given).map_err(usage)?;
    let mut args = batch::BatchArgs::try_parse_from(&merged)?;
    if let batch::BatchCommand::Submit(submit) = &mut args.command {
        submit.script = Some(bytes);
    }
    Ok(args)
}

/// The line of an error rexec made itself (a batch script's, see [`batch_args`]),
/// without clap's `error: `.
fn own_line(error: &clap::Error) -> Option<String> {
    use clap::error::{ContextKind, ErrorKind};
    if error.kind() != ErrorKind::InvalidValue || error.get(ContextKind::InvalidArg).is_some() {
        return None;
    }
    let text = error.to_string();
    let line = text.lines().next()?;
    Some(line.strip_prefix("error: ").unwrap_or(line).to_string())
}

/// The line (without `rexec: `) for clap's `error` on `argv` when it is an option
/// rexec does not know: it names the option and says where options and programs go.
/// `None` for any other error (a surplus argument that is no option among them).
///
/// ```
/// use rexec::cli::{try_parse, unknown_option};
/// let argv = ["rexec", "-n", "2", "--bogus", "hostname"].map(std::ffi::OsString::from);
/// let e = try_parse(&argv).unwrap_err();
/// let line = unknown_option(&argv, &e).unwrap();
/// assert!(line.starts_with("unknown option --bogus"), "{line}");
/// ```
pub fn unknown_option(argv: &[OsString], error: &clap::Error) -> Option<String> {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if error.kind() != ErrorKind::UnknownArgument {
        return None;
    }
    let Some(ContextValue::String(option)) = error.get(ContextKind::InvalidArg) else {
        return None;
    };
    // Only an option; `rexec wait 1 2` is a surplus argument, clap's own message.
    let name = option.split('=').next().unwrap_or(option);
    if !name.starts_with('-') || name == "-" {
        return None;
    }
    let (form, word) = deciding_word(argv.get(1..).unwrap_or(&[]));
    Some(match (form, word) {
        (Form::Run, _) => format!(
            "unknown option {name}: rexec's options come before the program (rexec --help), \
             and a program whose name starts with - comes after -- (rexec -- PROG)"
        ),
        (_, Some("submit")) => format!(
            "unknown option {name}: nothing was queued; the options come before the program \
             (rexec submit --help), and a program whose name starts with - comes after --"
        ),
        (_, Some(word)) => format!("unknown option {name} (rexec {word} --help)"),
        (_, None) => format!("unknown option {name} (rexec --help)"),
    })
}

#[cfg(test)]
mod tests;
