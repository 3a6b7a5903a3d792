//! What `accountctl` needs besides its argument parser, one room each:
//!
//! - [`settings`]: where its settings come from (flags, environment, and the
//!   client config file every rexec tool shares).
//! - [`render`]: what a ledger listing shows (the columns of entries and report rows).
//! - [`format`]: how any listing is laid out (table, JSON or CSV).
//! - [`audit`]: the audit run on the database itself, against signed chain heads.
//! - [`migrate`]: copying a ledger from SQLite to PostgreSQL or back.
//! - [`projects`]: the project and income commands and their listings.

pub mod audit;
pub mod format;
pub mod migrate;
pub mod projects;
pub mod render;
pub mod settings;
