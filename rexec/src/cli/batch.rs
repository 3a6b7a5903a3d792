//! The batch forms of the command line: `rexec submit`, `queue`, `cancel`,
//! `output`, `wait` and `history`, after Slurm's `sbatch`, `squeue`, `scancel` and
//! `sacct` where they fit. Which words select these forms is
//! [`crate::cli`]'s rule.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use super::Spending;

/// Default `--expires`: a job not started within a week of its signature never starts.
pub const DEFAULT_EXPIRES: &str = "7d";

/// Default `--priority` (PRIOFIFO's queues: 0 highest and dearest, 1 normal, 2 low).
pub const DEFAULT_PRIORITY: u8 = 1;

/// How many times a job may start when it may be requeued (`--no-requeue`: once).
pub const DEFAULT_ATTEMPTS: u32 = 3;

/// `rexec submit`'s `--max-cost` help.
const SUBMIT_MAX_COST_HELP: &str = "A spending ceiling, credits, signed with the job: the queue \
    refuses the job when its worst case (rate x width x length) is above it, and stops it (state \
    COST_LIMIT) when its charges reach it";

/// `rexec submit`'s `-A` help.
const SUBMIT_ACCOUNT_HELP: &str = "Charge project ACCOUNT (you must be one of its members), \
    signed with the job, rather than your default project, or your personal account when you \
    have none";

const SUBMIT_AFTER_HELP: &str = "\
What the job is worth, one of:
  -r RATE                      a bid, credits per CPU-minute, as for rexec -r (the default, 0)
  --value V --deadline D       the batch paper's shape: worth V credits if done within --length
                               of submission, falling linearly to 0 at D after submission
  --utility SPEC | @FILE       Lee's piecewise-linear utility: TIME:VALUE,TIME:VALUE,... with
                               times after submission (0, 90m, 2h, 1d) strictly increasing and
                               values in credits, e.g. 0:50,2h:50,6h:0; a FILE holds the same,
                               one breakpoint per line allowed, # starting a comment
The job is signed with your key (the configuration's cert and key): the queue can delay or
cancel it but never change it, start it more than 3 times (once with --no-requeue; each
rank once per start, across the cluster), or start it again once one start has ended on
every rank (each node records a rank's end with the ledger, which then refuses any new
start of the job). It takes the environment and working directory
of this shell, as rexec does. The job id (16 hex digits) is printed alone on stdout:
  JOB=$(rexec submit -n 4 --length 2h --value 50 --deadline 6h ./prog args)
An array (--array 0-999%4) is one signed submission of many tasks; a node starts only the
indices you signed. `rexec queue` shows its tasks folded (JOB_[0-999]), `rexec cancel JOB`
cancels them all and JOB_7 one, `rexec wait JOB` waits for all and exits with the worst.
A batch script (PROG a readable file starting with #!) is signed with the job, its bytes, not
its path: each node runs a private copy, so editing the file later changes nothing. Lines
`#REXEC OPTIONS...` after the #! line, up to the first line that is not blank or a comment,
give options of rexec submit (e.g. #REXEC -n 4 --length 10m --after JOB); an option on the
command line wins over a directive, and an unknown one is a usage error naming its line.
The queue: the configuration's [batch] table (address = \"host:port\", server_name), else the
queue a selector knows of. A refused submission (no credit, wider than the market, a bad
signature) exits 254 with one line saying why; a queue that cannot be reached exits 255.";

/// `rexec submit|queue|cancel|output|wait ...`.
#[derive(Debug, Parser)]
#[command(
    name = "rexec",
    version,
    about = "Submit batch jobs to the cluster's queue, list them, cancel them, read their output, wait for them",
    after_help = crate::exit::help_table()
)]
pub struct BatchArgs {
    /// The batch command.
    #[command(subcommand)]
    pub command: BatchCommand,
    /// Client configuration file.
    #[arg(long, value_name = "PATH", env = "REXEC_CONFIG", global = true)]
    pub config: Option<PathBuf>,
}

/// The batch commands.
#[derive(Debug, Subcommand)]
#[allow(
    clippy::large_enum_variant,
    reason = "parsed once per process; boxing buys nothing"
)]
pub enum BatchCommand {
    /// Queue a program to run later on WIDTH processors; prints the job id.
    Submit(SubmitArgs),
    /// List your batch jobs: state, place in the queue, rate, (estimated) start, nodes.
    Queue(QueueArgs),
    /// Cancel batch jobs: dequeued, or their ranks killed.
    Cancel(CancelArgs),
    /// Print a batch job's standard output and error, as kept by the queue.
    Output(OutputArgs),
    /// Wait until a batch job ends, and exit with its status (an array: all its tasks,
    /// and the worst status).
    Wait(WaitArgs),
    /// Ended batch jobs: times, CPU, peak memory, exit, credits charged, utility achieved.
    History(HistoryArgs),
}

