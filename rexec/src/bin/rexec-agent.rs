//! The `rexec-agent` binary: an ssh stand-in for MPI launchers (see
//! [`rexec::mpi::agent`]). It parses ssh's command line, then becomes `rexec` running
//! the command on the named node; on a bad command line it says why and how to call
//! it, and exits 255, as ssh does. `--help` prints its usage and exits 0.

use std::os::unix::process::CommandExt;

use rexec::mpi::agent::{self, AgentError};

fn main() {
    let request = match agent::parse(std::env::args().skip(1)) {
        Ok(r) => r,
        Err(AgentError::Help) => {
            println!("{}", agent::USAGE);
            std::process::exit(0);
        }
        Err(e) => {
            eprintln!("rexec-agent: {e}");
            if !matches!(e, AgentError::NoHost) {
                eprintln!(
                    "rexec-agent: usage: rexec-agent [ssh options] HOST COMMAND [ARGS...] (--help for more)"
                );
            }
            std::process::exit(255);
        }
    };
    let rate = std::env::var(agent::RATE_VAR).ok();
    let rexec = agent::rexec_binary(std::env::current_exe().ok());
    let error = std::process::Command::new(&rexec)
        .args(agent::rexec_args(&request, rate.as_deref()))
        .env_clear()
        .envs(std::env::vars_os().filter(|(k, _)| k.to_str().is_some_and(agent::keeps)))
        .exec();
    eprintln!("rexec-agent: cannot run {}: {error}", rexec.display());
    std::process::exit(255);
}
