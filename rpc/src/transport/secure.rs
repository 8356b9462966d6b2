//! The connections under the RPC: mutual TLS by default ([`crate::tls`]), plaintext with
//! tokens only under `--insecure-rpc` ([`crate::auth::Transport`]).
//!
//! tonic is handed connections that are already secured, both ways: the server side accepts
//! and handshakes here ([`incoming`]) and tells the handlers what the handshake proved
//! ([`PeerInfo`], a request extension); the calling side dials through [`connector`]. So one
//! rustls config per process serves every connection (sessions resume across reconnects), and
//! the caller's kind comes from its certificate.
//!
//! During an online upgrade from plaintext ([`crate::auth::Transition`]) one port takes both:
//! the acceptor peeks at a connection's first byte, and a TLS handshake record (0x16, never
//! the first byte of an HTTP/2 preface, `PRI * HTTP/2.0`) goes to TLS, anything else is
//! plaintext, whose every request must carry a token. When the node reloads its credential
//! ([`crate::auth::reload`]), each open connection is looked at again, and one the new
//! credential would not take (plaintext once the upgrade is done, a certificate of a CA no
//! longer trusted) is closed.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::rustls;

use crate::auth::{Kind, Process};
use tokio_rustls::rustls::pki_types::CertificateDer;

/// How long a caller may take to complete its TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// What the server knows of a connection's caller (a request extension).
#[derive(Clone, Debug, Default)]
pub struct PeerInfo {
    pub remote: Option<SocketAddr>,
    /// The kind its certificate names; `None` on a plaintext connection (tokens decide).
    pub kind: Option<Kind>,
}

/// A connection, TLS or (`--insecure-rpc`) plaintext; `info` is what the server knows of its
/// caller (unused on the calling side).
pub(super) struct Secured<T> {
    io: Either<T>,
    info: PeerInfo,
    /// Ready once the server no longer lets this connection in (a reload): every read and
    /// write fails from then on, and the connection closes. None on the calling side.
    revoked: Option<Revoked>,
}

type Revoked = Pin<Box<dyn std::future::Future<Output = ()> + Send + Sync>>;

impl<T> Secured<T> {
    /// An error once the connection was revoked.
    fn check(&mut self, cx: &mut Context<'_>) -> io::Result<()> {
        match self.revoked.as_mut().map(|r| r.as_mut().poll(cx)) {
            Some(Poll::Ready(())) => Err(io::Error::new(
                io::ErrorKind::ConnectionAborted,
                "this node no longer takes such connections",
            )),
            _ => Ok(()),
        }
    }
}

enum Either<T> {
    Tls(Box<T>),
    Plain(TcpStream),
}

/// An accepted connection.
pub(super) type Conn = Secured<tokio_rustls::server::TlsStream<TcpStream>>;
/// A dialed one.
type ClientConn = Secured<tokio_rustls::client::TlsStream<TcpStream>>;

impl<T> tonic::transport::server::Connected for Secured<T> {
    type ConnectInfo = PeerInfo;

    fn connect_info(&self) -> PeerInfo {
        self.info.clone()
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Secured<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        this.check(cx)?;
        match &mut this.io {
            Either::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
            Either::Plain(s) => Pin::new(s).poll_read(cx, buf),
        }
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Secured<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        this.check(cx)?;
        match &mut this.io {
            Either::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
            Either::Plain(s) => Pin::new(s).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        this.check(cx)?;
        match &mut this.io {
            Either::Tls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
            Either::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match &self.io {
            Either::Tls(s) => s.is_write_vectored(),
            Either::Plain(s) => s.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.get_mut().io {
            Either::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
            Either::Plain(s) => Pin::new(s).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.get_mut().io {
            Either::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
            Either::Plain(s) => Pin::new(s).poll_shutdown(cx),
        }
    }
}

/// The connections `listener` accepts, handshaken (each on its own task, so a slow or
/// silent caller holds up nobody), as the credential the server serves with says at each
/// ([`crate::auth::serving`]; `started` is the one it started with). A failed handshake is
/// logged and dropped: tonic sees only connections whose caller proved a certificate of the
/// cluster's CA, or, while the node takes plaintext, plaintext ones. Ends when the stream is
/// dropped (the listener closes then).
pub(super) fn incoming(
    listener: TcpListener,
    started: Arc<Process>,
) -> impl futures::Stream<Item = io::Result<Conn>> {
    let (tx, rx) = tokio::sync::mpsc::channel::<io::Result<Conn>>(64);
    tokio::spawn(async move {
        loop {
            let (tcp, remote) = tokio::select! {
                _ = tx.closed() => return,
                r = listener.accept() => match r {
                    Ok(pair) => pair,
                    Err(e) => {
                        // Out of descriptors and the like: the listener itself stays good.
                        tracing::warn!(error = %e, "RPC accept failed");
                        tokio::time::sleep(Duration::from_millis(20)).await;
                        continue;
                    }
                },
            };
            let _ = tcp.set_nodelay(true);
            let tx = tx.clone();
            let started = started.clone();
            tokio::spawn(async move {
                if let Some(conn) = secure(tcp, remote, started).await {
                    let _ = tx.send(Ok(conn)).await;
                }
            });
        }
    });
    futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|c| (c, rx)) })
}

/// The first byte of every TLS connection: a handshake record.
const TLS_HANDSHAKE: u8 = 0x16;

/// Whether the caller on `tcp` opens with TLS: its first byte, peeked (left for the
/// handshake or HTTP/2 to read). `None` if it sends nothing in time or hangs up.
async fn speaks_tls(tcp: &TcpStream) -> Option<bool> {
    let mut first = [0u8; 1];
    match tokio::time::timeout(HANDSHAKE_TIMEOUT, tcp.peek(&mut first)).await {
        Ok(Ok(1)) => Some(first[0] == TLS_HANDSHAKE),
        _ => None,
    }
}

fn refused(remote: SocketAddr, why: &str) -> Option<Conn> {
    crate::metrics::HANDSHAKES_REFUSED.inc();
    tracing::warn!(%remote, "RPC connection refused: {why}");
    None
}

/// `tcp` as the server takes it, or `None` (logged) if its caller failed the handshake.
async fn secure(tcp: TcpStream, remote: SocketAddr, started: Arc<Process>) -> Option<Conn> {
    let serving = crate::auth::serving(&started);
    let transport = serving.transport();
    let tls = match serving.server_tls() {
        Ok(tls) => tls.cloned(),
        Err(e) => return refused(remote, &format!("this node cannot serve TLS: {e}")),
    };
    drop(serving);
    let tls = match tls {
        // Both (an upgrade's middle steps): the caller's first byte says which.
        Some(tls) if transport.serves_plaintext() => match speaks_tls(&tcp).await {
            Some(true) => Some(tls),
            Some(false) => None,
            None => return refused(remote, "it sent nothing in time"),
        },
        tls => tls,
    };
    let Some(tls) = tls else {
        let info = PeerInfo {
            remote: Some(remote),
            kind: None,
        };
        return Some(Secured {
            io: Either::Plain(tcp),
            info,
            revoked: Some(revoked(started, None)),
        });
    };
    let handshake = tokio_rustls::TlsAcceptor::from(tls.config).accept(tcp);
    let tls = match tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake).await {
        Ok(Ok(tls)) => tls,
        Ok(Err(e)) => return refused(remote, &format!("TLS handshake failed: {e}")),
        Err(_) => return refused(remote, "no TLS handshake in time"),
    };
    let chain: Vec<CertificateDer<'static>> = tls
        .get_ref()
        .1
        .peer_certificates()
        .map(|certs| certs.iter().map(|c| c.clone().into_owned()).collect())
        .unwrap_or_default();
    let kind = chain
        .first()
        .and_then(|leaf| crate::tls::kind_of_certificate(leaf));
    let Some(kind) = kind else {
        return refused(remote, "its certificate names no saker kind");
    };
    let info = PeerInfo {
        remote: Some(remote),
        kind: Some(kind),
    };
    Some(Secured {
        io: Either::Tls(Box::new(tls)),
        info,
        revoked: Some(revoked(started, Some(chain))),
    })
}

