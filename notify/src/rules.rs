//! A bucket's notification configuration as saker keeps it: its queue configurations (S3's
//! `QueueConfigurations`), each an id, the ARN of a target, the event types and the key
//! filter. Stored as JSON in the bucket's `notification` record
//! ([`saker_rpc::NOTIFICATION_RECORD`]), which also switches the bucket's change feed on;
//! an empty configuration removes the record.
//!
//! Event types are S3's: `s3:ObjectCreated:*` and the like match every event of their
//! family, `s3:ObjectCreated:Put` only its own. A key filter has at most one prefix and one
//! suffix rule, as S3's.

use std::sync::Arc;

use saker_coordinator::StateStore;
use saker_rpc::NOTIFICATION_RECORD;
use serde::{Deserialize, Serialize};

use crate::NotifyError;

/// The event types a configuration may name (S3's, less the ones of features saker does not
/// have: reduced redundancy, replication, Intelligent-Tiering).
pub const EVENT_TYPES: &[&str] = &[
    "s3:ObjectCreated:*",
    "s3:ObjectCreated:Put",
    "s3:ObjectCreated:Post",
    "s3:ObjectCreated:Copy",
    "s3:ObjectCreated:CompleteMultipartUpload",
    "s3:ObjectRemoved:*",
    "s3:ObjectRemoved:Delete",
    "s3:ObjectRemoved:DeleteMarkerCreated",
    "s3:ObjectRestore:*",
    "s3:ObjectRestore:Post",
    "s3:ObjectRestore:Completed",
    "s3:ObjectRestore:Delete",
    "s3:ObjectTagging:*",
    "s3:ObjectTagging:Put",
    "s3:ObjectTagging:Delete",
    "s3:LifecycleExpiration:*",
    "s3:LifecycleExpiration:Delete",
    "s3:LifecycleExpiration:DeleteMarkerCreated",
    "s3:LifecycleTransition",
];

/// Most queue configurations one bucket has (S3 allows 100 of all kinds together).
pub const MAX_RULES: usize = 100;

/// One queue configuration.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueRule {
    /// Its `Id` (generated when the request had none): the events' `configurationId`.
    pub id: String,
    /// The target's ARN, `arn:saker:sqs::NAME:KIND` ([`crate::target`]).
    pub arn: String,
    /// Event types as they were put (`s3:ObjectCreated:*`, ...).
    pub events: Vec<String>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub prefix: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub suffix: String,
}

/// A bucket's notification configuration.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NotificationConfig {
    pub queues: Vec<QueueRule>,
    /// The most records the bucket's feed keeps per group ([`saker_rpc::FeedSettings`];
    /// `None`: the default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feed_cap: Option<u64>,
}

/// Whether event type `pattern` (`s3:ObjectCreated:*`) covers event `name`
/// (`ObjectCreated:Put`, as records name it).
pub fn covers(pattern: &str, name: &str) -> bool {
    let Some(p) = pattern.strip_prefix("s3:") else {
        return false;
    };
    match p.strip_suffix('*') {
        Some(family) => name.starts_with(family),
        None => p == name,
    }
}

impl QueueRule {
    /// Whether an event `name` on `key` goes to this rule's target.
    pub fn matches(&self, name: &str, key: &str) -> bool {
        key.starts_with(&self.prefix)
            && key.ends_with(&self.suffix)
            && self.events.iter().any(|p| covers(p, name))
    }

    fn check(&self) -> Result<(), NotifyError> {
        if self.events.is_empty() {
            return Err(NotifyError::Invalid(
                "a queue configuration names at least one event".into(),
            ));
        }
        if let Some(e) = self
            .events
            .iter()
            .find(|e| !EVENT_TYPES.contains(&e.as_str()))
        {
            return Err(NotifyError::Invalid(format!(
                "the event {e:?} is not supported for notifications"
            )));
        }
        if self.prefix.len() > 1024 || self.suffix.len() > 1024 {
            return Err(NotifyError::Invalid(
                "a filter rule value has at most 1024 characters".into(),
            ));
        }
        if self.id.is_empty() || self.id.len() > 255 {
            return Err(NotifyError::Invalid(
                "a configuration id has 1 to 255 characters".into(),
            ));
        }
        crate::target::parse_arn(&self.arn)?;
        Ok(())
    }
}