/// Arguments of `rexec submit`.
#[derive(Debug, Args)]
#[command(
    after_help = SUBMIT_AFTER_HELP,
    mut_arg("max_cost", |a| a.help(SUBMIT_MAX_COST_HELP)),
    mut_arg("account", |a| a.help(SUBMIT_ACCOUNT_HELP))
)]
pub struct SubmitArgs {
    /// Ranks, one per processor, all started at once.
    #[arg(short = 'n', long = "nranks", value_name = "WIDTH", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..=crate::MAX_RANKS as i64))]
    pub width: u32,
    /// How long the job runs (e.g. 90m, 2h, 1d; here or in a batch script's #REXEC
    /// line): what the queue plans with, and its time limit: at it the ranks get
    /// SIGTERM, then SIGKILL after the queue's kill_wait (default 30s), and the job
    /// ends TIMEOUT, charged for what ran.
    #[arg(long, value_name = "DURATION", required = true)]
    pub length: String,
    /// Bid in credits per CPU-minute, as for `rexec -r` (default 0).
    #[arg(short = 'r', long = "rate", value_name = "RATE", allow_negative_numbers = true,
          conflicts_with_all = ["value", "deadline", "utility"])]
    pub rate: Option<String>,
    /// What finishing within --length is worth, credits (needs --deadline).
    #[arg(
        long,
        value_name = "CREDITS",
        requires = "deadline",
        conflicts_with = "utility",
        allow_negative_numbers = true
    )]
    pub value: Option<String>,
    /// When, after submission, the job's value has fallen to 0 (needs --value).
    #[arg(long, value_name = "DURATION", requires = "value")]
    pub deadline: Option<String>,
    /// A piecewise-linear utility: TIME:VALUE,... or @FILE (see below).
    #[arg(long, value_name = "SPEC|@FILE")]
    pub utility: Option<String>,
    /// Priority queue for the PRIOFIFO policy: 0 highest (and dearest), 1 normal, 2 low.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_PRIORITY)]
    pub priority: u8,
    /// Fail the job if a node is lost while it runs, instead of queueing it again
    /// (by default it may start up to 3 times).
    #[arg(long)]
    pub no_requeue: bool,
    /// How long the signed job stays valid: no node starts it after that.
    #[arg(long, value_name = "DURATION", default_value = DEFAULT_EXPIRES)]
    pub expires: String,
    /// `--max-cost` and `-A`, signed with the job.
    #[command(flatten)]
    pub spending: Spending,
    /// Print what the job would cost (as `rexec estimate`: worst case, expected now on
    /// the nodes a selector would choose, your balance) and submit nothing.
    #[arg(long)]
    pub estimate: bool,
    /// A job array: one task per index FIRST..LAST (every STEP-th), each a job of its
    /// own seeing REXEC_ARRAY_INDEX and REXEC_ARRAY_JOB, charged on its own; %MAX
    /// bounds how many run at once. One signature covers them all; JOB_INDEX names a task.
    #[arg(long, value_name = "FIRST-LAST[:STEP][%MAX]")]
    pub array: Option<String>,
    /// Start only after job JOB (an array: all its tasks; ID_INDEX: one task) ended:
    /// ok (the default) finished with status 0, notok did not, any however. Repeatable;
    /// the job waits as DEPENDENT, and fails, saying why, once it never can start.
    #[arg(long, value_name = "JOB[:ok|any|notok]")]
    pub after: Vec<String>,
    /// Memory per rank (e.g. 512M, 4G): over it the kernel kills the rank and the job
    /// ends OUT_OF_MEMORY; above a node's max_mem_per_rank the node refuses it.
    #[arg(long, value_name = "SIZE")]
    pub mem: Option<String>,
    /// Write each rank's standard output to this file on its node, opened as you
    /// (relative to the working directory): %j job id, %a array index, %r rank,
    /// %n node, %% a %. Without it the queue keeps the output (rexec output).
    #[arg(short = 'o', long = "output", value_name = "PATTERN")]
    pub output: Option<String>,
    /// As -o, for standard error (the same file as -o shares it).
    #[arg(short = 'e', long = "error", value_name = "PATTERN")]
    pub error: Option<String>,
    /// The program and its arguments. The options come before it (one not known is a
    /// usage error, and nothing is queued); every word after it is the program's. A
    /// program whose name starts with - comes after --.
    #[arg(value_name = "PROG [ARGS...]", required = true, num_args = 1.., trailing_var_arg = true)]
    pub command: Vec<String>,
    /// The program's bytes when it is a batch script ([`crate::batch::script`]),
    /// signed with the job; set by [`crate::cli::try_parse`].
    #[arg(skip)]
    pub script: Option<Vec<u8>>,
}

