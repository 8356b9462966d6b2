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

/// How the buckets of a mount's rename keep versions: the old name's (where the file leaves
/// a delete marker) and the new name's (where it is a new version); and whether either keeps
/// a change feed (a directory's rename would change its files' keys with no event each, so
/// it is EXDEV there, as in buckets that keep versions).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RenameVersioning {
    pub from: Versioning,
    pub to: Versioning,
    pub feed: bool,
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
