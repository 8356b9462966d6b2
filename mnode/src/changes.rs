//! The change-log of parent-directory updates this group owes other groups (SwitchFS §5).
//!
//! A batch whose ops changed directories owned elsewhere writes one record per owner under
//! `c/seq/owner` in the same raft entry. [`ChangeLog::push_upto`] sends the records in seq
//! order to their owners, which apply each seq once (`ApplyChanges` keeps the last applied seq
//! per source). Sync mode answers the ops after that push; async mode answers them after
//! [`ChangeLog::mark_dirty`] reached every owner, and pushes a little later
//! ([`ChangeLog::push_soon`]) so that one push carries the records of many batches. Pushed
//! records are deleted by the next batch; records left by a crash are pushed again at start,
//! which is harmless because applying is idempotent.
//!
//! Compaction: an owner whose last push from this group succeeded has applied exactly up to
//! the last seq it acknowledged, so its next push leaves out the records at or below that seq
//! (they stay in the log until a batch trims them, and may be read again when a push to
//! another owner failed) and sends the rest as one record (the last seq) carrying one summed
//! delta per directory ([`compact`]): the deltas commute, so the owner ends where applying them
//! one by one would leave it, with one attribute write per directory. An owner whose last push
//! failed or was cut off may have applied part of it (a lost reply), so it gets the records one
//! by one, skipping the seqs it has, until a push to it succeeds; so does every owner after a
//! start.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;
use saker_namespace::GroupId;
use saker_rpc::{ClientTag, DirChange, InodeId, MetaError, MetaRequest, MetaService};
use tracing::Instrument;

use crate::keys::{Keys, CHANGE};
use crate::metrics;
use crate::records::decode;
use crate::store::MetaStore;
use crate::tree::internal;

/// One owner's share of a push: `(seq, changes)` records and their change-log keys.
type OwnerRecords = (Vec<(u64, Vec<DirChange>)>, Vec<Vec<u8>>);

/// The other groups, by id, as this MNode reaches them.
pub type Peers = BTreeMap<GroupId, Arc<dyn MetaService>>;

pub struct ChangeLog {
    keys: Keys,
    store: Arc<dyn MetaStore>,
    peers: Arc<OnceLock<Peers>>,
    /// Highest seq pushed; every record at or below it was pushed.
    pushed: tokio::sync::Mutex<u64>,
    /// Keys of pushed records, deleted by the next batch.
    trimmed: Mutex<Vec<Vec<u8>>>,
    /// Records pushed since start.
    pub pushes: std::sync::atomic::AtomicU64,
    /// Dirty marks sent since start.
    pub marks: std::sync::atomic::AtomicU64,
    /// A proactive push is scheduled.
    push_scheduled: std::sync::atomic::AtomicBool,
    /// Per owner whose last push succeeded, the last seq it acknowledged: it gets the records
    /// above it, compacted.
    acked: Mutex<BTreeMap<GroupId, u64>>,
    /// Change-log records folded into another by compaction, since start.
    pub compacted: std::sync::atomic::AtomicU64,
    /// Highest seq known written and highest known pushed (for the records gauge).
    written: std::sync::atomic::AtomicU64,
    pushed_seq: std::sync::atomic::AtomicU64,
    gauge: prometheus::IntGauge,
    /// The group's cost accounting, once set (records pushed count there).
    load: OnceLock<Arc<crate::load::LoadRecorder>>,
}

/// How long async mode lets change-log records gather before it pushes them: the push of
/// many batches' records costs the owner one raft entry (a journal sync), and a reader of a
/// dirty directory pulls what it needs anyway. 2,000 one-thread FUSE creates over 10
/// directories took 2,721 raft entries with 5 ms, 2,277 with 25 ms and 2,086 with 100 ms
/// (2,792, 3,078 and 3,187 creates/s), and a directory's stat right after creates took the same
/// time (session 10, `compat_tests/bench/results/2026-11-24-session10-experiments.json`).
const PUSH_DELAY: std::time::Duration = std::time::Duration::from_millis(100);

