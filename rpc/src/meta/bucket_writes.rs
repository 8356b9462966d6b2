//! A bucket's write settings as they travel: how it keeps versions, its Object Lock
//! configuration (with its default retention) and its default encryption
//! ([`BucketWrites`]); those settings sealed under a settings version ([`SealedWrites`]) and
//! installed in every MNode group ([`SettingsRequest`]); and the settings version a gateway
//! decided a write under ([`Decided`]), which the MNode checks in the write's own batch.
//!
//! Group 1 seals: its executor reads the bucket's records (the gateway's settings, kept among
//! the coordinator's records) and gives them the next version of that bucket, so one bucket's
//! versions only grow whoever changes it (a deleted bucket keeps its last version, empty, so
//! a bucket made again with the name goes on from it). Whoever changed a setting then
//! installs what group 1 sealed in every other group, which keeps the highest version it was
//! given. Every group decides the writes it applies from its own copy, read in the batch.

use serde::{Deserialize, Serialize};

use super::feed::FeedSettings;
use super::versions::Versioning;
use crate::{DefaultLock, LockConfig, MetaError};

/// What writes into a bucket need of its settings.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BucketWrites {
    pub versioning: Versioning,
    /// The Object Lock configuration, once Object Lock is enabled (it stays enabled).
    pub object_lock: Option<LockConfig>,
    /// The default encryption of new objects (`AES256`: SSE-S3), if the bucket has one.
    pub encryption: Option<String>,
    /// Whether (and how) the bucket's changes go to its change feed: set while the bucket
    /// has a notification configuration ([`super::feed`]).
    #[serde(default)]
    pub feed: Option<FeedSettings>,
}

/// Longest default-encryption setting carried ("AES256", "aws:kms" and the like).
const MAX_ENCRYPTION: usize = 64;

impl BucketWrites {
    /// The settings in a bucket's records (`buckets/<bucket>/<setting>`, as group 1 answers
    /// `BucketVersioning` and as its seal reads them).
    pub fn from_records(records: &[(String, Vec<u8>)]) -> Result<Self, MetaError> {
        let mut w = Self::default();
        for (key, value) in records {
            if key.ends_with("/versioning") {
                w.versioning = Versioning::from_setting(value).ok_or_else(|| {
                    let text = String::from_utf8_lossy(value);
                    MetaError::Internal(format!("versioning status {text:?}"))
                })?;
            } else if key.ends_with("/object-lock") {
                let config = LockConfig::parse(value)
                    .map_err(|e| MetaError::Internal(format!("object lock setting: {e}")))?;
                w.object_lock = Some(config);
            } else if key.ends_with("/encryption") {
                w.encryption = Some(String::from_utf8_lossy(value).into_owned());
            } else if key.ends_with(&format!("/{NOTIFICATION_RECORD}")) {
                w.feed = Some(FeedSettings::from_record(value)?);
            }
        }
        w.check()?;
        Ok(w)
    }

    /// The retention a new version gets when its write names none.
    pub fn default_lock(&self) -> Option<&DefaultLock> {
        self.object_lock.as_ref().and_then(|c| c.default.as_ref())
    }

    fn check(&self) -> Result<(), MetaError> {
        if let Some(f) = &self.feed {
            f.check()?;
        }
        match &self.encryption {
            Some(e) if e.is_empty() || e.len() > MAX_ENCRYPTION => Err(MetaError::Invalid(
                format!("a default encryption has 1 to {MAX_ENCRYPTION} bytes"),
            )),
            _ => Ok(()),
        }
    }
}

/// The name, under `buckets/<bucket>/`, of a bucket's notification configuration (the
/// gateway's JSON): while it exists the bucket's changes go to its feed.
pub const NOTIFICATION_RECORD: &str = "notification";

/// A bucket's write settings under their settings version (0: never set, the defaults).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SealedWrites {
    pub version: u64,
    pub writes: BucketWrites,
}

/// The name, under `buckets/<bucket>/`, of the coordinator's record of what group 1 sealed
/// last (JSON [`SealedWrites`]): what gateways decide their writes from.
pub const SEALED_RECORD: &str = "writes";

