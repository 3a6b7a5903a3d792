//! Integration tests: each starts the real `accountd` binary on its own temp
//! directory, ledger and CA, and talks to it over real mutual TLS with the
//! library client, the node's debit client, and the real `accountctl`.

mod anchors_cli;
mod audit_memory;
/// The ledger builder the audit benchmark uses, shared with the memory tests.
#[path = "../../benches/support/ledger.rs"]
mod built;
mod config;
mod conflict;
mod crash;
mod debits;
mod errors;
mod garbage;
mod journal;
mod ledger;
mod limits;
mod migrate_cli;
mod migrate_memory;
/// Peak memory of a command, as the audit benchmark measures it.
#[path = "../../benches/support/peak.rs"]
mod peak;
mod peers;
mod pg_errors;
mod projects;
mod reload;
mod roles;
mod support;

use testhost::postgres as pgserver;
