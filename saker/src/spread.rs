//! Which nodes a group's voters go to, spread over zones: pure rules, no I/O.
//!
//! A group whose voters sit in distinct zones keeps a majority when a whole zone is lost, so
//! voters go to distinct zones whenever the cluster has at least as many zones as a group has
//! voters (and to as many zones as there are otherwise). At creation ([`initial`]) the nodes
//! are taken in turn from each zone; later, when zones are added or nodes change zone,
//! [`next_move`] picks one voter move at a time that gives a group a zone it lacks.

use std::collections::{BTreeMap, BTreeSet};

/// The voters of groups 1..=`groups`, `r` each, as indexes of nodes whose zones are `zones`
/// (node i in zone `zones[i]`). Without zones (all alike) group g is on nodes g, g+1, ...
/// modulo the node count, as it was before zones. With zones, group g walks the nodes from
/// position g of an order that takes one node of each zone in turn, takes the least busy
/// node of each zone it meets until it has a voter per zone (or all its voters), then (fewer
/// zones than voters) the least busy nodes left.
pub fn initial(zones: &[String], groups: u32, r: usize) -> Vec<Vec<usize>> {
    let n = zones.len();
    let r = r.min(n);
    let distinct = zones.iter().collect::<BTreeSet<_>>().len();
    if distinct <= 1 {
        return (0..groups as usize)
            .map(|g| (0..r).map(|k| (g + k) % n).collect())
            .collect();
    }
    let order = interleaved(zones);
    let mut load = vec![0usize; n];
    (0..groups as usize)
        .map(|g| {
            let walk: Vec<usize> = (0..n).map(|k| order[(g + k) % n]).collect();
            // The least busy of `candidates`, the first met on the walk on a tie.
            let least = |load: &[usize], ok: &dyn Fn(usize) -> bool| {
                walk.iter()
                    .copied()
                    .filter(|&i| ok(i))
                    .min_by_key(|&i| load[i])
            };
            let mut voters: Vec<usize> = Vec::with_capacity(r);
            for &i in &walk {
                if voters.len() == r.min(distinct) {
                    break;
                }
                if voters.iter().any(|&v| zones[v] == zones[i]) {
                    continue;
                }
                let pick = least(&load, &|j| zones[j] == zones[i]).expect("i is one");
                voters.push(pick);
                load[pick] += 1;
            }
            while voters.len() < r {
                let pick = least(&load, &|j| !voters.contains(&j)).expect("r <= n");
                voters.push(pick);
                load[pick] += 1;
            }
            voters
        })
        .collect()
}

/// Node indexes taking one node of each zone in turn (zones in order of first appearance,
/// nodes of a zone in index order).
fn interleaved(zones: &[String]) -> Vec<usize> {
    let mut by_zone: Vec<(&String, Vec<usize>)> = Vec::new();
    for (i, z) in zones.iter().enumerate() {
        match by_zone.iter_mut().find(|(name, _)| *name == z) {
            Some((_, nodes)) => nodes.push(i),
            None => by_zone.push((z, vec![i])),
        }
    }
    let deepest = by_zone.iter().map(|(_, v)| v.len()).max().unwrap_or(0);
    (0..deepest)
        .flat_map(|k| by_zone.iter().filter_map(move |(_, v)| v.get(k).copied()))
        .collect()
}

/// One voter move: group, the raft id and address of the voter that goes, where it goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Move {
    pub group: u32,
    pub from_id: u64,
    pub from: String,
    pub to: String,
}

/// A group's voters: raft id and node address.
pub type Voters = BTreeMap<u32, Vec<(u64, String)>>;

/// How many distinct zones `voters` span.
fn zones_of<'z>(voters: &[(u64, String)], zone: &impl Fn(&str) -> &'z str) -> usize {
    voters
        .iter()
        .map(|(_, a)| zone(a))
        .collect::<BTreeSet<_>>()
        .len()
}

/// The next move that gives a group a zone it lacks (module docs), if one does: the group
/// spans fewer zones than it could (its voter count, at most the zones of `nodes`), one of
/// its voters shares a zone with another (the busiest of those, by `load`, goes) and a node
/// of a zone it does not span can take the voter (the least busy of those).
pub fn next_move<'z>(
    voters: &Voters,
    nodes: &[String],
    zone: impl Fn(&str) -> &'z str,
    load: &BTreeMap<String, usize>,
) -> Option<Move> {
    let all: BTreeSet<&str> = nodes.iter().map(|a| zone(a)).collect();
    let busy = |a: &str| load.get(a).copied().unwrap_or(0);
    for (&g, vs) in voters {
        if zones_of(vs, &zone) >= vs.len().min(all.len()) {
            continue;
        }
        let spanned: BTreeSet<&str> = vs.iter().map(|(_, a)| zone(a)).collect();
        let shared = |a: &str| vs.iter().filter(|(_, b)| zone(b) == zone(a)).count() > 1;
        let from = vs
            .iter()
            .filter(|(_, a)| shared(a))
            .max_by_key(|(_, a)| (busy(a), std::cmp::Reverse(a.clone())));
        let to = nodes
            .iter()
            .filter(|a| !spanned.contains(zone(a)))
            .min_by_key(|a| (busy(a), (*a).clone()));
        if let (Some((from_id, from)), Some(to)) = (from, to) {
            return Some(Move {
                group: g,
                from_id: *from_id,
                from: from.clone(),
                to: to.clone(),
            });
        }
    }
    None
}

