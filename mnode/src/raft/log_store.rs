//! Raft log and vote of one group, stored in the shared [`MetaStore`] under the group's prefix.
//!
//! Appends are durable (fsync) before openraft is told they are flushed; because all groups of
//! a process share one store, that fsync also makes every earlier state-machine apply durable.

use std::fmt::Debug;
use std::ops::{Bound, RangeBounds};
use std::sync::Arc;

use openraft::storage::{LogFlushed, LogState, RaftLogReader, RaftLogStorage};
use openraft::{Entry, LogId, OptionalSend, Vote};

use super::{read_err, storage_err, StorageError, TypeConfig};
use crate::keys::{Keys, LOG, PURGED, VOTE};
use crate::records::{decode, encode};
use crate::store::{MetaStore, StoreError, WriteBatch};

#[derive(Clone)]
pub struct LogStore {
    store: Arc<dyn MetaStore>,
    keys: Keys,
}

/// The tables a group's raft log consists of.
const LOG_TABLES: [u8; 3] = [LOG, VOTE, PURGED];

impl LogStore {
    /// The raft log of `group` in `store` itself.
    pub fn new(store: Arc<dyn MetaStore>, group: u32) -> Self {
        Self {
            store,
            keys: Keys::new(group),
        }
    }

    /// The raft log of `group` where `store` keeps raft logs
    /// ([`MetaStore::raft_log_store`]). A log that an older version kept in `store` itself is
    /// moved there first (copied durably, then deleted: a crash between leaves only a stale
    /// copy, deleted at the next open).
    pub fn open(store: Arc<dyn MetaStore>, group: u32) -> Result<Self, StoreError> {
        let Some(log_store) = store.raft_log_store()? else {
            return Ok(Self::new(store, group));
        };
        let keys = Keys::new(group);
        // Up to `limit` pairs of each log table of the group in `s`.
        let log_pairs = |s: &dyn MetaStore, limit: usize| {
            LOG_TABLES.iter().try_fold(Vec::new(), |mut all, &tag| {
                all.extend(s.scan(&keys.table(tag), Some(&keys.table_end(tag)), limit)?);
                Ok::<_, StoreError>(all)
            })
        };
        let old = log_pairs(store.as_ref(), usize::MAX)?;
        if !old.is_empty() {
            let moved = !log_pairs(log_store.as_ref(), 1)?.is_empty();
            if !moved {
                let mut copy = WriteBatch::default();
                for (k, v) in &old {
                    copy.put(k.clone(), v.clone());
                }
                log_store.write(&copy, true)?;
                tracing::info!(
                    group,
                    entries = old.len(),
                    "raft log moved to its own keyspace"
                );
            }
            let mut delete = WriteBatch::default();
            for (k, _) in old {
                delete.delete(k);
            }
            store.write(&delete, true)?;
        }
        Ok(Self::new(log_store, group))
    }

    fn get_rec<T: serde::de::DeserializeOwned>(&self, tag: u8) -> Result<Option<T>, StorageError> {
        match self.store.get(&self.keys.single(tag)).map_err(read_err)? {
            Some(b) => Ok(Some(decode(&b).map_err(read_err)?)),
            None => Ok(None),
        }
    }

    async fn write(&self, batch: WriteBatch, durable: bool) -> Result<(), StorageError> {
        if durable {
            // Commit here (a write to the journal's buffer), then wait for the store's syncer
            // thread without holding one.
            if let Some(rx) = self.store.write_then_sync(&batch) {
                let rx = rx.map_err(storage_err)?;
                return rx.await.map_err(storage_err)?.map_err(storage_err);
            }
        }
        let store = self.store.clone();
        tokio::task::spawn_blocking(move || store.write(&batch, durable))
            .await
            .map_err(storage_err)?
            .map_err(storage_err)
    }

