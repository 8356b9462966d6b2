//! Bucket notifications: S3's `NotificationConfiguration` as saker keeps it ([`rules`]), the
//! targets events go to ([`target`]: a webhook, a NATS JetStream subject, an AMQP exchange or
//! a Kafka topic ([`kafka`]), each a [`target::TargetKind`] delivered by its [`sink::Sink`]),
//! the AWS event JSON ([`event`]), and the consumer that reads every group's change feed of
//! every bucket with a configuration, sends what matches to its targets and acknowledges only
//! what they took ([`consumer`]).
//!
//! The feed itself is the MNodes' ([`saker_rpc::FeedRequest`]): a change's record is written
//! in the raft batch of the change, so an acknowledged write always has its record, and a
//! record goes only once every target took its event (at least once, in order per key) or when
//! the bucket's feed overflows its cap (counted, logged, on `/metrics`).

pub mod consumer;
pub mod event;
pub mod kafka;
pub mod metrics;
pub mod rules;
pub mod sink;
pub mod target;

pub use consumer::{Backlog, Notifier, PassReport, TargetStatus};
pub use rules::{NotificationConfig, QueueRule};
pub use target::{Target, TargetKind};

/// Errors of notification settings and delivery.
#[derive(Debug, thiserror::Error)]
pub enum NotifyError {
    /// A configuration or target definition that cannot be taken (S3 `InvalidArgument`).
    #[error("{0}")]
    Invalid(String),
    #[error("no notification target {0:?}")]
    NoSuchTarget(String),
    #[error("notification target {0:?} exists")]
    Exists(String),
    /// A target still named by a bucket's configuration.
    #[error("notification target {0:?} is used by bucket {1:?}")]
    InUse(String, String),
    /// The coordinator's records could not be read or written.
    #[error("cluster state: {0}")]
    State(String),
    /// A stored record that does not parse.
    #[error("record {key}: {reason}")]
    Corrupt { key: String, reason: String },
    #[error(transparent)]
    Client(#[from] saker_client::ClientError),
}
