//! Where a chunk goes among the members: rendezvous hashing of the chunk id over the members'
//! stable ids, spread over their zones.
//!
//! Every process computes a chunk's replicas from its id and the member list alone. A member is
//! ranked by the score of (its id, the chunk): an id never changes (a member that moves to
//! another RPC address keeps it), so an address change moves no chunk. Zones (failure
//! domains: racks, rooms) spread the copies: the replicas are the best-scored member of each
//! of the best-scored zones, as many zones as there are copies, and only when there are fewer
//! zones than copies the best-scored members left fill the rest. Hence adding a member moves
//! only the chunks it now ranks first in its zone for, and adding a zone moves one copy of a
//! chunk (to the new zone) where the chunk had two in one zone. A member that is leaving
//! (drained before it is removed) takes no new chunk: it ranks after every placing member, so
//! reads still find what it holds and a repair pass copies it away.

use std::collections::HashSet;

use crate::error::ChunkError;
use crate::id::ChunkId;
use crate::members::Member;

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

/// Indexes of `members` by rank for chunk `id`, `replicas` copies (module docs): the first
/// `replicas` hold it (in score order), then the other placing members by score, then the
/// leaving ones.
pub fn rank(members: &[Member], replicas: usize, id: ChunkId) -> Vec<usize> {
    let mut order: Vec<usize> = (0..members.len()).collect();
    order.sort_by_key(|&i| {
        let m = &members[i];
        (!m.placing, std::cmp::Reverse(score(&m.name, id)))
    });
    let placing = members.iter().filter(|m| m.placing).count();
    let replicas = replicas.min(placing);
    let zones: HashSet<&str> = members
        .iter()
        .filter(|m| m.placing)
        .map(|m| m.zone.as_str())
        .collect();
    // The best member of each zone, best zones first, as many as copies.
    let spread = replicas.min(zones.len());
    let mut held = vec![false; members.len()];
    let mut used: HashSet<&str> = HashSet::new();
    let mut taken = 0;
    for &i in &order[..placing] {
        if taken == spread {
            break;
        }
        if used.insert(members[i].zone.as_str()) {
            held[i] = true;
            taken += 1;
        }
    }
    // Fewer zones than copies: the best members left.
    for &i in &order[..placing] {
        if taken == replicas {
            break;
        }
        if !held[i] {
            held[i] = true;
            taken += 1;
        }
    }
    // A stable partition keeps the score order on both sides.
    let (mut first, rest): (Vec<usize>, Vec<usize>) = order.into_iter().partition(|&i| held[i]);
    first.extend(rest);
    first
}