    /// Deletes the log entries with `from <= index < to` (`to = None`: to the end), plus
    /// `extra`. Callers start at the live part of the log: below it lie the tombstones of
    /// every earlier purge still in the LSM, which a scan would have to walk past.
    async fn delete_range(
        &self,
        from: u64,
        to: Option<u64>,
        extra: WriteBatch,
    ) -> Result<(), StorageError> {
        let start = self.keys.log(from);
        let end = match to {
            Some(t) => self.keys.log(t),
            None => self.keys.table_end(LOG),
        };
        let mut batch = extra;
        for (k, _) in self
            .store
            .scan(&start, Some(&end), usize::MAX)
            .map_err(read_err)?
        {
            batch.delete(k);
        }
        self.write(batch, true).await
    }
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry<TypeConfig>>, StorageError> {
        let from = match range.start_bound() {
            Bound::Included(i) => *i,
            Bound::Excluded(i) => i + 1,
            Bound::Unbounded => 0,
        };
        let end = match range.end_bound() {
            Bound::Included(i) => self.keys.log(i + 1),
            Bound::Excluded(i) => self.keys.log(*i),
            Bound::Unbounded => self.keys.table_end(LOG),
        };
        let pairs = self
            .store
            .scan(&self.keys.log(from), Some(&end), usize::MAX)
            .map_err(read_err)?;
        pairs
            .iter()
            .map(|(_, v)| decode(v).map_err(read_err))
            .collect()
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = Self;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StorageError> {
        let last_purged: Option<LogId<u64>> = self.get_rec(PURGED)?;
        let last = self
            .store
            .last_in(&self.keys.table(LOG), &self.keys.table_end(LOG))
            .map_err(read_err)?
            .map(|(_, v)| decode::<Entry<TypeConfig>>(&v).map(|e| e.log_id))
            .transpose()
            .map_err(read_err)?;
        Ok(LogState {
            last_purged_log_id: last_purged,
            last_log_id: last.or(last_purged),
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote<u64>) -> Result<(), StorageError> {
        let mut b = WriteBatch::default();
        b.put(self.keys.single(VOTE), encode(vote));
        self.write(b, true).await
    }

    async fn read_vote(&mut self) -> Result<Option<Vote<u64>>, StorageError> {
        self.get_rec(VOTE)
    }

    async fn append<I>(
        &mut self,
        entries: I,
        callback: LogFlushed<TypeConfig>,
    ) -> Result<(), StorageError>
    where
        I: IntoIterator<Item = Entry<TypeConfig>> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let mut b = WriteBatch::default();
        for e in entries {
            b.put(self.keys.log(e.log_id.index), encode(&e));
        }
        let res = self.write(b, true).await;
        callback.log_io_completed(
            res.as_ref()
                .map(|_| ())
                .map_err(|e| std::io::Error::other(e.to_string())),
        );
        res
    }

    async fn truncate(&mut self, log_id: LogId<u64>) -> Result<(), StorageError> {
        self.delete_range(log_id.index, None, WriteBatch::default())
            .await
    }

    async fn purge(&mut self, log_id: LogId<u64>) -> Result<(), StorageError> {
        // Entries up to the last purge are gone already: scan from the one after it. (From
        // index 0 the scan walked past every earlier purge's tombstones still in the LSM, a
        // cost that grew with every purge.) A scan, not a delete per index: a follower that
        // installs a snapshot may purge far past the entries it has.
        let from = self
            .get_rec::<LogId<u64>>(PURGED)?
            .map_or(0, |last| last.index + 1);
        let mut b = WriteBatch::default();
        b.put(self.keys.single(PURGED), encode(&log_id));
        self.delete_range(from, Some(log_id.index + 1), b).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::MemStore;
    use openraft::{CommittedLeaderId, EntryPayload};

    fn log_id(index: u64) -> LogId<u64> {
        LogId::new(CommittedLeaderId::new(1, 1), index)
    }

    /// Blank entries `indexes`, laid out as `append` writes them.
    fn entries(keys: &Keys, indexes: std::ops::Range<u64>) -> WriteBatch {
        let mut b = WriteBatch::default();
        for i in indexes {
            let e: Entry<TypeConfig> = Entry {
                log_id: log_id(i),
                payload: EntryPayload::Blank,
            };
            b.put(keys.log(i), encode(&e));
        }
        b
    }

    #[tokio::test]
    async fn a_log_kept_in_the_state_machines_keyspace_moves_to_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("meta.fjall");
        let keys = Keys::new(2);
        let vote = Vote::new(3, 1);
        {
            // The layout before raft logs had a keyspace of their own.
            let main = crate::store::FjallStore::open(&path).unwrap();
            let mut b = entries(&keys, 1..10);
            b.put(keys.single(VOTE), encode(&vote));
            b.put(keys.single(PURGED), encode(&log_id(2)));
            b.put(b"other".to_vec(), &b"state"[..]);
            main.write(&b, true).unwrap();
        }
        let main: Arc<dyn MetaStore> = Arc::new(crate::store::FjallStore::open(&path).unwrap());
        let mut log = LogStore::open(main.clone(), 2).unwrap();
        assert_eq!(log.read_vote().await.unwrap(), Some(vote));
        let state = log.get_log_state().await.unwrap();
        assert_eq!(state.last_purged_log_id, Some(log_id(2)));
        assert_eq!(state.last_log_id, Some(log_id(9)));
        assert_eq!(log.try_get_log_entries(3..10).await.unwrap().len(), 7);
        for tag in LOG_TABLES {
            let left = main
                .scan(&keys.table(tag), Some(&keys.table_end(tag)), usize::MAX)
                .unwrap();
            assert!(left.is_empty(), "table {} left behind", tag as char);
        }
        assert_eq!(main.get(b"other").unwrap().as_deref(), Some(&b"state"[..]));
        // Opening again finds it moved and leaves it as it is.
        drop(log);
        let mut log = LogStore::open(main, 2).unwrap();
        assert_eq!(log.read_vote().await.unwrap(), Some(vote));
        assert_eq!(log.try_get_log_entries(3..10).await.unwrap().len(), 7);
    }

    #[tokio::test]
    async fn purges_delete_exactly_the_entries_up_to_the_purged_index() {
        let store = Arc::new(MemStore::new());
        let keys = Keys::new(3);
        store.write(&entries(&keys, 1..20), true).unwrap();
        let mut log = LogStore::new(store.clone(), 3);
        let present = |s: &MemStore| -> Vec<u64> {
            (0..25)
                .filter(|&i| s.get(&keys.log(i)).unwrap().is_some())
                .collect()
        };

        log.purge(log_id(6)).await.unwrap();
        assert_eq!(present(&store), (7..20).collect::<Vec<_>>());
        // The next purge starts after the last one and stops at its own index.
        log.purge(log_id(11)).await.unwrap();
        assert_eq!(present(&store), (12..20).collect::<Vec<_>>());
        let state = log.get_log_state().await.unwrap();
        assert_eq!(state.last_purged_log_id, Some(log_id(11)));
        assert_eq!(state.last_log_id, Some(log_id(19)));
        let entries = log.try_get_log_entries(12..20).await.unwrap();
        assert_eq!(entries.len(), 8);
        assert_eq!(entries[0].log_id, log_id(12));

        // A truncate removes the tail from its index on.
        log.truncate(log_id(15)).await.unwrap();
        assert_eq!(present(&store), (12..15).collect::<Vec<_>>());
        // A purge far past the last entry (a follower installing a snapshot) removes the rest.
        log.purge(log_id(1 << 40)).await.unwrap();
        assert!(present(&store).is_empty());
        let state = log.get_log_state().await.unwrap();
        assert_eq!(state.last_purged_log_id, Some(log_id(1 << 40)));
    }
}