impl ChangeLog {
    pub fn new(keys: Keys, store: Arc<dyn MetaStore>, peers: Arc<OnceLock<Peers>>) -> Self {
        Self {
            keys,
            store,
            peers,
            pushed: tokio::sync::Mutex::new(0),
            trimmed: Mutex::new(Vec::new()),
            pushes: Default::default(),
            marks: Default::default(),
            push_scheduled: Default::default(),
            acked: Default::default(),
            compacted: Default::default(),
            written: Default::default(),
            pushed_seq: Default::default(),
            gauge: metrics::CHANGE_LOG.with_label_values(&[&keys.group.to_string()]),
            load: OnceLock::new(),
        }
    }

    /// Counts the records this log pushes in `load`.
    pub fn observe(&self, load: Arc<crate::load::LoadRecorder>) {
        let _ = self.load.set(load);
    }

    /// A committed batch wrote records up to `seq`.
    pub fn written(&self, seq: u64) {
        self.written.fetch_max(seq, Ordering::Relaxed);
        self.publish();
    }

    fn publish(&self) {
        let (w, p) = (
            self.written.load(Ordering::Relaxed),
            self.pushed_seq.load(Ordering::Relaxed),
        );
        self.gauge.set(w.saturating_sub(p) as i64);
    }

    /// Tells each owner which of its directories this group changed (one message per owner,
    /// in parallel). Fails if any owner did not take its mark.
    pub async fn mark_dirty(
        &self,
        by_owner: &BTreeMap<GroupId, Vec<InodeId>>,
        seq: u64,
    ) -> Result<(), MetaError> {
        let span = tracing::debug_span!(
            "mnode.mark_dirty",
            group = self.keys.group,
            owners = by_owner.len()
        );
        self.send_marks(by_owner, seq).instrument(span).await
    }

    async fn send_marks(
        &self,
        by_owner: &BTreeMap<GroupId, Vec<InodeId>>,
        seq: u64,
    ) -> Result<(), MetaError> {
        let peers = self
            .peers
            .get()
            .ok_or_else(|| MetaError::Unavailable("peers not connected yet".into()))?;
        let mut calls = Vec::with_capacity(by_owner.len());
        for (owner, dirs) in by_owner {
            let peer = peers
                .get(owner)
                .ok_or_else(|| MetaError::Unavailable(format!("no route to group {owner}")))?;
            let req = MetaRequest::MarkDirty {
                source: self.keys.group,
                dirs: dirs.clone(),
                seq,
            };
            calls.push(async move { peer.call(ClientTag { client: 0, seq: 0 }, req).await });
        }
        let results = futures::future::join_all(calls).await;
        let sent = results.iter().filter(|r| r.is_ok()).count() as u64;
        self.marks
            .fetch_add(sent, std::sync::atomic::Ordering::Relaxed);
        metrics::DIRTY_MARKS.inc_by(sent);
        results.into_iter().try_for_each(|r| r.map(|_| ()))
    }

