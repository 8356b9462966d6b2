//! AMQP 0.9.1 delivery (RabbitMQ): one message per batch to the target's exchange with its
//! routing key, persistent (delivery mode 2), `application/json` and mandatory, on a channel
//! in confirm mode. The batch is delivered when the broker acks it; a nack, a message the
//! exchange routed to no queue (returned to us), a missing exchange or no confirm within
//! [`DELIVERY_TIMEOUT`] is a delivery error (retried).
//!
//! The connection and its channel are made at the first send and kept for the next ones. A
//! channel the broker closed (publishing to a missing exchange closes it) is opened again on
//! the same connection; a connection that closed, or a send that timed out, is dropped and
//! the next send dials afresh.

use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use lapin::options::{BasicPublishOptions, ConfirmSelectOptions};
use lapin::{BasicProperties, Channel, Confirmation, Connection, ConnectionProperties};

use super::{DeliveryError, Sink, DELIVERY_TIMEOUT};

/// Persistent, in AMQP's basic properties.
const PERSISTENT: u8 = 2;

/// An AMQP target's sink.
pub struct Amqp {
    url: String,
    exchange: String,
    routing_key: String,
    link: tokio::sync::Mutex<Option<Link>>,
    dialled: AtomicU64,
}

/// A connection and its channel in confirm mode.
struct Link {
    /// Its number, so a failed send drops only the connection it used.
    id: u64,
    conn: Connection,
    channel: Option<Channel>,
}

fn unreachable(what: &str, e: impl std::fmt::Display) -> DeliveryError {
    DeliveryError::Unreachable(format!("AMQP {what}: {e}"))
}

impl Amqp {
    pub fn new(url: &str, exchange: &str, routing_key: &str) -> Self {
        Self {
            url: url.to_string(),
            exchange: exchange.to_string(),
            routing_key: routing_key.to_string(),
            link: tokio::sync::Mutex::new(None),
            dialled: AtomicU64::new(0),
        }
    }

    /// The channel to publish on, with its connection's number: the kept one while it is
    /// open, else a new one (on a new connection if the kept one closed).
    async fn channel(&self, used: &mut Option<u64>) -> Result<Channel, DeliveryError> {
        let mut slot = self.link.lock().await;
        if slot.as_ref().is_some_and(|l| !l.conn.status().connected()) {
            *slot = None;
        }
        let link = match &mut *slot {
            Some(link) => link,
            None => {
                let conn = Connection::connect(
                    &self.url,
                    ConnectionProperties::default().with_connection_name("saker-notify".into()),
                )
                .await
                .map_err(|e| unreachable("connect", e))?;
                let id = self.dialled.fetch_add(1, Ordering::Relaxed);
                slot.insert(Link {
                    id,
                    conn,
                    channel: None,
                })
            }
        };
        *used = Some(link.id);
        if let Some(ch) = link.channel.as_ref().filter(|c| c.status().connected()) {
            return Ok(ch.clone());
        }
        link.channel = None;
        let ch = link
            .conn
            .create_channel()
            .await
            .map_err(|e| unreachable("open a channel", e))?;
        ch.confirm_select(ConfirmSelectOptions::default())
            .await
            .map_err(|e| unreachable("confirm mode", e))?;
        link.channel = Some(ch.clone());
        Ok(ch)
    }

    /// Publishes `body` and waits for the broker's confirm.
    async fn publish(&self, body: Vec<u8>, used: &mut Option<u64>) -> Result<(), DeliveryError> {
        let channel = self.channel(used).await?;
        let properties = BasicProperties::default()
            .with_delivery_mode(PERSISTENT)
            .with_content_type("application/json".into());
        let options = BasicPublishOptions {
            mandatory: true,
            ..Default::default()
        };
        let confirm = channel
            .basic_publish(
                self.exchange.as_str().into(),
                self.routing_key.as_str().into(),
                options,
                &body,
                properties,
            )
            .await
            .map_err(|e| unreachable("publish", e))?
            .await
            .map_err(|e| unreachable("publish", e))?;
        match confirm {
            Confirmation::Ack(None) => Ok(()),
            Confirmation::Ack(Some(returned)) | Confirmation::Nack(Some(returned)) => {
                Err(DeliveryError::Refused(format!(
                    "{} {}: exchange {:?} routed the message to no queue (routing key {:?})",
                    returned.reply_code, returned.reply_text, self.exchange, self.routing_key
                )))
            }
            Confirmation::Nack(None) => Err(DeliveryError::Refused(format!(
                "a nack for the message to exchange {:?}",
                self.exchange
            ))),
            Confirmation::NotRequested => Err(DeliveryError::Refused(
                "no confirm (the channel is not in confirm mode)".into(),
            )),
        }
    }

    /// Drops connection `id` if it is still the one kept.
    async fn drop_link(&self, id: Option<u64>) {
        let mut slot = self.link.lock().await;
        if id.is_some() && slot.as_ref().map(|l| l.id) == id {
            *slot = None;
        }
    }
}

#[async_trait]
impl Sink for Amqp {
    async fn send(&self, body: Vec<u8>) -> Result<(), DeliveryError> {
        let mut used = None;
        let sent = tokio::time::timeout(DELIVERY_TIMEOUT, self.publish(body, &mut used)).await;
        match sent {
            Ok(result) => result,
            Err(_) => {
                self.drop_link(used).await;
                Err(DeliveryError::Unreachable(format!(
                    "AMQP: no confirm within {DELIVERY_TIMEOUT:?}"
                )))
            }
        }
    }
}
