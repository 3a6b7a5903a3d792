//! The `rexec` binary: parse the command line, run, restore the terminal
//! and exit with the status the library computed.

use rexec::cli::{self, Invocation};

fn main() {
    rexec::tty::restore_on_panic();
    let invocation = cli::parse(std::env::args_os().collect());
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            rexec::say(&format!("cannot start the async runtime: {e}"));
            std::process::exit(255);
        }
    };
    let code = runtime.block_on(async move {
        match invocation {
            Invocation::Run(args) => rexec::run::run(args).await,
            Invocation::Admin(args) => rexec::admin::run(args).await,
        }
    });
    rexec::tty::restore();
    // Exit without waiting for the stdin thread, which may be blocked in read.
    std::process::exit(code);
}
