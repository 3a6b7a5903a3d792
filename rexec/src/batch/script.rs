//! Batch scripts: `rexec submit job.sh`, where the program is a script that
//! holds the job's options in `#REXEC` lines, as `#SBATCH` lines do for Slurm.
//!
//! The rule: the program (the first word after `rexec submit`'s options, as a
//! path, never looked up in `PATH`) is a script when it names a regular file this
//! process can read whose first two bytes are `#!`. Its bytes (at most
//! [`MAX_SCRIPT_BYTES`]) are signed with the job ([`proto::batch::JobTerms::script`])
//! and each node runs its own private copy of them, so editing or removing the file
//! after submission changes nothing. Any other program is run by name, as before.
//!
//! Directives: after the `#!` line, every line up to the first that is neither
//! blank nor a comment (`#...`) is read; those that start with `#REXEC` followed
//! by a blank hold options of `rexec submit`, split at blanks (no quoting), e.g.
//! `#REXEC -n 4 --length 10m --after 12`. A directive line holds options only,
//! never a program. An option given on the command line wins over the same option
//! in a directive (any of `-r`, `--value`, `--deadline`, `--utility` on the command
//! line replaces all of the directives' worth; a repeatable option such as
//! `--after` given on the command line replaces the directives' list), and a later
//! directive over an earlier one. A directive clap would refuse on the command line
//! (an unknown option, a bad value) is a usage error naming the script's line.

use std::ffi::OsString;
use std::io::Read;
use std::path::Path;

use clap::parser::ValueSource;
use clap::{ArgAction, Command, CommandFactory};

pub use proto::batch::MAX_SCRIPT_BYTES;

/// The prefix of a directive line.
pub const DIRECTIVE: &str = "#REXEC";

/// Why a script cannot be submitted; each names the script and, for a
/// directive, its line (1-based).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ScriptError {
    /// Larger than a job may carry.
    #[error("script {script}: {size} bytes is over the {MAX_SCRIPT_BYTES} a job may carry")]
    TooLarge {
        /// The script as named.
        script: String,
        /// Its size.
        size: u64,
    },
    /// The file could not be read after all.
    #[error("script {script}: cannot read it: {detail}")]
    Read {
        /// The script as named.
        script: String,
        /// What the read said.
        detail: String,
    },
    /// A directive line that is not options of `rexec submit`.
    #[error(
        "script {script} line {line}: {detail} (#REXEC lines hold options of rexec submit; see rexec submit --help); nothing was queued"
    )]
    Directive {
        /// The script as named.
        script: String,
        /// The line, from 1.
        line: usize,
        /// What is wrong with it.
        detail: String,
    },
}

/// The bytes of `program` when it is a script by the module's rule; `None` for
/// any other program.
pub fn read(program: &str) -> Result<Option<Vec<u8>>, ScriptError> {
    let path = Path::new(program);
    let Ok(meta) = std::fs::metadata(path) else {
        return Ok(None);
    };
    if !meta.is_file() {
        return Ok(None);
    }
    let Ok(mut file) = std::fs::File::open(path) else {
        return Ok(None);
    };
    let mut head = [0u8; 2];
    if file.read_exact(&mut head).is_err() || &head != b"#!" {
        return Ok(None);
    }
    let read_error = |e: std::io::Error| ScriptError::Read {
        script: program.to_string(),
        detail: e.to_string(),
    };
    let mut bytes = head.to_vec();
    // One byte past the limit is enough to know it is over.
    file.take(MAX_SCRIPT_BYTES as u64 - 1)
        .read_to_end(&mut bytes)
        .map_err(read_error)?;
    if bytes.len() > MAX_SCRIPT_BYTES {
        return Err(ScriptError::TooLarge {
            script: program.to_string(),
            size: meta.len().max(bytes.len() as u64),
        });
    }
    Ok(Some(bytes))
}

/// The directive lines of `script`: `(line number, words)`, in order (see the
/// module doc for which lines count).
pub fn directives(name: &str, script: &[u8]) -> Result<Vec<(usize, Vec<String>)>, ScriptError> {
    let mut found = Vec::new();
    for (i, raw) in script.split(|&b| b == b'\n').enumerate().skip(1) {
        let line = i + 1;
        let trimmed = raw.trim_ascii();
        if trimmed.is_empty() {
            continue;
        }
        if trimmed[0] != b'#' {
            break;
        }
        let Some(rest) = trimmed.strip_prefix(DIRECTIVE.as_bytes()) else {
            continue;
        };
        if !rest.is_empty() && !rest[0].is_ascii_whitespace() {
            continue; // `#REXECUTE` is a comment
        }
        let text = std::str::from_utf8(rest).map_err(|_| ScriptError::Directive {
            script: name.to_string(),
            line,
            detail: "the line is not UTF-8".into(),
        })?;
        found.push((line, text.split_whitespace().map(String::from).collect()));
    }
    Ok(found)
}

/// An option of a directive with its words, as clap knows it by `id`.
struct Given {
    id: String,
    words: Vec<String>,
    append: bool,
}

