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
//!
//! Syncs are shared ([`GroupSync`]): a durable write commits its batch to the journal without a
//! sync, then waits for the store's sync thread, which runs one fdatasync for every request
//! queued before it started.
//!
//! The raft logs are not in the LSM: they live in a [`LogJournal`] next to it
//! ([`MetaStore::raft_logs`]), and the state machines' applies here are written without a sync
//! (raft replays the log after a crash; a snapshot makes them durable before the log is purged).

use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::group_sync::GroupSync;
use super::{Kv, KvPairs, LogJournal, MetaStore, RaftLogs, StoreError, WriteBatch};
use fjall::{Database, Keyspace, KeyspaceCreateOptions, PersistMode};
use parking_lot::Mutex;
use saker_rpc::Durability;

/// Block cache size, equal to redb's default cache size.
const CACHE_BYTES: u64 = 1 << 30;

/// The keyspace of the state machines (every group's tables but its raft log).
const META_KEYSPACE: &str = "saker_meta_v1";
/// The keyspace that held the raft logs before they moved to a [`LogJournal`]; read once, by
/// the move.
pub(crate) const LEGACY_RAFT_LOG_KEYSPACE: &str = "saker_raft_log_v1";

/// A [`MetaStore`] on one fjall keyspace.
pub struct FjallStore {
    db: Database,
    ks: Keyspace,
    /// The sync thread serving durable writes (group commit), shared with sibling keyspaces.
    syncer: Arc<GroupSync>,
    /// Where the raft logs go, opened by the first group that asks.
    journal: Mutex<Option<Arc<LogJournal>>>,
    path: PathBuf,
    /// How durable the raft log journal's appends are when they return.
    durability: Durability,
}

fn io<E: std::fmt::Display>(e: E) -> StoreError {
    StoreError::Io(e.to_string())
}

/// fjall's background threads (flushes and compactions, one queue). With more than one,
/// fjall 3.1's first worker hands every compaction it takes back to the queue for another
/// and takes it again at once while the others are busy: it spins for as long as any
/// compaction runs (`perf record` of 4 KiB PUTs: half the `fjall:worker` samples were that
/// loop, 22% of the server's with a change feed's records and their tombstones to compact).
/// One thread does the same work without the loop.
const WORKER_THREADS: usize = 1;

impl FjallStore {
    /// Opens (or creates) the database in directory `path`; raft log appends are on disk when
    /// they return.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        Self::open_with_durability(path, Durability::Disk)
    }

    /// [`Self::open`], with raft log appends as durable as `durability` says.
    pub fn open_with_durability(path: &Path, durability: Durability) -> Result<Self, StoreError> {
        let db = Database::builder(path)
            .cache_size(CACHE_BYTES)
            .worker_threads(WORKER_THREADS)
            .open()
            .map_err(io)?;
        let ks = db
            .keyspace(META_KEYSPACE, KeyspaceCreateOptions::default)
            .map_err(io)?;
        let handle = db.clone();
        let syncer = GroupSync::start("saker-fjall-sync", move || {
            handle.persist(PersistMode::SyncData).map_err(io)
        })?;
        Ok(Self {
            db,
            ks,
            syncer: Arc::new(syncer),
            journal: Mutex::default(),
            path: path.to_path_buf(),
            durability,
        })
    }

    /// A store on keyspace `name` of the same database: same journal, same syncs.
    pub(crate) fn sibling(&self, name: &str) -> Result<Self, StoreError> {
        let ks = self
            .db
            .keyspace(name, KeyspaceCreateOptions::default)
            .map_err(io)?;
        Ok(Self {
            db: self.db.clone(),
            ks,
            syncer: self.syncer.clone(),
            journal: Mutex::default(),
            path: self.path.clone(),
            durability: self.durability,
        })
    }

    /// Whether background flushes or compactions are running or queued (benchmarks wait for
    /// quiet before measuring).
    pub fn busy(&self) -> bool {
        self.db.outstanding_flushes() > 0 || self.db.active_compactions() > 0
    }
}

impl FjallStore {
    /// Commits `batch` to the journal without a sync (it survives a crash only once synced).
    fn commit(&self, batch: &WriteBatch) -> Result<(), StoreError> {
        let mut b = self.db.batch().durability(None);
        for (k, v) in &batch.ops {
            match v {
                Some(v) => b.insert(&self.ks, k.as_slice(), v.as_ref()),
                None => b.remove(&self.ks, k.as_slice()),
            }
        }
        // fjall skips empty batches entirely; a durable one still syncs earlier writes.
        if !b.is_empty() {
            b.commit().map_err(io)?;
        }
        Ok(())
    }
}

impl MetaStore for FjallStore {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self.ks.get(key).map_err(io)?.map(|v| v.to_vec()))
    }

    fn write(&self, batch: &WriteBatch, durable: bool) -> Result<(), StoreError> {
        self.commit(batch)?;
        if durable {
            self.syncer.wait()?;
        }
        Ok(())
    }

    /// The raft logs go to a [`LogJournal`] in `<path>.raftlog` (next to the database).
    /// Before that they had a keyspace here of their own (and before that they shared the
    /// state machines' keyspace): every entry was written to the LSM and deleted a few
    /// thousand entries later, and flushing and compacting those entries and their tombstones
    /// cost fjall's workers ~20% of the machine's CPU in a 16-thread write (perf record).
    fn raft_logs(&self) -> Result<Option<RaftLogs>, StoreError> {
        let mut opened = self.journal.lock();
        let journal = match &*opened {
            Some(j) => j.clone(),
            None => {
                let j = Arc::new(LogJournal::open_with_durability(
                    &self.path.with_extension("raftlog"),
                    self.durability,
                )?);
                opened.insert(j).clone()
            }
        };
        let mut legacy: Vec<Arc<dyn MetaStore>> = Vec::new();
        if self.db.keyspace_exists(LEGACY_RAFT_LOG_KEYSPACE) {
            legacy.push(Arc::new(self.sibling(LEGACY_RAFT_LOG_KEYSPACE)?));
        }
        Ok(Some(RaftLogs { journal, legacy }))
    }

    /// The raft logs are where acknowledged writes live until applied and flushed.
    fn sync_to_disk(&self) -> Result<(), StoreError> {
        let journal = self.journal.lock().clone();
        match journal {
            Some(j) => j.sync_to_disk(),
            None => Ok(()),
        }
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
