//! The LSM engine: [`FjallStore`], the [`MetaStore`] trait on fjall (an LSM tree with a
//! write-ahead journal). Measured against redb in `compat_tests/bench/engines/`: 2.2-5.7x more
//! raft entries (durable append + apply) per second, reads 1.2-3x slower.
//!
//! One database, one keyspace. A [`WriteBatch`] becomes one fjall batch, which fjall writes to
//! its journal as one atomic record. `durable` commits fdatasync the journal before returning
//! (`PersistMode::SyncData`, the same system call redb's `Durability::Immediate` ends with);
//! non-durable ones stay in the journal's buffer and become durable with the next durable commit,
//! which syncs the whole journal. The block cache is set to redb's default (1 GiB) so both engines
//! may keep the same amount of data in memory.

use std::ops::Bound;
use std::path::Path;

use super::{Kv, KvPairs, MetaStore, StoreError, WriteBatch};
use fjall::{Database, Keyspace, KeyspaceCreateOptions, PersistMode};

/// Block cache size, equal to redb's default cache size.
const CACHE_BYTES: u64 = 1 << 30;

/// A [`MetaStore`] on one fjall keyspace.
pub struct FjallStore {
    db: Database,
    ks: Keyspace,
}

fn io<E: std::fmt::Display>(e: E) -> StoreError {
    StoreError::Io(e.to_string())
}

impl FjallStore {
    /// Opens (or creates) the database in directory `path`.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        let db = Database::builder(path)
            .cache_size(CACHE_BYTES)
            .open()
            .map_err(io)?;
        let ks = db
            .keyspace("saker_meta_v1", KeyspaceCreateOptions::default)
            .map_err(io)?;
        Ok(Self { db, ks })
    }

    /// Whether background flushes or compactions are running or queued (benchmarks wait for
    /// quiet before measuring).
    pub fn busy(&self) -> bool {
        self.db.outstanding_flushes() > 0 || self.db.active_compactions() > 0
    }
}

impl MetaStore for FjallStore {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self.ks.get(key).map_err(io)?.map(|v| v.to_vec()))
    }

    fn write(&self, batch: &WriteBatch, durable: bool) -> Result<(), StoreError> {
        let mut b = self
            .db
            .batch()
            .durability(durable.then_some(PersistMode::SyncData));
        for (k, v) in &batch.ops {
            match v {
                Some(v) => b.insert(&self.ks, k.as_slice(), v.as_ref()),
                None => b.remove(&self.ks, k.as_slice()),
            }
        }
        if b.is_empty() {
            // fjall skips empty batches entirely; a durable one must still sync earlier writes.
            if durable {
                self.db.persist(PersistMode::SyncData).map_err(io)?;
            }
            return Ok(());
        }
        b.commit().map_err(io)
    }

    fn scan(&self, start: &[u8], end: Option<&[u8]>, limit: usize) -> Result<KvPairs, StoreError> {
        let upper = match end {
            Some(e) => Bound::Excluded(e),
            None => Bound::Unbounded,
        };
        let mut out = Vec::new();
        for guard in self
            .ks
            .range::<&[u8], _>((Bound::Included(start), upper))
            .take(limit)
        {
            let (k, v) = guard.into_inner().map_err(io)?;
            out.push((k.to_vec(), v.to_vec()));
        }
        Ok(out)
    }

    fn last_in(&self, start: &[u8], end: &[u8]) -> Result<Option<Kv>, StoreError> {
        match self.ks.range::<&[u8], _>(start..end).next_back() {
            Some(guard) => {
                let (k, v) = guard.into_inner().map_err(io)?;
                Ok(Some((k.to_vec(), v.to_vec())))
            }
            None => Ok(None),
        }
    }
}
