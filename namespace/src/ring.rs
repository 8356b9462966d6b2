//! `Ring`: consistent hashing with virtual nodes over MNode group ids.

use xxhash_rust::xxh3::xxh3_64;

/// Identifier of an MNode (raft) group.
pub type GroupId = u32;

/// Virtual nodes per group unless configured otherwise.
pub const DEFAULT_VNODES: u32 = 64;

/// A consistent-hash ring. Group `g`'s virtual node `i` sits at XXH3-64 (seed 0) of the bytes of
/// `"{g}-{i}"`; a hash belongs to the first point at or after it, wrapping to the first point.
/// Like the name hash, the point formula is part of the placement format.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ring {
    /// The distinct groups, ascending.
    groups: Vec<GroupId>,
    /// `(point, group)`, ascending; ties (never seen in practice) break by group id.
    points: Vec<(u64, GroupId)>,
}

impl Ring {
    /// Builds the ring. Duplicate group ids count once.
    ///
    /// # Panics
    /// If `groups` is empty or `vnodes_per_group` is 0: a ring must own every hash.
    pub fn new(groups: &[GroupId], vnodes_per_group: u32) -> Ring {
        assert!(!groups.is_empty(), "a ring needs at least one group");
        assert!(
            vnodes_per_group > 0,
            "a ring needs at least one vnode per group"
        );
        let mut groups = groups.to_vec();
        groups.sort_unstable();
        groups.dedup();
        let mut points: Vec<(u64, GroupId)> = groups
            .iter()
            .flat_map(|&g| (0..vnodes_per_group).map(move |i| (vnode_point(g, i), g)))
            .collect();
        points.sort_unstable();
        Ring { groups, points }
    }

    /// The group that owns `hash`.
    pub fn owner(&self, hash: u64) -> GroupId {
        let i = self.points.partition_point(|&(p, _)| p < hash);
        self.points.get(i).unwrap_or(&self.points[0]).1
    }

    /// The distinct groups on the ring, ascending.
    pub fn groups(&self) -> &[GroupId] {
        &self.groups
    }
}

fn vnode_point(group: GroupId, i: u32) -> u64 {
    xxh3_64(format!("{group}-{i}").as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::name_hash;
    use proptest::prelude::*;

    #[test]
    fn single_group_owns_everything() {
        let r = Ring::new(&[7], DEFAULT_VNODES);
        for h in [0, 1, u64::MAX / 2, u64::MAX] {
            assert_eq!(r.owner(h), 7);
        }
        assert_eq!(r.groups(), &[7]);
    }

    #[test]
    fn points_follow_the_formula_and_wrap() {
        let r = Ring::new(&[3, 1, 3], 2);
        assert_eq!(r.groups(), &[1, 3]);
        assert_eq!(r.points.len(), 4);
        let mut want = vec![
            (xxh3_64(b"1-0"), 1),
            (xxh3_64(b"1-1"), 1),
            (xxh3_64(b"3-0"), 3),
            (xxh3_64(b"3-1"), 3),
        ];
        want.sort_unstable();
        assert_eq!(r.points, want);
        // Exactly on a point, just after it, and past the last point (wraps to the first).
        assert_eq!(r.owner(want[1].0), want[1].1);
        assert_eq!(r.owner(want[1].0 + 1), want[2].1);
        assert_eq!(r.owner(want[3].0 + 1), want[0].1);
        assert_eq!(r.owner(0), want[0].1);
    }

    fn assert_balanced(groups: &[GroupId]) {
        let r = Ring::new(groups, DEFAULT_VNODES);
        let n = 100_000;
        let mut count = std::collections::HashMap::new();
        for i in 0..n {
            let name = format!("file-{i:08}.jpg");
            *count
                .entry(r.owner(name_hash(name.as_bytes())))
                .or_insert(0u32) += 1;
        }
        let fair = n as f64 / groups.len() as f64;
        for &g in groups {
            let c = f64::from(count.get(&g).copied().unwrap_or(0));
            assert!(
                (c - fair).abs() <= 0.35 * fair,
                "group {g} got {c} of {n}, fair share {fair}"
            );
        }
    }

    #[test]
    fn balanced_with_4_groups() {
        assert_balanced(&[1, 2, 3, 4]);
    }

    #[test]
    fn balanced_with_16_groups() {
        assert_balanced(&(1..=16).collect::<Vec<_>>());
    }

    proptest! {
        #[test]
        fn removing_a_group_moves_only_its_keys(
            groups in prop::collection::btree_set(0u32..1000, 2..10),
            victim in any::<prop::sample::Index>(),
            hashes in prop::collection::vec(any::<u64>(), 200),
        ) {
            let groups: Vec<GroupId> = groups.into_iter().collect();
            let gone = groups[victim.index(groups.len())];
            let rest: Vec<GroupId> = groups.iter().copied().filter(|&g| g != gone).collect();
            let before = Ring::new(&groups, 16);
            let after = Ring::new(&rest, 16);
            for h in hashes {
                let (b, a) = (before.owner(h), after.owner(h));
                prop_assert_ne!(a, gone);
                if b != gone {
                    prop_assert_eq!(a, b, "hash {} moved off a surviving group", h);
                }
            }
        }

        #[test]
        fn owner_is_independent_of_group_order(
            groups in prop::collection::vec(0u32..50, 1..8),
            h in any::<u64>(),
        ) {
            let mut reversed = groups.clone();
            reversed.reverse();
            prop_assert_eq!(Ring::new(&groups, 8).owner(h), Ring::new(&reversed, 8).owner(h));
            prop_assert!(groups.contains(&Ring::new(&groups, 8).owner(h)));
        }
    }
}