/// The members that hold the `shards` shards of erasure-coded chunk `id`, shard i on the i-th:
/// distinct placing members, taken a round at a time over the zones (each zone's next best by
/// score, zones in the order of their best), so no zone holds more than `ceil(shards / zones)`
/// of them. Fewer placing members than shards is an error: the layout does not fit.
pub fn shard_places(
    members: &[Member],
    shards: usize,
    id: ChunkId,
) -> Result<Vec<usize>, ChunkError> {
    let placing: Vec<usize> = {
        let mut p: Vec<usize> = (0..members.len()).filter(|&i| members[i].placing).collect();
        p.sort_by_key(|&i| std::cmp::Reverse(score(&members[i].name, id)));
        p
    };
    if placing.len() < shards {
        return Err(ChunkError::Unavailable(format!(
            "{shards} shards need {shards} chunkstores that take chunks; the cluster has {}",
            placing.len()
        )));
    }
    // Each zone's members, best first; zones in the order of their best member.
    let mut zones: Vec<(&str, std::collections::VecDeque<usize>)> = Vec::new();
    for &i in &placing {
        let zone = members[i].zone.as_str();
        match zones.iter_mut().find(|(z, _)| *z == zone) {
            Some((_, q)) => q.push_back(i),
            None => zones.push((zone, std::collections::VecDeque::from([i]))),
        }
    }
    let mut out = Vec::with_capacity(shards);
    while out.len() < shards {
        for (_, q) in zones.iter_mut() {
            if out.len() == shards {
                break;
            }
            if let Some(i) = q.pop_front() {
                out.push(i);
            }
        }
    }
    Ok(out)
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
        rank(&self.members, self.replicas, id)
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

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::sync::Arc;

    use super::*;
    use crate::mem::MemChunkStore;

    /// Members `(id, addr, zone)`, all placing.
    fn members(list: &[(&str, &str, &str)]) -> Vec<Member> {
        let store = Arc::new(MemChunkStore::new());
        list.iter()
            .map(|(id, addr, zone)| {
                let mut m = Member::placing(*id, store.clone(), false);
                m.addr = addr.to_string();
                m.zone = zone.to_string();
                m
            })
            .collect()
    }

    /// The ids holding chunk `id`.
    fn held(ms: &[Member], replicas: usize, id: ChunkId) -> BTreeSet<String> {
        rank(ms, replicas, id)[..replicas]
            .iter()
            .map(|&i| ms[i].name.clone())
            .collect()
    }

    fn zone_list(zones: &[(&str, usize)]) -> Vec<(String, String, String)> {
        let mut out = Vec::new();
        for (z, n) in zones {
            for k in 0..*n {
                let id = format!("{z}{k}");
                out.push((id.clone(), format!("{id}:9902"), z.to_string()));
            }
        }
        out
    }

    fn of(list: &[(String, String, String)]) -> Vec<Member> {
        let refs: Vec<(&str, &str, &str)> = list
            .iter()
            .map(|(a, b, c)| (a.as_str(), b.as_str(), c.as_str()))
            .collect();
        members(&refs)
    }

    #[test]
    fn copies_go_to_distinct_zones_when_there_are_enough() {
        let ms = of(&zone_list(&[("a", 2), ("b", 3), ("c", 1)]));
        let mut per_member = vec![0usize; ms.len()];
        for _ in 0..3000 {
            let id = ChunkId::random();
            let order = rank(&ms, 3, id);
            let zones: BTreeSet<&str> = order[..3].iter().map(|&i| ms[i].zone.as_str()).collect();
            assert_eq!(zones.len(), 3, "{id}: {order:?}");
            assert_eq!(order.len(), ms.len());
            for &i in &order[..3] {
                per_member[i] += 1;
            }
        }
        // The lone member of zone c holds every chunk; a's two share theirs.
        assert_eq!(per_member[5], 3000);
        assert!(per_member[..2].iter().all(|&n| n > 1200), "{per_member:?}");
        // Two zones for three copies: one per zone, then the best left.
        let ms = of(&zone_list(&[("a", 2), ("b", 2)]));
        for _ in 0..1000 {
            let order = rank(&ms, 3, ChunkId::random());
            let zones: BTreeSet<&str> = order[..3].iter().map(|&i| ms[i].zone.as_str()).collect();
            assert_eq!(zones.len(), 2);
        }
    }

    #[test]
    fn shards_go_to_distinct_members_balanced_over_zones() {
        // 3 zones of 2, 3 and 4 members: 6 shards, at most 2 a zone.
        let ms = of(&zone_list(&[("a", 2), ("b", 3), ("c", 4)]));
        let mut firsts = BTreeSet::new();
        for _ in 0..2000 {
            let id = ChunkId::random();
            let places = shard_places(&ms, 6, id).unwrap();
            assert_eq!(places, shard_places(&ms, 6, id).unwrap(), "stable");
            let distinct: BTreeSet<usize> = places.iter().copied().collect();
            assert_eq!(distinct.len(), 6, "{places:?}");
            for z in ["a", "b", "c"] {
                let n = places.iter().filter(|&&i| ms[i].zone == z).count();
                assert_eq!(n, 2, "zone {z}: {places:?}");
            }
            firsts.insert(places[0]);
        }
        // The first shard is spread over every member.
        assert_eq!(firsts.len(), ms.len());
        // 8+3 on 11 members of one zone: all of them; on 10, refused.
        let ms = of(&zone_list(&[("", 11)]));
        assert_eq!(shard_places(&ms, 11, ChunkId(5)).unwrap().len(), 11);
        let e = shard_places(&ms[..10], 11, ChunkId(5)).unwrap_err();
        assert!(e.to_string().contains("11 shards"), "{e}");
    }

    #[test]
    fn without_zones_the_placement_is_plain_rendezvous_hashing() {
        let ms = of(&zone_list(&[("", 5)]));
        for _ in 0..1000 {
            let id = ChunkId::random();
            let mut by_score: Vec<usize> = (0..ms.len()).collect();
            by_score.sort_by_key(|&i| std::cmp::Reverse(score(&ms[i].name, id)));
            assert_eq!(rank(&ms, 3, id), by_score);
        }
    }

    #[test]
    fn an_address_change_moves_no_chunk() {
        let before = of(&zone_list(&[("a", 2), ("b", 2), ("c", 2)]));
        let mut moved = zone_list(&[("a", 2), ("b", 2), ("c", 2)]);
        moved[3].1 = "10.0.0.9:7000".into();
        let after = of(&moved);
        for _ in 0..1000 {
            let id = ChunkId::random();
            assert_eq!(rank(&before, 3, id), rank(&after, 3, id));
        }
    }

    #[test]
    fn a_new_zone_moves_one_copy_and_a_new_member_few_chunks() {
        let old = of(&zone_list(&[("a", 2), ("b", 2)]));
        let new = of(&zone_list(&[("a", 2), ("b", 2), ("c", 2)]));
        for _ in 0..2000 {
            let id = ChunkId::random();
            let (o, n) = (held(&old, 3, id), held(&new, 3, id));
            // The copy that shared a zone moves to zone c; the other two stay.
            assert_eq!(o.intersection(&n).count(), 2, "{o:?} -> {n:?}");
        }
        // One more member in zone a (of three zones): only what it now ranks first in a for.
        let grown = of(&zone_list(&[("a", 3), ("b", 2), ("c", 2)]));
        let mut changed = 0;
        for _ in 0..3000 {
            let id = ChunkId::random();
            let (o, n) = (held(&new, 3, id), held(&grown, 3, id));
            let kept = o.intersection(&n).count();
            assert!(kept >= 2, "{o:?} -> {n:?}");
            if kept == 2 {
                assert!(n.contains("a2"));
                changed += 1;
            }
        }
        // A third of the chunks (a2 is best of three in zone a), not more.
        assert!((800..1200).contains(&changed), "{changed} of 3000 moved");
    }

    #[test]
    fn a_leaving_member_ranks_after_every_placing_one() {
        let mut ms = of(&zone_list(&[("a", 2), ("b", 2), ("c", 2)]));
        ms[4].placing = false;
        for _ in 0..500 {
            let order = rank(&ms, 3, ChunkId::random());
            assert_eq!(order[5], 4);
            let zones: BTreeSet<&str> = order[..3].iter().map(|&i| ms[i].zone.as_str()).collect();
            assert_eq!(zones.len(), 3);
        }
    }
}