/// The record of `bucket`'s sealed settings among the coordinator's records.
pub fn sealed_record(bucket: &str) -> String {
    format!("buckets/{bucket}/{SEALED_RECORD}")
}

/// How a gateway decided a write's versioning: the bucket's setting, and the settings version
/// its copy had ([`SealedWrites::version`]). The MNode applies the write only if its group's
/// copy has that version; otherwise nothing is written and the answer is
/// [`MetaError::SettingsChanged`], so no write lands under settings other than those it was
/// decided under.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Decided {
    pub versioning: Versioning,
    /// `None`: not checked (tools and tests that write outside of buckets' settings).
    pub settings: Option<u64>,
}

impl Decided {
    /// Decided under `sealed`.
    pub fn under(versioning: Versioning, sealed: u64) -> Self {
        Self {
            versioning,
            settings: Some(sealed),
        }
    }

    /// `Ok` if the write may be applied by a group whose copy of the bucket's settings has
    /// version `current`.
    pub fn check(&self, current: u64) -> Result<(), MetaError> {
        match self.settings {
            Some(v) if v != current => Err(MetaError::SettingsChanged {
                decided: v,
                current,
            }),
            _ => Ok(()),
        }
    }
}

impl From<Versioning> for Decided {
    fn from(versioning: Versioning) -> Self {
        Self {
            versioning,
            settings: None,
        }
    }
}

impl From<Decided> for Versioning {
    fn from(d: Decided) -> Self {
        d.versioning
    }
}

/// Requests about buckets' write settings in a group (node credentials only).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SettingsRequest {
    /// At group 1: seal `bucket`'s records as they stand under the bucket's next settings
    /// version, in group 1's copy and its record for gateways ([`sealed_record`]), in one
    /// batch. Answers `Sealed`.
    Seal { bucket: String },
    /// Keep `sealed` as the group's copy of `bucket`'s settings unless the group has a newer
    /// one (so installing twice, or late, changes nothing). Answers `Sealed` with the copy
    /// the group has afterwards.
    Install {
        bucket: String,
        sealed: SealedWrites,
    },
    /// The group's copy of `bucket`'s settings. Answers `Sealed`.
    Get { bucket: String },
}

impl SettingsRequest {
    pub fn bucket(&self) -> &str {
        match self {
            SettingsRequest::Seal { bucket }
            | SettingsRequest::Install { bucket, .. }
            | SettingsRequest::Get { bucket } => bucket,
        }
    }

    /// Whether it changes the group's state (through the executor).
    pub fn is_write(&self) -> bool {
        !matches!(self, SettingsRequest::Get { .. })
    }

    pub fn op_name(&self) -> &'static str {
        match self {
            SettingsRequest::Seal { .. } => "seal_bucket_writes",
            SettingsRequest::Install { .. } => "install_bucket_writes",
            SettingsRequest::Get { .. } => "bucket_writes",
        }
    }

    /// A valid bucket name, and settings a gateway could have stored.
    pub fn validate(&self) -> Result<(), MetaError> {
        let bucket = self.bucket();
        saker_namespace::validate_bucket_name(bucket)
            .map_err(|e| MetaError::Invalid(format!("bad bucket {bucket:?}: {e}")))?;
        match self {
            SettingsRequest::Install { sealed, .. } => sealed.writes.check(),
            _ => Ok(()),
        }
    }
}

/// How long a mount's copy of a bucket's write settings is used before it is read again: a
/// gateway's refresh. (The MNode decides what a mount's write keeps from its group's copy;
/// the mount's copy only chooses which request to send.)
pub const SETTINGS_REFRESH: std::time::Duration = std::time::Duration::from_secs(2);

/// A mount's copies of buckets' write settings, each with when it was read.
#[derive(Default)]
pub struct BucketWritesCache(
    parking_lot::Mutex<std::collections::HashMap<String, (BucketWrites, std::time::Instant)>>,
);

impl BucketWritesCache {
    /// The copy of `bucket`'s settings, if one was read less than `max_age` ago.
    pub fn get(&self, bucket: &str, max_age: std::time::Duration) -> Option<BucketWrites> {
        let map = self.0.lock();
        let (w, at) = map.get(bucket)?;
        (at.elapsed() < max_age).then(|| w.clone())
    }

