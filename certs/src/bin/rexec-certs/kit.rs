//! `rexec-certs user-kit`: everything a user needs in one directory — her certificate
//! and key, the CA certificate, the revocation list and a client config whose TLS paths
//! name those files (relative paths, which `rexec` and `accountctl` resolve beside the
//! config, so the directory works wherever it is copied) — owned by her Unix account,
//! the directory and key private to her.
//!
//! The rest of the config (`[selectors]`, `[discovery]`, `[accountd]`, ...) comes from a
//! template the admin writes once: every line of it except top-level `ca`, `cert`, `key`
//! and `crl`, which the kit sets. A copy of the certificate stays in the CA directory, as
//! for every certificate `issue` writes, for `revoke`.

use std::fs;
use std::os::unix::fs::{PermissionsExt, chown};
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use certs::{Ca, Role};
use nix::unistd::User;

/// What `user-kit` was asked to make.
pub struct Kit {
    /// The user's name: the Unix account her jobs run as.
    pub name: String,
    /// Where to write the kit; default `~NAME/.config/rexec`.
    pub out: Option<PathBuf>,
    /// Who owns the files; default NAME when `out` is defaulted, else the caller.
    pub owner: Option<String>,
    /// The client config template (`[selectors]`, `[accountd]`, ...).
    pub config: Option<PathBuf>,
    /// Days of validity of the certificate.
    pub days: u32,
    /// Replace an existing kit.
    pub force: bool,
}

/// The files of a kit, by name, as the config names them.
const TLS_KEYS: [&str; 4] = ["ca", "cert", "key", "crl"];

impl Kit {
    /// Writes the kit with `ca`; returns its directory.
    pub fn make(&self, ca: &Ca) -> anyhow::Result<PathBuf> {
        certs::check_name(Role::User, &self.name)?;
        let account = |name: &str| -> anyhow::Result<User> {
            User::from_name(name)
                .with_context(|| format!("cannot look up the Unix user {name}"))?
                .with_context(|| format!("there is no Unix user {name} on this machine: create it, or give --out DIR to write the kit for copying"))
        };
        let (out, owner) = match (&self.out, &self.owner) {
            (Some(out), owner) => (out.clone(), owner.as_deref().map(account).transpose()?),
            (None, owner) => {
                let who = account(&self.name)?;
                let owner = match owner {
                    Some(o) => account(o)?,
                    None => who.clone(),
                };
                (who.dir.join(".config/rexec"), Some(owner))
            }
        };
        let template = match &self.config {
            Some(path) => fs::read_to_string(path)
                .with_context(|| format!("cannot read the config template {}", path.display()))?,
            None => String::new(),
        };
        let cert = format!("user-{}.pem", self.name);
        let key = format!("user-{}.key", self.name);
        let files = [
            cert.as_str(),
            key.as_str(),
            "ca.pem",
            "crl.pem",
            "config.toml",
        ];
        // The CA keeps a copy of the certificate, as `issue` does: `revoke` needs it.
        let kept = ca.dir().join(&cert);
        let existing = files
            .iter()
            .map(|f| out.join(f))
            .chain([kept.clone()])
            .find(|p| p.exists());
        if let Some(f) = existing.filter(|_| !self.force) {
            bail!(
                "{} exists: give --force to replace the kit (and her key)",
                f.display()
            );
        }
        if let Some(parent) = out.parent() {
            fs::create_dir_all(parent)
                .with_context(|| format!("cannot create {}", parent.display()))?;
        }
        fs::create_dir_all(&out).with_context(|| format!("cannot create {}", out.display()))?;
        set_mode(&out, 0o700)?;
        ca.issue(Role::User, &self.name, &[], self.days, &out)?;
        if kept != out.join(&cert) {
            copy(&out.join(&cert), &kept)?;
        }
        copy(&ca.ca_cert_path(), &out.join("ca.pem"))?;
        copy(&ca.crl_path(), &out.join("crl.pem"))?;
        let config = out.join("config.toml");
        fs::write(&config, config_text(&self.name, &template))
            .with_context(|| format!("cannot write {}", config.display()))?;
        set_mode(&config, 0o644)?;
        if let Some(owner) = owner {
            let (uid, gid) = (owner.uid.as_raw(), owner.gid.as_raw());
            let mut chowned = vec![out.clone()];
            chowned.extend(files.iter().map(|f| out.join(f)));
            // The parents made here (~/.config) are hers too, when under her home.
            if let Some(parent) = out
                .parent()
                .filter(|p| *p != owner.dir && p.starts_with(&owner.dir))
            {
                chowned.push(parent.to_path_buf());
            }
            for path in chowned {
                chown(&path, Some(uid), Some(gid))
                    .with_context(|| format!("cannot give {} to {}", path.display(), owner.name))?;
            }
        }
        Ok(out)
    }
}

/// The kit's config: its TLS paths (relative, beside the config), then the template
/// without top-level TLS keys of its own.
pub fn config_text(name: &str, template: &str) -> String {
    let mut text = format!(
        "# rexec and accountctl for {name}; the paths below are relative to this file.\n\
         ca = \"ca.pem\"\ncert = \"user-{name}.pem\"\nkey = \"user-{name}.key\"\ncrl = \"crl.pem\"\n"
    );
    let mut top = true;
    for line in template.lines() {
        let trimmed = line.trim_start();
        top &= !trimmed.starts_with('[');
        let key = trimmed.split('=').next().unwrap_or("").trim();
        if top && trimmed.contains('=') && TLS_KEYS.contains(&key) {
            continue;
        }
        text.push_str(line);
        text.push('\n');
    }
    text
}

fn copy(from: &Path, to: &Path) -> anyhow::Result<()> {
    fs::copy(from, to)
        .with_context(|| format!("cannot copy {} to {}", from.display(), to.display()))?;
    set_mode(to, 0o644)
}

fn set_mode(path: &Path, mode: u32) -> anyhow::Result<()> {
    fs::set_permissions(path, fs::Permissions::from_mode(mode))
        .with_context(|| format!("cannot set mode {mode:o} on {}", path.display()))
}
