//! Leadership of the group: follows raft's metrics, rebuilds the leader's in-memory state
//! when elected and restarts its protocols with the other groups; tells callers the term it
//! serves in and where the leader is.

use std::sync::{Arc, Weak};
use std::time::Instant;

use saker_namespace::GroupId;
use saker_rpc::MetaError;

use super::Mnode;
use crate::executor::ParentUpdates;
use crate::keys::EXCEPTIONS;
use crate::leadership::Change;
use crate::metrics;
use crate::records::decode;

impl Mnode {
    /// Restarts what a leader does for the other groups from the replicated state: the dirty
    /// set is rebuilt (it is empty after a start or an election, which says nothing) and the
    /// change-log records not known to be pushed are pushed again.
    pub(super) fn resume_protocols(self: &Arc<Self>) {
        let Some(peers) = self.peers.get() else {
            return; // not connected yet: `connect` does this
        };
        let others: Vec<GroupId> = peers
            .keys()
            .copied()
            .filter(|g| *g != self.keys.group)
            .collect();
        if self.parent_updates == ParentUpdates::Async && !others.is_empty() {
            self.dirty.lock().await_reports(others);
            let me = self.clone();
            tokio::spawn(async move { me.rebuild_dirty_set().await });
        }
        let me = self.clone();
        tokio::spawn(async move {
            if let Err(e) = me.changes.push_upto(u64::MAX).await {
                tracing::warn!(group = me.group(), error = %e, "leftover change-log not pushed");
            }
        });
    }

    /// Rebuilds what a leader keeps in memory, from the replicated state it has applied
    /// through the blank entry of its term: the exception table it routes by, an empty
    /// dentry replica (it cannot tell which invalidations it missed), the coordinator's holds
    /// and fence from their records (`holds`), push cursors from the
    /// change-log itself, and the dirty set. The executor reloads its own state (inode ids,
    /// change-log seq) before its first batch of the term. An error (the store failed a read,
    /// or a record does not decode) means the replica must not serve: it would route by a
    /// stale table, or let writes through a coordinator's holds.
    pub(crate) async fn on_elected(self: &Arc<Self>, term: u64) -> Result<(), MetaError> {
        if let Some(b) = self.store_get(&self.keys.single(EXCEPTIONS))? {
            let table =
                decode(&b).map_err(|e| MetaError::Internal(format!("the exception table: {e}")))?;
            self.router.install(&table);
        }
        self.replica.lock().clear();
        let held = self.rebuild_holds().await?;
        if held > 0 {
            tracing::info!(group = self.group(), held, "coordinator holds kept");
        }
        self.changes.restart().await;
        self.resume_protocols();
        tracing::info!(group = self.group(), term, "leader of the group");
        Ok(())
    }

    /// The term this replica serves its group in, as it changes (0 while it does not).
    pub fn watch_serving(&self) -> tokio::sync::watch::Receiver<u64> {
        self.leadership.watch()
    }

    /// The RPC address of the group's leader as far as this replica knows.
    pub fn leader_hint(&self) -> Option<String> {
        self.leadership.leader()
    }

    /// Whether this replica may serve a request now (a read, or a write). A read that finds
    /// the leader lease run out (its group went quiet and sends no heartbeats) renews it with
    /// one heartbeat round first, one round at a time.
    pub(super) async fn ready(&self, read: bool) -> Result<(), MetaError> {
        let refused = match self.leadership.check(read) {
            Ok(()) => return Ok(()),
            Err(e) => e,
        };
        if !read || self.leadership.ready_term() == 0 {
            return Err(refused);
        }
        let _one = self.renewing.lock().await;
        if self.leadership.check(read).is_ok() {
            return Ok(()); // renewed while this read waited
        }
        let sent = Instant::now();
        let Some(raft) = self.engine.raft() else {
            return Err(refused);
        };
        if raft.get_read_log_id().await.is_err() {
            return Err(refused);
        }
        self.leadership.acked(sent);
        self.leadership.check(read)
    }
}

/// Follows the group's raft metrics for as long as the node lives: stops serving when this
/// replica no longer leads, and rebuilds in-memory state before serving in a new term.
pub(super) async fn watch_leadership(
    node: Weak<Mnode>,
    mut metrics: tokio::sync::watch::Receiver<openraft::RaftMetrics<u64, openraft::BasicNode>>,
) {
    let gauges = match node.upgrade() {
        Some(n) => metrics::RaftGauges::new(n.group()),
        None => return,
    };
    loop {
        let m = metrics.borrow_and_update().clone();
        let Some(n) = node.upgrade() else { return };
        if m.state == openraft::ServerState::Shutdown {
            match &m.running_state {
                // A shutdown asked for (SIGTERM): nothing failed.
                Err(openraft::error::Fatal::Stopped) => {
                    tracing::info!(group = n.group(), "raft stopped")
                }
                Err(e) => tracing::error!(group = n.group(), error = %e, "raft stopped"),
                Ok(()) => {}
            }
        }
        if let Change::Elected(term) = n.leadership.update(&m) {
            let raft = n.engine.raft();
            match n.on_elected(term).await {
                Ok(()) => {
                    if let Some(raft) = raft {
                        n.leadership.serve(term, &raft.metrics().borrow());
                    }
                }
                // As a single voter refuses to start: this replica stops, and the others
                // elect a leader that can read the group's state.
                Err(e) => {
                    tracing::error!(group = n.group(), term, error = %e, "the group's state is unreadable here; this replica stops");
                    if let Some(raft) = raft {
                        if let Err(e) = raft.shutdown().await {
                            tracing::error!(group = n.group(), error = %e, "raft did not stop");
                        }
                    }
                }
            }
        }
        gauges.set(n.leadership.ready_term() != 0, &m);
        drop(n);
        if metrics.changed().await.is_err() {
            return;
        }
    }
}