impl NotificationConfig {
    /// Checks a configuration before it is stored (the targets' existence is the caller's
    /// to check: it needs the cluster's records).
    pub fn validate(&self) -> Result<(), NotifyError> {
        if self.queues.len() > MAX_RULES {
            return Err(NotifyError::Invalid(format!(
                "at most {MAX_RULES} notification configurations per bucket"
            )));
        }
        for (i, q) in self.queues.iter().enumerate() {
            q.check()?;
            if self.queues[..i].iter().any(|o| o.id == q.id) {
                return Err(NotifyError::Invalid(format!(
                    "two configurations have the id {:?}",
                    q.id
                )));
            }
        }
        if self.feed_cap == Some(0) {
            return Err(NotifyError::Invalid("a feed cap of 0 records".into()));
        }
        Ok(())
    }

    /// The configuration stored in a bucket's `notification` record.
    pub fn parse(value: &[u8]) -> Result<Self, NotifyError> {
        serde_json::from_slice(value).map_err(|e| NotifyError::Corrupt {
            key: "notification".into(),
            reason: e.to_string(),
        })
    }

    pub fn to_record(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("a configuration encodes as JSON")
    }
}

/// Every bucket with a notification configuration, with it (from the coordinator's records).
pub async fn configured_buckets(
    state: &Arc<dyn StateStore>,
) -> Result<Vec<(String, NotificationConfig)>, NotifyError> {
    let suffix = format!("/{NOTIFICATION_RECORD}");
    let mut out = Vec::new();
    let records = state
        .scan("buckets/")
        .await
        .map_err(|e| NotifyError::State(e.to_string()))?;
    for (key, value) in records {
        let Some(bucket) = key
            .strip_prefix("buckets/")
            .and_then(|k| k.strip_suffix(&suffix))
        else {
            continue;
        };
        if bucket.contains('/') {
            continue;
        }
        match NotificationConfig::parse(&value) {
            Ok(c) => out.push((bucket.to_string(), c)),
            // Only valid configurations are stored; one that no longer parses is skipped
            // (its feed waits) rather than stopping every other bucket's.
            Err(e) => tracing::warn!(bucket, error = %e, "notification configuration ignored"),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(events: &[&str], prefix: &str, suffix: &str) -> QueueRule {
        QueueRule {
            id: "r".into(),
            arn: "arn:saker:sqs::hook:webhook".into(),
            events: events.iter().map(|e| e.to_string()).collect(),
            prefix: prefix.into(),
            suffix: suffix.into(),
        }
    }

    #[test]
    fn families_cover_their_events_and_names_only_their_own() {
        assert!(covers("s3:ObjectCreated:*", "ObjectCreated:Put"));
        assert!(covers(
            "s3:ObjectCreated:*",
            "ObjectCreated:CompleteMultipartUpload"
        ));
        assert!(!covers("s3:ObjectCreated:*", "ObjectRemoved:Delete"));
        assert!(covers("s3:ObjectRemoved:Delete", "ObjectRemoved:Delete"));
        assert!(!covers(
            "s3:ObjectRemoved:Delete",
            "ObjectRemoved:DeleteMarkerCreated"
        ));
        assert!(!covers("ObjectCreated:*", "ObjectCreated:Put"));
    }

    #[test]
    fn key_filters_take_prefix_and_suffix_together() {
        let r = rule(&["s3:ObjectCreated:*"], "images/", ".jpg");
        assert!(r.matches("ObjectCreated:Put", "images/a.jpg"));
        assert!(!r.matches("ObjectCreated:Put", "images/a.png"));
        assert!(!r.matches("ObjectCreated:Put", "docs/a.jpg"));
        assert!(!r.matches("ObjectRemoved:Delete", "images/a.jpg"));
        assert!(rule(&["s3:ObjectRemoved:*"], "", "").matches("ObjectRemoved:Delete", "x"));
    }

    #[test]
    fn configurations_are_checked() {
        let ok = NotificationConfig {
            queues: vec![rule(&["s3:ObjectCreated:Put"], "", "")],
            feed_cap: None,
        };
        assert!(ok.validate().is_ok());
        assert_eq!(NotificationConfig::parse(&ok.to_record()).unwrap(), ok);
        let bad_event = NotificationConfig {
            queues: vec![rule(&["s3:ObjectCreated:Pot"], "", "")],
            feed_cap: None,
        };
        assert!(bad_event.validate().is_err());
        let mut bad_arn = ok.clone();
        bad_arn.queues[0].arn = "arn:aws:sqs:us-east-1:1:q".into();
        assert!(bad_arn.validate().is_err());
        let mut twice = ok.clone();
        twice.queues.push(twice.queues[0].clone());
        assert!(twice.validate().is_err());
        let mut none = ok;
        none.queues[0].events.clear();
        assert!(none.validate().is_err());
    }
}
