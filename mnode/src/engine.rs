//! How a group commits its batches: through its openraft group (the embedded engines) or,
//! on the TiKV engine, under a lease in TiKV ([`crate::lease`]), with no raft at all.

use std::sync::Arc;

use futures::future::BoxFuture;
use saker_rpc::{MetaError, MetaResponse};

use crate::lease::Lease;
use crate::raft::{BatchEntry, Raft};
use crate::store::WriteBatch;

/// The per-op results of a committed batch, or why it did not commit.
pub(crate) type Outcome = Result<Vec<Result<MetaResponse, MetaError>>, String>;

#[derive(Clone)]
pub(crate) enum Engine {
    Raft(Raft),
    Lease(Arc<Lease>),
}

impl Engine {
    /// Proposes `entry`: returns once it is queued (raft orders entries by then), with what
    /// answers once it is committed and applied.
    pub async fn propose(&self, entry: BatchEntry) -> BoxFuture<'static, Outcome> {
        match self {
            Engine::Raft(raft) => {
                let rx = raft.client_write_ff(entry).await;
                Box::pin(async move {
                    match rx {
                        Ok(rx) => match rx.await {
                            Ok(Ok(resp)) => Ok(Arc::unwrap_or_clone(resp.data.results)),
                            Ok(Err(e)) => Err(e.to_string()),
                            Err(e) => Err(e.to_string()),
                        },
                        Err(e) => Err(e.to_string()),
                    }
                })
            }
            Engine::Lease(lease) => {
                let lease = lease.clone();
                Box::pin(async move { lease.commit(entry).await })
            }
        }
    }

    /// Commits `mutations` as an entry of their own, outside the executor (control state the
    /// group keeps: the exception table, the coordinator's records), and waits until it is
    /// applied. A replica that does not serve answers `not_leader()`; a group short of space
    /// ([`Self::short_of_space`]) refuses it before it reaches the log.
    pub async fn write_control(
        &self,
        group: u32,
        mutations: WriteBatch,
        not_leader: impl FnOnce() -> MetaError,
    ) -> Result<(), MetaError> {
        if let Some(refusal) = self.short_of_space(group) {
            return Err(refusal);
        }
        match self {
            Engine::Raft(raft) => crate::raft::write_control(raft, mutations, not_leader).await,
            Engine::Lease(lease) => lease.write_control(mutations, not_leader).await,
        }
    }

    /// Why a write to `group` would commit nowhere for want of disk space, if it would: on
    /// raft, when fewer than a majority of the voters have room ([`crate::space`]). The
    /// TiKV engine keeps nothing on this node's disk.
    pub fn short_of_space(&self, group: u32) -> Option<MetaError> {
        match self {
            Engine::Raft(raft) => crate::raft::short_of_space(raft, group),
            Engine::Lease(_) => None,
        }
    }

    /// The group's raft instance, if it has one.
    pub fn raft(&self) -> Option<&Raft> {
        match self {
            Engine::Raft(raft) => Some(raft),
            Engine::Lease(_) => None,
        }
    }
}
