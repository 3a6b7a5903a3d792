//! The `rexec` binary: parse the command line, run, restore the terminal
//! and exit with the status of the outcome — the one place an error
//! becomes an exit status ([`rexec::exit::status`]).

use rexec::cli::{self, AdminCommand, Invocation};
use rexec::exit::Error;

fn main() {
    rexec::tty::restore_on_panic();
    let invocation = cli::parse(std::env::args_os().collect());
    let verbose = match &invocation {
        Invocation::Run(args) => args.verbose,
        Invocation::Admin(args) => match &args.command {
            AdminCommand::Nodes(n) => n.verbose,
            AdminCommand::Stats(s) => s.verbose,
            AdminCommand::Estimate(e) => e.verbose,
            _ => false,
        },
        Invocation::Batch(_) => false,
    };
    let runtime = runtime_for(&invocation).enable_all().build();
    let outcome = match &runtime {
        Ok(runtime) => runtime.block_on(async move {
            match invocation {
                Invocation::Run(args) => rexec::run::run(args).await,
                Invocation::Admin(args) => rexec::admin::run(args).await.map(|()| 0),
                Invocation::Batch(args) => rexec::batch::run(args).await,
            }
        }),
        Err(e) => Err(Error::Failed(format!(
            "cannot start the async runtime: {e}"
        ))),
    };
    rexec::tty::restore();
    let code = rexec::exit::status(outcome, verbose);
    // Exit without waiting for the stdin thread, which may be blocked in read, and
    // without shutting the runtime down (its threads have nothing left to do, and
    // joining them would only delay the exit).
    std::process::exit(code);
}

/// The async runtime for `invocation`. A job of one rank (the common interactive
/// `rexec -n 1 prog`) and every admin command have one connection at a time to serve,
/// so they run on the main thread alone: starting two worker threads cost more CPU
/// than anything they would do in parallel (see docs/BENCHMARKS.md, launch section).
/// Wider jobs keep two workers, so their TLS handshakes and streams use both cores.
fn runtime_for(invocation: &Invocation) -> tokio::runtime::Builder {
    let wide = match invocation {
        Invocation::Run(args) => {
            // As `plan::place` counts them: `-n`, else one per `--nodes` entry, else 1.
            let ranks = match (args.nranks, &args.nodes) {
                (Some(n), _) => n as usize,
                (None, Some(nodes)) => nodes.len(),
                (None, None) => 1,
            };
            ranks > 1 || args.mpi
        }
        Invocation::Admin(_) | Invocation::Batch(_) => false,
    };
    if wide {
        let mut builder = tokio::runtime::Builder::new_multi_thread();
        builder.worker_threads(2);
        builder
    } else {
        tokio::runtime::Builder::new_current_thread()
    }
}
