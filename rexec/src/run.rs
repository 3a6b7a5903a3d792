//! The run form from start to exit status: check the request (rate,
//! configuration, placement), launch, then coordinate the running ranks
//! until every one has ended.
//!
//! The failure model: a rank killed by a signal, a lost node, an `Error`
//! from a node, or a node silent past the heartbeat timeout aborts the
//! whole job: every other rank gets `Signal(Kill)`, and the client says
//! which node and rank failed and why. `--kill-on-bad-exit` adds a non-zero
//! exit to that list. After an abort the client waits at most
//! [`ABORT_GRACE`] for the other ranks to confirm.
//!
//! Exit status: the first non-zero status in the order ranks finish (a
//! failed rank counts as 255; `128+N` for a rank killed by signal N), 0 when
//! all succeed; 130 after a double Ctrl-C, 141 when stdout's reader went
//! away (as for a local program killed by SIGPIPE).

use std::sync::Arc;
use std::time::Duration;

use money::Bid;
use proto::node::{ExitStatus, Signal, ToNode};
use tokio::sync::mpsc;
use tokio::time::{Instant, sleep_until};

use crate::cli::RunArgs;
use crate::clock::Pause;
use crate::config::{Config, config_path};
use crate::output::{Output, OutputEvent};
use crate::plan::{JobSpec, place};
use crate::rank::{RankEvent, RankLink};
use crate::signals::{Caught, DOUBLE_INT};
use crate::{input, launch, rank, say, signals, tty};

/// How long ranks may take to confirm an abort.
pub const ABORT_GRACE: Duration = Duration::from_secs(3);

/// How long ranks may take to confirm the abort of a double Ctrl-C.
pub const INTERRUPT_GRACE: Duration = Duration::from_secs(1);

/// Exit status for a usage or configuration error.
pub const USAGE: i32 = 2;

/// Run the program the arguments name; returns the client's exit status.
pub async fn run(args: RunArgs) -> i32 {
    let usage = |msg: String| {
        say(&msg);
        USAGE
    };
    let bid: Bid = match args.rate.parse() {
        Ok(b) => b,
        Err(e) => return usage(format!("-r {}: {e}", args.rate)),
    };
    let timeout = match crate::clock::timeout_from_env() {
        Ok(t) => t,
        Err(e) => return usage(e),
    };
    let config = match config_path(args.config.as_deref()).and_then(|p| Config::load(&p)) {
        Ok(c) => c,
        Err(e) => return usage(e.to_string()),
    };
    if bid > config.max_rate {
        return usage(format!(
            "-r {}: a bid of {bid} credits per minute is over the maximum of {} set by max_rate in {}",
            args.rate,
            config.max_rate,
            config.path.display()
        ));
    }
    let selecting = args.nodes.is_none() && config.selects();
    let Ok(connector) = config.connector().map_err(|e| say(&e.to_string())) else {
        return 255;
    };
    let (ranks, opened) = if selecting {
        let wanted = match wanted(&args) {
            Ok(w) => w,
            Err(e) => return usage(e),
        };
        // Check what can be checked before asking anyone (the node names
        // are not known yet; the full check follows the choice).
        let placeholder = [crate::plan::RankTarget {
            rank: 0,
            node: crate::config::NodeEntry {
                name: "node".into(),
                addr: String::new(),
            },
        }];
        if let Err(e) = JobSpec::from_process(&placeholder, bid, args.command.clone(), None)
            .launch(0)
            .validate()
        {
            return usage(format!("cannot launch this: {e}"));
        }
        let note = |m: &str| {
            if args.verbose {
                say(m);
            }
        };
        let selectors = match crate::find::selectors(&config, &connector, &note).await {
            Ok(s) => s,
            Err(e) => {
                say(&e.to_string());
                return 255;
            }
        };
        match crate::choose::choose(&connector, &selectors, &wanted, timeout, &note).await {
            Ok(chosen) => (chosen.ranks, chosen.sessions),
            Err(e) => {
                for line in e.to_string().lines() {
                    say(line);
                }
                return 255;
            }
        }
    } else {
        // `--nodes` with no [nodes] table: the names are looked up in a
        // selector's listing of the live nodes (an unknown name is refused
        // there, naming the live ones; repeats still give a node several
        // ranks).
        let listed;
        let pool = if config.nodes.is_empty() && config.selects() {
            listed = Config {
                nodes: match crate::admin::listed_nodes(&config, args.nodes.as_deref(), &connector)
                    .await
                {
                    Ok(nodes) => nodes,
                    Err(code) => return code,
                },
                ..config.clone()
            };
            &listed
        } else {
            &config
        };
        match place(pool, args.nodes.as_deref(), args.nranks) {
            Ok(r) => (r, Vec::new()),
            Err(e) => return usage(e.to_string()),
        }
    };
    let terminal = args
        .tty
        .then(|| tty::window_size().unwrap_or(tty::DEFAULT_SIZE));
    let spec = JobSpec::from_process(&ranks, bid, args.command.clone(), terminal);
    if let Err(e) = spec.launch(0).validate() {
        return usage(format!("cannot launch this: {e}"));
    }
    let mut signals = match signals::install() {
        Ok(s) => s,
        Err(e) => {
            say(&format!("cannot install signal handlers: {e}"));
            return 255;
        }
    };
    let (out_tx, out_rx) = mpsc::unbounded_channel();
    let output = match Output::start(args.label, out_tx) {
        Ok(o) => o,
        Err(e) => {
            say(&format!("cannot start the output thread: {e}"));
            return 255;
        }
    };
    let pause = Arc::new(Pause::new());
    let (ev_tx, ev_rx) = mpsc::unbounded_channel();
    let spawner = launch::Spawner {
        output: output.sender(),
        events: ev_tx,
        pause: pause.clone(),
        notices: Arc::new(crate::bill::CreditNotices::default()),
    };
    let launched = launch::launch_all(
        &connector,
        &spec,
        &ranks,
        opened,
        timeout,
        &mut signals,
        spawner,
    )
    .await;
    let launch::Launched { links, deferred } = match launched {
        Ok(launched) => launched,
        Err(f) => {
            // What the started ranks printed before they were stopped still shows.
            let finish = tokio::task::spawn_blocking(move || output.finish());
            let _ = tokio::time::timeout(INTERRUPT_GRACE, finish).await;
            return f.code;
        }
    };
    if args.tty {
        let _ = tty::enter_raw();
    }
    if let Err(e) = input::start(args.stdin, links.iter().map(|l| l.stdin.clone()).collect()) {
        say(&format!("cannot read standard input: {e}"));
    }
    let nodes = links.iter().map(|l| l.node.clone()).collect();
    let mut job = Job {
        done: vec![false; links.len()],
        links,
        first_bad: None,
        forced: None,
        aborting: None,
        forwarded: Vec::new(),
        last_int: None,
        tty: args.tty,
        kill_on_bad_exit: args.kill_on_bad_exit,
        pause,
        exits: Vec::new(),
        nodes,
    };
    for sig in deferred {
        job.on_signal(sig).await;
    }
    job.coordinate(ev_rx, out_rx, signals).await;
    let code = job.forced.or(job.first_bad).unwrap_or(0);
    for link in &job.links {
        link.reader.abort();
    }
    let links = std::mem::take(&mut job.links);
    for link in links {
        let _ = link.reader.await;
    }
    let finish = tokio::task::spawn_blocking(move || output.finish());
    if job.aborting.is_some() {
        // Output still queued may be stuck behind a reader that stopped
        // reading; an aborted job does not wait for it long.
        let _ = tokio::time::timeout(INTERRUPT_GRACE, finish).await;
    } else {
        let _ = finish.await;
    }
    if args.verbose {
        let exits = job.exits.iter().map(|(r, e)| (job.node_of(*r), e.clone()));
        for bill in crate::bill::per_node(exits) {
            say(&bill.to_string());
        }
    }
    code
}

