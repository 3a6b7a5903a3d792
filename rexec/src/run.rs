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

use proto::node::{ExitStatus, Signal, ToNode};
use tokio::sync::mpsc;
use tokio::time::{Instant, sleep_until};

use crate::cli::RunArgs;
use crate::clock::Pause;
use crate::exit::{BROKEN_PIPE, Error, FAILED, INTERRUPTED};
use crate::output::{Output, OutputEvent};
use crate::plan::JobSpec;
use crate::rank::RankLink;
use crate::rank_msg::RankEvent;
use crate::signals::{Caught, DOUBLE_INT};
use crate::{input, launch, request, say, signals, tty};

/// How long ranks may take to confirm an abort.
pub const ABORT_GRACE: Duration = Duration::from_secs(3);

/// How long ranks may take to confirm the abort of a double Ctrl-C.
pub const INTERRUPT_GRACE: Duration = Duration::from_secs(1);

/// Run the program the arguments name: the job's exit status (the ranks',
/// or 130/141), or why it could not run.
pub async fn run(args: RunArgs) -> Result<i32, Error> {
    let request = request::check(&args)?;
    let mem_bytes = request::mem(args.mem.as_deref())?;
    let connector = crate::reach::connector(&request.config)?;
    let (ranks, opened) = request::place_ranks(&args, &request, &connector).await?;
    let terminal = args
        .tty
        .then(|| tty::window_size().unwrap_or(tty::DEFAULT_SIZE));
    let mut spec = JobSpec::from_process(&ranks, request.bid, args.command.clone(), terminal);
    spec.mem_bytes = mem_bytes;
    request::validate(&spec)?;
    let mut signals = signals::install()
        .map_err(|e| Error::Failed(format!("cannot install signal handlers: {e}")))?;
    let (out_tx, out_rx) = mpsc::unbounded_channel();
    let output = Output::start(args.label, out_tx);
    let pause = Arc::new(Pause::new());
    let (ev_tx, ev_rx) = mpsc::unbounded_channel();
    let pmi = crate::mpi::config::wanted(&args, &request.config.mpi).then(|| {
        let nodes: Vec<String> = ranks.iter().map(|r| r.node.name.clone()).collect();
        crate::mpi::start(spec.job, &nodes, ev_tx.clone())
    });
    let heard = pmi.as_ref().map(crate::mpi::Pmi::heard);
    let spawner = launch::Spawner {
        output: output.sender(),
        events: ev_tx,
        pause: pause.clone(),
        notices: Arc::new(crate::bill::CreditNotices::default()),
        pmi,
        max_cost: request.max_cost,
        account: request.account.clone(),
    };
    let launched = launch::launch_all(
        &connector,
        &spec,
        &ranks,
        opened,
        request.timeout,
        &mut signals,
        spawner,
    )
    .await;
    let launched = match launched {
        Ok(launched) => launched,
        Err(failed) => {
            // What the started ranks printed before they were stopped still shows.
            let _ = tokio::time::timeout(INTERRUPT_GRACE, output.finish()).await;
            return Err(failed.error);
        }
    };
    if args.verbose {
        announce(&spec, &launched.links);
    }
    let deferred = launched.deferred;
    let mut job = Job::start(&args, launched.links, pause);
    for sig in deferred {
        job.on_signal(sig).await;
    }
    job.coordinate(ev_rx, out_rx, signals).await;
    let code = job.finish(output).await;
    if let Some(heard) = heard {
        job.tell_unheard(&args, &spec, heard.any());
    }
    if args.verbose {
        let exits = job.exits.iter().map(|(r, e)| (job.node_of(*r), e.clone()));
        for bill in crate::bill::per_node(exits) {
            say(&bill.to_string());
        }
    }
    Ok(code)
}

