//! Growing and shrinking a replicated cluster (`saker admin node add ADDR`, `saker admin node
//! remove ID`): group replicas move between nodes one at a time, and the groups serve
//! throughout.
//!
//! A move of group g's replica from node A to node B: B takes a replica
//! ([`MetaRequest::HostReplica`]), which joins the group as a learner, catches up from the
//! log or a snapshot and becomes a voter; then the group's leader removes A's replica
//! ([`MetaRequest::LeaveGroup`]) and A drops it and its data ([`MetaRequest::DropReplica`]).
//! The group has at least its usual voters at every step, so a majority of them keeps it
//! serving. `add` moves replicas from the most loaded nodes to the new one until it holds its
//! share; `remove` moves every replica of the node to the least loaded others.

use std::collections::BTreeMap;
use std::time::Duration;

use saker_rpc::{ChannelPool, ClientTag, MetaError, MetaRequest, MetaService, ReplicaStatus};
use serde::{Deserialize, Serialize};

use crate::status::{leader_status, Groups};

/// How long a new replica may take to catch up and become a voter.
const CATCH_UP: Duration = Duration::from_secs(300);
/// How long a group may go without a leader before a change gives up.
const NO_LEADER: Duration = Duration::from_secs(30);
/// Between two looks at a group's membership.
const POLL: Duration = Duration::from_millis(100);

/// One replica moved.
#[derive(Debug, Serialize, Deserialize)]
pub struct Move {
    pub group: u32,
    /// The raft id and address of the replica removed.
    pub from_id: u64,
    pub from: String,
    /// The address of the node that took it.
    pub to: String,
}

/// What `node add` or `node remove` did.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Report {
    pub moves: Vec<Move>,
    /// Steps that did not complete but leave the cluster sound (a removed replica whose node
    /// was down to drop it, say).
    pub warnings: Vec<String>,
    /// What the change did to the chunkstores (none if the node runs none).
    #[serde(default)]
    pub chunks: Option<crate::node_chunks::ChunkReport>,
}

/// The node `node remove` takes away: a node number or raft id, or its RPC address.
#[derive(Clone, Debug)]
pub enum Target {
    Id(u64),
    Addr(String),
}

#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    #[error("{0}")]
    Refused(String),
    #[error(transparent)]
    Meta(#[from] MetaError),
}

/// The node changes of one process (one at a time).
pub struct Nodes {
    groups: Groups,
    pool: ChannelPool,
    lock: tokio::sync::Mutex<()>,
    /// Moves chunks too, where this process has the cluster's chunk store.
    chunks: Option<crate::node_chunks::ChunkMoves>,
}

/// Every group's leader view, by group.
type Views = BTreeMap<u32, ReplicaStatus>;

fn untagged() -> ClientTag {
    ClientTag { client: 0, seq: 0 }
}

impl Nodes {
    pub fn new(groups: Groups, pool: ChannelPool) -> Self {
        Self {
            groups,
            pool,
            lock: tokio::sync::Mutex::new(()),
            chunks: None,
        }
    }

    /// Node changes also move chunks, through `chunks`.
    pub fn with_chunks(mut self, chunks: crate::node_chunks::ChunkMoves) -> Self {
        self.chunks = Some(chunks);
        self
    }

    /// Moves replicas to the node at `addr` until it holds its share of them.
    pub async fn add(&self, addr: &str) -> Result<Report, NodeError> {
        let _one = self.lock.lock().await;
        let mut views = self.views().await?;
        let mut report = Report::default();
        let mut load = load(&views);
        load.entry(addr.to_string()).or_insert(0);
        let total: usize = load.values().sum();
        let share = total / load.len();
        while load[addr] < share {
            // A group the new node is not in, from the busiest node among its voters.
            let pick = views
                .iter()
                .filter(|(_, v)| !v.voters.iter().any(|(_, a)| a == addr))
                .flat_map(|(g, v)| v.voters.iter().map(move |(id, a)| (*g, *id, a.clone())))
                .max_by_key(|(g, _, a)| (load[a], std::cmp::Reverse(*g)));
            let Some((g, from_id, from)) = pick else {
                break;
            };
            if load[&from] <= load[addr] + 1 {
                break; // as even as it gets
            }
            self.move_replica(&mut views, g, (from_id, &from), addr, &mut report)
                .await?;
            *load.get_mut(&from).expect("counted") -= 1;
            *load.get_mut(addr).expect("counted") += 1;
        }
        if let Some(chunks) = &self.chunks {
            report.chunks = chunks.add(addr).await?;
            if report.chunks.is_none() {
                report.warnings.push(format!(
                    "the node at {addr} runs no chunkstore: chunks stay where they are"
                ));
            }
        }
        Ok(report)
    }

