//! The metadata store engine boundary: an ordered key-value store with atomic batch writes.
//!
//! The state machines of every MNode group in a process live in one store instance under
//! per-group key prefixes. Their raft logs and votes live there too, or, where the engine says
//! so ([`MetaStore::raft_logs`]), in one [`LogJournal`] of segment files; either way one sync
//! covers every group's appends. Engines:
//! [`RedbStore`] (embedded B-tree, the default), [`FjallStore`] (embedded LSM),
//! [`TikvStore`] (a TiKV cluster, past one machine's disks) and [`MemStore`] (tests). Every engine passes [`conformance`].

use bytes::Bytes;
use std::sync::Arc;

mod fjall_engine;
mod group_sync;
pub(crate) mod log_journal;
mod mem;
mod redb_engine;
mod tikv_cache;
mod tikv_connect;
mod tikv_engine;
mod tikv_gc;

pub mod conformance;

pub use fjall_engine::FjallStore;
#[cfg(test)]
pub(crate) use fjall_engine::LEGACY_RAFT_LOG_KEYSPACE;
pub use log_journal::LogJournal;
pub use mem::MemStore;
pub use redb_engine::RedbStore;
pub use tikv_engine::{FenceError, TikvStore};
pub use tikv_gc::GcPart;

/// A store engine failure. Fatal for the group that hits it.
#[derive(Clone, Debug, thiserror::Error)]
pub enum StoreError {
    #[error("store I/O error: {0}")]
    Io(String),
    #[error("corrupt record: {0}")]
    Corrupt(String),
    /// The store's service (TiKV) cannot be reached or did not answer in time (transient):
    /// what was tried and what happened.
    #[error("{0}")]
    Unreachable(String),
}

/// An atomic set of puts and deletes, applied in order. Values are shared buffers, so a batch
/// can be kept (by the executor's pipeline) and sent (in a raft entry) without copying them.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct WriteBatch {
    pub ops: Vec<(Vec<u8>, Option<Bytes>)>,
}

impl WriteBatch {
    pub fn put(&mut self, key: Vec<u8>, value: impl Into<Bytes>) {
        self.ops.push((key, Some(value.into())));
    }

    pub fn delete(&mut self, key: Vec<u8>) {
        self.ops.push((key, None));
    }

    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }
}

/// One key-value pair.
pub type Kv = (Vec<u8>, Vec<u8>);

/// Key-value pairs returned by a scan.
pub type KvPairs = Vec<Kv>;

/// An ordered key-value store.
pub trait MetaStore: Send + Sync + 'static {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError>;

    /// Applies `batch` atomically. With `durable`, it (and every earlier write) survives a crash
    /// once this returns; without, it may be lost in a crash but never partially applied.
    fn write(&self, batch: &WriteBatch, durable: bool) -> Result<(), StoreError>;

    /// Up to `limit` pairs with `start <= key < end` in key order (`end = None`: no bound).
    fn scan(&self, start: &[u8], end: Option<&[u8]>, limit: usize) -> Result<KvPairs, StoreError>;

    /// The greatest pair with `start <= key < end`, if any.
    fn last_in(&self, start: &[u8], end: &[u8]) -> Result<Option<Kv>, StoreError>;

    /// Where the raft logs go, if not into this store itself.
    fn raft_logs(&self) -> Result<Option<RaftLogs>, StoreError> {
        Ok(None)
    }

    /// Makes every acknowledged write durable on disk, where the store acknowledges some
    /// before (`saker_rpc::Durability::Process`); at once otherwise (the default). Blocking.
    fn sync_to_disk(&self) -> Result<(), StoreError> {
        Ok(())
    }
}

/// The raft logs of a store that keeps them outside itself.
pub struct RaftLogs {
    /// Every group's log, shared by the groups of the process.
    pub journal: Arc<LogJournal>,
    /// Where older versions kept the logs (besides the store itself), to move them from.
    pub legacy: Vec<Arc<dyn MetaStore>>,
}

/// The answer to a sync request: `Ok` once a sync that started after the request finished.
pub type SyncReceiver = tokio::sync::oneshot::Receiver<Result<(), StoreError>>;

/// Deletes every key from `start` up to `end` (excluded; `None`: to the end of the keyspace),
/// a page of keys per batch.
pub fn delete_range(
    store: &dyn MetaStore,
    start: &[u8],
    end: Option<&[u8]>,
    durable: bool,
) -> Result<(), StoreError> {
    const PAGE: usize = 1024;
    let mut start = start.to_vec();
    loop {
        let page = store.scan(&start, end, PAGE)?;
        let Some((last, _)) = page.last() else {
            return Ok(());
        };
        start = last.clone();
        start.push(0);
        let mut batch = WriteBatch::default();
        for (k, _) in page {
            batch.delete(k);
        }
        store.write(&batch, durable)?;
    }
}

/// The smallest key greater than every key that starts with `prefix` (`None`: no such key).
pub fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}
