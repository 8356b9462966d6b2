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

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;
use saker_namespace::GroupId;
use saker_rpc::{ClientTag, DirChange, InodeId, MetaError, MetaRequest, MetaService};

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
}

/// How long async mode lets change-log records gather before it pushes them: the push of
/// many batches' records costs the owner one raft entry.
const PUSH_DELAY: std::time::Duration = std::time::Duration::from_millis(5);

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
        }
    }

    /// Tells each owner which of its directories this group changed (one message per owner,
    /// in parallel). Fails if any owner did not take its mark.
    pub async fn mark_dirty(
        &self,
        by_owner: &BTreeMap<GroupId, Vec<InodeId>>,
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
        use std::sync::atomic::Ordering;
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

    /// Pushes every applied record up to at least `upto` to its owner, in seq order.
    pub async fn push_upto(&self, upto: u64) -> Result<(), MetaError> {
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
        for (owner, (records, owner_keys)) in per_owner {
            let peer = peers
                .get(&owner)
                .ok_or_else(|| MetaError::Unavailable(format!("no route to group {owner}")))?;
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
        for (result, owner_keys) in results.into_iter().zip(keys) {
            match result {
                Ok(_) => {
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
                Ok(())
            }
        }
    }

    /// Keys of pushed records, for the next batch to delete.
    pub fn take_trimmed(&self) -> Vec<Vec<u8>> {
        std::mem::take(&mut *self.trimmed.lock())
    }
}
