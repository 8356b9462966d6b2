//! The openraft group that makes an MNode durable and replicated: type config, log store,
//! state machine, snapshot files and the network over the RPC transport.
//!
//! A raft entry is one executor batch: the physical KV mutations it computed plus the per-op
//! results, so followers apply bytes and never re-resolve paths. Both are shared (`Arc`): the
//! executor's pipeline, the log store's tail of decoded entries and the state machine hold the
//! one batch instead of copies, and none decodes an entry the log was handed whole.

pub mod liveness;
// openraft's StorageError is large and not ours to box.
#[allow(clippy::result_large_err)]
mod log_store;
mod log_tail;
mod network;
pub mod snapshot;
#[allow(clippy::result_large_err)]
mod state_machine;

use saker_rpc::{MetaError, MetaResponse};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::store::WriteBatch;

pub use log_store::LogStore;
#[cfg(feature = "fuzzing")]
pub(crate) use network::{fuzz_raft_body, fuzz_raft_seeds};
pub use network::{Network, RaftPeers};
pub use state_machine::StateMachine;

/// The per-op results of a batch.
pub type Results = Vec<Result<MetaResponse, MetaError>>;

/// One executor batch, as a raft log entry. (An `Arc` encodes as what it holds: the entry's
/// bytes in the log and on the wire are those of the batch and results themselves.)
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct BatchEntry {
    pub mutations: Arc<WriteBatch>,
    pub results: Arc<Results>,
    /// Highest inode id allocated so far by the group.
    pub id_high_water: u64,
    /// The proposing batch's `traceparent`, so the leader's journal write joins its trace;
    /// never written to the log or sent to followers.
    #[serde(skip)]
    pub trace: Option<String>,
}

/// What applying a [`BatchEntry`] returns to the proposer (its results, shared with the entry).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct BatchOutcome {
    pub results: Arc<Results>,
}

openraft::declare_raft_types!(
    /// Raft types of an MNode group.
    pub TypeConfig:
        D = BatchEntry,
        R = BatchOutcome,
        NodeId = u64,
        Node = openraft::BasicNode,
        Entry = openraft::Entry<TypeConfig>,
        SnapshotData = tokio::fs::File,
);

pub type Raft = openraft::Raft<TypeConfig>;
pub type StorageError = openraft::StorageError<u64>;

pub(crate) fn storage_err(e: impl std::fmt::Display) -> StorageError {
    openraft::StorageIOError::write(openraft::AnyError::error(e.to_string())).into()
}

/// The refusal of a write to `group` while fewer than a majority of its voters take entries
/// for want of disk space ([`crate::space::quorum_refusal`]).
pub(crate) fn short_of_space(raft: &Raft, group: u32) -> Option<MetaError> {
    if !crate::space::anyone_short() {
        return None;
    }
    let m = raft.metrics();
    let m = m.borrow();
    let membership = m.membership_config.membership();
    let voters = membership
        .voter_ids()
        .filter_map(|id| membership.get_node(&id).map(|n| (id, n.addr.as_str())));
    crate::space::quorum_refusal(group, m.id, voters, liveness::DEAD_AFTER)
}

pub(crate) fn read_err(e: impl std::fmt::Display) -> StorageError {
    openraft::StorageIOError::read(openraft::AnyError::error(e.to_string())).into()
}

/// Proposes `mutations` as one entry of their own, outside the executor (control state the
/// group keeps: the exception table, the coordinator's records), and waits until it is
/// applied. A replica that no longer leads answers `not_leader()`.
pub(crate) async fn write_control(
    raft: &Raft,
    mutations: WriteBatch,
    not_leader: impl FnOnce() -> MetaError,
) -> Result<(), MetaError> {
    let entry = BatchEntry {
        mutations: Arc::new(mutations),
        ..Default::default()
    };
    match raft.client_write(entry).await {
        Ok(_) => Ok(()),
        Err(openraft::error::RaftError::APIError(
            openraft::error::ClientWriteError::ForwardToLeader(_),
        )) => Err(not_leader()),
        Err(e) => Err(MetaError::Unavailable(e.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use openraft::{CommittedLeaderId, Entry, EntryPayload, LogId};

    /// The entry as it was before its batch and results were shared.
    #[derive(Serialize, Deserialize)]
    struct OldBatchEntry {
        mutations: WriteBatch,
        results: Vec<Result<MetaResponse, MetaError>>,
        id_high_water: u64,
        #[serde(skip)]
        _trace: Option<String>,
    }

    /// Sharing the batch changes nothing in the log or on the wire: an entry encodes to the
    /// same bytes, and old bytes decode.
    #[test]
    fn a_shared_batch_encodes_as_the_batch_did() {
        let mut mutations = WriteBatch::default();
        mutations.put(b"inode/1".to_vec(), &b"attr"[..]);
        mutations.delete(b"payload/1/tags".to_vec());
        let results = vec![Ok(MetaResponse::Done), Err(MetaError::NotEmpty)];
        let old = OldBatchEntry {
            mutations: mutations.clone(),
            results: results.clone(),
            id_high_water: 42,
            _trace: Some("dropped".into()),
        };
        let new = BatchEntry {
            mutations: Arc::new(mutations.clone()),
            results: Arc::new(results),
            id_high_water: 42,
            trace: Some("dropped".into()),
        };
        let old_bytes = postcard::to_allocvec(&old).unwrap();
        assert_eq!(postcard::to_allocvec(&new).unwrap(), old_bytes);
        let back: BatchEntry = postcard::from_bytes(&old_bytes).unwrap();
        assert_eq!(*back.mutations, mutations);
        assert_eq!(back.id_high_water, 42);
        assert_eq!(back.results.len(), 2);
        // And as a log record (the raft entry around it).
        let log_id = LogId::new(CommittedLeaderId::new(3, 1), 7);
        let entry = Entry::<TypeConfig> {
            log_id,
            payload: EntryPayload::Normal(new),
        };
        let mut old_record = crate::records::encode(&log_id);
        old_record.push(1); // EntryPayload::Normal
        old_record.extend(old_bytes);
        assert_eq!(crate::records::encode(&entry), old_record);
    }
}
