//! Handshakes over tokio. [`accept`] and [`connect`] wrap tokio-rustls with a time limit,
//! read the peer's [`PeerIdentity`] from its verified certificate, and turn handshake
//! failures into one-line explanations ("the peer's certificate has been revoked").
//! [`connect`] also checks that the server is the party the caller meant to reach: the
//! certificate must name the dialled host (checked by rustls against the DNS SAN) and
//! carry the expected role (checked here against the identity URI SAN).
//!
//! Both run over any transport that implements [`PeerAddr`] as well as tokio's
//! `AsyncRead + AsyncWrite`: a bare `TcpStream`, or one wrapped in a tokio `BufReader`
//! (rustls reads its transport 4 KiB at a time, and a larger read buffer saves system
//! calls when data streams in). [`PeerAddr`] names the remote end in error messages.
//!
//! [`LazyBufReader`] is such a read buffer that is allocated only when asked for, so a
//! server can give each connection a large buffer once its handshake has succeeded
//! without paying for it on every connection that never finishes one.
//!
//! In TLS 1.3 the client finishes its half of the handshake before the server has judged
//! the client's certificate, so a client the server refuses sees `connect` succeed and its
//! first read fail with the server's alert. The server side always knows at `accept`.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use rustls::pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncWrite, BufReader, BufStream, BufWriter, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::{TlsAcceptor, TlsConnector, client, server};

use crate::config::{TlsPaths, client_config, peer_identity, server_config};
use crate::error::CertError;
use crate::explain::handshake_error;
use crate::identity::PeerIdentity;
use crate::names::check_dns;
use crate::role::Role;

/// How long a handshake may take before it is abandoned.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// A tokio-rustls acceptor for [`server_config`]`(paths)`.
pub fn acceptor(paths: &TlsPaths) -> Result<TlsAcceptor, CertError> {
    Ok(TlsAcceptor::from(server_config(paths)?))
}

/// A tokio-rustls connector for [`client_config`]`(paths)`.
pub fn connector(paths: &TlsPaths) -> Result<TlsConnector, CertError> {
    Ok(TlsConnector::from(client_config(paths)?))
}

/// A transport that can name its remote end, for handshake error messages.
///
/// Implemented for `TcpStream` and for tokio's buffering wrappers around any
/// transport that implements it.
///
/// ```
/// use certs::PeerAddr;
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> std::io::Result<()> {
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
/// let addr = listener.local_addr()?;
/// let tcp = tokio::net::TcpStream::connect(addr).await?;
/// let buffered = tokio::io::BufReader::with_capacity(64 * 1024, tcp);
/// assert_eq!(buffered.peer_label(), addr.to_string());
/// # Ok(())
/// # }
/// ```
pub trait PeerAddr {
    /// The remote end as a user would recognise it ("192.0.2.7:7070"), or
    /// "unknown peer" when it cannot be told.
    fn peer_label(&self) -> String;
}

impl PeerAddr for TcpStream {
    fn peer_label(&self) -> String {
        self.peer_addr()
            .map(|a| a.to_string())
            .unwrap_or_else(|_| "unknown peer".to_string())
    }
}

impl<S: PeerAddr + AsyncRead> PeerAddr for BufReader<S> {
    fn peer_label(&self) -> String {
        self.get_ref().peer_label()
    }
}

impl<S: PeerAddr + AsyncWrite> PeerAddr for BufWriter<S> {
    fn peer_label(&self) -> String {
        self.get_ref().peer_label()
    }
}

impl<S: PeerAddr + AsyncRead + AsyncWrite> PeerAddr for BufStream<S> {
    fn peer_label(&self) -> String {
        self.get_ref().peer_label()
    }
}

/// A read buffer that costs nothing until [`LazyBufReader::buffer`] turns it on: reads
/// go straight to the transport until then, and are served from one buffer after
/// (writes always go straight through). The buffer starts at 16 KiB and
/// doubles each time one read from the transport fills it, up to the chosen size: a
/// short session (one launch of a short job) never zeroes and faults in the whole
/// buffer, while a stream reaches the full size after a few reads.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// use tokio::io::AsyncReadExt;
/// let mut r = certs::LazyBufReader::new(&b"hello world"[..]);
/// assert_eq!(r.capacity(), 0);
/// let mut first = [0u8; 5];
/// r.read_exact(&mut first).await.unwrap();
/// r.buffer(64 * 1024);
/// let mut rest = String::new();
/// r.read_to_string(&mut rest).await.unwrap();
/// assert_eq!((&first[..], rest.as_str()), (&b"hello"[..], " world"));
/// # });
/// ```
#[derive(Debug)]
pub struct LazyBufReader<S> {
    inner: S,
    /// Empty until the first buffered read; then from `FIRST_BUFFER` up to
    /// `capacity` bytes.
    buf: Vec<u8>,
    pos: usize,
    filled: usize,
    capacity: usize,
}

/// The size of a [`LazyBufReader`]'s first buffer (or its whole buffer, when a smaller
/// one was asked for).
const FIRST_BUFFER: usize = 16 * 1024;

impl<S> LazyBufReader<S> {
    /// Wraps `inner` without a buffer.
    pub fn new(inner: S) -> Self {
        LazyBufReader {
            inner,
            buf: Vec::new(),
            pos: 0,
            filled: 0,
            capacity: 0,
        }
    }

    /// Reads through a buffer of `capacity` bytes from now on (allocated at the next
    /// read that needs it). Bytes already buffered are kept.
    pub fn buffer(&mut self, capacity: usize) {
        self.capacity = self.capacity.max(capacity);
    }

    /// The buffer size in force (0: unbuffered).
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// The wrapped transport.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for LazyBufReader<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        dst: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if this.pos == this.filled {
            // Nothing buffered: unbuffered, or a read as large as the buffer, goes direct.
            if this.capacity == 0 || dst.remaining() >= this.capacity {
                return Pin::new(&mut this.inner).poll_read(cx, dst);
            }
            if this.buf.is_empty()
                || (this.filled == this.buf.len() && this.buf.len() < this.capacity)
            {
                // First use, or the last read filled the buffer: (re)allocate, larger.
                let size = (this.buf.len() * 2).max(FIRST_BUFFER).min(this.capacity);
                this.buf = vec![0; size];
            }
            let mut into = ReadBuf::new(&mut this.buf);
            ready!(Pin::new(&mut this.inner).poll_read(cx, &mut into))?;
            this.filled = into.filled().len();
            this.pos = 0;
        }
        let n = dst.remaining().min(this.filled - this.pos);
        dst.put_slice(&this.buf[this.pos..this.pos + n]);
        this.pos += n;
        Poll::Ready(Ok(()))
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for LazyBufReader<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, data)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