    /// Keeps `w` as `bucket`'s settings, read now (copies past their refresh go once there
    /// are many).
    pub fn put(&self, bucket: &str, w: BucketWrites) {
        let mut map = self.0.lock();
        if map.len() >= 4096 {
            map.retain(|_, (_, at)| at.elapsed() < SETTINGS_REFRESH);
        }
        map.insert(bucket.to_string(), (w, std::time::Instant::now()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gateway_s_words_parse() {
        let records = |v: &[u8]| vec![("buckets/b/versioning".to_string(), v.to_vec())];
        let parse = |v: &[u8]| BucketWrites::from_records(&records(v)).map(|w| w.versioning);
        assert_eq!(parse(b"Enabled").unwrap(), Versioning::Enabled);
        assert_eq!(parse(b"Suspended").unwrap(), Versioning::Suspended);
        assert!(parse(b"enabled").is_err());
    }

    #[test]
    fn lock_and_encryption_are_read_beside_versioning() {
        let lock = br#"{"default":{"mode":"Compliance","days":3,"years":null}}"#;
        let records = vec![
            ("buckets/b/encryption".to_string(), b"AES256".to_vec()),
            ("buckets/b/object-lock".to_string(), lock.to_vec()),
            ("buckets/b/versioning".to_string(), b"Enabled".to_vec()),
        ];
        let w = BucketWrites::from_records(&records).unwrap();
        assert_eq!(w.versioning, Versioning::Enabled);
        assert_eq!(w.encryption.as_deref(), Some("AES256"));
        let d = w.default_lock().unwrap();
        assert_eq!((d.mode, d.days), (crate::LockMode::Compliance, Some(3)));
        assert_eq!(
            BucketWrites::from_records(&[]).unwrap(),
            BucketWrites::default()
        );
        let bad = [("buckets/b/object-lock".to_string(), b"{".to_vec())];
        assert!(BucketWrites::from_records(&bad).is_err());
        let long = [("buckets/b/encryption".to_string(), vec![b'a'; 65])];
        assert!(BucketWrites::from_records(&long).is_err());
    }

    #[test]
    fn a_write_applies_only_under_the_version_it_was_decided_under() {
        let d = Decided::under(Versioning::Enabled, 7);
        assert_eq!(d.check(7), Ok(()));
        assert_eq!(
            d.check(8),
            Err(MetaError::SettingsChanged {
                decided: 7,
                current: 8
            })
        );
        // A group behind the gateway refuses too: it would apply older settings.
        assert!(d.check(6).is_err());
        // Version 0 is the defaults of a bucket never set, checked like any other.
        assert!(Decided::under(Versioning::Off, 0).check(1).is_err());
        assert_eq!(Decided::under(Versioning::Off, 0).check(0), Ok(()));
        // Unstamped writes (tools, tests) are not checked.
        assert_eq!(Decided::from(Versioning::Suspended).check(9), Ok(()));
        assert_eq!(Versioning::from(d), Versioning::Enabled);
    }

    #[test]
    fn requests_name_a_valid_bucket_and_sane_settings() {
        let get = SettingsRequest::Get { bucket: "b".into() };
        assert!(
            get.validate().is_err(),
            "bucket names have 3 characters or more"
        );
        let seal = SettingsRequest::Seal {
            bucket: "logs".into(),
        };
        assert!(seal.validate().is_ok() && seal.is_write());
        let mut sealed = SealedWrites::default();
        sealed.writes.encryption = Some(String::new());
        let install = SettingsRequest::Install {
            bucket: "logs".into(),
            sealed,
        };
        assert!(install.validate().is_err());
        assert!(!SettingsRequest::Get {
            bucket: "logs".into()
        }
        .is_write());
    }

    #[test]
    fn a_copy_serves_until_it_is_too_old() {
        let c = BucketWritesCache::default();
        assert_eq!(c.get("b", SETTINGS_REFRESH), None);
        let w = BucketWrites {
            versioning: Versioning::Enabled,
            ..Default::default()
        };
        c.put("b", w.clone());
        assert_eq!(c.get("b", SETTINGS_REFRESH), Some(w));
        assert_eq!(c.get("b", std::time::Duration::ZERO), None);
    }
}