/// The worth options, of which the command line's replace all the directives'.
const WORTH: [&str; 4] = ["rate", "value", "deadline", "utility"];

/// The ids of the options `submit`'s matches got from the command line.
pub fn explicit(submit: &clap::ArgMatches) -> Vec<String> {
    submit
        .ids()
        .filter(|id| submit.value_source(id.as_str()) == Some(ValueSource::CommandLine))
        .map(|id| id.as_str().to_string())
        .collect()
}

/// `rexec submit`'s command as clap knows it.
fn submit_command() -> Command {
    crate::cli::batch::BatchArgs::command()
        .find_subcommand("submit")
        .cloned()
        .unwrap_or_else(|| Command::new("submit"))
}

/// Splits one directive line into options (checking each as clap would).
fn options(
    submit: &Command,
    name: &str,
    line: usize,
    words: &[String],
) -> Result<Vec<Given>, ScriptError> {
    let bad = |detail: String| ScriptError::Directive {
        script: name.to_string(),
        line,
        detail,
    };
    let mut given = Vec::new();
    let mut rest = words.iter();
    while let Some(word) = rest.next() {
        let (arg, inline) = if let Some(long) = word.strip_prefix("--").filter(|l| !l.is_empty()) {
            let (flag, value) = match long.split_once('=') {
                Some((f, v)) => (f, Some(v)),
                None => (long, None),
            };
            let arg = submit.get_arguments().find(|a| {
                a.get_long() == Some(flag)
                    || a.get_all_aliases().is_some_and(|al| al.contains(&flag))
            });
            (arg, value.is_some())
        } else if let Some(short) = word.strip_prefix('-').and_then(|s| s.chars().next()) {
            let arg = submit
                .get_arguments()
                .find(|a| a.get_short() == Some(short));
            (arg, word.len() > 1 + short.len_utf8())
        } else {
            return Err(bad(format!(
                "`{word}` is not an option; the program is the script itself"
            )));
        };
        let option = word.split('=').next().unwrap_or(word);
        let Some(arg) = arg.filter(|a| !a.is_positional()) else {
            return Err(bad(format!("unknown option {option}")));
        };
        let id = arg.get_id().as_str().to_string();
        let mut taken = vec![word.clone()];
        if arg.get_action().takes_values() && !inline {
            match rest.next() {
                Some(value) => taken.push(value.clone()),
                None => return Err(bad(format!("{option} needs a value"))),
            }
        }
        given.push(Given {
            append: matches!(arg.get_action(), ArgAction::Append),
            id,
            words: taken,
        });
    }
    // Each value as clap would take it on the command line.
    let check = submit
        .clone()
        .no_binary_name(true)
        .mut_arg("length", |a| a.required(false))
        .mut_arg("command", |a| a.required(false));
    check
        .try_get_matches_from(words)
        .map_err(|e| bad(clap_line(&e)))?;
    Ok(given)
}

/// The first line of clap's message, without its `error: `.
fn clap_line(e: &clap::Error) -> String {
    let text = e.to_string();
    let first = text.lines().next().unwrap_or("");
    first.strip_prefix("error: ").unwrap_or(first).to_string()
}

