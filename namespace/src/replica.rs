//! `DentryReplica`: an MNode's lazily filled, consistent but incomplete copy of the directory
//! entries other MNodes own (FalconFS §4.3).
//!
//! A miss is filled by a remote lookup at the owner. Consistency comes from invalidation: rmdir
//! (and later rename and chmod of a directory) removes the entry on every MNode before the owner
//! changes it. A lookup reply that was issued before an invalidation must not be cached, so every
//! invalidation advances the replica's epoch and [`DentryReplica::insert_at`] refuses replies
//! whose lookup started at an older epoch.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::InodeId;

/// What a replica knows about a directory: enough to resolve a path through it and to check
/// search permission.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dentry {
    pub id: InodeId,
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
}

/// The replica table of one MNode. Not synchronised: the owner wraps it in a lock.
#[derive(Debug, Default)]
pub struct DentryReplica {
    /// Key: parent id (big-endian) followed by the name bytes.
    entries: HashMap<Box<[u8]>, Dentry>,
    epoch: u64,
}

fn key(pid: InodeId, name: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(8 + name.len());
    k.extend_from_slice(&pid.to_be_bytes());
    k.extend_from_slice(name.as_bytes());
    k
}

impl DentryReplica {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn get(&self, pid: InodeId, name: &str) -> Option<Dentry> {
        self.entries.get(key(pid, name).as_slice()).copied()
    }

    /// The current epoch; read it before sending a remote lookup.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Caches a lookup reply unless an invalidation happened since `epoch` was read. Returns
    /// whether it was cached.
    pub fn insert_at(&mut self, epoch: u64, pid: InodeId, name: &str, d: Dentry) -> bool {
        if epoch != self.epoch {
            return false;
        }
        self.entries.insert(key(pid, name).into_boxed_slice(), d);
        true
    }

    /// Drops the entry `(pid, name)` and advances the epoch, so lookups in flight are discarded.
    pub fn invalidate(&mut self, pid: InodeId, name: &str) {
        self.epoch += 1;
        self.entries.remove(key(pid, name).as_slice());
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(id: InodeId) -> Dentry {
        Dentry {
            id,
            mode: 0o755,
            uid: 0,
            gid: 0,
        }
    }

    #[test]
    fn caches_and_invalidates() {
        let mut r = DentryReplica::new();
        let e = r.epoch();
        assert!(r.insert_at(e, 1, "bucket", d(10)));
        assert_eq!(r.get(1, "bucket"), Some(d(10)));
        assert_eq!(r.get(2, "bucket"), None);
        assert_eq!(r.get(1, "bucke"), None);
        r.invalidate(1, "bucket");
        assert_eq!(r.get(1, "bucket"), None);
        assert!(r.is_empty());
    }

    #[test]
    fn a_reply_older_than_an_invalidation_is_discarded() {
        let mut r = DentryReplica::new();
        let before = r.epoch();
        // The lookup is in flight when another directory's invalidation arrives.
        r.invalidate(1, "other");
        assert!(!r.insert_at(before, 1, "bucket", d(10)));
        assert_eq!(r.get(1, "bucket"), None);
        let now = r.epoch();
        assert!(r.insert_at(now, 1, "bucket", d(10)));
        assert_eq!(r.len(), 1);
    }

    #[test]
    fn parent_id_and_name_do_not_alias() {
        // (pid, name) pairs whose concatenations could collide if the pid were not fixed-width.
        let mut r = DentryReplica::new();
        let e = r.epoch();
        r.insert_at(e, 0x0100, "a", d(1));
        r.insert_at(e, 0x01, "\u{0}a", d(2));
        assert_eq!(r.get(0x0100, "a"), Some(d(1)));
        assert_eq!(r.get(0x01, "\u{0}a"), Some(d(2)));
    }
}
