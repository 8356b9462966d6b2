//! The single-writer TiKV store's read cache: the values this process last read or wrote,
//! so that the executor's reads of a group it holds (bucket and directory records, dentries,
//! inodes) are local lookups rather than a TiKV round trip each.
//!
//! It is exactly as fresh as the pinned read timestamp it sits in front of: every write this
//! process commits updates it (as the commit moves the pinned timestamp), and whatever moves
//! the timestamp past other processes' writes (a won lease, a periodic re-pin, a commit of
//! unknown outcome) empties it. A read that raced a write is not cached: a fill carries the
//! generation seen before the read and is dropped if a write or a clear came in between, so
//! an older value never replaces a newer one.

use bytes::Bytes;
use parking_lot::Mutex;
use quick_cache::unsync::Cache;
use quick_cache::Weighter;

/// Per-entry bookkeeping counted on top of the key's and the value's bytes.
const ENTRY_OVERHEAD: u64 = 64;

#[derive(Clone)]
struct Weight;

impl Weighter<Vec<u8>, Option<Bytes>> for Weight {
    fn weight(&self, key: &Vec<u8>, value: &Option<Bytes>) -> u64 {
        ENTRY_OVERHEAD + key.len() as u64 + value.as_ref().map_or(0, |v| v.len() as u64)
    }
}

struct Inner {
    /// A key's value, `None` for a key known to be absent.
    entries: Cache<Vec<u8>, Option<Bytes>, Weight>,
    /// Bumped by every write and clear: a fill of a read begun before it is stale.
    generation: u64,
}

pub(super) struct ReadCache {
    inner: Mutex<Inner>,
}

impl ReadCache {
    /// A cache of at most `bytes` of keys and values.
    pub fn new(bytes: u64) -> Self {
        let estimated = (bytes / 256).max(16) as usize;
        Self {
            inner: Mutex::new(Inner {
                entries: Cache::with_weighter(estimated, bytes, Weight),
                generation: 0,
            }),
        }
    }

    /// The cached value of `key`: `Some(None)` when it is known to be absent, `None` when
    /// it is not cached.
    pub fn get(&self, key: &[u8]) -> Option<Option<Bytes>> {
        self.inner.lock().entries.get(key).cloned()
    }

    /// Take this before reading from TiKV, and give it to [`ReadCache::fill`].
    pub fn generation(&self) -> u64 {
        self.inner.lock().generation
    }

    /// Caches `value`, read from TiKV after [`ReadCache::generation`] gave `seen`, unless a
    /// write or a clear came in between.
    pub fn fill(&self, key: &[u8], value: Option<Bytes>, seen: u64) {
        let mut inner = self.inner.lock();
        if inner.generation == seen {
            inner.entries.insert(key.to_vec(), value);
        }
    }

    /// Records a committed batch (keys as the store's callers name them), in order.
    pub fn apply(&self, ops: &[(Vec<u8>, Option<Bytes>)]) {
        let mut inner = self.inner.lock();
        inner.generation += 1;
        for (key, value) in ops {
            inner.entries.insert(key.clone(), value.clone());
        }
    }

    /// Forgets everything (reads move past other processes' writes).
    pub fn clear(&self) {
        let mut inner = self.inner.lock();
        inner.generation += 1;
        inner.entries.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ops(key: &str, value: Option<&str>) -> Vec<(Vec<u8>, Option<Bytes>)> {
        vec![(
            key.as_bytes().to_vec(),
            value.map(|v| Bytes::copy_from_slice(v.as_bytes())),
        )]
    }

    #[test]
    fn writes_and_reads_are_cached_absent_keys_too() {
        let c = ReadCache::new(1 << 20);
        assert_eq!(c.get(b"a"), None);
        let g = c.generation();
        c.fill(b"a", None, g);
        assert_eq!(c.get(b"a"), Some(None), "known absent");
        c.apply(&ops("a", Some("1")));
        assert_eq!(c.get(b"a"), Some(Some(Bytes::from_static(b"1"))));
        c.apply(&ops("a", None));
        assert_eq!(c.get(b"a"), Some(None), "a delete is cached as absent");
    }

    #[test]
    fn a_read_that_raced_a_write_or_a_clear_is_not_cached() {
        let c = ReadCache::new(1 << 20);
        let before = c.generation();
        c.apply(&ops("a", Some("new")));
        // The read began before the write and may have seen the old value.
        c.fill(b"a", Some(Bytes::from_static(b"old")), before);
        assert_eq!(c.get(b"a"), Some(Some(Bytes::from_static(b"new"))));
        let before = c.generation();
        c.clear();
        c.fill(b"b", Some(Bytes::from_static(b"old")), before);
        assert_eq!(c.get(b"b"), None);
        assert_eq!(c.get(b"a"), None, "cleared");
    }

    #[test]
    fn it_stays_within_its_size() {
        let c = ReadCache::new(64 << 10);
        for i in 0..10_000u32 {
            let g = c.generation();
            c.fill(&i.to_be_bytes(), Some(Bytes::from(vec![0u8; 100])), g);
        }
        let kept = (0..10_000u32)
            .filter(|i| c.get(&i.to_be_bytes()).is_some())
            .count();
        assert!(kept > 0 && kept <= (64 << 10) / 168, "{kept} entries kept");
    }
}
