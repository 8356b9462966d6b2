//! Raft log and vote of one group: in the process's [`LogJournal`] where the store keeps one
//! ([`MetaStore::raft_logs`]), else in the shared [`MetaStore`] under the group's prefix.
//!
//! Appends are durable before openraft is told they are flushed. In the store, that sync also
//! makes every earlier state-machine apply durable; with a journal, applies become durable when
//! a snapshot is built (before the log up to it is purged), and raft replays the log after a
//! crash.
//!
//! Reads take the newest entries from the group's [`LogTail`] (the entries as appended, not
//! decoded again) and decode only older ones.

use std::fmt::Debug;
use std::ops::{Bound, RangeBounds};
use std::sync::Arc;

use bytes::Bytes;
use openraft::storage::{LogFlushed, LogState, RaftLogReader, RaftLogStorage};
use openraft::{Entry, EntryPayload, LogId, OptionalSend, Vote};
use tracing::Instrument;

use super::log_tail::{LogTail, TAIL_BYTES};
use super::{read_err, storage_err, StorageError, TypeConfig};
use crate::keys::{Keys, LOG, PURGED, VOTE};
use crate::records::{decode, encode};
use crate::store::{LogJournal, MetaStore, RaftLogs, StoreError, WriteBatch};

#[derive(Clone)]
pub struct LogStore {
    place: Place,
    keys: Keys,
    /// The newest entries, shared by the log store and its readers.
    tail: Arc<LogTail>,
}

/// Where the log lives.
#[derive(Clone)]
enum Place {
    Store(Arc<dyn MetaStore>),
    Journal(Arc<LogJournal>),
}

impl LogStore {
    /// The raft log of `group` in `store` itself.
    pub fn new(store: Arc<dyn MetaStore>, group: u32) -> Self {
        Self {
            place: Place::Store(store),
            keys: Keys::new(group),
            tail: Arc::new(LogTail::new(TAIL_BYTES)),
        }
    }

    /// The raft log of `group` where `store` keeps raft logs ([`MetaStore::raft_logs`]). A
    /// log that an older version kept in a store is moved to the journal first (imported
    /// durably, then deleted: a crash between leaves only a stale copy, deleted at the next
    /// open).
    pub fn open(store: Arc<dyn MetaStore>, group: u32) -> Result<Self, StoreError> {
        let Some(RaftLogs { journal, legacy }) = store.raft_logs()? else {
            return Ok(Self::new(store, group));
        };
        let keys = Keys::new(group);
        for old in legacy.into_iter().chain([store]) {
            move_to_journal(old.as_ref(), &journal, keys)?;
        }
        Ok(Self {
            place: Place::Journal(journal),
            keys,
            tail: Arc::new(LogTail::new(TAIL_BYTES)),
        })
    }

    /// Deletes the group's log, vote and purge record (its replica left this node). Only
    /// the journal needs this: a log kept in the store is in the group's key range, which
    /// the caller deletes.
    pub async fn erase(&self) -> Result<(), StoreError> {
        self.tail.truncated(0);
        match &self.place {
            Place::Journal(j) => j.forget(self.group()).await,
            Place::Store(_) => Ok(()),
        }
    }

    fn group(&self) -> u32 {
        self.keys.group
    }

    fn get_rec<T: serde::de::DeserializeOwned>(&self, tag: u8) -> Result<Option<T>, StorageError> {
        let bytes = match &self.place {
            Place::Store(store) => store.get(&self.keys.single(tag)).map_err(read_err)?,
            Place::Journal(j) => match tag {
                VOTE => j.vote(self.group()).map(|b| b.to_vec()),
                _ => j.purged(self.group()).map(|b| b.to_vec()),
            },
        };
        bytes.map(|b| decode(&b).map_err(read_err)).transpose()
    }

