//! What `rexec` says when no rank of an MPI job of several ranks opened its PMI
//! channel: the ranks then never learnt of each other, and each ran alone as rank 0
//! of 1, so the job's output and exit status are not those of one MPI job. That is
//! never left silent when it can be known:
//!
//! - the program (as found here, see [`super::linked`]) links an MPI that does not speak
//!   PMI-1, Open MPI: one line naming the library and the way to start it
//!   (`mpirun.openmpi` with `rexec-agent`), whether `--mpi` was typed or came from the
//!   client file's `[mpi] default`;
//! - `--mpi` was typed: one line saying no rank opened the channel (under the file's
//!   default it is said only for a known library, as most programs run that way are
//!   not MPI programs at all and rightly never open it).
//!
//! A job of one rank is not told: alone is what it asked for. Nor is a job that was
//! aborted or interrupted (its ranks may not have reached `MPI_Init`). The exit status
//! stays the ranks' own.

use super::linked;

/// What is known of the job when its ranks have all ended.
#[derive(Debug, Clone)]
pub struct Ended<'a> {
    /// The program as given (`./ring`, `ring`).
    pub program: &'a str,
    /// The `PATH` the ranks got, to find a bare name by.
    pub path: Option<&'a str>,
    /// How many ranks the job had.
    pub ranks: usize,
    /// Whether `--mpi` was typed (rather than the client file's default).
    pub typed: bool,
    /// Whether any rank wrote to its PMI channel.
    pub heard: bool,
    /// Whether every rank ended by itself (no abort, no interrupt).
    pub ended_alone: bool,
}

/// The line to print (without `rexec: `), if any, by the rules in the module docs.
pub fn line(job: &Ended<'_>) -> Option<String> {
    if job.heard || job.ranks < 2 || !job.ended_alone {
        return None;
    }
    let library = linked::locate(job.program, job.path)
        .and_then(|file| linked::needed(&file))
        .and_then(|names| linked::without_pmi1(&names));
    let n = job.ranks;
    match library {
        Some(lib) => Some(format!(
            "--mpi: {} links {} ({}), which does not speak PMI-1: no rank opened its PMI \
             channel, so the {n} ranks ran as {n} separate one-rank MPI jobs (each rank 0 of \
             1); start it with mpirun.openmpi --mca plm_rsh_agent rexec-agent (README, MPI)",
            job.program, lib.mpi, lib.library
        )),
        None if job.typed => Some(format!(
            "--mpi: no rank of {} opened its PMI channel, so the {n} ranks ran as {n} \
             separate programs, not one MPI job (an MPICH-family program opens it in \
             MPI_Init)",
            job.program
        )),
        None => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ended(program: &str) -> Ended<'_> {
        Ended {
            program,
            path: None,
            ranks: 2,
            typed: true,
            heard: false,
            ended_alone: true,
        }
    }

    #[test]
    fn typed_mpi_that_nobody_opened_is_said() {
        let me = std::env::current_exe().unwrap();
        let me = me.to_str().unwrap();
        let said = line(&ended(me)).expect("a line");
        assert!(
            said.contains("no rank of") && said.contains("2 ranks"),
            "{said}"
        );
        assert!(!said.contains('\n'));
    }

    #[test]
    fn nothing_is_said_when_heard_alone_aborted_or_only_defaulted() {
        let me = std::env::current_exe().unwrap();
        let me = me.to_str().unwrap();
        let quiet = [
            Ended {
                heard: true,
                ..ended(me)
            },
            Ended {
                ranks: 1,
                ..ended(me)
            },
            Ended {
                ended_alone: false,
                ..ended(me)
            },
            // Under the file's default, a program linking no known MPI: most likely no
            // MPI program at all.
            Ended {
                typed: false,
                ..ended(me)
            },
        ];
        for job in quiet {
            assert_eq!(line(&job), None, "{job:?}");
        }
    }
}
