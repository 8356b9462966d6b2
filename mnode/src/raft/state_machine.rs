//! The state machine of one group: applies batch entries to the shared store.
//!
//! Applies are written without fsync. They become durable with the next durable write to the
//! store: the next log append where the log lives in the store, or else the next snapshot.
//! After a crash raft replays the log from the last applied index found in the store. A
//! snapshot is the group's state-machine tables; `build_snapshot` only makes the applied state
//! durable (which lets raft purge the log), and the bytes are produced when a snapshot is
//! actually sent.

use std::io::Cursor;
use std::sync::Arc;

use openraft::storage::{RaftSnapshotBuilder, RaftStateMachine, Snapshot};
use openraft::{Entry, EntryPayload, LogId, OptionalSend, SnapshotMeta, StoredMembership};

use super::{read_err, storage_err, BatchOutcome, StorageError, TypeConfig};
use crate::keys::{Keys, SM_META, SM_TABLES};
use crate::records::{decode, encode, SmMeta};
use crate::store::{KvPairs, MetaStore, WriteBatch};

pub struct StateMachine {
    store: Arc<dyn MetaStore>,
    keys: Keys,
    meta: SmMeta,
}

impl StateMachine {
    pub fn open(store: Arc<dyn MetaStore>, group: u32) -> Result<Self, crate::store::StoreError> {
        let keys = Keys::new(group);
        let meta = match store.get(&keys.single(SM_META))? {
            Some(b) => decode(&b)?,
            None => SmMeta::default(),
        };
        Ok(Self { store, keys, meta })
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

    fn dump(&self) -> Result<KvPairs, StorageError> {
        let mut all = Vec::new();
        for tag in SM_TABLES {
            let pairs = self
                .store
                .scan(
                    &self.keys.table(tag),
                    Some(&self.keys.table_end(tag)),
                    usize::MAX,
                )
                .map_err(read_err)?;
            all.extend(pairs);
        }
        Ok(all)
    }
}

pub struct SnapshotBuilder {
    store: Arc<dyn MetaStore>,
    keys: Keys,
    meta: SnapshotMeta<u64, openraft::BasicNode>,
    sm_meta: SmMeta,
}

impl RaftSnapshotBuilder<TypeConfig> for SnapshotBuilder {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, StorageError> {
        // Make the applied state durable; the log up to it may then be purged.
        let mut b = WriteBatch::default();
        b.put(self.keys.single(SM_META), encode(&self.sm_meta));
        let store = self.store.clone();
        tokio::task::spawn_blocking(move || store.write(&b, true))
            .await
            .map_err(storage_err)?
            .map_err(storage_err)?;
        Ok(Snapshot {
            meta: self.meta.clone(),
            snapshot: Box::new(Cursor::new(Vec::new())),
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
        let mut batch = WriteBatch::default();
        let mut out = Vec::new();
        for entry in entries {
            self.meta.last_applied = Some(entry.log_id);
            match entry.payload {
                EntryPayload::Blank => out.push(BatchOutcome::default()),
                EntryPayload::Normal(data) => {
                    batch.ops.extend(data.mutations.ops);
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
        }
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<Cursor<Vec<u8>>>, StorageError> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta<u64, openraft::BasicNode>,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError> {
        let pairs: KvPairs = decode(snapshot.get_ref()).map_err(read_err)?;
        let meta_key = self.keys.single(SM_META);
        // The sender's meta record carries the id high-water mark.
        let mut sm_meta = match pairs.iter().find(|(k, _)| *k == meta_key) {
            Some((_, v)) => decode::<SmMeta>(v).map_err(read_err)?,
            None => SmMeta::default(),
        };
        sm_meta.last_applied = meta.last_log_id;
        sm_meta.membership = meta.last_membership.clone();
        let mut batch = WriteBatch::default();
        for (k, _) in self.dump()? {
            batch.delete(k);
        }
        for (k, v) in pairs {
            batch.put(k, v);
        }
        batch.put(meta_key, encode(&sm_meta));
        self.store.write(&batch, true).map_err(storage_err)?;
        self.meta = sm_meta;
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot<TypeConfig>>, StorageError> {
        if self.meta.last_applied.is_none() {
            return Ok(None);
        }
        // Produce the bytes of the current applied state, with matching meta.
        let pairs = self.dump()?;
        Ok(Some(Snapshot {
            meta: self.snapshot_meta(),
            snapshot: Box::new(Cursor::new(encode(&pairs))),
        }))
    }
}
