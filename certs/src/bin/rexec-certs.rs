//! `rexec-certs`: manage the rexec cluster CA. A thin shell over the `certs` library:
//! parse flags, call [`certs::Ca`], print what happened.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use certs::{Ca, CertInfo, Role};
use clap::{Parser, Subcommand};

#[path = "rexec-certs/kit.rs"]
mod kit;

/// Manage the rexec cluster certificate authority.
///
/// Every connection in a rexec cluster is mutual TLS 1.3 against one CA. Each certificate
/// carries a role (node, user, service, admin) and a name, signed by the CA.
#[derive(Parser)]
#[command(name = "rexec-certs", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Create a new cluster CA in DIR (ca.pem, ca.key, crl.pem, crl.state).
    Init {
        /// The CA directory.
        #[arg(long, env = "REXEC_CA_DIR")]
        dir: PathBuf,
        /// The cluster's name ([a-z0-9._-], up to 64 characters).
        #[arg(long)]
        cluster: String,
        /// Replace an existing CA (every certificate it issued stops working).
        #[arg(long)]
        force: bool,
    },
    /// Issue a certificate and private key signed by the CA.
    Issue {
        /// The CA directory.
        #[arg(long, env = "REXEC_CA_DIR", global = true)]
        dir: Option<PathBuf>,
        /// Where to write ROLE-NAME.pem and ROLE-NAME.key (default: the CA directory).
        #[arg(long, global = true)]
        out: Option<PathBuf>,
        /// Days of validity.
        #[arg(long, default_value_t = 365, global = true)]
        days: u32,
        /// Replace an existing certificate and key of the same name.
        #[arg(long, global = true)]
        force: bool,
        #[command(subcommand)]
        what: IssueWhat,
    },
    /// Hand a user her files: certificate and key, ca.pem, crl.pem and a client
    /// config.toml naming them, in ~NAME/.config/rexec (or --out DIR), owned by her
    /// Unix account; the directory and the key mode 0700 and 0600.
    UserKit {
        /// The CA directory.
        #[arg(long, env = "REXEC_CA_DIR")]
        dir: PathBuf,
        /// The user: the Unix account her jobs run as.
        name: String,
        /// Client config to start from (its [selectors], [discovery], [accountd], ...);
        /// its top-level ca, cert, key and crl are replaced by the kit's files.
        #[arg(long)]
        config: Option<PathBuf>,
        /// Where to write the kit (default: ~NAME/.config/rexec of the Unix user NAME).
        #[arg(long)]
        out: Option<PathBuf>,
        /// The Unix user who owns the files (default: NAME, unless --out is given).
        #[arg(long)]
        owner: Option<String>,
        /// Days of validity.
        #[arg(long, default_value_t = 365)]
        days: u32,
        /// Replace an existing kit (a new key and certificate).
        #[arg(long)]
        force: bool,
    },
    /// Print a certificate's role, name, SANs, validity, fingerprint and issuer (or what a
    /// revocation list holds).
    Show {
        /// The certificate or CRL (PEM).
        file: PathBuf,
    },
    /// Revoke a certificate issued by the CA and re-sign crl.pem.
    Revoke {
        /// The CA directory.
        #[arg(long, env = "REXEC_CA_DIR")]
        dir: PathBuf,
        /// The certificate to revoke (PEM).
        file: PathBuf,
    },
    /// Re-sign crl.pem with a fresh date (no change to what is revoked).
    Crl {
        /// The CA directory.
        #[arg(long, env = "REXEC_CA_DIR")]
        dir: PathBuf,
    },
}

#[derive(Subcommand)]
enum IssueWhat {
    /// A node (runs rexecd): server and client certificate, DNS SAN = NAME.
    Node {
        /// The node's name, also its DNS SAN.
        name: String,
        /// Extra DNS name or IP address the node is reached by (repeatable).
        #[arg(long = "san")]
        sans: Vec<String>,
    },
    /// A user: client certificate for the Unix account UNIX_NAME.
    User {
        /// The Unix user name jobs will run as.
        unix_name: String,
    },
    /// A cluster service: server and client certificate, DNS SAN = its name.
    Service {
        /// Which service: accountd, or vexecd optionally followed by letters, digits or
        /// '-' (vexecd1, vexecd-b), the `name` in that selector's config.
        #[arg(value_parser = service_name)]
        name: String,
        /// Extra DNS name or IP address the service is reached by (repeatable).
        #[arg(long = "san")]
        sans: Vec<String>,
    },
    /// An administrator: client certificate.
    Admin {
        /// The admin's name.
        name: String,
    },
}

