//! NATS JetStream delivery: one message per batch on the target's subject, published with
//! JetStream, so the server answers with a PubAck once the stream that captures the subject
//! has stored it; only then is the batch delivered. No stream for the subject is a delivery
//! error (retried until an operator makes one), as is no PubAck within [`DELIVERY_TIMEOUT`].
//!
//! The client connects at the first send and is kept for the next ones. One whose delivery
//! failed for another reason than a missing stream (a timeout, a lost connection) is
//! dropped, with what async-nats buffered for it, so the next send dials afresh.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use async_nats::jetstream::{self, context::PublishErrorKind};
use async_nats::rustls;
use async_trait::async_trait;

use super::{DeliveryError, Sink, DELIVERY_TIMEOUT};

/// How a NATS target is reached.
pub struct Settings {
    /// `nats://` or `tls://HOST:PORT`.
    pub url: String,
    pub subject: String,
    /// User and password.
    pub user: Option<(String, String)>,
    pub token: Option<String>,
    /// PEM certificates the server's must chain to.
    pub tls_ca: Option<String>,
}

/// A NATS JetStream target's sink.
pub struct Nats {
    settings: Settings,
    /// The connection, once made, with its number (so a failed send drops only the
    /// connection it used, not one another send made since).
    conn: tokio::sync::Mutex<Option<(u64, jetstream::Context)>>,
    dialled: AtomicU64,
}

/// A failed delivery, and whether the connection it used is to be dropped.
struct Failure {
    error: DeliveryError,
    drop_conn: bool,
}

impl Nats {
    pub fn new(settings: Settings) -> Self {
        Self {
            settings,
            conn: tokio::sync::Mutex::new(None),
            dialled: AtomicU64::new(0),
        }
    }

    /// The connection, made now if there is none.
    async fn context(&self) -> Result<(u64, jetstream::Context), DeliveryError> {
        let mut slot = self.conn.lock().await;
        if let Some(c) = &*slot {
            return Ok(c.clone());
        }
        let s = &self.settings;
        let mut opts = async_nats::ConnectOptions::new()
            .name("saker-notify")
            .connection_timeout(DELIVERY_TIMEOUT);
        if let Some((user, password)) = &s.user {
            opts = opts.user_and_password(user.clone(), password.clone());
        }
        if let Some(token) = &s.token {
            opts = opts.token(token.clone());
        }
        if let Some(pem) = &s.tls_ca {
            opts = opts.require_tls(true).tls_client_config(tls_config(pem)?);
        }
        let client = opts
            .connect(s.url.as_str())
            .await
            .map_err(|e| DeliveryError::Unreachable(format!("NATS: {e}")))?;
        let mut js = jetstream::new(client);
        js.set_timeout(DELIVERY_TIMEOUT);
        let conn = (self.dialled.fetch_add(1, Ordering::Relaxed), js);
        *slot = Some(conn.clone());
        Ok(conn)
    }

    /// Publishes `body` and waits for its PubAck; answers the connection it used.
    async fn publish(&self, body: Vec<u8>, used: &mut Option<u64>) -> Result<(), Failure> {
        let (id, js) = self.context().await.map_err(|error| Failure {
            error,
            drop_conn: false,
        })?;
        *used = Some(id);
        let subject = &self.settings.subject;
        let fail = |e: jetstream::context::PublishError| match e.kind() {
            PublishErrorKind::StreamNotFound => Failure {
                error: DeliveryError::Refused(format!(
                    "that no JetStream stream captures subject {subject:?}"
                )),
                drop_conn: false,
            },
            // A lost connection, a timeout, or the server's refusal: dialled again next time
            // (a client that gave up reconnecting would fail every send otherwise).
            _ => Failure {
                error: DeliveryError::Unreachable(format!("NATS JetStream publish: {e}")),
                drop_conn: true,
            },
        };
        let ack = js
            .publish(subject.clone(), body.into())
            .await
            .map_err(fail)?;
        ack.await.map_err(fail)?;
        Ok(())
    }

    /// Drops connection `id` if it is still the one kept.
    async fn drop_conn(&self, id: Option<u64>) {
        let mut slot = self.conn.lock().await;
        if id.is_some() && slot.as_ref().map(|c| c.0) == id {
            *slot = None;
        }
    }
}

#[async_trait]
impl Sink for Nats {
    async fn send(&self, body: Vec<u8>) -> Result<(), DeliveryError> {
        let mut used = None;
        let sent = tokio::time::timeout(DELIVERY_TIMEOUT, self.publish(body, &mut used)).await;
        match sent {
            Ok(Ok(())) => Ok(()),
            Ok(Err(f)) => {
                if f.drop_conn {
                    self.drop_conn(used).await;
                }
                Err(f.error)
            }
            Err(_) => {
                self.drop_conn(used).await;
                Err(DeliveryError::Unreachable(format!(
                    "no JetStream PubAck within {DELIVERY_TIMEOUT:?}"
                )))
            }
        }
    }
}

/// A TLS client configuration that trusts the certificates of `pem` only.
fn tls_config(pem: &str) -> Result<rustls::ClientConfig, DeliveryError> {
    use rustls::pki_types::{pem::PemObject, CertificateDer};
    let bad = |e: String| DeliveryError::Unreachable(format!("NATS TLS CA: {e}"));
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(pem.as_bytes()) {
        roots
            .add(cert.map_err(|e| bad(e.to_string()))?)
            .map_err(|e| bad(e.to_string()))?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| bad(e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth())
}
