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
            _ => false,
        },
        Invocation::Batch(_) => false,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build();
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