/// Arguments of `rexec queue`.
#[derive(Debug, Args)]
pub struct QueueArgs {
    /// Everyone's jobs (an admin; others see their own).
    #[arg(short = 'a', long, conflicts_with = "user")]
    pub all: bool,
    /// This user's jobs (an admin may name anyone).
    #[arg(short = 'u', long, value_name = "USER")]
    pub user: Option<String>,
    /// Include jobs that ended (most recent first).
    #[arg(long)]
    pub ended: bool,
    /// One line per task of an array (by default an array's tasks in one state are
    /// one line, JOB_[FIRST-LAST]).
    #[arg(long)]
    pub expand: bool,
}

/// Arguments of `rexec history`.
#[derive(Debug, Args)]
pub struct HistoryArgs {
    /// Jobs that ended at or after this local time (YYYY-MM-DD[THH:MM[:SS]]) or this
    /// long ago (30m, 2h, 7d).
    #[arg(short = 'S', long, value_name = "TIME")]
    pub since: Option<String>,
    /// This user's jobs (an admin may name anyone).
    #[arg(short = 'u', long, value_name = "USER")]
    pub user: Option<String>,
    /// Everyone's jobs (an admin; others see their own).
    #[arg(short = 'a', long, conflicts_with = "user")]
    pub all: bool,
    /// Columns, comma-separated (any of
    /// jobid,user,name,state,exit,submit,start,end,elapsed,cpu,maxmem,charged,utility,width,nodes,attempts,reason;
    /// the default is those up to utility).
    #[arg(short = 'o', long, value_name = "FIELDS")]
    pub format: Option<String>,
}

/// Arguments of `rexec cancel`.
#[derive(Debug, Args)]
pub struct CancelArgs {
    /// Job ids, as `rexec submit` printed them (16 hex digits): an array's id cancels
    /// every task of it, ID_INDEX one task.
    #[arg(value_name = "JOB", required = true, num_args = 1..)]
    pub jobs: Vec<String>,
}

/// Arguments of `rexec output`.
#[derive(Debug, Args)]
pub struct OutputArgs {
    /// The job id.
    #[arg(value_name = "JOB")]
    pub job: String,
    /// Keep printing new output until the job ends.
    #[arg(short = 'f', long)]
    pub follow: bool,
    /// Write standard output to FILE instead (standard error still goes to stderr).
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub file: Option<PathBuf>,
}

/// Arguments of `rexec wait`.
#[derive(Debug, Args)]
pub struct WaitArgs {
    /// The job id.
    #[arg(value_name = "JOB")]
    pub job: String,
}