/// Ready once a reload of this node's credential no longer lets in a connection that
/// showed `chain` (`None`: plaintext).
fn revoked(started: Arc<Process>, chain: Option<Vec<CertificateDer<'static>>>) -> Revoked {
    let mut reloads = crate::auth::reloads();
    Box::pin(async move {
        loop {
            if reloads.changed().await.is_err() {
                return std::future::pending().await;
            }
            let serving = crate::auth::serving(&started);
            if !serving.still_accepts(chain.as_deref()) {
                tracing::info!(
                    plaintext = chain.is_none(),
                    "closing an RPC connection the reloaded credential does not let in"
                );
                return;
            }
        }
    })
}

/// The calling side's dialer: TCP, then (unless `tls` is `None`, `--insecure-rpc`) a TLS
/// handshake that checks the server is a node of the cluster and shows this process's
/// certificate.
#[derive(Clone)]
pub(super) struct Connector {
    pub(super) tls: Option<Arc<rustls::ClientConfig>>,
}

type Dialed = TokioIo<ClientConn>;

impl tower::Service<http::Uri> for Connector {
    type Response = Dialed;
    type Error = io::Error;
    type Future = Pin<Box<dyn std::future::Future<Output = io::Result<Dialed>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: http::Uri) -> Self::Future {
        let tls = self.tls.clone();
        Box::pin(async move {
            let host = uri.host().unwrap_or_default().trim_matches(['[', ']']);
            let port = uri.port_u16().unwrap_or(80);
            let tcp = TcpStream::connect((host, port)).await?;
            tcp.set_nodelay(true)?;
            let Some(tls) = tls else {
                return Ok(TokioIo::new(Secured {
                    io: Either::Plain(tcp),
                    info: PeerInfo::default(),
                    revoked: None,
                }));
            };
            let name = rustls::pki_types::ServerName::try_from(crate::tls::NODE_NAME)
                .expect("a valid DNS name");
            let stream = tokio_rustls::TlsConnector::from(tls)
                .connect(name, tcp)
                .await?;
            Ok(TokioIo::new(Secured {
                io: Either::Tls(Box::new(stream)),
                info: PeerInfo::default(),
                revoked: None,
            }))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the acceptor sees first: a TLS ClientHello record, or an HTTP/2 preface.
    #[tokio::test]
    async fn the_first_byte_tells_tls_from_plaintext() {
        use tokio::io::AsyncWriteExt;
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        for (first, tls) in [
            (&[0x16u8, 0x03, 0x01][..], Some(true)),
            (b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", Some(false)),
            (b"", None),
        ] {
            let mut caller = TcpStream::connect(addr).await.unwrap();
            let (tcp, _) = listener.accept().await.unwrap();
            if first.is_empty() {
                caller.shutdown().await.unwrap();
            } else {
                caller.write_all(first).await.unwrap();
            }
            assert_eq!(speaks_tls(&tcp).await, tls, "{first:?}");
            // Peeked, not read: the whole of it is still there.
            let mut buf = vec![0u8; first.len()];
            if !first.is_empty() {
                tokio::io::AsyncReadExt::read_exact(&mut { tcp }, &mut buf)
                    .await
                    .unwrap();
                assert_eq!(buf, first);
            }
        }
    }
}
