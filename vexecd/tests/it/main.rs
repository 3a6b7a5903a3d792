//! vexecd library scenarios: the node table under good, bad and hostile
//! datagrams; the selection policies; the placement simulation.

mod common;
mod placement;
mod select;
mod table;
