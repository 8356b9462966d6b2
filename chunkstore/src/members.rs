//! The members of a replicated chunk store and where a chunk goes among them.
//!
//! Placement is rendezvous hashing of the chunk id over the names (RPC addresses) of the
//! members that take new chunks, so any process computes a chunk's replicas from its id and
//! the member list alone, and adding a member moves only the chunks it now ranks first for. A
//! member that is leaving (drained before it is removed) takes no new chunk: it ranks after
//! every placing member, so reads still find what it holds and a repair pass copies it away.

use std::sync::Arc;

use crate::id::ChunkId;
use crate::store::ChunkStore;

/// One chunkstore of the cluster.
#[derive(Clone)]
pub struct Member {
    /// Its name in placement (its RPC address): the same in every process.
    pub name: String,
    pub store: Arc<dyn ChunkStore>,
    /// In this process: read first.
    pub local: bool,
    /// New chunks may be placed here (false: it is being drained before it leaves).
    pub placing: bool,
}

impl Member {
    /// A member that takes new chunks.
    pub fn placing(name: impl Into<String>, store: Arc<dyn ChunkStore>, local: bool) -> Self {
        Self {
            name: name.into(),
            store,
            local,
            placing: true,
        }
    }
}

/// One member list and the replica count it allows: what every operation of the store reads
/// at its start, so a change of members never mixes two lists in one operation.
pub(crate) struct View {
    pub members: Vec<Member>,
    /// Copies per chunk: as many as asked, at most the placing members.
    pub replicas: usize,
    /// Copies a write waits for.
    pub quorum: usize,
}

/// A stable 64-bit score of (member, chunk): FNV-1a, then a splitmix64 finish.
fn score(name: &str, id: ChunkId) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in name.bytes().chain(id.0.to_le_bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h ^= h >> 30;
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^= h >> 27;
    h = h.wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

impl View {
    /// `members` (at least one placing), `replicas` copies asked for.
    pub fn new(members: Vec<Member>, replicas: usize) -> Self {
        let placing = members.iter().filter(|m| m.placing).count();
        assert!(placing > 0, "a cluster has a chunkstore that takes chunks");
        let replicas = replicas.clamp(1, placing);
        Self {
            members,
            replicas,
            quorum: replicas / 2 + 1,
        }
    }

    /// Member indexes by rank for `id`: the first `replicas` hold it; leaving members come
    /// after every placing one.
    pub fn placement(&self, id: ChunkId) -> Vec<usize> {
        let mut order: Vec<usize> = (0..self.members.len()).collect();
        order.sort_by_key(|&i| {
            let m = &self.members[i];
            (!m.placing, std::cmp::Reverse(score(&m.name, id)))
        });
        order
    }

    /// The order a read tries the members in, from the chunk's `placement`: this process's
    /// replica, the other replicas, then everyone else.
    pub fn read_order(&self, placement: &[usize]) -> Vec<usize> {
        let mut order = placement.to_vec();
        if let Some(pos) = order[..self.replicas]
            .iter()
            .position(|&i| self.members[i].local)
        {
            order[..=pos].rotate_right(1);
        }
        order
    }
}
