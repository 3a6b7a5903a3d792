//! Who is on the other end. A [`Role`] and a name are carried inside every certificate the
//! cluster CA signs, as exactly one URI subject alternative name `rexec:ROLE:NAME`; since
//! the CA signs it, nobody can claim a role or name the CA did not grant. This module owns
//! that encoding, reading it back from a verified certificate, and two small
//! authorisation helpers for a [`PeerIdentity`] with their refusal, [`AuthError`]
//! (rexecd and accountd check roles in their own code today; see `docs/SECURITY.md`).

use std::fmt;

use x509_parser::extensions::GeneralName;

use crate::error::CertError;
use crate::names::check_name;
use crate::role::Role;

/// The scheme prefix of the identity URI SAN.
pub const URI_PREFIX: &str = "rexec:";

/// The authenticated holder of a certificate: what the CA signed, nothing else.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PeerIdentity {
    /// What the peer is.
    pub role: Role,
    /// Its name (node name, Unix user name, service name or admin name).
    pub name: String,
}

impl PeerIdentity {
    /// Builds an identity, checking the name rules for the role.
    pub fn new(role: Role, name: &str) -> Result<Self, CertError> {
        check_name(role, name)?;
        Ok(PeerIdentity {
            role,
            name: name.to_string(),
        })
    }

    /// Succeeds when the peer's role is one of `allowed`.
    ///
    /// ```
    /// use certs::{PeerIdentity, Role};
    /// let alice = PeerIdentity::new(Role::User, "alice").unwrap();
    /// assert!(alice.require_role(&[Role::User, Role::Admin]).is_ok());
    /// let err = alice.require_role(&[Role::Node]).unwrap_err();
    /// assert_eq!(err.to_string(), "user alice is not allowed to do this: only node certificates are accepted");
    /// ```
    pub fn require_role(&self, allowed: &[Role]) -> Result<(), AuthError> {
        if allowed.contains(&self.role) {
            Ok(())
        } else {
            Err(AuthError::role_not_allowed(self, allowed))
        }
    }

    /// Succeeds for an admin, or for the user whose Unix name is `owner` (a user reading
    /// their own balance, history or jobs). Everyone else is refused.
    ///
    /// ```
    /// use certs::{PeerIdentity, Role};
    /// let alice = PeerIdentity::new(Role::User, "alice").unwrap();
    /// assert!(alice.require_self_or_admin("alice").is_ok());
    /// assert!(alice.require_self_or_admin("bob").is_err());
    /// let root = PeerIdentity::new(Role::Admin, "ops").unwrap();
    /// assert!(root.require_self_or_admin("bob").is_ok());
    /// ```
    pub fn require_self_or_admin(&self, owner: &str) -> Result<(), AuthError> {
        match self.role {
            Role::Admin => Ok(()),
            Role::User if self.name == owner => Ok(()),
            Role::User => Err(AuthError::NotOwner {
                peer: self.clone(),
                target: owner.to_string(),
            }),
            _ => Err(AuthError::role_not_allowed(
                self,
                &[Role::User, Role::Admin],
            )),
        }
    }

    /// The identity URI SAN for this identity: `rexec:ROLE:NAME`.
    pub fn to_uri(&self) -> String {
        format!("{URI_PREFIX}{}:{}", self.role, self.name)
    }

    /// Parses an identity URI SAN. Returns `Ok(None)` for URIs of other schemes.
    pub fn from_uri(uri: &str) -> Result<Option<Self>, CertError> {
        let Some(rest) = uri.strip_prefix(URI_PREFIX) else {
            return Ok(None);
        };
        let bad = |detail: String| CertError::NoIdentity {
            subject: "certificate".to_string(),
            detail,
        };
        let (role, name) = rest
            .split_once(':')
            .ok_or_else(|| bad(format!("URI {uri:?} is not rexec:ROLE:NAME")))?;
        let role: Role = role
            .parse()
            .map_err(|_| bad(format!("URI {uri:?} names unknown role {role:?}")))?;
        PeerIdentity::new(role, name)
            .map(Some)
            .map_err(|e| bad(format!("URI {uri:?}: {e}")))
    }

