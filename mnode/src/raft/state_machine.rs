//! The state machine of one group: applies batch entries to the shared store.
//!
//! Applies are written without fsync. They become durable with the next durable write to the
//! store: the next log append where the log lives in the store, or else the next snapshot.
//! After a crash raft replays the log from the last applied index found in the store.
//! `build_snapshot` only makes the applied state durable (which lets raft purge the log); the
//! snapshot a follower gets is written when it is asked for ([`super::snapshot`]): on the
//! state machine's task, between two applies, so it is one consistent state with the log id
//! it names. The state machine counts the bytes it applied since the last snapshot
//! ([`StateMachine::applied_bytes`]), so a group whose entries are large snapshots (and purges
//! the log it holds in memory) before its entry count says so.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use openraft::storage::{RaftSnapshotBuilder, RaftStateMachine, Snapshot};
use openraft::{Entry, EntryPayload, LogId, OptionalSend, SnapshotMeta, StoredMembership};
use tokio::fs::File;

use super::snapshot::{self, unnamed_file};
use super::{read_err, storage_err, BatchOutcome, StorageError, TypeConfig};
use crate::keys::{Keys, SM_META};
use crate::records::{decode, encode, SmMeta};
use crate::store::{MetaStore, WriteBatch};

pub struct StateMachine {
    store: Arc<dyn MetaStore>,
    keys: Keys,
    meta: SmMeta,
    /// Where snapshot files are made (unnamed: nothing is left behind).
    snapshot_dir: PathBuf,
    /// Bytes of mutations applied since the last snapshot was built.
    applied_bytes: Arc<AtomicU64>,
}

impl StateMachine {
    pub fn open(
        store: Arc<dyn MetaStore>,
        group: u32,
        snapshot_dir: PathBuf,
    ) -> Result<Self, crate::store::StoreError> {
        let keys = Keys::new(group);
        let meta = SmMeta::load(store.as_ref(), keys)?;
        Ok(Self {
            store,
            keys,
            meta,
            snapshot_dir,
            applied_bytes: Arc::default(),
        })
    }

    /// The bytes of mutations applied since the last snapshot was built (keys and values).
    pub fn applied_bytes(&self) -> Arc<AtomicU64> {
        self.applied_bytes.clone()
    }

    /// Highest inode id handed out by this group so far.
    pub fn id_high_water(&self) -> u64 {
        self.meta.id_high_water
    }

    fn snapshot_meta(&self) -> SnapshotMeta<u64, openraft::BasicNode> {
        SnapshotMeta {
            last_log_id: self.meta.last_applied,
            last_membership: self.meta.membership.clone(),
            snapshot_id: format!(
                "{}-{}",
                self.keys.group,
                self.meta.last_applied.map(|l| l.index).unwrap_or_default()
            ),
        }
    }

    fn empty_file(&self) -> Result<File, StorageError> {
        Ok(File::from_std(
            unnamed_file(&self.snapshot_dir, "snapshot").map_err(storage_err)?,
        ))
    }
}

pub struct SnapshotBuilder {
    store: Arc<dyn MetaStore>,
    keys: Keys,
    meta: SnapshotMeta<u64, openraft::BasicNode>,
    sm_meta: SmMeta,
    snapshot_dir: PathBuf,
    applied_bytes: Arc<AtomicU64>,
}

impl RaftSnapshotBuilder<TypeConfig> for SnapshotBuilder {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, StorageError> {
        // Make the applied state durable; the log up to it may then be purged. openraft keeps
        // only the meta of a built snapshot, so the data is an empty file.
        let mut b = WriteBatch::default();
        b.put(self.keys.single(SM_META), encode(&self.sm_meta));
        let store = self.store.clone();
        tokio::task::spawn_blocking(move || store.write(&b, true))
            .await
            .map_err(storage_err)?
            .map_err(storage_err)?;
        self.applied_bytes.store(0, Ordering::Relaxed);
        let file = unnamed_file(&self.snapshot_dir, "snapshot").map_err(storage_err)?;
        Ok(Snapshot {
            meta: self.meta.clone(),
            snapshot: Box::new(File::from_std(file)),
        })
    }
}

impl RaftStateMachine<TypeConfig> for StateMachine {
    type SnapshotBuilder = SnapshotBuilder;

