//! `rexec-agent`: what MPI launchers call instead of `ssh`, so that their per-node
//! daemons (Open MPI's `orted`, Hydra's `hydra_pmi_proxy`) start through rexecd, in the
//! market's cgroups, at the user's bid, and are killed with everything they started.
//!
//! It accepts what a launcher gives `ssh`: `rexec-agent [ssh options] HOST COMMAND
//! ARGS...`. Options are recognised as ssh's (those that take a value skip it) and
//! ignored, except `-n` (standard input from nowhere). `HOST` (after any `user@`) names
//! the node, as the node names the configuration and the selectors use. The command
//! words are joined with spaces and run by `sh -c` on the node, as ssh has the remote
//! shell run them (launchers quote for that).
//!
//! The agent then becomes `rexec --no-mpi --nodes HOST -r $REXEC_RATE -- sh -c COMMAND` (the
//! `rexec` binary beside it, else the one on `PATH`): a one-rank job like any other,
//! listed by `rexec jobs` and charged by the node. Like ssh, it does not carry the
//! launcher's whole environment to the node: only `PATH`, `HOME`, `LANG`, `LC_*`, `TZ`
//! and `REXEC_*` (rexecd sets the user's `USER`, `LOGNAME` and `SHELL`).

use std::ffi::OsString;
use std::path::PathBuf;

/// ssh options that take a value (`-o Option=value`, `-p 22`, ...).
const WITH_VALUE: &str = "BbcDEeFIiJLlmOoPpQRSWw";
/// ssh options that take none (`-x`, `-q`, `-T`, ...).
const FLAGS: &str = "1246AaCfGgKkMNnqsTtVvXxYy";

/// The variable that holds the bid of the agent's jobs (credits per minute).
pub const RATE_VAR: &str = "REXEC_RATE";

/// What `rexec-agent --help` prints.
pub const USAGE: &str = "\
usage: rexec-agent [ssh options] HOST COMMAND [ARGS...]

An ssh stand-in for MPI launchers: it runs COMMAND on node HOST as a one-rank rexec job
(`rexec --no-mpi --nodes HOST -r $REXEC_RATE -- sh -c 'COMMAND ARGS...'`), in the
market's cgroups, at your bid, charged by the node. Give it to the launcher in place of ssh:
  REXEC_RATE=2 mpiexec.hydra -launcher ssh -launcher-exec rexec-agent -hosts n1,n2 -n 4 ./prog
  REXEC_RATE=2 mpirun.openmpi --mca plm_rsh_agent rexec-agent --host n1,n2 -np 2 ./prog
(Open MPI's daemons sharing one machine's /tmp need a tmpdir each: see README, MPI.)

ssh's options are accepted and ignored, except -n (no standard input); `user@` before
HOST is dropped. HOST is a node name as the client configuration and the selectors name it.
Only PATH, HOME, LANG, LC_*, TZ and REXEC_* travel to the node, as with ssh.

Environment:
  REXEC_RATE     the bid of the jobs, credits per minute of CPU (default 0)
  REXEC_CONFIG   the client configuration file (else rexec's default)

Exit status: the command's, or 255 when the command line is not ssh's or rexec cannot run
(as ssh). --help (or -h) prints this and exits 0.";

/// A launcher's request, as understood.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// The node.
    pub host: String,
    /// The shell command to run there.
    pub command: String,
    /// `-n`: no standard input.
    pub no_stdin: bool,
}

/// Why the arguments are not an ssh command line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AgentError {
    /// An option this agent does not know.
    #[error("unknown ssh option {0}; rexec-agent takes ssh's options, a host and a command")]
    UnknownOption(String),
    /// An option's value is missing.
    #[error("ssh option {0} needs a value")]
    MissingValue(String),
    /// No host.
    #[error("no host given; usage: rexec-agent [ssh options] HOST COMMAND [ARGS...]")]
    NoHost,
    /// No command (an interactive login is not what a launcher asks for).
    #[error("no command given for {0}; rexec-agent runs commands, not login shells")]
    NoCommand(String),
    /// `--help` or `-h` before the host: not a request but a question ([`USAGE`]).
    #[error("{USAGE}")]
    Help,
}

/// Parses `args` (without the program name) as ssh would.
///
/// ```
/// use rexec::mpi::agent::parse;
/// let args = ["-x", "-o", "BatchMode=yes", "ann@n2", "orted", "-mca", "ess", "\"env\""];
/// let request = parse(args.iter().map(|a| a.to_string())).unwrap();
/// assert_eq!(request.host, "n2");
/// assert_eq!(request.command, "orted -mca ess \"env\"");
/// ```
pub fn parse(args: impl IntoIterator<Item = String>) -> Result<Request, AgentError> {
    let mut args = args.into_iter();
    let mut no_stdin = false;
    let host = loop {
        let Some(arg) = args.next() else {
            return Err(AgentError::NoHost);
        };
        // ssh has no -h nor --help (it prints its usage on any unknown option); a
        // launcher never gives them, so they are a person asking.
        if arg == "--help" || arg == "-h" {
            return Err(AgentError::Help);
        }
        // As ssh's getopt: `--` ends the options.
        if arg == "--" {
            break args.next().ok_or(AgentError::NoHost)?;
        }
        let Some(letters) = arg.strip_prefix('-').filter(|l| !l.is_empty()) else {
            break arg;
        };
        // Flags may be grouped (`-xT`); an option with a value ends the group, its
        // value either the rest of the word (`-p22`) or the next word.
        for (i, c) in letters.char_indices() {
            if FLAGS.contains(c) {
                no_stdin |= c == 'n';
            } else if WITH_VALUE.contains(c) {
                if i + c.len_utf8() == letters.len() && args.next().is_none() {
                    return Err(AgentError::MissingValue(format!("-{c}")));
                }
                break;
            } else {
                return Err(AgentError::UnknownOption(format!("-{c}")));
            }
        }
    };
    let host = host.rsplit('@').next().unwrap_or(&host).to_string();
    let words: Vec<String> = args.collect();
    if words.is_empty() {
        return Err(AgentError::NoCommand(host));
    }
    Ok(Request {
        host,
        command: words.join(" "),
        no_stdin,
    })
}

