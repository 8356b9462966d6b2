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
use crate::store::{MetaStore, WriteBatch};

#[derive(Clone)]
pub struct LogStore {
    store: Arc<dyn MetaStore>,
    keys: Keys,
}

impl LogStore {
    pub fn new(store: Arc<dyn MetaStore>, group: u32) -> Self {
        Self {
            store,
            keys: Keys::new(group),
        }
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

    /// Deletes the log entries from index `from` on (the live end of the log, so the scan
    /// meets no tombstones of purged entries).
    async fn delete_from(&self, from: u64) -> Result<(), StorageError> {
        let start = self.keys.log(from);
        let end = self.keys.table_end(LOG);
        let mut batch = WriteBatch::default();
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
        self.delete_from(log_id.index).await
    }

    async fn purge(&mut self, log_id: LogId<u64>) -> Result<(), StorageError> {
        // Entries up to the last purge are gone already: delete only the ones after it, by
        // key. (A range scan from index 0 would walk past every earlier purge's tombstones
        // still in the LSM, a cost that grew with every purge.)
        let from = self
            .get_rec::<LogId<u64>>(PURGED)?
            .map_or(0, |last| last.index + 1);
        let mut b = WriteBatch::default();
        b.put(self.keys.single(PURGED), encode(&log_id));
        for index in from..=log_id.index {
            b.delete(self.keys.log(index));
        }
        self.write(b, true).await
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

    /// Puts blank entries `indexes` straight into the store (as `append` lays them out).
    fn put_entries(store: &MemStore, keys: &Keys, indexes: std::ops::Range<u64>) {
        let mut b = WriteBatch::default();
        for i in indexes {
            let e: Entry<TypeConfig> = Entry {
                log_id: log_id(i),
                payload: EntryPayload::Blank,
            };
            b.put(keys.log(i), encode(&e));
        }
        store.write(&b, true).unwrap();
    }

    #[tokio::test]
    async fn purges_delete_exactly_the_entries_up_to_the_purged_index() {
        let store = Arc::new(MemStore::new());
        let keys = Keys::new(3);
        put_entries(&store, &keys, 1..20);
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
    }
}
