//! What a replica reports about itself: its raft state and the group's counters (also
//! published as metrics).

use std::sync::atomic::Ordering;

use saker_rpc::{GroupCounters, MetaError};

use super::Mnode;
use crate::metrics;
use crate::tree::{for_each_value, StoreView};

impl Mnode {
    /// This replica's raft state.
    pub fn raft_status(&self) -> saker_rpc::ReplicaStatus {
        let raft = match &self.engine {
            crate::engine::Engine::Raft(raft) => raft,
            crate::engine::Engine::Lease(lease) => return self.lease_status(lease),
        };
        let m = raft.metrics().borrow().clone();
        let membership = m.membership_config.membership();
        let nodes = |ids: &mut dyn Iterator<Item = u64>| -> Vec<(u64, String)> {
            ids.map(|id| {
                let addr = membership.get_node(&id).map(|n| n.addr.clone());
                (id, addr.unwrap_or_default())
            })
            .collect()
        };
        let voters = nodes(&mut membership.voter_ids());
        let learners = nodes(&mut membership.learner_ids());
        saker_rpc::ReplicaStatus {
            node_id: m.id,
            state: match m.state {
                openraft::ServerState::Leader => "leader",
                openraft::ServerState::Follower => "follower",
                openraft::ServerState::Candidate => "candidate",
                openraft::ServerState::Learner => "learner",
                openraft::ServerState::Shutdown => "shutdown",
            }
            .into(),
            serving: self.leadership.ready_term() != 0,
            term: m.current_term,
            leader: m.current_leader,
            last_log: m.last_log_index.unwrap_or(0),
            applied: m.last_applied.map_or(0, |l| l.index),
            snapshot: m.snapshot.map_or(0, |l| l.index),
            voters,
            learners,
            matched: m
                .replication
                .iter()
                .flatten()
                .map(|(id, l)| (*id, l.map_or(0, |l| l.index)))
                .collect(),
        }
    }

    /// The TiKV engine's stand-in for raft state: this process serves the group (as its
    /// "leader") in the lease's epoch, or does not.
    fn lease_status(&self, lease: &crate::lease::Lease) -> saker_rpc::ReplicaStatus {
        let term = self.leadership.ready_term();
        saker_rpc::ReplicaStatus {
            node_id: self.node_id,
            state: if term != 0 { "leader" } else { "follower" }.into(),
            serving: term != 0,
            term,
            leader: (term != 0).then_some(self.node_id),
            // The serving process is the group's only member as far as status goes.
            voters: vec![(self.node_id, lease.addr().to_string())],
            ..Default::default()
        }
    }

    /// This group's message counters and sizes.
    pub fn counters(&self) -> Result<GroupCounters, MetaError> {
        let mut inodes = 0u64;
        for_each_value(
            &StoreView(self.store.as_ref()),
            &self.keys.table(crate::keys::INODE),
            &self.keys.table_end(crate::keys::INODE),
            |_| {
                inodes += 1;
                Ok(true)
            },
        )?;
        metrics::INODES
            .with_label_values(&[&self.keys.group.to_string()])
            .set(inodes as i64);
        Ok(GroupCounters {
            forwards: self.forwards.load(Ordering::Relaxed),
            remote_lookups: self.remote_lookups.load(Ordering::Relaxed),
            change_pushes: self.changes.pushes.load(Ordering::Relaxed),
            dirty_marks: self.changes.marks.load(Ordering::Relaxed),
            pulls: self.pulls.load(Ordering::Relaxed),
            dirty_dirs: self.dirty.lock().len() as u64,
            batches: self.batch_counts.batches.load(Ordering::Relaxed),
            batched_ops: self.batch_counts.ops.load(Ordering::Relaxed),
            invalidations: self.invalidations.load(Ordering::Relaxed),
            replica_len: self.replica_len() as u64,
            inodes,
        })
    }

    /// Directory entries cached in this group's dentry replica.
    pub fn replica_len(&self) -> usize {
        self.replica.lock().len()
    }
}
