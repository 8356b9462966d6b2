//! Object versions (S3 bucket versioning) as they travel: how a bucket keeps versions, and one
//! version of a key.
//!
//! A version's id is its inode id in hex ([`version_id`]); the object written while a bucket
//! did not keep versions (or kept them suspended) is the `null` version.

use serde::{Deserialize, Serialize};

use crate::attr::Attr;
use crate::InodeId;

/// How a bucket keeps versions, sent by the gateway with each write of an object.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Versioning {
    /// Never enabled: a write replaces the object, a delete removes it.
    #[default]
    Off,
    /// Every write makes a new version; a delete without a version id writes a delete marker.
    Enabled,
    /// Writes replace the `null` version (older versions stay); deletes write a `null`
    /// delete marker.
    Suspended,
}

impl Versioning {
    /// The setting as a bucket's record keeps it (`Enabled`, `Suspended`; `None` for anything
    /// else: `Off` has no record).
    pub fn from_setting(text: &[u8]) -> Option<Versioning> {
        match text {
            b"Enabled" => Some(Versioning::Enabled),
            b"Suspended" => Some(Versioning::Suspended),
            _ => None,
        }
    }
}

/// What a write needs of its bucket's settings (the gateway's records of it, kept by the
/// coordinator in the cluster's first group): how it keeps versions, and its default
/// retention if it has Object Lock with one.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BucketWrites {
    pub versioning: Versioning,
    pub default_lock: Option<crate::DefaultLock>,
    /// The bucket's default encryption (PutBucketEncryption) as stored: `AES256` (SSE-S3) or
    /// `aws:kms KEY-ID`. A mount seals what it writes there, or is refused.
    pub encryption: Option<String>,
}

impl BucketWrites {
    /// The settings in the records group 1 answers to `BucketVersioning`
    /// (`buckets/<bucket>/<setting>`).
    pub fn from_records(records: &[(String, Vec<u8>)]) -> Result<Self, crate::MetaError> {
        let mut w = Self::default();
        for (key, value) in records {
            if key.ends_with("/versioning") {
                w.versioning = Versioning::from_setting(value).ok_or_else(|| {
                    let text = String::from_utf8_lossy(value);
                    crate::MetaError::Internal(format!("versioning status {text:?}"))
                })?;
            } else if key.ends_with("/object-lock") {
                let config = crate::LockConfig::parse(value)
                    .map_err(|e| crate::MetaError::Internal(format!("object lock setting: {e}")))?;
                w.default_lock = config.default;
            } else if key.ends_with("/encryption") {
                w.encryption = Some(String::from_utf8_lossy(value).into_owned());
            }
        }
        Ok(w)
    }
}

/// How long a copy of a bucket's write settings is used before it is read again: a
/// gateway's refresh, so that a change reaches mounts and MNodes as it reaches gateways.
pub const SETTINGS_REFRESH: std::time::Duration = std::time::Duration::from_secs(2);

/// A process's copies of buckets' write settings, each with when it was read (a mount's, an
/// MNode's).
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

/// How the buckets of a mount's rename keep versions: the old name's (where the file leaves
/// a delete marker) and the new name's (where it is a new version).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RenameVersioning {
    pub from: Versioning,
    pub to: Versioning,
}

/// The version id of the `null` version.
pub const NULL_VERSION: &str = "null";

/// The version id of the version stored as inode `id`.
pub fn version_id(id: InodeId) -> String {
    format!("{id:016x}")
}

/// The inode id a (non-`null`) version id names; `None` for anything else.
pub fn version_inode(version_id: &str) -> Option<InodeId> {
    if version_id.len() != 16 {
        return None;
    }
    InodeId::from_str_radix(version_id, 16).ok()
}

/// What a version is.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum VersionKind {
    /// The key's current object (its attributes are the inode record's).
    Current,
    /// A noncurrent object: its attributes when it was replaced; its payloads stay under
    /// its inode id.
    Object(Box<Attr>),
    /// A delete marker.
    DeleteMarker,
}

/// One version of a key, as a group's version table holds it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct VersionEntry {
    /// The object key within its bucket.
    pub key: String,
    /// The inode id the version was written as (newest first within a key).
    pub id: InodeId,
    pub version_id: String,
    pub kind: VersionKind,
    /// When the version was written (its LastModified).
    pub mtime_ns: i64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_ids_name_their_inode() {
        assert_eq!(version_id(0x2a), "000000000000002a");
        assert_eq!(version_inode(&version_id(u64::MAX - 3)), Some(u64::MAX - 3));
        assert_eq!(version_inode(NULL_VERSION), None);
        assert_eq!(version_inode("2a"), None);
        assert_eq!(version_inode("zzzzzzzzzzzzzzzz"), None);
    }
}

#[cfg(test)]
mod bucket_writes_tests {
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
    fn a_default_retention_is_read_beside_versioning() {
        let lock = br#"{"default":{"mode":"Compliance","days":3,"years":null}}"#;
        let records = vec![
            ("buckets/b/object-lock".to_string(), lock.to_vec()),
            ("buckets/b/versioning".to_string(), b"Enabled".to_vec()),
            ("buckets/b/encryption".to_string(), b"AES256".to_vec()),
        ];
        let w = BucketWrites::from_records(&records).unwrap();
        assert_eq!(w.versioning, Versioning::Enabled);
        assert_eq!(w.encryption.as_deref(), Some("AES256"));
        let d = w.default_lock.unwrap();
        assert_eq!((d.mode, d.days), (crate::LockMode::Compliance, Some(3)));
        assert_eq!(
            BucketWrites::from_records(&[]).unwrap(),
            BucketWrites::default()
        );
        let bad = [("buckets/b/object-lock".to_string(), b"{".to_vec())];
        assert!(BucketWrites::from_records(&bad).is_err());
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