impl<S: PeerAddr> PeerAddr for LazyBufReader<S> {
    fn peer_label(&self) -> String {
        self.inner.peer_label()
    }
}

/// Runs the server side of the handshake on an accepted connection (a `TcpStream`,
/// possibly read-buffered) and returns the stream with the client's identity.
pub async fn accept<S>(
    acceptor: &TlsAcceptor,
    io: S,
) -> Result<(server::TlsStream<S>, PeerIdentity), CertError>
where
    S: AsyncRead + AsyncWrite + Unpin + PeerAddr,
{
    let peer = io.peer_label();
    let stream = within_handshake_time(&peer, acceptor.accept(io)).await?;
    let identity = peer_identity(stream.get_ref().1)?;
    Ok((stream, identity))
}

/// Runs the client side of the handshake to the server `role` `name` and returns the
/// stream with the server's identity, which is checked to be exactly (`role`, `name`).
///
/// `io` is the connected transport (a `TcpStream`, possibly read-buffered).
pub async fn connect<S>(
    connector: &TlsConnector,
    io: S,
    role: Role,
    name: &str,
) -> Result<(client::TlsStream<S>, PeerIdentity), CertError>
where
    S: AsyncRead + AsyncWrite + Unpin + PeerAddr,
{
    let peer = io.peer_label();
    let expected = PeerIdentity::new(role, name)?;
    let dns = check_dns(name).map_err(|reason| CertError::InvalidName {
        name: name.to_string(),
        reason,
    })?;
    let connecting = connector.connect(ServerName::DnsName(dns), io);
    let stream = within_handshake_time(&peer, connecting).await?;
    let identity = peer_identity(stream.get_ref().1)?;
    if identity != expected {
        return Err(CertError::WrongPeer {
            peer,
            expected: expected.to_string(),
            got: identity.to_string(),
        });
    }
    Ok((stream, identity))
}

