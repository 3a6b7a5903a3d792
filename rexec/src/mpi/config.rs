//! The client file's `[mpi]` table: whether `rexec` runs every program as an MPI job,
//! so that users of MPI need not type `--mpi` each time.
//!
//! ```toml
//! [mpi]
//! default = true      # as if --mpi were given; --no-mpi turns it off for one run
//! ```
//!
//! A program that does not use MPI runs as before under it (its ranks are merely given
//! a PMI channel they never open).

use serde::Deserialize;

use crate::cli::RunArgs;

/// The `[mpi]` table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MpiEntry {
    /// Run as `--mpi` unless `--no-mpi` is given.
    #[serde(default)]
    pub default: bool,
}

/// Whether this run is an MPI job: `--mpi`, else the file's `table` default unless
/// `--no-mpi`.
pub fn wanted(args: &RunArgs, table: &MpiEntry) -> bool {
    args.mpi || (table.default && !args.no_mpi)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use clap::Parser;

    use super::*;
    use crate::config::Config;

    const BASE: &str = "ca = \"ca.pem\"\ncert = \"u.pem\"\nkey = \"u.key\"\n";

    fn config(text: &str) -> Result<Config, crate::config::ConfigError> {
        Config::parse(Path::new("/etc/rexec/c.toml"), &format!("{BASE}{text}"))
    }

    fn run(line: &str) -> RunArgs {
        RunArgs::parse_from(std::iter::once("rexec").chain(line.split(' ')))
    }

    #[test]
    fn the_table_makes_mpi_the_default_and_no_mpi_undoes_it() {
        let on = config("[mpi]\ndefault = true\n").unwrap();
        let off = config("").unwrap();
        assert_eq!(off.mpi, MpiEntry::default());
        assert!(wanted(&run("prog"), &on.mpi));
        assert!(!wanted(&run("--no-mpi prog"), &on.mpi));
        assert!(!wanted(&run("prog"), &off.mpi));
        assert!(wanted(&run("--mpi prog"), &off.mpi));
        assert!(!wanted(&run("--no-mpi prog"), &off.mpi));
        assert!(!wanted(&run("prog"), &config("[mpi]\n").unwrap().mpi));
    }

    #[test]
    fn a_misspelt_or_mistyped_key_names_the_file() {
        let e = config("[mpi]\ndefualt = true\n").unwrap_err().to_string();
        assert!(
            e.contains("/etc/rexec/c.toml") && e.contains("defualt"),
            "{e}"
        );
        let e = config("[mpi]\ndefault = \"yes\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("/etc/rexec/c.toml"), "{e}");
    }
}
