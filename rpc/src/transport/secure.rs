//! The connections under the RPC: mutual TLS by default ([`crate::tls`]), plaintext with
//! tokens only under `--insecure-rpc` ([`crate::auth::Transport`]).
//!
//! tonic is handed connections that are already secured, both ways: the server side accepts
//! and handshakes here ([`incoming`]) and tells the handlers what the handshake proved
//! ([`PeerInfo`], a request extension); the calling side dials through [`connector`]. So one
//! rustls config per process serves every connection (sessions resume across reconnects), and
//! the caller's kind comes from its certificate.

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

use crate::auth::Kind;

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
        match &mut self.get_mut().io {
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
        match &mut self.get_mut().io {
            Either::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
            Either::Plain(s) => Pin::new(s).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match &mut self.get_mut().io {
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

/// Which connections a server takes.
#[derive(Clone)]
pub(super) enum Accept {
    /// Mutual TLS only.
    Tls(Arc<rustls::ServerConfig>),
    /// Plaintext only (`--insecure-rpc`).
    Plain,
}

/// The connections `listener` accepts, handshaken (each on its own task, so a slow or
/// silent caller holds up nobody). A failed handshake is logged and dropped: tonic sees only
/// connections whose caller proved a certificate of the cluster's CA. Ends when the stream is
/// dropped (the listener closes then).
pub(super) fn incoming(
    listener: TcpListener,
    accept: Accept,
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
            let accept = accept.clone();
            tokio::spawn(async move {
                if let Some(conn) = secure(tcp, remote, accept).await {
                    let _ = tx.send(Ok(conn)).await;
                }
            });
        }
    });
    futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|c| (c, rx)) })
}

/// `tcp` as the server takes it, or `None` (logged) if its caller failed the handshake.
async fn secure(tcp: TcpStream, remote: SocketAddr, accept: Accept) -> Option<Conn> {
    let config = match accept {
        Accept::Plain => {
            let info = PeerInfo {
                remote: Some(remote),
                kind: None,
            };
            return Some(Secured {
                io: Either::Plain(tcp),
                info,
            });
        }
        Accept::Tls(config) => config,
    };
    let handshake = tokio_rustls::TlsAcceptor::from(config).accept(tcp);
    let tls = match tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake).await {
        Ok(Ok(tls)) => tls,
        Ok(Err(e)) => {
            crate::metrics::HANDSHAKES_REFUSED.inc();
            tracing::warn!(%remote, error = %e, "RPC connection refused: TLS handshake failed");
            return None;
        }
        Err(_) => {
            crate::metrics::HANDSHAKES_REFUSED.inc();
            tracing::warn!(%remote, "RPC connection refused: no TLS handshake in time");
            return None;
        }
    };
    let kind = tls
        .get_ref()
        .1
        .peer_certificates()
        .and_then(|certs| certs.first())
        .and_then(|leaf| crate::tls::kind_of_certificate(leaf));
    let Some(kind) = kind else {
        crate::metrics::HANDSHAKES_REFUSED.inc();
        tracing::warn!(%remote, "RPC connection refused: its certificate names no saker kind");
        return None;
    };
    let info = PeerInfo {
        remote: Some(remote),
        kind: Some(kind),
    };
    Some(Secured {
        io: Either::Tls(Box::new(tls)),
        info,
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
            }))
        })
    }
}