/// `-v`: the job's id on each node, so `rexec bid` and `rexec kill` can
/// name it while it runs.
fn announce(spec: &JobSpec, links: &[RankLink]) {
    for link in links {
        say(&format!(
            "job {} on {} (rank {})",
            spec.job, link.node, link.rank
        ));
    }
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
    /// The coordinator of the ranks just launched: the terminal in raw mode
    /// under `-t`, standard input pumped to the ranks.
    fn start(args: &RunArgs, links: Vec<RankLink>, pause: Arc<Pause>) -> Job {
        if args.tty {
            let _ = tty::enter_raw();
        }
        if let Err(e) = input::start(args.stdin, links.iter().map(|l| l.stdin.clone()).collect()) {
            say(&format!("cannot read standard input: {e}"));
        }
        Job::new(links, pause, args.tty, args.kill_on_bad_exit)
    }

    /// The coordinator's state for `links`, nothing done yet.
    fn new(links: Vec<RankLink>, pause: Arc<Pause>, tty: bool, kill_on_bad_exit: bool) -> Job {
        let nodes = links.iter().map(|l| l.node.clone()).collect();
        Job {
            done: vec![false; links.len()],
            links,
            first_bad: None,
            forced: None,
            aborting: None,
            forwarded: Vec::new(),
            last_int: None,
            tty,
            kill_on_bad_exit,
            pause,
            exits: Vec::new(),
            nodes,
        }
    }

    /// Under `--mpi`, say so when no rank opened its PMI channel (see
    /// [`crate::mpi::unheard`]).
    fn tell_unheard(&self, args: &RunArgs, spec: &JobSpec, heard: bool) {
        let path = spec.env.iter().find(|(k, _)| k == "PATH");
        let ended = crate::mpi::unheard::Ended {
            program: spec.argv.first().map_or("", String::as_str),
            path: path.map(|(_, v)| v.as_str()),
            ranks: self.nodes.len(),
            typed: args.mpi,
            heard,
            ended_alone: self.aborting.is_none()
                && self.forced.is_none()
                && self.forwarded.is_empty(),
        };
        if let Some(line) = crate::mpi::unheard::line(&ended) {
            say(&line);
        }
    }

    /// After coordination: stop the readers, let the output drain (not
    /// long after an abort), and return the job's exit status.
    async fn finish(&mut self, output: Output) -> i32 {
        let code = self.forced.or(self.first_bad).unwrap_or(0);
        for link in &self.links {
            link.reader.abort();
        }
        for link in std::mem::take(&mut self.links) {
            let _ = link.reader.await;
        }
        let finish = output.finish();
        if self.aborting.is_some() {
            // Output still queued may be stuck behind a reader that stopped
            // reading; an aborted job does not wait for it long.
            let _ = tokio::time::timeout(INTERRUPT_GRACE, finish).await;
        } else {
            let _ = finish.await;
        }
        code
    }

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
                self.first_bad.get_or_insert(FAILED);
                self.abort(rank, &why, false);
            }
            RankEvent::OutOfMemory { rank, text } => {
                // One line from the node (rank, node, limit); the job exits 252 and
                // its other ranks are stopped without another word.
                say(&text);
                self.forced.get_or_insert(crate::exit::OUT_OF_MEMORY);
                self.abort(rank, &text, true);
            }
            RankEvent::Aborted { rank, why, code } => {
                // The rank may still run: it is killed with the others. After a signal
                // the user sent, ranks ending their PMI channels is no news.
                if let Some(code) = code {
                    self.first_bad.get_or_insert(code);
                }
                let quiet = !self.forwarded.is_empty();
                self.abort(rank, &why, quiet);
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
                self.forced.get_or_insert(BROKEN_PIPE);
            }
            OutputEvent::Failed(msg) => {
                say(&msg);
                self.first_bad.get_or_insert(FAILED);
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
                    self.forced = Some(INTERRUPTED);
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
                        .send(crate::rank_msg::Control::Send(ToNode::Resize(size)));
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
