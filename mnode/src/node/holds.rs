//! The coordinator's holds at this group (a frozen directory, a blocked path, a blocked name)
//! and the fence against a coordinator that lost its place.
//!
//! A hold is a record in the group's state machine ([`HOLDS`]), written through raft before
//! the call is answered, and held in memory at the leader ([`crate::frozen::FrozenDirs`]),
//! where requests wait on it. A new leader rebuilds the memory from the records before it
//! serves, so a hold survives a failover of its group: no write slips in between the failover
//! and the coordinator's next step. Holds are a set: taking one again (a retried call)
//! changes nothing, and releasing one that is not held does nothing.
//!
//! Every call carries its coordinator's term (its group-1 term; 0 in a one-process cluster).
//! The fence record keeps the highest term seen, and a call below it is refused (`Fenced`). A
//! new coordinator's `ThawAll` raises the fence and drops every hold, so its predecessor can
//! neither take nor release a hold after that.

use saker_rpc::{InodeId, MetaError, MetaResponse};
use serde::{Deserialize, Serialize};

use super::Mnode;
use crate::keys::{Keys, HOLDS};
use crate::records::{decode, encode};
use crate::store::{prefix_end, WriteBatch};
use crate::tree::{for_each_entry, StoreView};

/// What a coordinator holds at a group.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum Hold {
    /// A frozen directory (rmdir, directory rename).
    Dir(InodeId),
    /// A blocked path (a file moving to another group).
    Path(Vec<String>),
    /// A blocked name (its inodes moving between groups).
    Name(String),
}

/// The key kinds of the table: one hold, or the fence.
const KIND_HOLD: u8 = b'H';
const KIND_FENCE: u8 = b'F';

fn hold_prefix(keys: &Keys) -> Vec<u8> {
    let mut k = keys.table(HOLDS);
    k.push(KIND_HOLD);
    k
}

fn hold_key(keys: &Keys, hold: &Hold) -> Vec<u8> {
    let mut k = hold_prefix(keys);
    k.extend_from_slice(&encode(hold));
    k
}

fn fence_key(keys: &Keys) -> Vec<u8> {
    let mut k = keys.table(HOLDS);
    k.push(KIND_FENCE);
    k
}

/// Refuses a call of a coordinator older than the newest one the group has heard from.
fn check_fence(coord: u64, fence: u64) -> Result<(), MetaError> {
    if coord < fence {
        return Err(MetaError::Fenced { term: coord });
    }
    Ok(())
}

fn term_of(v: &[u8]) -> Result<u64, MetaError> {
    v.try_into()
        .map(u64::from_be_bytes)
        .map_err(|_| MetaError::Internal("a hold record is not a term".into()))
}

impl Mnode {
    /// Takes `hold` for the coordinator of term `coord` (module docs).
    pub(super) async fn take_hold(&self, coord: u64, hold: Hold) -> Result<(), MetaError> {
        let mut fence = self.holds.lock().await;
        check_fence(coord, *fence)?;
        let key = hold_key(&self.keys, &hold);
        let fresh = self.store_get(&key)?.is_none();
        if !fresh && coord <= *fence {
            return Ok(()); // held already: a retry
        }
        let mut batch = WriteBatch::default();
        batch.put(key, coord.to_be_bytes().to_vec());
        if coord > *fence {
            batch.put(fence_key(&self.keys), coord.to_be_bytes().to_vec());
        }
        // In memory first: requests evaluated from now on wait for it.
        if fresh {
            self.apply_hold(&hold, true);
        }
        if let Err(e) = self
            .engine
            .write_control(self.keys.group, batch, || self.leadership.refusal())
            .await
        {
            if fresh {
                self.apply_hold(&hold, false);
            }
            return Err(e);
        }
        *fence = coord.max(*fence);
        Ok(())
    }