    /// Moves every replica of node `target` (a raft id, or a node number: every incarnation
    /// of it; or its address) to the least loaded other nodes, and drains its chunkstore.
    pub async fn remove(&self, target: Target) -> Result<Report, NodeError> {
        let _one = self.lock.lock().await;
        let mut views = self.views().await?;
        let mut report = Report::default();
        let mut load = load(&views);
        let is_it = |raft_id: u64, addr: &str| match &target {
            Target::Id(id) => raft_id == *id || crate::roles::position_of(raft_id) == *id,
            Target::Addr(a) => a == addr,
        };
        let theirs: Vec<(u32, u64, String)> = views
            .iter()
            .flat_map(|(g, v)| v.voters.iter().map(move |(i, a)| (*g, *i, a.clone())))
            .filter(|(_, i, a)| is_it(*i, a))
            .collect();
        let mut addrs: Vec<String> = theirs.iter().map(|(_, _, a)| a.clone()).collect();
        if let Target::Addr(a) = &target {
            addrs.push(a.clone());
        }
        addrs.sort();
        addrs.dedup();
        if addrs.is_empty() {
            return Err(NodeError::Refused(format!(
                "no group has a replica of node {target:?}: name it by its RPC address"
            )));
        }
        if let Some(chunks) = &self.chunks {
            chunks.check_remove(&addrs).await?;
        }
        for (g, from_id, from) in theirs {
            let voters = &views[&g].voters;
            let to = load
                .iter()
                .filter(|(a, _)| **a != from && !voters.iter().any(|(_, v)| v == *a))
                .min_by_key(|(a, n)| (**n, (*a).clone()))
                .map(|(a, _)| a.clone());
            let Some(to) = to else {
                return Err(NodeError::Refused(format!(
                    "no other node can take group {g}'s replica (every node has one): add a \
                     node first"
                )));
            };
            self.move_replica(&mut views, g, (from_id, &from), &to, &mut report)
                .await?;
            *load.get_mut(&from).expect("counted") -= 1;
            *load.get_mut(&to).expect("counted") += 1;
        }
        if let Some(chunks) = &self.chunks {
            for addr in &addrs {
                if let Some(r) = chunks.remove(addr).await? {
                    report.chunks = Some(r);
                }
            }
        }
        Ok(report)
    }

    /// Moves group `g`'s replica `from` to the node at `to` (module docs), then reads the
    /// group's membership again into `views`.
    async fn move_replica(
        &self,
        views: &mut Views,
        g: u32,
        (from_id, from): (u64, &str),
        to: &str,
        report: &mut Report,
    ) -> Result<(), NodeError> {
        tracing::info!(group = g, from_id, from, to, "moving a replica");
        let voters = views[&g].voters.clone();
        let node = self.pool.get(to)?.meta(g);
        let host = MetaRequest::HostReplica { group: g, voters };
        node.call(untagged(), host).await?;
        let set = self.groups[&g].clone();
        // Its replica joins by itself: wait until it votes.
        let deadline = tokio::time::Instant::now() + CATCH_UP;
        loop {
            let v = self.view(g).await?;
            if v.voters.iter().any(|(_, a)| a == to) {
                break;
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(NodeError::Refused(format!(
                    "group {g}'s new replica at {to} did not become a voter within {} s",
                    CATCH_UP.as_secs()
                )));
            }
            tokio::time::sleep(POLL).await;
        }
        set.call(untagged(), MetaRequest::LeaveGroup { id: from_id })
            .await?;
        let old = match self.pool.get(from) {
            Ok(channel) => channel
                .meta(g)
                .call(untagged(), MetaRequest::DropReplica { group: g })
                .await
                .map(|_| ()),
            Err(e) => Err(e),
        };
        if let Err(e) = old {
            report.warnings.push(format!(
                "group {g}: the replica at {from} left the group but was not dropped there \
                 ({e}); it serves nothing, and its data stays until the node is wiped"
            ));
        }
        views.insert(g, self.view(g).await?);
        report.moves.push(Move {
            group: g,
            from_id,
            from: from.to_string(),
            to: to.to_string(),
        });
        Ok(())
    }

    /// Every group's membership as its leader reports it.
    async fn views(&self) -> Result<Views, NodeError> {
        let mut views = BTreeMap::new();
        for &g in self.groups.keys() {
            views.insert(g, self.view(g).await?);
        }
        Ok(views)
    }

    /// Group `g`'s leader's state, waiting out an election.
    async fn view(&self, g: u32) -> Result<ReplicaStatus, NodeError> {
        let set = &self.groups[&g];
        let deadline = tokio::time::Instant::now() + NO_LEADER;
        loop {
            if let Some(s) = leader_status(set).await {
                for (_, addr) in crate::status::members(&s) {
                    set.learn(&addr);
                }
                return Ok(s);
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(NodeError::Refused(format!(
                    "group {g} has no leader: try again once it has one"
                )));
            }
            tokio::time::sleep(POLL).await;
        }
    }
}

/// Voters per node address.
fn load(views: &Views) -> BTreeMap<String, usize> {
    let mut load = BTreeMap::new();
    for v in views.values() {
        for (_, addr) in &v.voters {
            *load.entry(addr.clone()).or_insert(0) += 1;
        }
    }
    load
}