    /// Pushes everything owed after [`PUSH_DELAY`], unless a push is already scheduled.
    pub fn push_soon(self: &Arc<Self>) {
        if self.push_scheduled.swap(true, Ordering::AcqRel) {
            return;
        }
        let me = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(PUSH_DELAY).await;
            me.push_scheduled.store(false, Ordering::Release);
            if let Err(e) = me.push_upto(u64::MAX).await {
                tracing::debug!(error = %e, "proactive change-log push failed; retried later");
            }
        });
    }

    /// The directories of `owner` this group still holds change-log records for.
    pub fn pending_dirs(&self, owner: GroupId) -> Result<Vec<InodeId>, MetaError> {
        let start = self.keys.table(CHANGE);
        let end = self.keys.table_end(CHANGE);
        let mut dirs = std::collections::BTreeSet::new();
        for (key, value) in self
            .store
            .scan(&start, Some(&end), usize::MAX)
            .map_err(internal)?
        {
            match Keys::change_parts(&key) {
                Some((_, o)) if o == owner => {
                    let changes: Vec<DirChange> = decode(&value).map_err(internal)?;
                    dirs.extend(changes.iter().map(|c| c.dir));
                }
                Some(_) => {}
                None => return Err(MetaError::Internal("bad change-log key".into())),
            }
        }
        Ok(dirs.into_iter().collect())
    }

    /// Forgets what was pushed: a new leader of the group knows only the records still in
    /// the change-log, and pushes them all again (owners skip what they applied already).
    pub async fn restart(&self) {
        *self.pushed.lock().await = 0;
        self.acked.lock().clear();
    }

    /// Pushes every applied record up to at least `upto` to its owner, in seq order.
    pub async fn push_upto(&self, upto: u64) -> Result<(), MetaError> {
        let span = tracing::debug_span!(
            "mnode.change_push",
            group = self.keys.group,
            records = tracing::field::Empty
        );
        self.push(upto).instrument(span).await
    }

    async fn push(&self, upto: u64) -> Result<(), MetaError> {
        let mut pushed = self.pushed.lock().await;
        if *pushed >= upto {
            return Ok(());
        }
        let peers = self
            .peers
            .get()
            .ok_or_else(|| MetaError::Unavailable("peers not connected yet".into()))?;
        let start = self.keys.change(*pushed + 1, 0);
        let end = self.keys.table_end(CHANGE);
        let records = self
            .store
            .scan(&start, Some(&end), usize::MAX)
            .map_err(internal)?;
        let Some(last) = records.last().and_then(|(k, _)| Keys::change_parts(k)) else {
            return Ok(());
        };
        tracing::Span::current().record("records", records.len());
        // Seqs are consecutive: the records below the first one left were pushed and trimmed.
        if let Some((first, _)) = records.first().and_then(|(k, _)| Keys::change_parts(k)) {
            self.pushed_seq
                .fetch_max(first.saturating_sub(1), Ordering::Relaxed);
        }
        self.written.fetch_max(last.0, Ordering::Relaxed);
        self.publish();
        // One request per owner with its records in seq order; owners in parallel (order
        // matters only between one source and one owner).
        let mut per_owner: BTreeMap<GroupId, OwnerRecords> = BTreeMap::new();
        for (key, value) in records {
            let Some((seq, owner)) = Keys::change_parts(&key) else {
                return Err(MetaError::Internal("bad change-log key".into()));
            };
            let changes: Vec<DirChange> = decode(&value).map_err(internal)?;
            let entry = per_owner.entry(owner).or_default();
            entry.0.push((seq, changes));
            entry.1.push(key);
        }
        let mut calls = Vec::with_capacity(per_owner.len());
        let mut keys = Vec::with_capacity(per_owner.len());
        let mut owners = Vec::with_capacity(per_owner.len());
        for (owner, (mut records, owner_keys)) in per_owner {
            let peer = peers
                .get(&owner)
                .ok_or_else(|| MetaError::Unavailable(format!("no route to group {owner}")))?;
            // Unknown until this push answers (it may be cut off, or its reply lost).
            let acked = self.acked.lock().remove(&owner);
            if let Some(acked) = acked {
                records.retain(|(seq, _)| *seq > acked);
                let before = records.len();
                records = compact(records);
                let folded = (before - records.len()) as u64;
                self.compacted
                    .fetch_add(folded, std::sync::atomic::Ordering::Relaxed);
                metrics::CHANGE_RECORDS_COMPACTED.inc_by(folded);
            }
            let Some(&(owner_last, _)) = records.last() else {
                // Every record here is at or below what the owner acknowledged: nothing to send.
                self.trimmed.lock().extend(owner_keys);
                if let Some(a) = acked {
                    self.acked.lock().insert(owner, a);
                }
                continue;
            };
            owners.push((owner, owner_last));
            if let Some(load) = self.load.get() {
                let n = records.len() as u64;
                load.record(saker_rpc::CostKind::ChangePush, n, None, None, 0);
            }
            let req = MetaRequest::ApplyChanges {
                source: self.keys.group,
                records,
            };
            // Untagged: applying is idempotent by seq, so no dedupe entry is needed.
            let untagged = ClientTag { client: 0, seq: 0 };
            calls.push(async move { peer.call(untagged, req).await });
            keys.push(owner_keys);
        }
        let results = futures::future::join_all(calls).await;
        let mut failed = None;
        for ((result, owner_keys), (owner, owner_last)) in results.into_iter().zip(keys).zip(owners)
        {
            match result {
                Ok(_) => {
                    self.acked.lock().insert(owner, owner_last);
                    metrics::CHANGE_PUSHES.inc();
                    self.pushes
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    self.trimmed.lock().extend(owner_keys);
                }
                Err(e) => failed = Some(e),
            }
        }
        match failed {
            // The records pushed stay trimmed; the others are pushed again next time (their
            // owners skip what they applied).
            Some(e) => Err(e),
            None => {
                *pushed = last.0;
                self.pushed_seq.fetch_max(last.0, Ordering::Relaxed);
                self.publish();
                Ok(())
            }
        }
    }

    /// Keys of pushed records, for the next batch to delete.
    pub fn take_trimmed(&self) -> Vec<Vec<u8>> {
        std::mem::take(&mut *self.trimmed.lock())
    }
}