/// The command line `argv` (the whole of it, `rexec ... submit ...`) with the
/// directives of `script` (named `name`) put in right after `submit`, less those
/// the command line overrides (`explicit`: the ids of the options it gives, see
/// [`explicit`]); `submit_at` is the index of `submit` in `argv`.
pub fn merge(
    argv: &[OsString],
    submit_at: usize,
    name: &str,
    script: &[u8],
    explicit: &[String],
) -> Result<Vec<OsString>, ScriptError> {
    let submit = submit_command();
    let mut given: Vec<Given> = Vec::new();
    for (line, words) in directives(name, script)? {
        for g in options(&submit, name, line, &words)? {
            if !g.append {
                given.retain(|earlier| earlier.id != g.id);
            }
            given.push(g);
        }
    }
    let worth_given = explicit.iter().any(|id| WORTH.contains(&id.as_str()));
    given.retain(|g| {
        let overridden = worth_given && WORTH.contains(&g.id.as_str());
        !overridden && !explicit.contains(&g.id)
    });
    let mut merged: Vec<OsString> = argv[..=submit_at].to_vec();
    merged.extend(given.into_iter().flat_map(|g| g.words).map(OsString::from));
    merged.extend_from_slice(&argv[submit_at + 1..]);
    Ok(merged)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(line: &str) -> Vec<OsString> {
        line.split(' ').map(OsString::from).collect()
    }

    /// `line` with `script`'s directives, as `rexec` merges them.
    fn merged(line: &str, script: &str) -> Result<Vec<OsString>, ScriptError> {
        let argv = argv(line);
        let relaxed = crate::cli::batch::BatchArgs::command()
            .mut_subcommand("submit", |c| c.mut_arg("length", |a| a.required(false)));
        let m = relaxed.try_get_matches_from(&argv).unwrap();
        let at = argv.iter().position(|w| w == "submit").unwrap();
        let given = explicit(m.subcommand_matches("submit").unwrap());
        merge(&argv, at, "j.sh", script.as_bytes(), &given)
    }

    fn submit_args(argv: &[OsString]) -> crate::cli::batch::SubmitArgs {
        use clap::Parser;
        match crate::cli::batch::BatchArgs::try_parse_from(argv)
            .unwrap()
            .command
        {
            crate::cli::batch::BatchCommand::Submit(s) => s,
            other => panic!("not submit: {other:?}"),
        }
    }

    const SCRIPT: &str = "#!/bin/sh\n\
        # a comment\n\
        #REXEC -n 4 --length 10m\n\
        \n\
        #REXEC --after 12 -r 2\n\
        #REXECUTE -n 9 is a comment\n\
        echo hi\n\
        #REXEC -n 7 after the first command: not read\n";

    #[test]
    fn directives_are_read_up_to_the_first_command() {
        let d = directives("j.sh", SCRIPT.as_bytes()).unwrap();
        assert_eq!(
            d,
            vec![
                (
                    3,
                    vec!["-n".into(), "4".into(), "--length".into(), "10m".into()]
                ),
                (
                    5,
                    vec!["--after".into(), "12".into(), "-r".into(), "2".into()]
                ),
            ]
        );
        assert!(directives("j.sh", b"#!/bin/sh\n#REXEC -n \xff\n").is_err());
        assert!(directives("j.sh", b"#!/bin/sh\ntrue\n").unwrap().is_empty());
    }

    #[test]
    fn directives_apply_and_the_command_line_wins() {
        let s = submit_args(&merged("rexec submit -n 2 j.sh a", SCRIPT).unwrap());
        assert_eq!((s.width, s.length.as_str()), (2, "10m"));
        assert_eq!(
            (s.rate.as_deref(), s.after.as_slice()),
            (Some("2"), &["12".to_string()][..])
        );
        assert_eq!(s.command, ["j.sh", "a"]);
        // A worth on the command line replaces the directives' rate; --after replaces.
        let line = "rexec --config c.toml submit --value 5 --deadline 1h --after 3:any j.sh";
        let s = submit_args(&merged(line, SCRIPT).unwrap());
        assert_eq!((s.rate, s.value.as_deref()), (None, Some("5")));
        assert_eq!((s.after, s.width), (vec!["3:any".to_string()], 4));
        // A later directive wins over an earlier one; --opt=value and -n4 forms.
        let script = "#!/bin/sh\n#REXEC -n4 --length=1m\n#REXEC --nranks 3 --no-requeue\n";
        let s = submit_args(&merged("rexec submit j.sh", script).unwrap());
        assert_eq!((s.width, s.length.as_str(), s.no_requeue), (3, "1m", true));
    }

    #[test]
    fn bad_directives_name_their_line() {
        let bad = |script: &str, want: &str| {
            let e = merged("rexec submit --length 1m j.sh", script).unwrap_err();
            let text = e.to_string();
            assert!(text.contains("script j.sh line 3: "), "{text}");
            assert!(text.contains(want), "{text}");
        };
        bad(
            "#!/bin/sh\n#REXEC -n 2\n#REXEC --bogus 1\n",
            "unknown option --bogus",
        );
        bad("#!/bin/sh\n\n#REXEC -x\n", "unknown option -x");
        bad(
            "#!/bin/sh\n#\n#REXEC -n 2 prog\n",
            "`prog` is not an option",
        );
        bad("#!/bin/sh\n#\n#REXEC -n two\n", "two");
        bad("#!/bin/sh\n#\n#REXEC --length\n", "--length needs a value");
        bad("#!/bin/sh\n#\n#REXEC --help\n", "unknown option --help");
    }

    #[test]
    fn only_readable_files_starting_with_a_shebang_are_scripts() {
        let dir = tempfile::tempdir().unwrap();
        let path = |n: &str| dir.path().join(n).to_string_lossy().into_owned();
        std::fs::write(path("s.sh"), "#!/bin/sh\necho\n").unwrap();
        std::fs::write(path("bin"), "\x7fELF").unwrap();
        assert_eq!(read(&path("s.sh")).unwrap().unwrap(), b"#!/bin/sh\necho\n");
        assert_eq!(read(&path("bin")).unwrap(), None);
        assert_eq!(read(&path("missing")).unwrap(), None);
        assert_eq!(read(&dir.path().to_string_lossy()).unwrap(), None);
        assert_eq!(read("true").unwrap(), None);
        let mut big = b"#!/bin/sh\n".to_vec();
        big.resize(MAX_SCRIPT_BYTES + 1, b'#');
        std::fs::write(path("big"), &big).unwrap();
        let e = read(&path("big")).unwrap_err();
        assert!(matches!(e, ScriptError::TooLarge { .. }), "{e}");
        big.truncate(MAX_SCRIPT_BYTES);
        std::fs::write(path("big"), &big).unwrap();
        assert_eq!(read(&path("big")).unwrap().unwrap().len(), MAX_SCRIPT_BYTES);
    }
}
