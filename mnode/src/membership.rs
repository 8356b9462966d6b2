//! Who the voters of a group are. A group starts with one voter, the replica placed first,
//! and every other replica joins it: it asks the leader ([`MetaRequest::JoinGroup`]), which
//! adds it as a learner, waits until it has caught up (from the log or a snapshot), and then
//! makes it a voter. A node whose disk was lost comes back under a new raft id and joins the
//! same way, taking the place of its old id: a replica never votes under an id whose log it
//! has lost.

use std::collections::BTreeSet;
use std::time::Duration;

use openraft::BasicNode;
use saker_rpc::{ClientTag, MetaError, MetaRequest, MetaService, ReplicaSet};

use crate::raft::Raft;

fn has_voter(m: &openraft::RaftMetrics<u64, BasicNode>, id: u64) -> bool {
    m.membership_config
        .membership()
        .voter_ids()
        .any(|v| v == id)
}

fn is_voter(raft: &Raft, id: u64) -> bool {
    has_voter(&raft.metrics().borrow(), id)
}

fn failed(e: impl std::fmt::Display) -> MetaError {
    tracing::warn!(error = %e, "membership change failed");
    MetaError::Unavailable(format!("membership change: {e}"))
}

/// At the leader: makes `id` at `addr` a voter once it has caught up, replacing any other
/// voter at `addr`. `lock` serializes changes (openraft takes one at a time).
pub(crate) async fn admit(
    raft: &Raft,
    lock: &tokio::sync::Mutex<()>,
    id: u64,
    addr: &str,
) -> Result<(), MetaError> {
    let _one = lock.lock().await;
    if is_voter(raft, id) {
        return Ok(());
    }
    raft.add_learner(id, BasicNode::new(addr), true)
        .await
        .map_err(failed)?;
    let membership = raft.metrics().borrow().membership_config.clone();
    let m = membership.membership();
    let voters: BTreeSet<u64> = m
        .voter_ids()
        .filter(|v| m.get_node(v).is_none_or(|n| n.addr != addr))
        .chain([id])
        .collect();
    tracing::info!(id, addr, ?voters, "admitting a replica");
    raft.change_membership(voters, false)
        .await
        .map_err(failed)?;
    Ok(())
}

/// At the leader: removes replica `id` from the group (voter or learner), unless it is the
/// last voter. `lock` as for [`admit`].
pub(crate) async fn leave(
    raft: &Raft,
    lock: &tokio::sync::Mutex<()>,
    id: u64,
) -> Result<(), MetaError> {
    let _one = lock.lock().await;
    let membership = raft.metrics().borrow().membership_config.clone();
    let m = membership.membership();
    if m.get_node(&id).is_none() {
        return Ok(());
    }
    let voters: BTreeSet<u64> = m.voter_ids().filter(|v| *v != id).collect();
    if voters.is_empty() {
        return Err(MetaError::Invalid(format!(
            "replica {id} is the group's last voter"
        )));
    }
    tracing::info!(id, ?voters, "removing a replica");
    if m.voter_ids().any(|v| v == id) {
        raft.change_membership(voters, false)
            .await
            .map_err(failed)?;
    } else {
        let learner = BTreeSet::from([id]);
        raft.change_membership(openraft::ChangeMembers::RemoveNodes(learner), false)
            .await
            .map_err(failed)?;
    }
    Ok(())
}

/// Asks `group` to admit this replica (`id` at `addr`) until it is a voter.
pub(crate) async fn join(raft: Raft, group: ReplicaSet, id: u64, addr: String) {
    let tag = ClientTag { client: 0, seq: 0 };
    loop {
        if is_voter(&raft, id) {
            return;
        }
        let req = MetaRequest::JoinGroup {
            id,
            addr: addr.clone(),
        };
        if let Err(e) = group.call(tag, req).await {
            tracing::info!(id, error = %e, "joining the group failed; asking again");
        }
        // The new membership reaches this replica with the next entries it gets.
        let wait = raft.wait(Some(Duration::from_secs(1)));
        let _ = wait.metrics(|m| has_voter(m, id), "become a voter").await;
    }
}