/// How many more zones `voters` span once the voter at `from` is replaced by one at `to`
/// (negative: fewer).
pub fn gain<'z>(
    voters: &[(u64, String)],
    from: &str,
    to: &str,
    zone: impl Fn(&str) -> &'z str,
) -> i64 {
    let after: Vec<(u64, String)> = voters
        .iter()
        .map(|(id, a)| match a == from {
            true => (*id, to.to_string()),
            false => (*id, a.clone()),
        })
        .collect();
    zones_of(&after, &zone) as i64 - zones_of(voters, &zone) as i64
}

/// Groups whose voters share a zone while the cluster has enough zones for them not to
/// (what `saker admin status` warns about).
pub fn unspread<'z>(voters: &Voters, nodes: &[String], zone: impl Fn(&str) -> &'z str) -> Vec<u32> {
    let all = nodes.iter().map(|a| zone(a)).collect::<BTreeSet<_>>().len();
    voters
        .iter()
        .filter(|(_, vs)| zones_of(vs, &zone) < vs.len().min(all))
        .map(|(g, _)| *g)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn zones(list: &[&str]) -> Vec<String> {
        list.iter().map(|z| z.to_string()).collect()
    }

    #[test]
    fn without_zones_groups_are_placed_as_before() {
        let placed = initial(&zones(&["", "", "", ""]), 5, 3);
        assert_eq!(placed[0], [0, 1, 2]);
        assert_eq!(placed[3], [3, 0, 1]);
        assert_eq!(placed[4], [0, 1, 2]);
    }

    #[test]
    fn voters_go_to_distinct_zones_when_there_are_enough() {
        // Zones given in node order, unbalanced: a a a b c.
        let z = zones(&["a", "a", "a", "b", "c"]);
        let placed = initial(&z, 10, 3);
        let mut load = [0; 5];
        for vs in &placed {
            let spanned: BTreeSet<&String> = vs.iter().map(|&i| &z[i]).collect();
            assert_eq!(spanned.len(), 3, "{vs:?}");
            vs.iter().for_each(|&i| load[i] += 1);
        }
        // b and c are in every group; a's nodes share the third voter.
        assert_eq!((load[3], load[4]), (10, 10));
        assert!(load[..3].iter().all(|&n| (3..=4).contains(&n)), "{load:?}");
        // Six nodes in three zones, given zone by zone.
        let z = zones(&["a", "a", "b", "b", "c", "c"]);
        for vs in initial(&z, 6, 3) {
            assert_eq!(vs.iter().map(|&i| &z[i]).collect::<BTreeSet<_>>().len(), 3);
        }
        // Two zones for three voters: both zones, then the next node.
        for vs in initial(&zones(&["a", "b", "a", "b"]), 4, 3) {
            assert_eq!(vs.len(), 3);
        }
    }

    fn voters(list: &[(u32, &[&str])]) -> Voters {
        list.iter()
            .map(|(g, addrs)| {
                let vs = addrs
                    .iter()
                    .map(|a| (a[1..].parse::<u64>().unwrap(), a.to_string()))
                    .collect();
                (*g, vs)
            })
            .collect()
    }

    #[test]
    fn a_new_zone_gets_one_voter_of_each_group_that_lacks_it() {
        // n1..n4 in zones a a b b, every group on three of them; n5 joins in zone c.
        let zone_map: BTreeMap<&str, &str> = [
            ("n1", "a"),
            ("n2", "a"),
            ("n3", "b"),
            ("n4", "b"),
            ("n5", "c"),
        ]
        .into_iter()
        .collect();
        let zone = |a: &str| zone_map.get(a).copied().unwrap_or("");
        let mut vs = voters(&[
            (1, &["n1", "n2", "n3"]),
            (2, &["n2", "n3", "n4"]),
            (3, &["n3", "n4", "n1"]),
        ]);
        let nodes: Vec<String> = zone_map.keys().map(|a| a.to_string()).collect();
        assert_eq!(unspread(&vs, &nodes, zone), [1, 2, 3]);
        // Replacing one of group 1's zone-a voters by n5 gains a zone, its zone-b one none,
        // and n3 by n1 loses one.
        assert_eq!(gain(&vs[&1], "n2", "n5", zone), 1);
        assert_eq!(gain(&vs[&1], "n3", "n4", zone), 0);
        assert_eq!(gain(&vs[&1], "n3", "n2", zone), -1);
        let mut load = BTreeMap::new();
        let mut moves = Vec::new();
        while let Some(m) = next_move(&vs.clone(), &nodes, zone, &load) {
            let group = vs.get_mut(&m.group).unwrap();
            let at = group.iter().position(|(id, _)| *id == m.from_id).unwrap();
            group[at] = (5, m.to.clone());
            *load.entry(m.to.clone()).or_insert(0) += 1;
            moves.push(m);
            assert!(moves.len() <= 3, "{moves:?}");
        }
        // One move per group, each to n5, and every group spans the three zones.
        assert_eq!(moves.len(), 3);
        assert!(moves.iter().all(|m| m.to == "n5"));
        assert!(unspread(&vs, &nodes, zone).is_empty());
        // Group 1 had two voters in a: one of them went.
        assert!(["n1", "n2"].contains(&moves[0].from.as_str()));
    }

    #[test]
    fn with_too_few_zones_nothing_moves() {
        let zone = |a: &str| if a == "n1" { "a" } else { "b" };
        let vs = voters(&[(1, &["n1", "n2", "n3"])]);
        let nodes: Vec<String> = ["n1", "n2", "n3", "n4"].map(String::from).to_vec();
        assert_eq!(next_move(&vs, &nodes, zone, &BTreeMap::new()), None);
        assert!(unspread(&vs, &nodes, zone).is_empty());
    }
}
