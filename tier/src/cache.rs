//! The local cache of tiered objects read through: whole objects (up to a quarter of the
//! cache each) as files in a directory, least recently used first out, bounded in bytes
//! (`--tier-cache-size`). The directory is emptied at start; what it holds was verified
//! against the version's CRC32C before it was kept.

use std::collections::{BTreeMap, HashMap};
use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;

use bytes::Bytes;
use md5::{Digest, Md5};
use parking_lot::Mutex;

/// A bounded cache of objects in a directory (or none: a limit of 0).
pub struct Cache {
    dir: Option<PathBuf>,
    limit: u64,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    /// File name -> (size, last use).
    entries: HashMap<String, (u64, u64)>,
    by_use: BTreeMap<u64, String>,
    total: u64,
    tick: u64,
}

/// The most cached at once in memory while a piece is read from a cached file.
const PIECE: u64 = 1024 * 1024;

impl Cache {
    /// A cache of at most `limit` bytes in `dir` (emptied now).
    pub fn new(dir: PathBuf, limit: u64) -> std::io::Result<Self> {
        if dir.exists() {
            std::fs::remove_dir_all(&dir)?;
        }
        std::fs::create_dir_all(&dir)?;
        Ok(Self {
            dir: Some(dir),
            limit,
            inner: Mutex::default(),
        })
    }

    /// No cache: every read goes to the tier.
    pub fn none() -> Self {
        Self {
            dir: None,
            limit: 0,
            inner: Mutex::default(),
        }
    }

    /// The largest object kept.
    pub fn max_object(&self) -> u64 {
        if self.dir.is_some() {
            (self.limit / 4).min(64 << 20)
        } else {
            0
        }
    }

    fn name(tier: &str, key: &str) -> String {
        let mut h = Md5::new();
        h.update(tier.as_bytes());
        h.update([0]);
        h.update(key.as_bytes());
        hex::encode(h.finalize())
    }

    /// The cached file of `key`, marked as just used.
    fn lookup(&self, tier: &str, key: &str) -> Option<PathBuf> {
        let dir = self.dir.as_ref()?;
        let name = Self::name(tier, key);
        let mut g = self.inner.lock();
        let Inner {
            entries,
            by_use,
            tick,
            ..
        } = &mut *g;
        let (_, used) = entries.get_mut(&name)?;
        by_use.remove(used);
        *tick += 1;
        *used = *tick;
        by_use.insert(*tick, name.clone());
        Some(dir.join(name))
    }

    /// Bytes `[start, end)` of the cached `key`, in pieces of at most 1 MiB, if it is cached.
    pub fn read(&self, tier: &str, key: &str, start: u64, end: u64) -> Option<Vec<Bytes>> {
        let path = self.lookup(tier, key)?;
        let mut f = std::fs::File::open(path).ok()?;
        f.seek(SeekFrom::Start(start)).ok()?;
        let mut out = Vec::new();
        let mut pos = start;
        while pos < end {
            let n = (end - pos).min(PIECE) as usize;
            let mut buf = vec![0; n];
            f.read_exact(&mut buf).ok()?;
            out.push(Bytes::from(buf));
            pos += n as u64;
        }
        Some(out)
    }

    /// Keeps `data` as `key`, dropping the least recently used objects to make room.
    pub fn insert(&self, tier: &str, key: &str, data: &[u8]) -> std::io::Result<()> {
        let Some(dir) = &self.dir else {
            return Ok(());
        };
        let size = data.len() as u64;
        if size > self.max_object() {
            return Ok(());
        }
        let name = Self::name(tier, key);
        let tmp = dir.join(format!("{name}.tmp{}", rand::random::<u32>()));
        std::fs::write(&tmp, data)?;
        std::fs::rename(&tmp, dir.join(&name))?;
        let mut g = self.inner.lock();
        g.tick += 1;
        let tick = g.tick;
        if let Some((old, used)) = g.entries.insert(name.clone(), (size, tick)) {
            g.by_use.remove(&used);
            g.total -= old;
        }
        g.by_use.insert(tick, name);
        g.total += size;
        while g.total > self.limit {
            let Some((_, victim)) = g.by_use.pop_first() else {
                break;
            };
            if let Some((s, _)) = g.entries.remove(&victim) {
                g.total -= s;
            }
            let _ = std::fs::remove_file(dir.join(victim));
        }
        Ok(())
    }

    /// Bytes held now.
    pub fn bytes(&self) -> u64 {
        self.inner.lock().total
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_recent_objects_within_its_limit() {
        let dir = tempfile::tempdir().unwrap();
        let c = Cache::new(dir.path().join("c"), 400).unwrap();
        assert_eq!(c.max_object(), 100);
        c.insert("T", "a", &[1; 100]).unwrap();
        c.insert("T", "b", &[2; 100]).unwrap();
        c.insert("T", "c", &[3; 100]).unwrap();
        c.insert("T", "big", &[9; 101]).unwrap();
        assert!(c.read("T", "big", 0, 1).is_none(), "over max_object");
        // `a` used last, so `b` goes first.
        assert_eq!(
            c.read("T", "a", 10, 12).unwrap(),
            vec![Bytes::from(vec![1, 1])]
        );
        c.insert("T", "d", &[4; 100]).unwrap();
        c.insert("T", "e", &[5; 100]).unwrap();
        assert_eq!(c.bytes(), 400);
        assert!(c.read("T", "b", 0, 1).is_none());
        assert!(c.read("T", "a", 0, 1).is_some());
        assert!(c.read("U", "a", 0, 1).is_none(), "tiers are apart");
    }
}