    /// Writes `batch` to the store (durably: on a blocking thread).
    async fn write(store: &Arc<dyn MetaStore>, batch: WriteBatch) -> Result<(), StorageError> {
        let store = store.clone();
        tokio::task::spawn_blocking(move || store.write(&batch, true))
            .await
            .map_err(storage_err)?
            .map_err(storage_err)
    }

    /// Deletes the log entries with `from <= index < to` (`to = None`: to the end) from the
    /// store, plus `extra`. Callers start at the live part of the log: below it lie the
    /// tombstones of every earlier purge still in an LSM, which a scan would have to walk past.
    async fn delete_range(
        &self,
        store: &Arc<dyn MetaStore>,
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
        for (k, _) in store
            .scan(&start, Some(&end), usize::MAX)
            .map_err(read_err)?
        {
            batch.delete(k);
        }
        Self::write(store, batch).await
    }

    /// Appends `entries` to the log and the tail; returns once they are durable.
    async fn append_entries(
        &mut self,
        entries: Vec<Entry<TypeConfig>>,
    ) -> Result<(), StorageError> {
        let span = append_span(self.group(), &entries);
        let encoded: Vec<(u64, Bytes)> = entries
            .iter()
            .map(|e| (e.log_id.index, Bytes::from(encode(e))))
            .collect();
        // Readers may ask for the entries once `append` is called: the tail has them first.
        self.tail
            .appended(entries.into_iter().zip(&encoded).map(|(mut e, (_, b))| {
                if let EntryPayload::Normal(batch) = &mut e.payload {
                    // As the entry reads back from the log.
                    batch.trace = None;
                }
                (e, b.len())
            }));
        let res = match &self.place {
            Place::Journal(j) => j
                .append(self.group(), encoded)
                .instrument(span)
                .await
                .map_err(storage_err),
            Place::Store(store) => {
                let mut b = WriteBatch::default();
                for (index, e) in encoded {
                    b.put(self.keys.log(index), e);
                }
                Self::write(store, b).instrument(span).await
            }
        };
        if res.is_err() {
            // What the log holds is unknown: it is read from the log from now on.
            self.tail.truncated(0);
        }
        res
    }
}

