//! Shared test plumbing: a real loopback server/client exchange, and rustls configs built
//! by hand (bypassing our own checks) to present bad certificates to a peer.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use certs::{PeerIdentity, Role};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::{TlsAcceptor, TlsConnector};

/// What each side saw of one connection attempt.
#[derive(Debug)]
pub struct Outcome {
    /// The client identity the server saw after a full echo, or the server's error.
    pub server: Result<PeerIdentity, String>,
    /// The server identity the client saw after a full echo, or the client's error.
    pub client: Result<PeerIdentity, String>,
}

/// Runs one connection over 127.0.0.1: handshake, then the client sends "hello" and the
/// server answers "world". `dial` is who the client means to reach.
pub async fn exchange(
    acceptor: TlsAcceptor,
    connector: TlsConnector,
    dial: (Role, &str),
) -> Outcome {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.map_err(|e| e.to_string())?;
        let (mut tls, id) = certs::accept(&acceptor, tcp)
            .await
            .map_err(|e| e.to_string())?;
        let mut buf = [0u8; 5];
        tls.read_exact(&mut buf)
            .await
            .map_err(|e| certs::explain_io(&e))?;
        assert_eq!(&buf, b"hello");
        tls.write_all(b"world")
            .await
            .map_err(|e| certs::explain_io(&e))?;
        tls.shutdown().await.map_err(|e| certs::explain_io(&e))?;
        Ok::<_, String>(id)
    });
    let (role, name) = dial;
    let client = async {
        let tcp = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
        let (mut tls, id) = certs::connect(&connector, tcp, role, name)
            .await
            .map_err(|e| e.to_string())?;
        tls.write_all(b"hello")
            .await
            .map_err(|e| certs::explain_io(&e))?;
        let mut buf = [0u8; 5];
        tls.read_exact(&mut buf)
            .await
            .map_err(|e| certs::explain_io(&e))?;
        assert_eq!(&buf, b"world");
        Ok::<_, String>(id)
    };
    let limit = Duration::from_secs(20);
    let client = tokio::time::timeout(limit, client)
        .await
        .expect("client hung");
    let server = tokio::time::timeout(limit, server)
        .await
        .expect("server hung")
        .expect("server task panicked");
    Outcome { server, client }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn roots(ca: &Path) -> Arc<RootCertStore> {
    let mut roots = RootCertStore::empty();
    for c in CertificateDer::pem_file_iter(ca).unwrap() {
        roots.add(c.unwrap()).unwrap();
    }
    Arc::new(roots)
}

fn chain(cert: &Path) -> Vec<CertificateDer<'static>> {
    CertificateDer::pem_file_iter(cert)
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

/// A client config that trusts `ca` and presents `cert`/`key` (or nothing), without any of
/// the checks `certs::client_config` makes on its own certificate.
pub fn raw_connector(ca: &Path, ident: Option<(&Path, &Path)>) -> TlsConnector {
    let builder = ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .with_root_certificates(roots(ca));
    let config = match ident {
        Some((cert, key)) => builder
            .with_client_auth_cert(chain(cert), PrivateKeyDer::from_pem_file(key).unwrap())
            .unwrap(),
        None => builder.with_no_client_auth(),
    };
    TlsConnector::from(Arc::new(config))
}

/// A server config that requires client certs from `ca` and presents `cert`/`key`, without
/// the checks `certs::server_config` makes (so it can present a user certificate).
pub fn raw_acceptor(ca: &Path, cert: &Path, key: &Path) -> TlsAcceptor {
    let verifier = WebPkiClientVerifier::builder_with_provider(roots(ca), provider())
        .build()
        .unwrap();
    let config = ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain(cert), PrivateKeyDer::from_pem_file(key).unwrap())
        .unwrap();
    TlsAcceptor::from(Arc::new(config))
}