/// Folds change-log records for one owner into one: the last seq, and per directory the summed
/// entry and link deltas with the latest time (directories in first-seen order).
pub fn compact(records: Vec<(u64, Vec<DirChange>)>) -> Vec<(u64, Vec<DirChange>)> {
    if records.len() < 2 {
        return records;
    }
    let last = records.last().expect("two or more").0;
    let mut merged: Vec<DirChange> = Vec::new();
    let mut at: std::collections::HashMap<InodeId, usize> = std::collections::HashMap::new();
    for c in records.into_iter().flat_map(|(_, changes)| changes) {
        match at.get(&c.dir) {
            Some(&i) => {
                let m = &mut merged[i];
                m.entries += c.entries;
                m.links += c.links;
                m.mtime_ns = m.mtime_ns.max(c.mtime_ns);
            }
            None => {
                at.insert(c.dir, merged.len());
                merged.push(c);
            }
        }
    }
    vec![(last, merged)]
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::*;
    use crate::records::encode;
    use crate::store::{MemStore, WriteBatch};

    /// An owner that applies pushed records as MNodes do (once per seq, by source) into
    /// per-directory entry counts, and can lose its reply after applying.
    #[derive(Default)]
    struct Owner {
        state: Mutex<(u64, BTreeMap<InodeId, i64>)>,
        pushes: Mutex<Vec<usize>>,
        lose_reply: AtomicBool,
    }

    #[async_trait::async_trait]
    impl MetaService for Owner {
        async fn call(
            &self,
            _: ClientTag,
            req: MetaRequest,
        ) -> Result<saker_rpc::MetaResponse, MetaError> {
            let MetaRequest::ApplyChanges { records, .. } = req else {
                return Err(MetaError::Invalid("only ApplyChanges".into()));
            };
            self.pushes.lock().push(records.len());
            let mut st = self.state.lock();
            for (seq, changes) in records {
                if seq <= st.0 {
                    continue;
                }
                for c in changes {
                    *st.1.entry(c.dir).or_default() += c.entries;
                }
                st.0 = seq;
            }
            if self.lose_reply.swap(false, Ordering::SeqCst) {
                return Err(MetaError::Unavailable("reply lost".into()));
            }
            Ok(saker_rpc::MetaResponse::Done)
        }
    }

    fn append(store: &MemStore, keys: &Keys, seq: u64, dir: InodeId) {
        append_for(store, keys, seq, 2, dir);
    }

    fn append_for(store: &MemStore, keys: &Keys, seq: u64, owner: GroupId, dir: InodeId) {
        let mut b = WriteBatch::default();
        b.put(
            keys.change(seq, owner),
            encode(&vec![ch(dir, 1, 0, seq as i64)]),
        );
        store.write(&b, true).unwrap();
    }

    #[tokio::test]
    async fn records_an_owner_applied_are_not_folded_into_its_next_push() {
        let keys = Keys::new(1);
        let store = Arc::new(MemStore::new());
        let (x, y) = (Arc::new(Owner::default()), Arc::new(Owner::default()));
        let peers = Arc::new(OnceLock::new());
        let mut p: Peers = BTreeMap::new();
        p.insert(2, x.clone());
        p.insert(3, y.clone());
        peers.set(p).ok().unwrap();
        let log = ChangeLog::new(keys, store.clone(), peers);
        append_for(&store, &keys, 1, 2, 7);
        log.push_upto(u64::MAX).await.unwrap();
        // X takes seq 2; Y's reply is lost, so the push fails and no record is deleted yet.
        append_for(&store, &keys, 2, 2, 7);
        append_for(&store, &keys, 3, 3, 8);
        y.lose_reply.store(true, Ordering::SeqCst);
        assert!(log.push_upto(u64::MAX).await.is_err());
        // The next push reads seq 2 again: X must not get it a second time inside a fold.
        append_for(&store, &keys, 4, 2, 7);
        append_for(&store, &keys, 5, 2, 7);
        log.push_upto(u64::MAX).await.unwrap();
        let xs = x.state.lock();
        assert_eq!(
            (xs.0, xs.1[&7]),
            (5, 4),
            "one entry per create in directory 7"
        );
        let ys = y.state.lock();
        assert_eq!((ys.0, ys.1[&8]), (3, 1));
        assert_eq!(
            *x.pushes.lock(),
            vec![1, 1, 1],
            "4 and 5 folded, 2 left out"
        );
    }

    #[tokio::test]
    async fn a_push_whose_reply_was_lost_is_resent_record_by_record_then_compacted() {
        let keys = Keys::new(1);
        let store = Arc::new(MemStore::new());
        let owner = Arc::new(Owner::default());
        let peers = Arc::new(OnceLock::new());
        let mut p: Peers = BTreeMap::new();
        p.insert(2, owner.clone());
        peers.set(p).ok().unwrap();
        let log = ChangeLog::new(keys, store.clone(), peers);
        let delete = |log: &ChangeLog| {
            let mut b = WriteBatch::default();
            for k in log.take_trimmed() {
                b.delete(k);
            }
            store.write(&b, true).unwrap();
        };

        // After a start the owner's state is unknown: records one by one.
        for seq in 1..=3 {
            append(&store, &keys, seq, 7);
        }
        log.push_upto(u64::MAX).await.unwrap();
        delete(&log);
        // Known now: the next push is one record.
        for seq in 4..=6 {
            append(&store, &keys, seq, 7);
        }
        log.push_upto(u64::MAX).await.unwrap();
        delete(&log);
        // The owner applies 7..=8 but its reply is lost; the resend with 9 must not count
        // 7 and 8 twice, so it goes record by record.
        append(&store, &keys, 7, 7);
        append(&store, &keys, 8, 8);
        owner.lose_reply.store(true, Ordering::SeqCst);
        assert!(log.push_upto(u64::MAX).await.is_err());
        append(&store, &keys, 9, 8);
        log.push_upto(u64::MAX).await.unwrap();
        delete(&log);
        append(&store, &keys, 10, 8);
        append(&store, &keys, 11, 8);
        log.push_upto(u64::MAX).await.unwrap();

        assert_eq!(*owner.pushes.lock(), vec![3, 1, 1, 3, 1]);
        let st = owner.state.lock();
        assert_eq!(st.0, 11);
        assert_eq!(st.1[&7], 7, "one entry per create in directory 7");
        assert_eq!(st.1[&8], 4);
        assert_eq!(log.compacted.load(Ordering::Relaxed), 2 + 1 + 1);
    }

    fn ch(dir: InodeId, entries: i64, links: i64, mtime_ns: i64) -> DirChange {
        DirChange {
            dir,
            entries,
            links,
            mtime_ns,
        }
    }

    #[test]
    fn records_fold_into_one_delta_per_directory_at_the_last_seq() {
        let records = vec![
            (3, vec![ch(7, 1, 0, 10), ch(8, 1, 1, 11)]),
            (5, vec![ch(7, 1, 0, 30)]),
            (9, vec![ch(7, -1, 0, 20), ch(9, 1, 0, 5)]),
        ];
        assert_eq!(
            compact(records),
            vec![(9, vec![ch(7, 1, 0, 30), ch(8, 1, 1, 11), ch(9, 1, 0, 5)])]
        );
        let one = vec![(4, vec![ch(1, 1, 0, 1)])];
        assert_eq!(compact(one.clone()), one);
        assert!(compact(Vec::new()).is_empty());
    }
}
