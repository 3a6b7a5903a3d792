//! Name rules. Every name that ends up in a certificate (node, user, service, admin and
//! cluster names) uses a small safe alphabet, so it can go into file names, URIs, DNS
//! SANs, log lines and Unix account lookups without quoting. Node and service names must
//! also be valid DNS names, because clients verify servers with `ServerName::DnsName`.

use rustls::pki_types::DnsName;

use crate::error::CertError;
use crate::role::Role;

/// The longest name accepted.
pub const MAX_NAME_LEN: usize = 64;

/// Checks that `name` is acceptable for a certificate of `role`.
///
/// All names: 1 to 64 characters from `[a-z0-9._-]`, not starting with `-` or `.`.
/// Node and service names must in addition be valid DNS names (no empty label, no label
/// starting or ending with `-`, last label not all digits), because they are also the
/// name a client verifies when it connects.
///
/// ```
/// use certs::{check_name, Role};
/// assert!(check_name(Role::Node, "n3").is_ok());
/// assert!(check_name(Role::User, "_apt").is_ok());
/// assert!(check_name(Role::User, "Alice").is_err());
/// assert!(check_name(Role::Node, "10").is_err()); // not a DNS name
/// ```
pub fn check_name(role: Role, name: &str) -> Result<(), CertError> {
    check_plain_name(name)?;
    if matches!(role, Role::Node | Role::Service) {
        check_dns(name).map_err(|reason| CertError::InvalidName {
            name: name.to_string(),
            reason: format!("{role} names must be DNS names ({reason})"),
        })?;
    }
    Ok(())
}

/// Checks the alphabet and length rules shared by all names (also used for cluster names).
pub fn check_plain_name(name: &str) -> Result<(), CertError> {
    let bad = |reason: &str| CertError::InvalidName {
        name: name.to_string(),
        reason: reason.to_string(),
    };
    if name.is_empty() {
        return Err(bad("a name cannot be empty"));
    }
    if name.len() > MAX_NAME_LEN {
        return Err(bad("names are at most 64 characters"));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !matches!(c, 'a'..='z' | '0'..='9' | '.' | '_' | '-'))
    {
        return Err(bad(&format!(
            "character {c:?} is not allowed; use only a-z, 0-9, '.', '_' and '-'"
        )));
    }
    if name.starts_with('-') || name.starts_with('.') {
        return Err(bad("a name cannot start with '-' or '.'"));
    }
    Ok(())
}

/// Checks that `name` is a DNS name a client can verify, returning the reason if not.
pub(crate) fn check_dns(name: &str) -> Result<DnsName<'static>, String> {
    if name.parse::<std::net::IpAddr>().is_ok() {
        return Err("it looks like an IP address".to_string());
    }
    DnsName::try_from(name.to_string()).map_err(|_| {
        "labels must be non-empty, must not start or end with '-', and the last must not be all digits"
            .to_string()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_ordinary_names() {
        for n in ["n3", "node-1.rack2", "alice", "a", "_apt", "svc_1"] {
            assert!(check_name(Role::User, n).is_ok(), "{n}");
        }
        for n in ["n3", "node-1.rack2", "accountd", "vexecd", "x_y"] {
            assert!(check_name(Role::Node, n).is_ok(), "{n}");
        }
    }

    #[test]
    fn refuses_unsafe_names() {
        let long = "a".repeat(65);
        for n in [
            "",
            "Alice",
            "a b",
            "a/b",
            "../x",
            "-x",
            ".x",
            "é",
            "a:b",
            long.as_str(),
        ] {
            let err = check_name(Role::User, n).unwrap_err();
            assert!(matches!(err, CertError::InvalidName { .. }), "{n}: {err}");
        }
        assert!(check_name(Role::User, &"a".repeat(64)).is_ok());
    }

    #[test]
    fn server_names_must_be_dns_names() {
        for n in ["10", "1.2.3.4", "a..b", "a-", "a.-b", "x.1"] {
            let err = check_name(Role::Node, n).unwrap_err().to_string();
            assert!(err.contains("DNS"), "{n}: {err}");
            assert!(check_name(Role::Service, n).is_err());
        }
        // The same names are fine for clients only.
        assert!(check_name(Role::User, "10").is_ok());
    }
}
