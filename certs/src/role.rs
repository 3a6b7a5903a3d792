//! What a certificate holder is in the cluster: the [`Role`] every certificate carries
//! beside its name (`rexec:ROLE:NAME`, see `identity`), with its command-line and
//! certificate spelling.

use std::fmt;
use std::str::FromStr;

use crate::error::CertError;

/// What a certificate holder is in the cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Role {
    /// A machine running rexecd (server for clients, client of accountd).
    Node,
    /// A person with a Unix account, who launches jobs and reads their own balance.
    User,
    /// A cluster service (accountd, vexecd).
    Service,
    /// An operator, who manages accounts and jobs.
    Admin,
}

impl Role {
    /// All roles, in a fixed order.
    pub const ALL: [Role; 4] = [Role::Node, Role::User, Role::Service, Role::Admin];

    /// The lower-case name used on the command line and in certificates.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Node => "node",
            Role::User => "user",
            Role::Service => "service",
            Role::Admin => "admin",
        }
    }

    /// Whether certificates of this role are servers too (and so carry a DNS SAN and the
    /// ServerAuth purpose besides ClientAuth).
    pub fn is_server(self) -> bool {
        matches!(self, Role::Node | Role::Service)
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Role {
    type Err = CertError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Role::ALL
            .into_iter()
            .find(|r| r.as_str() == s)
            .ok_or_else(|| CertError::InvalidName {
                name: s.to_string(),
                reason: "not a role; use node, user, service or admin".to_string(),
            })
    }
}
