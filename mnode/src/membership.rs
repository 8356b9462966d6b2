//! Who the voters of a group are. A group starts with one voter, the replica placed first,
//! and every other replica joins it: it asks the leader ([`MetaRequest::JoinGroup`]), which
//! adds it as a learner, waits until it has caught up (from the log or a snapshot), and then
//! makes it a voter. A node whose disk was lost comes back under a new raft id and joins the
//! same way, taking the place of its old id: a replica never votes under an id whose log it
//! has lost. A node that comes back at another address asks the same way: the leader
//! records its new address, and the group's messages reach it there.

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

/// Whether `id` votes in the group as `m` has it, at `addr`.
fn votes_at(m: &openraft::RaftMetrics<u64, BasicNode>, id: u64, addr: &str) -> bool {
    has_voter(m, id)
        && m.membership_config
            .membership()
            .get_node(&id)
            .is_some_and(|n| n.addr == addr)
}

fn failed(e: impl std::fmt::Display) -> MetaError {
    tracing::warn!(error = %e, "membership change failed");
    MetaError::Unavailable(format!("membership change: {e}"))
}

/// At the leader: makes `id` at `addr` a voter once it has caught up, replacing any other
/// voter at `addr`; a voter `id` at another address is recorded at `addr` (the same replica,
/// log and all, moved). `lock` serializes changes (openraft takes one at a time).
pub(crate) async fn admit(
    raft: &Raft,
    lock: &tokio::sync::Mutex<()>,
    id: u64,
    addr: &str,
) -> Result<(), MetaError> {
    let _one = lock.lock().await;
    let metrics = raft.metrics().borrow().clone();
    if votes_at(&metrics, id, addr) {
        return Ok(());
    }
    if has_voter(&metrics, id) {
        tracing::info!(id, addr, "a replica moved to another address");
        let node = [(id, BasicNode::new(addr))].into_iter().collect();
        raft.change_membership(openraft::ChangeMembers::SetNodes(node), false)
            .await
            .map_err(failed)?;
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

/// Asks `group` to admit this replica (`id` at `addr`) until it is a voter at `addr`.
pub(crate) async fn join(raft: Raft, group: ReplicaSet, id: u64, addr: String) {
    let tag = ClientTag { client: 0, seq: 0 };
    loop {
        if votes_at(&raft.metrics().borrow(), id, &addr) {
            return;
        }
        // A moved replica that leads already (the others name it at its old address)
        // records its address itself.
        let leading = raft.metrics().borrow().current_leader == Some(id);
        let asked = if leading {
            admit(&raft, &tokio::sync::Mutex::new(()), id, &addr).await
        } else {
            let req = MetaRequest::JoinGroup {
                id,
                addr: addr.clone(),
            };
            group.call(tag, req).await.map(|_| ())
        };
        if let Err(e) = asked {
            tracing::info!(id, error = %e, "joining the group failed; asking again");
        }
        // The new membership reaches this replica with the next entries it gets.
        let wait = raft.wait(Some(Duration::from_secs(1)));
        let _ = wait
            .metrics(|m| votes_at(m, id, &addr), "become a voter here")
            .await;
    }
}
