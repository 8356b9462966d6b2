//! The change feed as it travels: what a bucket's feed holds ([`FeedEvent`]), read and
//! acknowledged page by page ([`FeedRequest`], answered by a [`FeedPage`]).
//!
//! A bucket whose settings ask for a feed ([`FeedSettings`], part of its sealed write
//! settings) gets one record per object change in the raft batch that applies the change, in
//! the group that applies it. So a bucket's feed is ordered per (bucket, group): each group
//! numbers the bucket's records 1, 2, 3, ... (`seq`), and a consumer reads every group's feed.
//! A record stays until a consumer acknowledges it (`Ack` drops every record up to a seq) or
//! the feed reaches its cap, when the oldest go and are counted (`dropped`): the only way a
//! record is lost, and never silently.
//!
//! Each record also has a `sequencer`, as S3 events do: a number that grows with every change
//! of one key (it grows with every record of the group, and is at least the batch's clock, so
//! a key that moves to another group keeps growing with it on clocks that agree). Consumers
//! order one key's events by it.

use serde::{Deserialize, Serialize};

use crate::MetaError;

/// What happened to an object.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum FeedKind {
    /// A new current object by PUT.
    Put,
    /// A new current object by CopyObject.
    Copy,
    /// A new current object by CompleteMultipartUpload.
    CompleteUpload,
    /// An object (or, with a version id, one version of it) removed.
    Delete,
    /// A delete marker made by a DELETE in a bucket that keeps versions.
    DeleteMarker,
    /// Tags set on an object (or a version).
    TagsPut,
    /// Tags removed.
    TagsDeleted,
    /// Object Lock retention or legal hold changed.
    Retention,
    /// A restored local copy of a version in a remote tier is ready (or its expiry moved).
    Restored,
    /// An object or version removed by a lifecycle rule's expiration.
    Expired,
    /// A delete marker made by a lifecycle rule's expiration.
    ExpiredToMarker,
}

impl FeedKind {
    /// The S3 event name (without `s3:`), or `None` for a change S3 has no event for (the
    /// feed keeps it for replication).
    pub fn s3_event(self) -> Option<&'static str> {
        Some(match self {
            FeedKind::Put => "ObjectCreated:Put",
            FeedKind::Copy => "ObjectCreated:Copy",
            FeedKind::CompleteUpload => "ObjectCreated:CompleteMultipartUpload",
            FeedKind::Delete => "ObjectRemoved:Delete",
            FeedKind::DeleteMarker => "ObjectRemoved:DeleteMarkerCreated",
            FeedKind::TagsPut => "ObjectTagging:Put",
            FeedKind::TagsDeleted => "ObjectTagging:Delete",
            FeedKind::Restored => "ObjectRestore:Completed",
            FeedKind::Expired => "LifecycleExpiration:Delete",
            FeedKind::ExpiredToMarker => "LifecycleExpiration:DeleteMarkerCreated",
            FeedKind::Retention => return None,
        })
    }
}

/// One change of one object, as the feed keeps it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FeedEvent {
    /// Its place in the bucket's feed of the group that wrote it (from 1).
    pub seq: u64,
    pub kind: FeedKind,
    /// The object key.
    pub key: String,
    /// The object's size after the change (0 for removals).
    pub size: u64,
    /// Its ETag, unquoted, after the change (empty for removals).
    pub etag: String,
    /// The version the change made or touched (`None`: the bucket never kept versions).
    pub version_id: Option<String>,
    /// Grows with every change of the key (module docs).
    pub sequencer: u64,
    /// When the change was applied (ns since the epoch).
    pub time_ns: i64,
}

impl FeedEvent {
    /// The sequencer as S3 shows it: 16 uppercase hex digits (so string order is number
    /// order).
    pub fn sequencer_hex(&self) -> String {
        format!("{:016X}", self.sequencer)
    }
}

/// How a bucket's feed is kept: present in a bucket's write settings when it has a
/// notification configuration.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FeedSettings {
    /// The most records the bucket's feed keeps in one group; past it the oldest go, counted.
    pub cap: u64,
}

/// The default [`FeedSettings::cap`]: about 100 MB of records per group at the record sizes
/// of typical keys.
pub const DEFAULT_FEED_CAP: u64 = 500_000;

/// Most records one `Read` answers.
pub const MAX_FEED_PAGE: u32 = 1000;

impl Default for FeedSettings {
    fn default() -> Self {
        Self {
            cap: DEFAULT_FEED_CAP,
        }
    }
}