/// Whether the agent passes variable `name` on (see the module docs).
pub fn keeps(name: &str) -> bool {
    matches!(name, "PATH" | "HOME" | "LANG" | "TZ")
        || name.starts_with("LC_")
        || name.starts_with("REXEC_")
}

/// The `rexec` arguments (after the program name) that run `request` at `rate`.
pub fn rexec_args(request: &Request, rate: Option<&str>) -> Vec<OsString> {
    // A launcher's daemon is not an MPI rank of rexec's, whatever `[mpi]` says.
    let mut args: Vec<OsString> = vec![
        "--no-mpi".into(),
        "--nodes".into(),
        request.host.clone().into(),
    ];
    if let Some(rate) = rate {
        args.extend(["-r".into(), rate.into()]);
    }
    if request.no_stdin {
        args.extend(["--stdin".into(), "none".into()]);
    }
    args.extend([
        "--".into(),
        "sh".into(),
        "-c".into(),
        request.command.clone().into(),
    ]);
    args
}

/// The `rexec` binary: the one beside `agent` (this program), else `rexec` on `PATH`.
pub fn rexec_binary(agent: Option<PathBuf>) -> PathBuf {
    agent
        .and_then(|a| a.parent().map(|d| d.join("rexec")))
        .filter(|p| p.is_file())
        .unwrap_or_else(|| PathBuf::from("rexec"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_str(args: &[&str]) -> Result<Request, AgentError> {
        parse(args.iter().map(|a| a.to_string()))
    }

    #[test]
    fn hydra_shape() {
        let r = parse_str(&[
            "-x",
            "n1",
            "\"/usr/bin/hydra_pmi_proxy\"",
            "--control-port",
            "vm:1",
        ])
        .unwrap();
        assert_eq!(r.host, "n1");
        assert_eq!(
            r.command,
            "\"/usr/bin/hydra_pmi_proxy\" --control-port vm:1"
        );
        assert!(!r.no_stdin);
    }

    #[test]
    fn grouped_flags_and_values_in_either_form() {
        let r = parse_str(&["-xTn", "-p22", "-l", "ann", "-oBatchMode=yes", "n3", "true"]).unwrap();
        assert_eq!((r.host.as_str(), r.command.as_str()), ("n3", "true"));
        assert!(r.no_stdin);
    }

    #[test]
    fn bad_command_lines_say_what_is_wrong() {
        assert_eq!(
            parse_str(&["-Z", "n1", "x"]),
            Err(AgentError::UnknownOption("-Z".into()))
        );
        assert_eq!(
            parse_str(&["-p"]),
            Err(AgentError::MissingValue("-p".into()))
        );
        assert_eq!(parse_str(&["-x"]), Err(AgentError::NoHost));
        assert_eq!(parse_str(&["n1"]), Err(AgentError::NoCommand("n1".into())));
        assert_eq!(parse_str(&["--"]), Err(AgentError::NoHost));
    }

    #[test]
    fn help_is_asked_before_the_host_and_double_dash_ends_the_options() {
        assert_eq!(parse_str(&["--help"]), Err(AgentError::Help));
        assert_eq!(parse_str(&["-x", "-h"]), Err(AgentError::Help));
        // After the host, --help is the command's.
        let r = parse_str(&["n1", "prog", "--help"]).unwrap();
        assert_eq!(r.command, "prog --help");
        let r = parse_str(&["-x", "--", "n2", "true"]).unwrap();
        assert_eq!((r.host.as_str(), r.command.as_str()), ("n2", "true"));
    }

    #[test]
    fn the_rexec_command_line() {
        let r = parse_str(&["-n", "n2", "orted", "-mca", "x"]).unwrap();
        let args = rexec_args(&r, Some("2"));
        let want = [
            "--no-mpi",
            "--nodes",
            "n2",
            "-r",
            "2",
            "--stdin",
            "none",
            "--",
            "sh",
            "-c",
            "orted -mca x",
        ];
        assert_eq!(args, want.map(OsString::from));
    }

    #[test]
    fn only_the_login_like_variables_travel() {
        assert!(keeps("PATH") && keeps("LC_ALL") && keeps("REXEC_CONFIG"));
        assert!(!keeps("OMPI_MCA_plm_rsh_agent") && !keeps("PMI_FD") && !keeps("LD_PRELOAD"));
    }
}
