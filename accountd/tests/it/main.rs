//! Integration tests: each starts the real `accountd` binary on its own temp
//! directory, ledger and CA, and talks to it over real mutual TLS with the
//! library client, the node's debit client, and the real `accountctl`.

mod anchors_cli;
mod audit_memory;
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
mod peers;
mod pg_errors;
mod projects;
mod reload;
mod roles;
mod support;

use testhost::postgres as pgserver;