/// The service names a certificate may carry: `accountd`; `vexecd` with an optional
/// suffix so that several selectors each have a name of their own; and the batch
/// queue, `batchd` or `batchd-SUFFIX` (the names accountd and rexecd take for a queue);
/// and a reader of the ledger's spend summary for a market page's ledger panel,
/// `ledger-reader` or `ledger-reader-SUFFIX` (the names accountd lets read it).
fn service_name(name: &str) -> Result<String, String> {
    let suffix_ok = |s: &str| {
        s.len() <= 32
            && s.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    };
    let ok = name == "accountd"
        || name.strip_prefix("vexecd").is_some_and(suffix_ok)
        || name == "batchd"
        || name
            .strip_prefix("batchd-")
            .is_some_and(|s| !s.is_empty() && suffix_ok(s))
        || name == "ledger-reader"
        || name
            .strip_prefix("ledger-reader-")
            .is_some_and(|s| !s.is_empty() && suffix_ok(s));
    if ok {
        Ok(name.to_string())
    } else {
        Err(format!(
            "'{name}' is not a cluster service: use accountd, vexecd or vexecd<suffix> (vexecd1, vexecd-b), batchd or batchd-<suffix>, ledger-reader or ledger-reader-<suffix>"
        ))
    }
}

fn main() {
    let cli = Cli::parse();
    if let Err(e) = run(cli) {
        eprintln!("rexec-certs: {e:#}");
        std::process::exit(1);
    }
}

fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Init {
            dir,
            cluster,
            force,
        } => {
            let ca = Ca::init(&dir, &cluster, force)?;
            println!("created CA for cluster {cluster}");
            println!("  certificate: {}", ca.ca_cert_path().display());
            println!(
                "  private key: {} (mode 0600, keep it offline)",
                dir.join(certs::CA_KEY_FILE).display()
            );
            println!("  revocation list: {}", ca.crl_path().display());
            println!("  in every config's [discovery] table: cluster = \"{cluster}\"");
        }
        Command::Issue {
            dir,
            out,
            days,
            force,
            what,
        } => {
            let Some(dir) = dir else {
                bail!("say which CA to use with --dir DIR (or REXEC_CA_DIR)");
            };
            let (role, name, sans) = match what {
                IssueWhat::Node { name, sans } => (Role::Node, name, sans),
                IssueWhat::User { unix_name } => (Role::User, unix_name, Vec::new()),
                IssueWhat::Service { name, sans } => (Role::Service, name, sans),
                IssueWhat::Admin { name } => (Role::Admin, name, Vec::new()),
            };
            certs::check_name(role, &name)?;
            let ca = Ca::load(&dir)?;
            let out = out.unwrap_or_else(|| dir.clone());
            if !force {
                refuse_overwrite(&out, role, &name)?;
            }
            let issued = ca.issue(role, &name, &sans, days, &out)?;
            let info = CertInfo::load(&issued.cert)?;
            println!("issued {role} certificate for {name}, valid {days} days");
            println!("  certificate: {}", issued.cert.display());
            println!("  private key: {} (mode 0600)", issued.key.display());
            println!("  fingerprint: SHA256:{}", info.fingerprint);
        }
        Command::UserKit {
            dir,
            name,
            config,
            out,
            owner,
            days,
            force,
        } => {
            let ca = Ca::load(&dir)?;
            let kit = kit::Kit {
                name,
                out,
                owner,
                config,
                days,
                force,
            };
            let out = kit.make(&ca)?;
            println!("wrote the kit of user {} in {}", kit.name, out.display());
            println!(
                "  user-{}.pem, user-{}.key (mode 0600), ca.pem, crl.pem, config.toml",
                kit.name, kit.name
            );
            if let Some(owner) = kit
                .owner
                .as_deref()
                .or(kit.out.is_none().then_some(kit.name.as_str()))
            {
                println!("  owned by {owner}");
            }
        }
        Command::Show { file } => {
            let text = std::fs::read(&file).unwrap_or_default();
            if text.windows(14).any(|w| w == b"BEGIN X509 CRL") {
                println!("{}", certs::CrlInfo::load(&file)?);
            } else {
                println!("{}", CertInfo::load(&file)?);
            }
        }
        Command::Revoke { dir, file } => {
            let ca = Ca::load(&dir)?;
            let info = CertInfo::load(&file)?;
            let crl = ca.revoke(&file)?;
            let who = info
                .identity
                .as_ref()
                .map(|id| id.to_string())
                .unwrap_or_else(|| "certificate".to_string());
            println!("revoked {who} (serial {})", info.serial_hex());
            println!("  revocation list: {}", crl.display());
            println!("  servers pick it up when they reload their TLS configuration");
        }
        Command::Crl { dir } => {
            let ca = Ca::load(&dir)?;
            let crl = ca
                .refresh_crl()
                .context("cannot re-sign the revocation list")?;
            println!("re-signed {}", crl.display());
        }
    }
    Ok(())
}

fn refuse_overwrite(out: &Path, role: Role, name: &str) -> anyhow::Result<()> {
    for ext in ["pem", "key"] {
        let p = out.join(format!("{role}-{name}.{ext}"));
        if p.exists() {
            return Err(certs::CertError::AlreadyExists {
                path: p,
                consequence: String::new(),
            }
            .into());
        }
    }
    Ok(())
}
