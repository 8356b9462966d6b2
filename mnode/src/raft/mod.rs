//! The openraft group that makes an MNode durable and replicated: type config, log store,
//! state machine, snapshot files and the network over the RPC transport.
//!
//! A raft entry is one executor batch: the physical KV mutations it computed plus the per-op
//! results, so followers apply bytes and never re-resolve paths.

pub mod liveness;
// openraft's StorageError is large and not ours to box.
#[allow(clippy::result_large_err)]
mod log_store;
mod network;
pub mod snapshot;
#[allow(clippy::result_large_err)]
mod state_machine;

use saker_rpc::{MetaError, MetaResponse};
use serde::{Deserialize, Serialize};

use crate::store::WriteBatch;

pub use log_store::LogStore;
#[cfg(feature = "fuzzing")]
pub(crate) use network::{fuzz_raft_body, fuzz_raft_seeds};
pub use network::{Network, RaftPeers};
pub use state_machine::StateMachine;

/// One executor batch, as a raft log entry.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct BatchEntry {
    pub mutations: WriteBatch,
    pub results: Vec<Result<MetaResponse, MetaError>>,
    /// Highest inode id allocated so far by the group.
    pub id_high_water: u64,
    /// The proposing batch's `traceparent`, so the leader's journal write joins its trace;
    /// never written to the log or sent to followers.
    #[serde(skip)]
    pub trace: Option<String>,
}

/// What applying a [`BatchEntry`] returns to the proposer.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct BatchOutcome {
    pub results: Vec<Result<MetaResponse, MetaError>>,
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
        mutations,
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
