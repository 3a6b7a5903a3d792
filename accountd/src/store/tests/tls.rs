//! TLS to PostgreSQL with rustls: a server whose certificate the configured
//! CA issued is reached and the ledger works over it; with another CA the
//! connection is refused.

use certs::Role;
use certs::testing::TestPki;

use crate::store::pg::{self, PgConfig};
use crate::store::testdb::server::Postgres;

#[test]
fn the_ledger_reaches_postgres_over_tls_and_refuses_a_server_of_another_ca() {
    let pki = TestPki::new();
    let server = pki.tls_paths(Role::Service, "localhost");
    let pg = Postgres::start_tls(&server.cert, &server.key);
    pg.create_db("ledger");
    let cfg = |ca: std::path::PathBuf| PgConfig {
        conninfo: format!(
            "host=localhost hostaddr=127.0.0.1 port={} dbname=ledger user=postgres sslmode=require",
            pg.port()
        ),
        password_file: None,
        ca: Some(ca),
    };
    let good = cfg(pki.ca().ca_cert_path());
    let (w, r) = pg::open(&good, true).unwrap();
    let ssl = pg.psql("ledger", "SELECT count(*) FROM pg_stat_ssl WHERE ssl");
    assert_eq!(
        ssl, "2",
        "the writer's and the reader's connections use TLS"
    );
    drop((w, r));
    let other = TestPki::new();
    let Err(e) = pg::connect(&cfg(other.ca().ca_cert_path())) else {
        panic!("a server of another CA was accepted");
    };
    assert!(e.to_string().contains("cannot connect"), "{e}");
}
