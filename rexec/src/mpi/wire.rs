//! PMI-1 "simple" wire lines: `cmd=NAME key=value key=value\n`, one command or answer
//! per line, fields separated by spaces, each split at its first `=`. Values carry no
//! spaces (MPI libraries hex-encode their business cards).

/// A line longer than this ends the job: MPICH's own limit is 1024 bytes, and a put's
/// value is at most [`VALLEN_MAX`].
pub const MAX_LINE: usize = 64 * 1024;

/// Longest key-value space name announced in `maxes`.
pub const KVSNAME_MAX: usize = 256;
/// Longest key announced in `maxes`.
pub const KEYLEN_MAX: usize = 64;
/// Longest value announced in `maxes` (as MPICH's Hydra announces).
pub const VALLEN_MAX: usize = 1024;

/// One parsed line: its fields in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line<'a> {
    fields: Vec<(&'a str, &'a str)>,
}

impl<'a> Line<'a> {
    /// Splits `text` (without its newline) into fields; a token without `=` is a field
    /// with an empty value.
    ///
    /// ```
    /// let line = rexec::mpi::wire::Line::parse("cmd=get kvsname=k key=PMI_process_mapping");
    /// assert_eq!(line.get("cmd"), Some("get"));
    /// assert_eq!(line.get("key"), Some("PMI_process_mapping"));
    /// assert_eq!(line.get("value"), None);
    /// ```
    pub fn parse(text: &'a str) -> Line<'a> {
        let fields = text
            .split(' ')
            .filter(|t| !t.is_empty())
            .map(|t| t.split_once('=').unwrap_or((t, "")))
            .collect();
        Line { fields }
    }

    /// The value of the first field named `key`.
    pub fn get(&self, key: &str) -> Option<&'a str> {
        self.fields.iter().find(|(k, _)| *k == key).map(|(_, v)| *v)
    }

    /// The command: the value of `cmd` (or of `mcmd`, the multi-line form).
    pub fn command(&self) -> Option<&'a str> {
        self.get("cmd").or_else(|| self.get("mcmd"))
    }
}

/// An answer line: `cmd=NAME` and the fields, newline-terminated.
pub fn answer(cmd: &str, fields: &[(&str, &str)]) -> String {
    let mut line = format!("cmd={cmd}");
    for (k, v) in fields {
        line.push(' ');
        line.push_str(k);
        line.push('=');
        line.push_str(v);
    }
    line.push('\n');
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_put_splits_at_the_first_equals_sign() {
        let line = Line::parse("cmd=put kvsname=kvs_1 key=-bcast-1-0 value=2F64=65");
        assert_eq!(line.command(), Some("put"));
        assert_eq!(line.get("key"), Some("-bcast-1-0"));
        assert_eq!(line.get("value"), Some("2F64=65"));
    }

    #[test]
    fn answers_are_single_lines() {
        assert_eq!(
            answer(
                "get_result",
                &[("rc", "0"), ("msg", "success"), ("value", "v")]
            ),
            "cmd=get_result rc=0 msg=success value=v\n"
        );
        assert_eq!(answer("barrier_out", &[]), "cmd=barrier_out\n");
    }

    #[test]
    fn the_multi_line_form_names_its_command_too() {
        assert_eq!(Line::parse("mcmd=spawn").command(), Some("spawn"));
        assert_eq!(Line::parse("junk").command(), None);
    }
}