impl FeedSettings {
    /// The feed settings a bucket's notification record (the gateway's JSON) asks for: its
    /// optional `feed_cap`, the default otherwise.
    pub fn from_record(value: &[u8]) -> Result<Self, MetaError> {
        #[derive(Deserialize)]
        struct Record {
            #[serde(default)]
            feed_cap: Option<u64>,
        }
        let r: Record = serde_json::from_slice(value)
            .map_err(|e| MetaError::Internal(format!("notification setting: {e}")))?;
        let s = Self {
            cap: r.feed_cap.unwrap_or(DEFAULT_FEED_CAP),
        };
        s.check()?;
        Ok(s)
    }

    pub fn check(&self) -> Result<(), MetaError> {
        if self.cap == 0 {
            return Err(MetaError::Invalid("a feed cap of 0 records".into()));
        }
        Ok(())
    }
}

/// Requests on a bucket's feed in one group (node credentials only).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum FeedRequest {
    /// At most `limit` records of `bucket`'s feed with a seq above `after`, oldest first.
    /// Answers `Feed`.
    Read {
        bucket: String,
        after: u64,
        limit: u32,
    },
    /// Drops every record of `bucket`'s feed up to seq `upto` (delivered). Answers `Feed`
    /// with no records (where the feed stands).
    Ack { bucket: String, upto: u64 },
    /// At the group's leader: answers `FeedClock` with the group's feed clock once it is not
    /// `seen` (records were applied since), or after `wait_ms` (at most 20 s) as it is. A
    /// consumer long-polls each group with it and reads the feeds when it moves.
    Wait { seen: u64, wait_ms: u32 },
}

/// A page of a bucket's feed in one group, and where the feed stands.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FeedPage {
    pub events: Vec<FeedEvent>,
    /// The seq the next record will get (the feed holds `first..next`).
    pub next: u64,
    /// The oldest seq kept.
    pub first: u64,
    /// Records dropped at the cap since the feed began.
    pub dropped: u64,
}

impl FeedPage {
    /// How many records the feed holds.
    pub fn depth(&self) -> u64 {
        self.next.saturating_sub(self.first)
    }
}

impl FeedRequest {
    /// The bucket it is about (`Wait` is about the group).
    pub fn bucket(&self) -> Option<&str> {
        match self {
            FeedRequest::Read { bucket, .. } | FeedRequest::Ack { bucket, .. } => Some(bucket),
            FeedRequest::Wait { .. } => None,
        }
    }

    /// Whether it changes the group's state (through the executor).
    pub fn is_write(&self) -> bool {
        matches!(self, FeedRequest::Ack { .. })
    }

    pub fn op_name(&self) -> &'static str {
        match self {
            FeedRequest::Read { .. } => "feed_read",
            FeedRequest::Ack { .. } => "feed_ack",
            FeedRequest::Wait { .. } => "feed_wait",
        }
    }

    /// A valid bucket name and a page within [`MAX_FEED_PAGE`].
    pub fn validate(&self) -> Result<(), MetaError> {
        if let Some(bucket) = self.bucket() {
            saker_namespace::validate_bucket_name(bucket)
                .map_err(|e| MetaError::Invalid(format!("bad bucket {bucket:?}: {e}")))?;
        }
        match self {
            FeedRequest::Read { limit, .. } if *limit > MAX_FEED_PAGE => Err(MetaError::Invalid(
                format!("a page of {limit} feed records is over the limit of {MAX_FEED_PAGE}"),
            )),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequencers_sort_as_strings() {
        let ev = |sequencer| FeedEvent {
            seq: 1,
            kind: FeedKind::Put,
            key: "k".into(),
            size: 0,
            etag: String::new(),
            version_id: None,
            sequencer,
            time_ns: 0,
        };
        let (a, b) = (ev(9).sequencer_hex(), ev(0x1_0000_0000).sequencer_hex());
        assert_eq!(a.len(), 16);
        assert!(a < b);
    }

    #[test]
    fn the_notification_record_may_set_the_cap() {
        assert_eq!(
            FeedSettings::from_record(br#"{"queues":[]}"#).unwrap().cap,
            DEFAULT_FEED_CAP
        );
        assert_eq!(
            FeedSettings::from_record(br#"{"feed_cap":10}"#)
                .unwrap()
                .cap,
            10
        );
        assert!(FeedSettings::from_record(br#"{"feed_cap":0}"#).is_err());
        assert!(FeedSettings::from_record(b"{").is_err());
    }

    #[test]
    fn pages_are_bounded_and_buckets_valid() {
        let read = |limit| FeedRequest::Read {
            bucket: "logs".into(),
            after: 0,
            limit,
        };
        assert!(read(MAX_FEED_PAGE).validate().is_ok());
        assert!(read(MAX_FEED_PAGE + 1).validate().is_err());
        let ack = FeedRequest::Ack {
            bucket: "b".into(),
            upto: 1,
        };
        assert!(ack.validate().is_err() && ack.is_write() && !read(1).is_write());
        assert!(FeedKind::Retention.s3_event().is_none());
    }
}
