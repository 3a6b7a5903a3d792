//! accountd's PostgreSQL errors carry PostgreSQL's own reason: the real
//! binary started on a real server with a wrong password, a missing
//! database, a port nobody listens on and a server certificate of another
//! CA exits with an error naming the cause (never only "db error"), and a
//! running accountd whose database went away tells its clients why in the
//! retryable error.

use std::process::{Command, Stdio};
use std::time::Duration;

use certs::Role;
use certs::testing::TestPki;

use crate::pgserver::Postgres;
use crate::support::*;

/// Runs accountd with `[store]` holding `store` (TOML lines) until it exits;
/// what it printed on stderr.
fn start_fails(store: &str) -> String {
    let pki = TestPki::new();
    let dir = tempfile::tempdir().unwrap();
    let srv = pki.tls_paths(Role::Service, "accountd");
    let conf = dir.path().join("accountd.toml");
    std::fs::write(
        &conf,
        format!(
            "listen = \"127.0.0.1:0\"\nca = {:?}\ncert = {:?}\nkey = {:?}\n\n[store]\n{store}",
            srv.ca, srv.cert, srv.key
        ),
    )
    .unwrap();
    let err = dir.path().join("stderr");
    let mut child = Command::new(ACCOUNTD)
        .arg("--config")
        .arg(&conf)
        .arg("--init")
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .unwrap();
    let status = testhost::wait::until(Duration::from_secs(60), || child.try_wait().unwrap());
    let text = std::fs::read_to_string(&err).unwrap();
    let Some(status) = status else {
        let _ = child.kill();
        let _ = child.wait();
        panic!("accountd still runs after 60 s on a database it cannot use:\n{text}");
    };
    assert_eq!(status.code(), Some(1), "{text}");
    assert!(
        text.contains("accountd: cannot connect to PostgreSQL: "),
        "{text}"
    );
    assert!(!text.trim_end().ends_with("db error"), "{text}");
    text
}

#[test]
fn a_wrong_password_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let pg = Postgres::with_database("ledger");
    pg.require_password("accountd", "right horse battery");
    let pw = dir.path().join("pw");
    std::fs::write(&pw, "wrong\n").unwrap();
    let text = start_fails(&format!(
        "postgres = \"host={} port={} dbname=ledger user=accountd\"\npassword_file = {pw:?}\n",
        pg.socket_dir().display(),
        pg.port()
    ));
    assert!(
        text.contains(r#"password authentication failed for user "accountd""#),
        "{text}"
    );
}

#[test]
fn a_missing_database_is_named() {
    let pg = Postgres::start();
    let text = start_fails(&format!("postgres = \"{}\"\n", pg.conninfo("nosuchdb")));
    assert!(
        text.contains(r#"database "nosuchdb" does not exist"#),
        "{text}"
    );
}

#[test]
fn a_refused_connection_is_named() {
    let closed = unused_port();
    let port = closed.local_addr().unwrap().port();
    let text = start_fails(&format!(
        "postgres = \"host=127.0.0.1 port={port} dbname=ledger user=postgres\"\n"
    ));
    assert!(text.contains("Connection refused"), "{text}");
}

#[test]
fn an_untrusted_server_certificate_is_named() {
    let pki = TestPki::new();
    let server = pki.tls_paths(Role::Service, "localhost");
    let pg = Postgres::start_tls(&server.cert, &server.key);
    pg.create_db("ledger");
    let other = TestPki::new();
    let text = start_fails(&format!(
        "postgres = \"host=localhost hostaddr=127.0.0.1 port={} dbname=ledger user=postgres sslmode=require\"\nca = {:?}\n",
        pg.port(),
        other.ca().ca_cert_path()
    ));
    // rustls's reason (`BadSignature` here: both test CAs bear the same name).
    assert!(
        text.contains("error performing TLS handshake: invalid peer certificate: "),
        "{text}"
    );
}

#[test]
fn accountd_help_says_how_to_use_postgres() {
    let out = Command::new(ACCOUNTD).arg("--help").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    for needle in ["PostgreSQL", "[store]", "postgres =", "password_file"] {
        assert!(
            text.contains(needle),
            "--help does not mention {needle}:\n{text}"
        );
    }
}

#[test]
fn a_client_is_told_why_the_database_cannot_be_reached() {
    let pki = TestPki::new();
    let dir = tempfile::tempdir().unwrap();
    let pg = Postgres::with_database("ledger");
    let srv = pki.tls_paths(Role::Service, "accountd");
    let ready = dir.path().join("ready");
    let conf = dir.path().join("accountd.toml");
    std::fs::write(
        &conf,
        format!(
            "listen = \"127.0.0.1:0\"\nready_file = {ready:?}\nca = {:?}\ncert = {:?}\nkey = {:?}\n\n[store]\npostgres = \"{}\"\n",
            srv.ca,
            srv.cert,
            srv.key,
            pg.conninfo("ledger")
        ),
    )
    .unwrap();
    let (mut child, addr) = start_from_config(&conf, &ready);
    let admin = pki.tls_paths(Role::Admin, "ops");
    ctl_with(
        &addr,
        &admin,
        dir.path(),
        &["create", "alice", "--initial", "5"],
    )
    .ok();
    pg.stop();
    let out = ctl_with(&addr, &admin, dir.path(), &["balance", "alice"]);
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.stderr.contains("retry"), "{out:?}");
    // The server's socket is gone: the operating system's own words.
    assert!(
        out.stderr.contains("No such file or directory"),
        "the retryable error does not say why: {out:?}"
    );
}
