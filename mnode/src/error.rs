//! Errors that stop an MNode (as opposed to per-op [`saker_rpc::MetaError`]s).

use crate::store::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum MnodeError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("raft: {0}")]
    Raft(String),
    #[error("configuration: {0}")]
    Config(String),
    #[error("state machine: {0}")]
    State(String),
}

impl MnodeError {
    pub(crate) fn raft(e: impl std::fmt::Display) -> Self {
        MnodeError::Raft(e.to_string())
    }
}