/// Moves `keys.group`'s log from `old` into `journal`, unless the journal has the group
/// already (then `old` holds a stale copy), and deletes it from `old`.
fn move_to_journal(
    old: &dyn MetaStore,
    journal: &LogJournal,
    keys: Keys,
) -> Result<(), StoreError> {
    let scan = |tag| old.scan(&keys.table(tag), Some(&keys.table_end(tag)), usize::MAX);
    let (log, vote, purged) = (scan(LOG)?, scan(VOTE)?, scan(PURGED)?);
    if log.is_empty() && vote.is_empty() && purged.is_empty() {
        return Ok(());
    }
    let mut delete = WriteBatch::default();
    for (k, _) in log.iter().chain(&vote).chain(&purged) {
        delete.delete(k.clone());
    }
    if !journal.has_group(keys.group) {
        // VOTE and PURGED are single-record tables.
        let vote = vote.into_iter().next().map(|(_, v)| Bytes::from(v));
        let purged = match purged.into_iter().next() {
            Some((_, b)) => Some((decode::<LogId<u64>>(&b)?.index, Bytes::from(b))),
            None => None,
        };
        let entries = log
            .into_iter()
            .map(|(_, v)| {
                Ok((
                    decode::<Entry<TypeConfig>>(&v)?.log_id.index,
                    Bytes::from(v),
                ))
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        tracing::info!(
            group = keys.group,
            entries = entries.len(),
            "raft log moved to the log journal"
        );
        journal.import(keys.group, vote, purged, entries)?;
    }
    old.write(&delete, true)
}

/// The span of one append: on the leader, in the trace of the batch it carries (the entry's
/// `trace`, kept in memory only); on a follower, a trace of its own.
fn append_span(group: u32, entries: &[Entry<TypeConfig>]) -> tracing::Span {
    let span = tracing::debug_span!("raft.append", group, entries = entries.len());
    let trace = entries.iter().find_map(|e| match &e.payload {
        EntryPayload::Normal(b) => b.trace.as_deref(),
        _ => None,
    });
    if let Some(tp) = trace {
        saker_rpc::trace_context::adopt_parent(&span, tp);
    }
    span
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
        let to = match range.end_bound() {
            // Up to u64::MAX inclusive is no bound at all.
            Bound::Included(i) => i.checked_add(1),
            Bound::Excluded(i) => Some(*i),
            Bound::Unbounded => None,
        };
        // The tail first: what it lacks below its start is in the log (a purge meanwhile may
        // take some of it, as it may from any read).
        let (held_from, held) = self.tail.read(from, to);
        if held_from <= from {
            return Ok(held);
        }
        let to = Some(held_from);
        let values: Vec<Bytes> = match &self.place {
            Place::Journal(j) => j.entries(self.group(), from, to),
            Place::Store(store) => {
                let end = to.map_or_else(|| self.keys.table_end(LOG), |t| self.keys.log(t));
                store
                    .scan(&self.keys.log(from), Some(&end), usize::MAX)
                    .map_err(read_err)?
                    .into_iter()
                    .map(|(_, v)| Bytes::from(v))
                    .collect()
            }
        };
        let mut entries = values
            .iter()
            .map(|v| decode(v).map_err(read_err))
            .collect::<Result<Vec<Entry<TypeConfig>>, _>>()?;
        entries.extend(held);
        Ok(entries)
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = Self;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StorageError> {
        let last_purged: Option<LogId<u64>> = self.get_rec(PURGED)?;
        let last = match &self.place {
            Place::Journal(j) => j.last_entry(self.group()).map(|b| b.to_vec()),
            Place::Store(store) => store
                .last_in(&self.keys.table(LOG), &self.keys.table_end(LOG))
                .map_err(read_err)?
                .map(|(_, v)| v),
        };
        let last = last
            .map(|v| decode::<Entry<TypeConfig>>(&v).map(|e| e.log_id))
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
        match &self.place {
            Place::Journal(j) => j
                .save_vote(self.group(), encode(vote).into())
                .await
                .map_err(storage_err),
            Place::Store(store) => {
                let mut b = WriteBatch::default();
                b.put(self.keys.single(VOTE), encode(vote));
                Self::write(store, b).await
            }
        }
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
        let res = self.append_entries(entries.into_iter().collect()).await;
        callback.log_io_completed(
            res.as_ref()
                .map(|_| ())
                .map_err(|e| std::io::Error::other(e.to_string())),
        );
        res
    }

    async fn truncate(&mut self, log_id: LogId<u64>) -> Result<(), StorageError> {
        self.tail.truncated(log_id.index);
        match &self.place {
            Place::Journal(j) => j
                .truncate(self.group(), log_id.index)
                .await
                .map_err(storage_err),
            Place::Store(store) => {
                self.delete_range(store, log_id.index, None, WriteBatch::default())
                    .await
            }
        }
    }

    async fn purge(&mut self, log_id: LogId<u64>) -> Result<(), StorageError> {
        self.tail.purged(log_id.index);
        match &self.place {
            Place::Journal(j) => j
                .purge(self.group(), log_id.index, encode(&log_id).into())
                .await
                .map_err(storage_err),
            Place::Store(store) => {
                // Entries up to the last purge are gone already: scan from the one after it.
                // (From index 0 the scan walked past every earlier purge's tombstones still in
                // the LSM, a cost that grew with every purge.) A scan, not a delete per index:
                // a follower that installs a snapshot may purge far past the entries it has.
                let from = self
                    .get_rec::<LogId<u64>>(PURGED)?
                    .map_or(0, |last| last.index + 1);
                let mut b = WriteBatch::default();
                b.put(self.keys.single(PURGED), encode(&log_id));
                self.delete_range(store, from, Some(log_id.index + 1), b)
                    .await
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::MemStore;
    use openraft::{CommittedLeaderId, EntryPayload};

    /// The tables a group's raft log consists of in a store.
    const LOG_TABLES: [u8; 3] = [LOG, VOTE, PURGED];

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
    async fn a_log_kept_in_the_store_moves_to_the_journal() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("meta.fjall");
        let keys = Keys::new(2);
        let vote = Vote::new(3, 1);
        {
            // The oldest layout: the raft log in the state machines' keyspace.
            let main = crate::store::FjallStore::open(&path).unwrap();
            let mut b = entries(&keys, 1..10);
            b.put(keys.single(VOTE), encode(&vote));
            b.put(keys.single(PURGED), encode(&log_id(2)));
            b.put(b"other".to_vec(), &b"state"[..]);
            main.write(&b, true).unwrap();
            // The layout after that: group 3's log in a keyspace of its own.
            let legacy = main
                .sibling(crate::store::LEGACY_RAFT_LOG_KEYSPACE)
                .unwrap();
            legacy.write(&entries(&Keys::new(3), 1..4), true).unwrap();
        }
        let main: Arc<dyn MetaStore> = Arc::new(crate::store::FjallStore::open(&path).unwrap());
        let mut log = LogStore::open(main.clone(), 2).unwrap();
        assert!(matches!(log.place, Place::Journal(_)));
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
        // After a restart the journal has it, and the store still has nothing.
        drop(log);
        drop(main);
        let main: Arc<dyn MetaStore> = Arc::new(crate::store::FjallStore::open(&path).unwrap());
        let mut log = LogStore::open(main.clone(), 2).unwrap();
        assert_eq!(log.read_vote().await.unwrap(), Some(vote));
        let got = log.try_get_log_entries(3..=9).await.unwrap();
        let indexes: Vec<u64> = got.iter().map(|e| e.log_id.index).collect();
        assert_eq!(indexes, (3..10).collect::<Vec<_>>());
        assert!(main
            .scan(&keys.table(LOG), Some(&keys.table_end(LOG)), usize::MAX)
            .unwrap()
            .is_empty());
        let mut log3 = LogStore::open(main, 3).unwrap();
        let state = log3.get_log_state().await.unwrap();
        assert_eq!(state.last_log_id, Some(log_id(3)));
        assert_eq!(log3.try_get_log_entries(1..).await.unwrap().len(), 3);
    }

    /// An entry of `term` at `index` whose batch puts `key`.
    fn normal(term: u64, index: u64, key: &str) -> Entry<TypeConfig> {
        let mut mutations = WriteBatch::default();
        mutations.put(key.as_bytes().to_vec(), &b"v"[..]);
        Entry {
            log_id: LogId::new(CommittedLeaderId::new(term, 1), index),
            payload: EntryPayload::Normal(crate::raft::BatchEntry {
                mutations: Arc::new(mutations),
                results: Arc::default(),
                id_high_water: index,
                trace: Some("00-trace".into()),
            }),
        }
    }

    /// (term, index, the key the batch puts) of each entry.
    fn seen(entries: &[Entry<TypeConfig>]) -> Vec<(u64, u64, String)> {
        entries
            .iter()
            .map(|e| {
                let EntryPayload::Normal(b) = &e.payload else {
                    panic!("not a batch")
                };
                assert_eq!(b.trace, None, "the trace is never read back");
                let key = String::from_utf8(b.mutations.ops[0].0.clone()).unwrap();
                (e.log_id.leader_id.term, e.log_id.index, key)
            })
            .collect()
    }

    fn expect(ids: &[(u64, u64)]) -> Vec<(u64, u64, String)> {
        ids.iter()
            .map(|&(t, i)| (t, i, format!("{t}/{i}")))
            .collect()
    }

    fn run(term: u64, r: std::ops::RangeInclusive<u64>) -> Vec<Entry<TypeConfig>> {
        r.map(|i| normal(term, i, &format!("{term}/{i}"))).collect()
    }

    /// The log of group 5 in a fresh store; `journal` puts it in a log journal.
    fn fresh_log(dir: &std::path::Path, journal: bool) -> (Arc<dyn MetaStore>, LogStore) {
        if journal {
            let store: Arc<dyn MetaStore> =
                Arc::new(crate::store::FjallStore::open(&dir.join("meta.fjall")).unwrap());
            let log = LogStore::open(store.clone(), 5).unwrap();
            assert!(matches!(log.place, Place::Journal(_)));
            (store, log)
        } else {
            let store: Arc<dyn MetaStore> = Arc::new(MemStore::new());
            (store.clone(), LogStore::new(store, 5))
        }
    }

    /// Reads come from the tail of appended entries (the very batches, not decoded again)
    /// and agree with the log after a truncation replaced a conflicting suffix, after a
    /// purge, and after a restart (an empty tail: everything decoded).
    #[tokio::test]
    async fn the_tail_reads_as_the_log_across_truncations_purges_and_restarts() {
        for journal in [false, true] {
            let dir = tempfile::tempdir().unwrap();
            let (store, mut log) = fresh_log(dir.path(), journal);
            log.append_entries(run(1, 1..=3)).await.unwrap();
            let fourth = run(1, 4..=6);
            let EntryPayload::Normal(b4) = &fourth[0].payload else {
                unreachable!()
            };
            let batch4 = b4.mutations.clone();
            log.append_entries(fourth).await.unwrap();
            let got = log.try_get_log_entries(1..=6).await.unwrap();
            assert_eq!(
                seen(&got),
                expect(&[(1, 1), (1, 2), (1, 3), (1, 4), (1, 5), (1, 6)])
            );
            let EntryPayload::Normal(read4) = &got[3].payload else {
                unreachable!()
            };
            assert!(Arc::ptr_eq(&read4.mutations, &batch4), "decoded again");

            // A follower whose log diverged at 4: raft truncates, then appends the leader's.
            log.truncate(log_id(4)).await.unwrap();
            log.append_entries(run(2, 4..=5)).await.unwrap();
            let want = expect(&[(1, 1), (1, 2), (1, 3), (2, 4), (2, 5)]);
            assert_eq!(seen(&log.try_get_log_entries(1..).await.unwrap()), want);
            assert_eq!(seen(&log.try_get_log_entries(..6).await.unwrap()), want);
            assert_eq!(
                seen(&log.try_get_log_entries(3..5).await.unwrap()),
                expect(&[(1, 3), (2, 4)])
            );

            log.purge(log_id(2)).await.unwrap();
            let want = expect(&[(1, 3), (2, 4), (2, 5)]);
            assert_eq!(seen(&log.try_get_log_entries(0..).await.unwrap()), want);

            // After a restart the tail is empty: what it lacks is decoded from the log, and
            // a read across both joins them in order.
            let mut again = if journal {
                LogStore::open(store.clone(), 5).unwrap()
            } else {
                LogStore::new(store.clone(), 5)
            };
            assert_eq!(seen(&again.try_get_log_entries(0..).await.unwrap()), want);
            again.append_entries(run(2, 6..=7)).await.unwrap();
            assert_eq!(
                seen(&again.try_get_log_entries(4..=6).await.unwrap()),
                expect(&[(2, 4), (2, 5), (2, 6)])
            );
            let state = again.get_log_state().await.unwrap();
            assert_eq!(state.last_log_id.map(|l| l.index), Some(7));
            // A truncation below the tail's start empties it; the log answers.
            again.truncate(log_id(5)).await.unwrap();
            assert_eq!(
                seen(&again.try_get_log_entries(0..).await.unwrap()),
                expect(&[(1, 3), (2, 4)])
            );
            // A purge past the end (a snapshot installed) leaves nothing in either.
            again.purge(log_id(1 << 40)).await.unwrap();
            assert!(again.try_get_log_entries(0..).await.unwrap().is_empty());
        }
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
