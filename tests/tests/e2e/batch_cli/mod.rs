//! The batch commands as a user types them: `rexec submit`, `queue`,
//! `cancel`, `output`, `wait` and `history`, and the refusals, each one line with its
//! documented exit status.
//!
//! [`local`] needs no queue: what the client itself refuses (a bad utility
//! spec, a deadline before the length, a certificate that cannot sign, no queue
//! configured) exits 2 before anything is sent, and a queue that cannot be
//! reached exits 255. [`live`] runs the batch market of [`rexec_tests::batch`]
//! (nodes, accountd, vexecd, batchd) and types the commands against it;
//! [`scripts`] submits batch scripts with `#REXEC` directives to it.

mod history;
mod live;
mod local;
mod scripts;

/// `stderr` is one `rexec: ` line holding `want`.
fn one_line_in(stderr: &str, want: &str) {
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr:?}");
    assert!(stderr.starts_with("rexec: "), "{stderr:?}");
    assert!(stderr.contains(want), "{want:?} in {stderr:?}");
}
