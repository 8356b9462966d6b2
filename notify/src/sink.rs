//! Delivery to a target: one [`Sink`] per kind. A sink takes one batch of event records (the
//! JSON body of [`crate::event::body`]) and answers `Ok` only once the target has it, so the
//! consumer acknowledges the feed only then. A sink lives as long as the consumer uses its
//! target, so the ones that hold a connection ([`nats`], [`amqp`]) make it at their first
//! send and keep it.

pub mod amqp;
pub mod nats;

use std::time::Duration;

use async_trait::async_trait;

use crate::target::{Target, TargetKind};

/// How long one delivery may take before it counts as failed.
pub const DELIVERY_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a delivery failed (the consumer retries it with backoff).
#[derive(Debug, thiserror::Error)]
pub enum DeliveryError {
    #[error("{0}")]
    Unreachable(String),
    /// The target answered, but not with success.
    #[error("answered {0}")]
    Refused(String),
}

/// Where one batch of events goes.
#[async_trait]
pub trait Sink: Send + Sync {
    /// Delivers one `{"Records": [...]}` body.
    async fn send(&self, body: Vec<u8>) -> Result<(), DeliveryError>;
}

/// The sink of `target`.
pub fn sink_for(target: &Target, http: &reqwest::Client) -> Box<dyn Sink> {
    match &target.kind {
        TargetKind::Webhook { url, auth_token } => Box::new(Webhook {
            http: http.clone(),
            url: url.clone(),
            auth_token: auth_token.clone(),
        }),
        TargetKind::Kafka {
            brokers,
            topic,
            sasl_user,
            sasl_password,
            tls,
            tls_ca,
        } => crate::kafka::producer::sink(crate::kafka::Settings {
            brokers: brokers.clone(),
            topic: topic.clone(),
            sasl: sasl_user.clone().zip(sasl_password.clone()),
            tls: *tls || tls_ca.is_some(),
            tls_ca: tls_ca.clone(),
        }),
        TargetKind::Nats {
            url,
            subject,
            user,
            password,
            token,
            tls_ca,
        } => Box::new(nats::Nats::new(nats::Settings {
            url: url.clone(),
            subject: subject.clone(),
            user: user.clone().zip(password.clone()),
            token: token.clone(),
            tls_ca: tls_ca.clone(),
        })),
        TargetKind::Amqp {
            url,
            exchange,
            routing_key,
        } => Box::new(amqp::Amqp::new(url, exchange, routing_key)),
    }
}

/// A webhook: one POST per batch, `Content-Type: application/json`; any 2xx is delivered.
pub struct Webhook {
    http: reqwest::Client,
    url: String,
    auth_token: Option<String>,
}

#[async_trait]
impl Sink for Webhook {
    async fn send(&self, body: Vec<u8>) -> Result<(), DeliveryError> {
        let mut req = self
            .http
            .post(&self.url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .timeout(DELIVERY_TIMEOUT)
            .body(body);
        if let Some(t) = &self.auth_token {
            req = req.bearer_auth(t);
        }
        let resp = req
            .send()
            .await
            .map_err(|e| DeliveryError::Unreachable(e.to_string()))?;
        if resp.status().is_success() {
            Ok(())
        } else {
            Err(DeliveryError::Refused(resp.status().to_string()))
        }
    }
}