/// What to ask a selector for, from `-n`, `--policy`, `--max-price` and
/// `--length`; an error is a usage message.
pub fn wanted(args: &RunArgs) -> Result<crate::choose::Wanted, String> {
    let max_price = match &args.max_price {
        None => None,
        Some(text) => {
            let micros =
                money::parse_credits(text).map_err(|e| format!("--max-price {text}: {e}"))?;
            if micros < 0 {
                return Err(format!(
                    "--max-price {text}: a price cap cannot be negative; give credits per minute like 0.5"
                ));
            }
            Some(micros)
        }
    };
    let expected_cpu_ms = match &args.length {
        None => None,
        Some(text) => Some(
            proto::duration::parse_duration(text)
                .map_err(|e| format!("--length {text}: {e}"))?
                .as_millis() as u64,
        ),
    };
    if args.policy == "history" && expected_cpu_ms.is_none() {
        return Err(
            "--policy history needs --length, the job's expected CPU time (e.g. --length 20m): \
             it places the job where that much CPU would finish soonest"
                .to_string(),
        );
    }
    Ok(crate::choose::Wanted {
        count: args.nranks.unwrap_or(1),
        policy: args.policy.clone(),
        max_price,
        expected_cpu_ms,
    })
}

struct Job {
    links: Vec<RankLink>,
    done: Vec<bool>,
    first_bad: Option<i32>,
    /// An exit status that overrides the ranks' (double Ctrl-C, broken pipe).
    forced: Option<i32>,
    /// Set once the job is being aborted: until when to wait for the ranks.
    aborting: Option<Instant>,
    /// Signals the user sent (a rank dying of one of them is no surprise).
    forwarded: Vec<Signal>,
    last_int: Option<Instant>,
    tty: bool,
    kill_on_bad_exit: bool,
    pause: Arc<Pause>,
    /// The exits reported so far, by rank.
    exits: Vec<(u32, proto::node::Exit)>,
    /// Node names by rank (kept after the links are dropped).
    nodes: Vec<String>,
}

