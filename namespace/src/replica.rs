//! `DentryReplica`: an MNode's lazily filled, consistent but incomplete copy of the directory
//! entries other MNodes own (FalconFS §4.3).
//!
//! A miss is filled by a remote lookup at the owner. Consistency comes from invalidation: rmdir,
//! rename and chmod/chown of a directory (the coordinator's protocols) remove the entry on every
//! MNode before the owner changes it. A lookup reply that was issued before an invalidation
//! must not be cached, so every invalidation advances the replica's epoch and
//! [`DentryReplica::insert_at`] refuses replies whose lookup started at an older epoch.

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
///
/// Laid out for size (FalconFS keeps a cached dentry under 100 bytes): the entries sit in one
/// `Vec` of fixed-size slots (a name of up to 22 bytes inline, longer ones boxed), and a
/// hashbrown `HashTable<u32>` maps `(pid, name)` to a slot by index (5 bytes a bucket). About
/// 65 bytes a dentry at 1M directories; `tests/replica_memory.rs` measures it.
#[derive(Default)]
pub struct DentryReplica {
    slots: Vec<Slot>,
    index: hashbrown::HashTable<u32>,
    epoch: u64,
}

impl std::fmt::Debug for DentryReplica {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DentryReplica")
            .field("len", &self.slots.len())
            .field("epoch", &self.epoch)
            .finish()
    }
}

/// Names up to this many bytes are stored inline.
const INLINE_NAME: usize = 22;

enum NameBytes {
    Inline { len: u8, bytes: [u8; INLINE_NAME] },
    Heap(Box<[u8]>),
}

impl NameBytes {
    fn new(name: &[u8]) -> Self {
        if name.len() <= INLINE_NAME {
            let mut bytes = [0u8; INLINE_NAME];
            bytes[..name.len()].copy_from_slice(name);
            NameBytes::Inline {
                len: name.len() as u8,
                bytes,
            }
        } else {
            NameBytes::Heap(name.into())
        }
    }

    fn as_bytes(&self) -> &[u8] {
        match self {
            NameBytes::Inline { len, bytes } => &bytes[..*len as usize],
            NameBytes::Heap(b) => b,
        }
    }
}

struct Slot {
    pid: InodeId,
    name: NameBytes,
    dentry: Dentry,
}

/// Hash of a replica key (in-memory only; not a placement hash).
fn key_hash(pid: InodeId, name: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64_with_seed(name, pid)
}

impl DentryReplica {
    pub fn new() -> Self {
        Self::default()
    }

    fn find(&self, pid: InodeId, name: &[u8]) -> Option<usize> {
        let slots = &self.slots;
        self.index
            .find(key_hash(pid, name), |&i| {
                let s = &slots[i as usize];
                s.pid == pid && s.name.as_bytes() == name
            })
            .map(|&i| i as usize)
    }

    pub fn get(&self, pid: InodeId, name: &str) -> Option<Dentry> {
        self.find(pid, name.as_bytes())
            .map(|i| self.slots[i].dentry)
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
        if let Some(i) = self.find(pid, name.as_bytes()) {
            self.slots[i].dentry = d;
            return true;
        }
        let i = u32::try_from(self.slots.len()).expect("fewer than 2^32 cached dentries");
        self.slots.push(Slot {
            pid,
            name: NameBytes::new(name.as_bytes()),
            dentry: d,
        });
        let slots = &self.slots;
        self.index
            .insert_unique(key_hash(pid, name.as_bytes()), i, |&j| {
                let s = &slots[j as usize];
                key_hash(s.pid, s.name.as_bytes())
            });
        true
    }

    /// Drops the entry `(pid, name)` and advances the epoch, so lookups in flight are discarded.
    pub fn invalidate(&mut self, pid: InodeId, name: &str) {
        self.epoch += 1;
        let Some(i) = self.find(pid, name.as_bytes()) else {
            return;
        };
        let hash = key_hash(pid, name.as_bytes());
        if let Ok(entry) = self.index.find_entry(hash, |&j| j as usize == i) {
            entry.remove();
        }
        // Move the last slot into the hole and repoint its index entry.
        let last = self.slots.len() - 1;
        self.slots.swap_remove(i);
        if i != last {
            let moved = &self.slots[i];
            let moved_hash = key_hash(moved.pid, moved.name.as_bytes());
            if let Some(j) = self.index.find_mut(moved_hash, |&j| j as usize == last) {
                *j = i as u32;
            }
        }
    }

    /// Drops every entry and advances the epoch (a replica that becomes its group's leader
    /// again cannot tell which invalidations it missed meanwhile).
    pub fn clear(&mut self) {
        self.epoch += 1;
        self.slots.clear();
        self.index.clear();
    }

    pub fn len(&self) -> usize {
        self.slots.len()
    }

    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
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
    fn matches_a_map_under_random_inserts_and_invalidations() {
        use std::collections::HashMap;
        let mut r = DentryReplica::new();
        let mut model: HashMap<(InodeId, String), Dentry> = HashMap::new();
        let mut x: u64 = 0x9e3779b97f4a7c15;
        for step in 0..20_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let pid = x % 7;
            // Short and long (boxed) names.
            let name = if x.is_multiple_of(5) {
                format!("a-rather-long-directory-name-{}", x % 31)
            } else {
                format!("d{}", x % 31)
            };
            if x.is_multiple_of(3) {
                r.invalidate(pid, &name);
                model.remove(&(pid, name));
            } else {
                let e = r.epoch();
                assert!(r.insert_at(e, pid, &name, d(step)));
                model.insert((pid, name), d(step));
            }
            assert_eq!(r.len(), model.len());
        }
        for ((pid, name), want) in &model {
            assert_eq!(r.get(*pid, name), Some(*want));
        }
        for pid in 0..7 {
            for i in 0..31 {
                let n = format!("d{i}");
                assert_eq!(r.get(pid, &n), model.get(&(pid, n.clone())).copied());
            }
        }
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