    async fn applied_state(
        &mut self,
    ) -> Result<
        (
            Option<LogId<u64>>,
            StoredMembership<u64, openraft::BasicNode>,
        ),
        StorageError,
    > {
        Ok((self.meta.last_applied, self.meta.membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<BatchOutcome>, StorageError>
    where
        I: IntoIterator<Item = Entry<TypeConfig>> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let span = tracing::debug_span!(
            "raft.apply",
            group = self.keys.group,
            entries = tracing::field::Empty
        );
        let _in = span.enter();
        let mut batch = WriteBatch::default();
        let mut out = Vec::new();
        let mut bytes = 0;
        for entry in entries {
            self.meta.last_applied = Some(entry.log_id);
            match entry.payload {
                EntryPayload::Blank => out.push(BatchOutcome::default()),
                EntryPayload::Normal(data) => {
                    // The batch is shared with the log's tail: its ops are copied (keys; values
                    // are shared buffers) into the one write of all entries and the meta.
                    let ops = &data.mutations.ops;
                    bytes += ops
                        .iter()
                        .map(|(k, v)| k.len() + v.as_ref().map_or(0, |v| v.len()))
                        .sum::<usize>();
                    batch.ops.extend(ops.iter().cloned());
                    self.meta.id_high_water = self.meta.id_high_water.max(data.id_high_water);
                    out.push(BatchOutcome {
                        results: data.results,
                    });
                }
                EntryPayload::Membership(m) => {
                    self.meta.membership = StoredMembership::new(Some(entry.log_id), m);
                    out.push(BatchOutcome::default());
                }
            }
        }
        span.record("entries", out.len());
        self.applied_bytes
            .fetch_add(bytes as u64, Ordering::Relaxed);
        batch.put(self.keys.single(SM_META), encode(&self.meta));
        self.store.write(&batch, false).map_err(storage_err)?;
        Ok(out)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        SnapshotBuilder {
            store: self.store.clone(),
            keys: self.keys,
            meta: self.snapshot_meta(),
            sm_meta: self.meta.clone(),
            snapshot_dir: self.snapshot_dir.clone(),
            applied_bytes: self.applied_bytes.clone(),
        }
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<File>, StorageError> {
        Ok(Box::new(self.empty_file()?))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta<u64, openraft::BasicNode>,
        snapshot: Box<File>,
    ) -> Result<(), StorageError> {
        let mut file = snapshot.into_std().await;
        let meta_key = self.keys.single(SM_META);
        // The sender's meta record carries the id high-water mark; it is written last.
        let mut sender: Option<Vec<u8>> = None;
        let pairs = snapshot::install(self.store.as_ref(), self.keys, &mut file, |k, v| {
            if k == meta_key.as_slice() {
                sender = Some(v.to_vec());
                return false;
            }
            true
        })
        .map_err(read_err)?;
        let mut sm_meta = match sender {
            Some(v) => decode::<SmMeta>(&v).map_err(read_err)?,
            None => SmMeta::default(),
        };
        sm_meta.last_applied = meta.last_log_id;
        sm_meta.membership = meta.last_membership.clone();
        let mut batch = WriteBatch::default();
        batch.put(meta_key, encode(&sm_meta));
        self.store.write(&batch, true).map_err(storage_err)?;
        self.meta = sm_meta;
        crate::metrics::SNAPSHOTS
            .with_label_values(&["installed"])
            .inc();
        tracing::info!(group = self.keys.group, pairs, snapshot = %meta.snapshot_id, "snapshot installed");
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot<TypeConfig>>, StorageError> {
        if self.meta.last_applied.is_none() {
            return Ok(None);
        }
        let mut file = unnamed_file(&self.snapshot_dir, "snapshot").map_err(storage_err)?;
        let pairs = snapshot::write(self.store.as_ref(), self.keys, &mut file).map_err(read_err)?;
        crate::metrics::SNAPSHOTS.with_label_values(&["sent"]).inc();
        tracing::info!(group = self.keys.group, pairs, "snapshot written");
        Ok(Some(Snapshot {
            meta: self.snapshot_meta(),
            snapshot: Box::new(File::from_std(file)),
        }))
    }
}