    /// Reads the identity from a DER certificate. The certificate must carry exactly one
    /// `rexec:` URI SAN. This does not verify the certificate; use it on certificates that
    /// a verifier already accepted (see [`crate::peer_identity`]).
    pub fn from_der(der: &[u8], subject: &str) -> Result<Self, CertError> {
        let bad = |detail: String| CertError::NoIdentity {
            subject: subject.to_string(),
            detail,
        };
        let (_, cert) = x509_parser::parse_x509_certificate(der)
            .map_err(|e| bad(format!("cannot parse certificate: {e}")))?;
        let sans = cert
            .subject_alternative_name()
            .map_err(|e| bad(format!("bad subject alternative names: {e}")))?;
        let mut found: Option<PeerIdentity> = None;
        for general in sans.iter().flat_map(|ext| ext.value.general_names.iter()) {
            if let GeneralName::URI(uri) = general {
                let parsed = PeerIdentity::from_uri(uri).map_err(|e| bad(e.to_string()))?;
                if let Some(id) = parsed {
                    if found.is_some() {
                        return Err(bad("more than one rexec: URI SAN".to_string()));
                    }
                    found = Some(id);
                }
            }
        }
        found.ok_or_else(|| bad("no rexec:ROLE:NAME URI SAN".to_string()))
    }
}

impl fmt::Display for PeerIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.role, self.name)
    }
}

/// An authenticated peer is not allowed to do what it asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AuthError {
    /// The peer's role is not among the allowed ones.
    #[error("{peer} is not allowed to do this: only {allowed} certificates are accepted")]
    RoleNotAllowed {
        /// Who asked.
        peer: PeerIdentity,
        /// The roles that would have been accepted, comma separated.
        allowed: String,
    },
    /// The peer asked about something that belongs to another user.
    #[error("{peer} may only act on its own account, not on {target:?}")]
    NotOwner {
        /// Who asked.
        peer: PeerIdentity,
        /// The account or object it asked about.
        target: String,
    },
}

impl AuthError {
    pub(crate) fn role_not_allowed(peer: &PeerIdentity, allowed: &[Role]) -> Self {
        let allowed = if allowed.is_empty() {
            "no".to_string()
        } else {
            allowed
                .iter()
                .map(|r| r.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        };
        AuthError::RoleNotAllowed {
            peer: peer.clone(),
            allowed,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_round_trip() {
        for r in Role::ALL {
            assert_eq!(r.as_str().parse::<Role>().unwrap(), r);
            assert_eq!(r.to_string(), r.as_str());
        }
        assert!("root".parse::<Role>().is_err());
        assert!("Node".parse::<Role>().is_err());
    }

    #[test]
    fn uri_round_trip_and_rejects() {
        let id = PeerIdentity::new(Role::Node, "n3").unwrap();
        assert_eq!(id.to_uri(), "rexec:node:n3");
        assert_eq!(PeerIdentity::from_uri("rexec:node:n3").unwrap(), Some(id));
        assert_eq!(PeerIdentity::from_uri("https://x").unwrap(), None);
        for bad in [
            "rexec:node",
            "rexec:root:x",
            "rexec:user:Alice",
            "rexec:node:10",
            "rexec:user:a:b",
        ] {
            assert!(PeerIdentity::from_uri(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn authorisation_helpers() {
        let node = PeerIdentity::new(Role::Node, "n1").unwrap();
        assert!(node.require_role(&[]).is_err());
        assert!(node.require_role(&[Role::Node]).is_ok());
        let err = node.require_self_or_admin("n1").unwrap_err();
        assert!(matches!(err, AuthError::RoleNotAllowed { .. }), "{err}");
    }
}