    /// Takes `hold`, then waits until the writes evaluated before it are applied; answers
    /// `Done`, or the error having released the hold.
    pub(super) async fn hold_and_drain(
        &self,
        coord: u64,
        hold: Hold,
    ) -> Result<MetaResponse, MetaError> {
        self.take_hold(coord, hold.clone()).await?;
        if let Err(e) = self.drain_inflight().await {
            if let Err(e) = self.release_hold(coord, hold).await {
                tracing::warn!(group = self.group(), error = %e, "a hold not released");
            }
            return Err(e);
        }
        Ok(MetaResponse::Done)
    }

    /// Releases `hold` for the coordinator of term `coord`; nothing if it is not held.
    pub(super) async fn release_hold(&self, coord: u64, hold: Hold) -> Result<(), MetaError> {
        let fence = self.holds.lock().await;
        check_fence(coord, *fence)?;
        let key = hold_key(&self.keys, &hold);
        if self.store_get(&key)?.is_none() {
            return Ok(());
        }
        let mut batch = WriteBatch::default();
        batch.delete(key);
        self.engine
            .write_control(self.keys.group, batch, || self.leadership.refusal())
            .await?;
        self.apply_hold(&hold, false);
        Ok(())
    }

    /// Releases every hold and raises the fence to `coord` (a new coordinator's `ThawAll`);
    /// answers how many holds there were.
    pub(super) async fn release_all_holds(&self, coord: u64) -> Result<usize, MetaError> {
        let mut fence = self.holds.lock().await;
        check_fence(coord, *fence)?;
        let held = self.hold_records()?;
        let mut batch = WriteBatch::default();
        for (key, _) in &held {
            batch.delete(key.clone());
        }
        if coord > *fence {
            batch.put(fence_key(&self.keys), coord.to_be_bytes().to_vec());
        }
        if !batch.is_empty() {
            self.engine
                .write_control(self.keys.group, batch, || self.leadership.refusal())
                .await?;
        }
        *fence = coord.max(*fence);
        self.frozen.thaw_all();
        Ok(held.len())
    }

    /// A new leader's holds and fence, from the records it has applied (before it serves).
    pub(super) async fn rebuild_holds(&self) -> Result<usize, MetaError> {
        let mut fence = self.holds.lock().await;
        self.frozen.thaw_all();
        let held = self.hold_records()?;
        for (_, hold) in &held {
            self.apply_hold(hold, true);
        }
        *fence = match self.store_get(&fence_key(&self.keys))? {
            Some(v) => term_of(&v)?,
            None => 0,
        };
        Ok(held.len())
    }

    /// Every hold recorded here, with its key.
    fn hold_records(&self) -> Result<Vec<(Vec<u8>, Hold)>, MetaError> {
        let start = hold_prefix(&self.keys);
        let end = prefix_end(&start).expect("a table prefix has an end");
        let mut out = Vec::new();
        for_each_entry(&StoreView(self.store.as_ref()), &start, &end, |k, _| {
            let hold = decode(&k[start.len()..])
                .map_err(|e| MetaError::Internal(format!("a hold record: {e}")))?;
            out.push((k.to_vec(), hold));
            Ok(true)
        })?;
        Ok(out)
    }

    /// A read of the store, its failure as a [`MetaError`].
    pub(super) fn store_get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, MetaError> {
        self.store.get(key).map_err(crate::tree::internal)
    }

    /// Holds (`on`) or releases `hold` in memory.
    fn apply_hold(&self, hold: &Hold, on: bool) {
        match (hold, on) {
            (Hold::Dir(id), true) => self.frozen.freeze(*id),
            (Hold::Dir(id), false) => self.frozen.thaw(*id),
            (Hold::Path(p), true) => self.frozen.block(p),
            (Hold::Path(p), false) => self.frozen.unblock(p),
            (Hold::Name(n), true) => self.frozen.block_name(n),
            (Hold::Name(n), false) => self.frozen.unblock_name(n),
        }
    }
}
