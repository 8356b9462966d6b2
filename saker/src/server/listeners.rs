//! The HTTP listeners (S3 and admin): an accept loop that serves each connection, over TLS
//! when a certificate is configured (`--tls-cert`/`--tls-key`, rustls).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use saker_gateway::Peer;
use tokio::net::TcpListener;
use tokio_rustls::rustls;
use tokio_rustls::TlsAcceptor;

use crate::limits::ConnLimits;

/// How long a client has for its TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The TLS setup of the HTTP listeners: a certificate chain and its private key, PEM files.
pub fn acceptor(cert: &Path, key: &Path) -> anyhow::Result<TlsAcceptor> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let chain = CertificateDer::pem_file_iter(cert)
        .with_context(|| format!("cannot read the TLS certificate {}", cert.display()))?
        .collect::<Result<Vec<_>, _>>()
        .with_context(|| format!("bad PEM in the TLS certificate {}", cert.display()))?;
    anyhow::ensure!(
        !chain.is_empty(),
        "no certificate in {} (PEM, CERTIFICATE blocks)",
        cert.display()
    );
    let key = PrivateKeyDer::from_pem_file(key)
        .with_context(|| format!("cannot read a private key from {}", key.display()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .context("TLS protocol versions")?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .context("the TLS certificate and key do not go together")?;
    let mut config = config;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// `http` or `https`, as the listener serves.
pub fn scheme(tls: &Option<TlsAcceptor>) -> &'static str {
    if tls.is_some() {
        "https"
    } else {
        "http"
    }
}

/// Serves every connection `listener` accepts (TLS first when `tls` is set) with the
/// service `make` builds for it, HTTP/1.1 or HTTP/2, each on its own task, within `limits`:
/// at most `max_connections` at once (the next waits in the backlog), and a connection
/// that does not send a request's headers within `header_timeout` (a slow client, or an
/// idle HTTP/1.1 keep-alive) is closed.
pub async fn serve<F, S, B>(
    listener: TcpListener,
    tls: Option<TlsAcceptor>,
    limits: ConnLimits,
    make: F,
) where
    F: Fn(Peer) -> S + Send + Sync + 'static,
    S: hyper::service::Service<
            hyper::Request<hyper::body::Incoming>,
            Response = hyper::Response<B>,
        > + Send
        + 'static,
    S::Future: Send + 'static,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    B: hyper::body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let make = Arc::new(make);
    let open = Arc::new(tokio::sync::Semaphore::new(limits.max_connections));
    loop {
        let Ok(slot) = open.clone().acquire_owned().await else {
            return;
        };
        let (stream, remote) = match listener.accept().await {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(error = %e, "accept failed");
                // Out of file descriptors, say: give others a moment to close theirs.
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let (make, tls) = (make.clone(), tls.clone());
        tokio::spawn(async move {
            let _slot = slot;
            let peer = Peer {
                addr: remote,
                secure: tls.is_some(),
            };
            let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
            builder
                .http1()
                .timer(TokioTimer::new())
                .header_read_timeout(limits.header_timeout);
            let service = make(peer);
            let served = match tls {
                None => {
                    builder
                        .serve_connection(TokioIo::new(stream), service)
                        .await
                }
                Some(tls) => {
                    let stream =
                        match tokio::time::timeout(HANDSHAKE_TIMEOUT, tls.accept(stream)).await {
                            Ok(Ok(s)) => s,
                            Ok(Err(e)) => {
                                tracing::debug!(%remote, error = %e, "TLS handshake failed");
                                return;
                            }
                            Err(_) => {
                                tracing::debug!(%remote, "TLS handshake timed out");
                                return;
                            }
                        };
                    builder
                        .serve_connection(TokioIo::new(stream), service)
                        .await
                }
            };
            if let Err(e) = served {
                tracing::debug!(%remote, error = %e, "connection ended with an error");
            }
        });
    }
}

/// Serves an axum router (the admin API) on `listener`.
pub async fn serve_router(listener: TcpListener, tls: Option<TlsAcceptor>, app: axum::Router) {
    serve(listener, tls, ConnLimits::ADMIN, move |_| {
        hyper_util::service::TowerToHyperService::new(app.clone())
    })
    .await
}

/// Serves S3 on `listener`: CORS preflights and decoration, request bodies drained, and the
/// access log if there is one.
pub(crate) async fn serve_s3(
    listener: TcpListener,
    tls: Option<tokio_rustls::TlsAcceptor>,
    limits: crate::limits::ConnLimits,
    front: saker_gateway::Front,
    log: Option<Arc<crate::access_log::AccessLog>>,
) {
    serve(listener, tls, limits, move |peer| {
        let (front, log) = (front.clone(), log.clone());
        hyper::service::service_fn(move |mut req: hyper::Request<hyper::body::Incoming>| {
            let (front, log) = (front.clone(), log.clone());
            async move {
                // Who is asking, for policy conditions (aws:SourceIp, aws:SecureTransport).
                req.extensions_mut().insert(peer);
                let pending = log
                    .as_ref()
                    .map(|_| crate::access_log::AccessLog::begin(&req, peer.addr));
                let resp = match front.cors.preflight(&req).await {
                    Some(resp) => resp,
                    None => {
                        let cross = front.cors.cross_origin(&req);
                        front.prepare(&mut req).await;
                        let expects = crate::drain::expects_continue(req.headers());
                        let req = req.map(|b| crate::drain::Drained::new(b, !expects));
                        let mut svc = front.s3.clone();
                        let mut resp = tower::Service::call(&mut svc, req).await?;
                        if let Some(x) = cross {
                            front.cors.decorate(x, resp.headers_mut()).await;
                        }
                        if crate::drain::must_close(expects, resp.status()) {
                            resp.headers_mut().insert(
                                http::header::CONNECTION,
                                http::HeaderValue::from_static("close"),
                            );
                        }
                        resp
                    }
                };
                if let (Some(log), Some(pending)) = (log, pending) {
                    log.end(pending, &resp);
                }
                Ok::<_, s3s::HttpError>(resp)
            }
        })
    })
    .await
}
