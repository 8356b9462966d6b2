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
//! share, then moves voters until each group spans as many zones as it can
//! ([`crate::spread::next_move`]; run it again for a node already added, after zones
//! changed); `remove` moves every replica of the node to the least loaded others, in a zone
//! the group lacks where there is one.

use std::collections::BTreeMap;
use std::time::Duration;

use saker_rpc::{ChannelPool, ClientTag, MetaError, MetaRequest, MetaService, ReplicaStatus};
use serde::{Deserialize, Serialize};

use crate::placement_status::Placement;
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
/// Each node's zone, by address.
type Zones = BTreeMap<String, String>;

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

    /// The zone of every node, as the chunkstore record has it ("" where it has none), the
    /// node at `addr` in `zone` if one is given.
    async fn zones(&self, addr: &str, zone: Option<&str>) -> Result<Zones, NodeError> {
        let mut zones = Zones::new();
        if let Some(chunks) = &self.chunks {
            for e in chunks.membership().await?.members {
                zones.insert(e.addr, e.zone);
            }
        }
        if let Some(z) = zone {
            zones.insert(addr.to_string(), z.to_string());
        }
        Ok(zones)
    }

    /// Moves replicas to the node at `addr` (in `zone`, if given) until it holds its share of
    /// them, then spreads voters over zones.
    pub async fn add(&self, addr: &str, zone: Option<&str>) -> Result<Report, NodeError> {
        let _one = self.lock.lock().await;
        let mut views = self.views().await?;
        let mut report = Report::default();
        let mut load = load(&views);
        let zones = self.zones(addr, zone).await?;
        let zone_of = |a: &str| zones.get(a).map_or("", String::as_str);
        load.entry(addr.to_string()).or_insert(0);
        let total: usize = load.values().sum();
        let share = total / load.len();
        while load[addr] < share {
            // A group the new node is not in, from the busiest node among its voters whose
            // move leaves the group in as many zones (in more, if one does).
            let pick = views
                .iter()
                .filter(|(_, v)| !v.voters.iter().any(|(_, a)| a == addr))
                .flat_map(|(g, v)| {
                    v.voters.iter().map(move |(id, a)| {
                        let gain = crate::spread::gain(&v.voters, a, addr, zone_of);
                        (*g, *id, a.clone(), gain)
                    })
                })
                .filter(|(_, _, _, gain)| *gain >= 0)
                .max_by_key(|(g, _, a, gain)| (load[a], *gain, std::cmp::Reverse(*g)));
            let Some((g, from_id, from, _)) = pick else {
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
        self.spread(&mut views, &mut load, zone_of, &mut report)
            .await?;
        if let Some(chunks) = &self.chunks {
            report.chunks = chunks.add(addr, zone).await?;
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
            Target::Id(id) => raft_id == *id || crate::server::config::position_of(raft_id) == *id,
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
        let zones = self.zones("", None).await?;
        let zone_of = |a: &str| zones.get(a).map_or("", String::as_str);
        for (g, from_id, from) in theirs {
            let voters = &views[&g].voters;
            // Least loaded, in a zone the others of the group are not in where one is.
            let kept: Vec<&str> = voters
                .iter()
                .filter(|(_, v)| *v != from)
                .map(|(_, v)| zone_of(v.as_str()))
                .collect();
            let to = load
                .iter()
                .filter(|(a, _)| **a != from && !voters.iter().any(|(_, v)| v == *a))
                .min_by_key(|(a, n)| (kept.contains(&zone_of(a.as_str())), **n, (*a).clone()))
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

    /// Moves voters, one at a time, until every group spans as many zones as it can.
    async fn spread<'a>(
        &self,
        views: &mut Views,
        load: &mut BTreeMap<String, usize>,
        zone_of: impl Fn(&str) -> &'a str + Copy,
        report: &mut Report,
    ) -> Result<(), NodeError> {
        let nodes: Vec<String> = load.keys().cloned().collect();
        // Each move gives a group a zone: at most one per voter.
        let most: usize = views.values().map(|v| v.voters.len()).sum();
        for _ in 0..most {
            let voters: crate::spread::Voters =
                views.iter().map(|(g, v)| (*g, v.voters.clone())).collect();
            let Some(m) = crate::spread::next_move(&voters, &nodes, zone_of, load) else {
                break;
            };
            self.move_replica(views, m.group, (m.from_id, &m.from), &m.to, report)
                .await?;
            *load.entry(m.from).or_insert(1) -= 1;
            *load.entry(m.to).or_insert(0) += 1;
        }
        Ok(())
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

    /// Where the voters and the chunk copies are, by zone ([`Placement`]).
    pub async fn placement(&self) -> Result<Placement, NodeError> {
        let views = self.views().await?;
        let voters = views.iter().map(|(g, v)| (*g, v.voters.clone())).collect();
        let (members, copies) = match &self.chunks {
            Some(chunks) => (chunks.membership().await?, chunks.copies()),
            None => (crate::chunk_members::Membership { members: vec![] }, 0),
        };
        Ok(Placement::new(&voters, members, copies))
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