impl Job {
    async fn coordinate(
        &mut self,
        mut events: mpsc::UnboundedReceiver<RankEvent>,
        mut output: mpsc::UnboundedReceiver<OutputEvent>,
        mut signals: mpsc::UnboundedReceiver<Caught>,
    ) {
        while self.done.iter().any(|d| !d) {
            let grace = self.aborting;
            tokio::select! {
                ev = events.recv() => match ev {
                    Some(ev) => self.on_rank(ev),
                    None => break,
                },
                Some(ev) = output.recv() => self.on_output(ev),
                Some(sig) = signals.recv() => self.on_signal(sig).await,
                _ = sleep_until(grace.unwrap_or_else(Instant::now)), if grace.is_some() => break,
            }
        }
    }

    fn node(&self, rank: u32) -> &str {
        &self.links[rank as usize].node
    }

    fn node_of(&self, rank: u32) -> &str {
        self.nodes.get(rank as usize).map_or("?", String::as_str)
    }

    fn on_rank(&mut self, ev: RankEvent) {
        match ev {
            RankEvent::Exited { rank, exit } => {
                self.done[rank as usize] = true;
                let status = exit.status;
                self.exits.push((rank, exit));
                if !status.success() {
                    self.first_bad.get_or_insert(status.shell_code());
                }
                match status {
                    ExitStatus::Signaled { signal, .. } => {
                        let why = format!("killed by {signal}");
                        let expected = self.forwarded.contains(&signal);
                        self.abort(rank, &why, expected);
                    }
                    ExitStatus::Code(c) if c != 0 && self.kill_on_bad_exit => {
                        self.abort(rank, &format!("exited with status {c}"), false);
                    }
                    ExitStatus::Code(_) => {}
                }
            }
            RankEvent::Failed { rank, why } => {
                self.done[rank as usize] = true;
                self.first_bad.get_or_insert(255);
                self.abort(rank, &why, false);
            }
        }
    }

    /// Abort every rank still running because `rank` failed for `why`
    /// (said to the user unless `quiet` or already aborting).
    fn abort(&mut self, rank: u32, why: &str, quiet: bool) {
        let live = self.done.iter().any(|d| !d);
        if self.aborting.is_some() {
            return;
        }
        if !quiet {
            let tail = if live {
                "; aborting the other ranks"
            } else {
                ""
            };
            say(&format!(
                "node {} (rank {rank}): {why}{tail}",
                self.node(rank)
            ));
        }
        self.kill_all(ABORT_GRACE);
    }

    fn kill_all(&mut self, grace: Duration) {
        self.aborting = Some(Instant::now() + grace);
        for link in self.live() {
            link.signal(Signal::Kill);
        }
    }

    fn live(&self) -> impl Iterator<Item = &RankLink> {
        self.links.iter().filter(|l| !self.done[l.rank as usize])
    }

    fn on_output(&mut self, ev: OutputEvent) {
        match ev {
            OutputEvent::BrokenPipe => {
                self.forced.get_or_insert(141);
            }
            OutputEvent::Failed(msg) => {
                say(&msg);
                self.first_bad.get_or_insert(255);
            }
        }
        if self.aborting.is_none() {
            self.kill_all(ABORT_GRACE);
        }
    }

    async fn on_signal(&mut self, sig: Caught) {
        match sig {
            Caught::Int => {
                let now = Instant::now();
                if self
                    .last_int
                    .is_some_and(|t| now.duration_since(t) < DOUBLE_INT)
                {
                    say("interrupted twice, aborting");
                    self.forced = Some(130);
                    self.kill_all(INTERRUPT_GRACE);
                    return;
                }
                self.last_int = Some(now);
                self.forward(Signal::Int);
            }
            Caught::Forward(s) => self.forward(s),
            Caught::Tstp => self.suspend().await,
            Caught::Cont => self.pause.resumed(),
            Caught::Winch => {
                if self.tty
                    && !self.done[0]
                    && let Some(size) = tty::window_size()
                {
                    let _ = self.links[0]
                        .control
                        .send(rank::Control::Send(ToNode::Resize(size)));
                }
            }
        }
    }

    fn forward(&mut self, signal: Signal) {
        if !self.forwarded.contains(&signal) {
            self.forwarded.push(signal);
        }
        for link in self.live() {
            link.signal(signal);
        }
    }

    /// Ctrl-Z: stop the ranks, then this process; on `fg`, resume both.
    async fn suspend(&mut self) {
        for link in self.live() {
            link.signal(Signal::Tstp);
        }
        let flushed: Vec<_> = self.live().map(|l| l.flush()).collect();
        let _ = tokio::time::timeout(Duration::from_secs(1), async {
            for f in flushed {
                let _ = f.await;
            }
        })
        .await;
        self.pause.stopping();
        tty::restore();
        signals::stop_self();
        self.pause.resumed();
        if self.tty {
            let _ = tty::enter_raw();
        }
        for link in self.live() {
            link.signal(Signal::Cont);
        }
    }
}

#[cfg(test)]
#[path = "run_tests.rs"]
mod tests;