/// A handshake with `peer`, given [`HANDSHAKE_TIMEOUT`]; its failure explained.
async fn within_handshake_time<T>(
    peer: &str,
    handshake: impl Future<Output = io::Result<T>>,
) -> Result<T, CertError> {
    tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake)
        .await
        .map_err(|_| CertError::HandshakeTimeout {
            peer: peer.to_string(),
            seconds: HANDSHAKE_TIMEOUT.as_secs(),
        })?
        .map_err(|e| handshake_error(peer, &e))
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};
    use tokio::net::{TcpListener, TcpStream};

    use crate::testing::TestPki;
    use crate::{CertError, PeerAddr, PeerIdentity, Role};

    /// Both ends read-buffered: the handshake, the identities and data both ways work,
    /// and a wrong server is reported with its address.
    #[tokio::test]
    async fn handshakes_run_over_read_buffered_streams() {
        let pki = TestPki::new();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let acceptor = pki.acceptor(Role::Node, "n1").unwrap();
        let server = tokio::spawn(async move {
            let (tcp, _) = listener.accept().await.unwrap();
            let io = BufReader::with_capacity(64 * 1024, tcp);
            let (mut tls, client) = super::accept(&acceptor, io).await.unwrap();
            let mut buf = [0u8; 5];
            tls.read_exact(&mut buf).await.unwrap();
            tls.write_all(&buf).await.unwrap();
            tls.flush().await.unwrap();
            let (tcp, _) = listener.accept().await.unwrap();
            // The second client dialled someone else; its refusal is its own business.
            let _ = super::accept(&acceptor, BufReader::new(tcp)).await;
            client
        });
        let connector = pki.connector(Role::User, "alice").unwrap();

        let io = BufReader::with_capacity(64 * 1024, TcpStream::connect(addr).await.unwrap());
        assert_eq!(io.peer_label(), addr.to_string());
        let (mut tls, node) = super::connect(&connector, io, Role::Node, "n1")
            .await
            .unwrap();
        assert_eq!(node, PeerIdentity::new(Role::Node, "n1").unwrap());
        tls.write_all(b"hello").await.unwrap();
        tls.flush().await.unwrap();
        let mut echo = [0u8; 5];
        tls.read_exact(&mut echo).await.unwrap();
        assert_eq!(&echo, b"hello");

        let io = BufReader::new(TcpStream::connect(addr).await.unwrap());
        let err = super::connect(&connector, io, Role::Service, "n1")
            .await
            .unwrap_err();
        assert!(matches!(err, CertError::WrongPeer { .. }), "{err}");
        assert!(err.to_string().starts_with(&addr.to_string()), "{err}");
        assert_eq!(
            server.await.unwrap(),
            PeerIdentity::new(Role::User, "alice").unwrap()
        );
    }

    /// A peer presenting the CA's own (self-signed) certificate is explained in
    /// words, never as rustls's `Other(OtherError(CaUsedAsEndEntity))`.
    #[tokio::test]
    async fn a_peer_showing_the_ca_certificate_is_refused_in_words() {
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::{CertificateDer, PrivateKeyDer};
        let pki = TestPki::new();
        let dir = pki.ca().dir();
        let cert = CertificateDer::from_pem_file(dir.join(crate::ca::CA_CERT_FILE)).unwrap();
        let key = PrivateKeyDer::from_pem_file(dir.join(crate::ca::CA_KEY_FILE)).unwrap();
        let config = rustls::ServerConfig::builder_with_provider(crate::crypto_provider())
            .with_protocol_versions(&[&rustls::version::TLS13])
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(vec![cert], key)
            .unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(std::sync::Arc::new(config));
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let (tcp, _) = listener.accept().await.unwrap();
            let _ = acceptor.accept(tcp).await;
        });
        let connector = pki.connector(Role::User, "alice").unwrap();
        let tcp = TcpStream::connect(addr).await.unwrap();
        let err = super::connect(&connector, tcp, Role::Node, "n1")
            .await
            .unwrap_err();
        let text = err.to_string();
        assert!(text.contains("it is a CA certificate"), "{text}");
        assert!(
            !text.contains("CaUsedAsEndEntity") && !text.contains("Other("),
            "{text}"
        );
    }

    /// Reads `r` to the end in reads of `chunk` bytes; the buffer sizes seen in turn.
    async fn drain(r: &mut super::LazyBufReader<&[u8]>, chunk: usize) -> (Vec<u8>, Vec<usize>) {
        let (mut out, mut sizes, mut buf) = (Vec::new(), Vec::new(), vec![0u8; chunk]);
        loop {
            let n = r.read(&mut buf).await.unwrap();
            if n == 0 {
                return (out, sizes);
            }
            out.extend_from_slice(&buf[..n]);
            if sizes.last() != Some(&r.buf.len()) {
                sizes.push(r.buf.len());
            }
        }
    }

    /// The read buffer starts small and doubles while reads from the transport fill
    /// it, up to the capacity asked for; a short exchange never grows it. The bytes
    /// come through in order.
    #[tokio::test]
    async fn the_read_buffer_grows_only_while_reads_fill_it() {
        let data: Vec<u8> = (0..1u32 << 20).map(|i| (i % 251) as u8).collect();
        let mut stream = super::LazyBufReader::new(&data[..]);
        stream.buffer(256 * 1024);
        let (out, sizes) = drain(&mut stream, 4096).await;
        assert!(out == data, "the bytes changed on the way");
        assert_eq!(sizes, [16 << 10, 32 << 10, 64 << 10, 128 << 10, 256 << 10]);

        let mut short = super::LazyBufReader::new(&data[..1000]);
        short.buffer(256 * 1024);
        let (out, sizes) = drain(&mut short, 100).await;
        assert_eq!((out.len(), sizes), (1000, vec![16 << 10]));

        let mut small = super::LazyBufReader::new(&data[..10_000]);
        small.buffer(1024);
        let (out, sizes) = drain(&mut small, 100).await;
        assert!(out == data[..10_000]);
        assert_eq!(sizes, [1024]);
    }
}
