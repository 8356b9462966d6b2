//! Statistical load balancing of inodes over MNode groups (FalconFS §4.2.2), sans I/O.
//!
//! Input: what each group reports — its inode count and its most frequent file names with
//! their counts (`O(n log n)` names) — the current exception table and ε. [`balance`] runs the
//! paper's greedy loop: while the most loaded group holds more than `(1/n + ε)` of all inodes,
//! take the most frequent name F on it that is not path-walked yet and redirect it, either
//! *overriding* (all of F's `|F|` inodes there move to the least loaded group) or *path walk*
//! (F is spread by hash(parent, F), so the group keeps `|F|/n` and every group gains `|F|/n`),
//! whichever gives the smaller maximum load; when another group stays the hottest either way,
//! the one that leaves the two groups involved lower; then overriding (it costs no extra hop).
//! [`shrink`] drops entries whose names the groups could now hold by plain hashing without
//! anyone exceeding the bound. Names under [`MIN_NAME_SHARE`] of the namespace are never worth
//! an entry (an imbalance made of them is the ring's, fixed by more virtual nodes). Moving the
//! inodes of a redirected name is the caller's work.

use std::collections::{BTreeMap, BTreeSet};

use saker_namespace::{Exception, ExceptionTable, GroupId, Router};

/// What one group reports.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GroupStats {
    pub inodes: u64,
    /// Its most frequent file names and how many inodes of each it holds.
    pub top_names: Vec<(String, u64)>,
}

/// The balancer's decision: new exception entries, in the order taken, and the loads it
/// expects once the inodes have moved.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Plan {
    pub entries: Vec<(String, Exception)>,
    pub expected: BTreeMap<GroupId, f64>,
}

/// Names holding less than this share of all inodes are never redirected: moving them barely
/// changes any load, and the table would fill with entries that buy nothing.
pub const MIN_NAME_SHARE: f64 = 0.001;

/// The largest share of all inodes a group may hold: `1/n + epsilon`.
pub fn bound(groups: usize, epsilon: f64) -> f64 {
    1.0 / groups as f64 + epsilon
}

/// Greedy redirection of the most frequent names of the most loaded groups (§4.2.2), at most
/// `max_entries` new entries.
pub fn balance(
    stats: &BTreeMap<GroupId, GroupStats>,
    table: &ExceptionTable,
    epsilon: f64,
    max_entries: usize,
) -> Plan {
    let n = stats.len();
    let mut load: BTreeMap<GroupId, f64> =
        stats.iter().map(|(g, s)| (*g, s.inodes as f64)).collect();
    let mut plan = Plan::default();
    if n < 2 {
        plan.expected = load;
        return plan;
    }
    let total: f64 = load.values().sum();
    let limit = total * bound(n, epsilon);
    let mut names: BTreeMap<GroupId, Vec<(String, u64)>> = stats
        .iter()
        .map(|(g, s)| {
            let mut v: Vec<(String, u64)> = s
                .top_names
                .iter()
                // A path-walked name is spread already; an overridden one may move again.
                .filter(|(name, _)| !matches!(table.get(name), Some(Exception::PathWalk)))
                .cloned()
                .collect();
            // Most frequent first; ties by name, so the plan is deterministic.
            v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
            (*g, v)
        })
        .collect();
    let mut taken: BTreeSet<String> = BTreeSet::new();
    // A move may raise the maximum when the next one lowers it; the plan never ends above
    // where it started: it keeps its longest prefix that does not.
    let start_max = extreme(&load, true).1;
    let mut kept = (0, load.clone());
    while plan.entries.len() < max_entries {
        let (max_g, max_load) = extreme(&load, true);
        if max_load <= limit {
            break;
        }
        let (min_g, _) = extreme(&load, false);
        let list = names.get_mut(&max_g).expect("every group has a list");
        let Some(pos) = list.iter().position(|(name, _)| !taken.contains(name)) else {
            break; // nothing left to move from the hottest group
        };
        let (name, count) = list.remove(pos);
        let f = count as f64;
        if f < total * MIN_NAME_SHARE {
            // What is left is the ring's own unevenness: no name is worth an entry.
            break;
        }
        let n_f = n as f64;
        // Path walk: F spreads evenly; the hottest keeps a 1/n share of it.
        let mut walk = load.clone();
        for (g, l) in walk.iter_mut() {
            *l += f / n_f;
            if *g == max_g {
                *l -= f;
            }
        }
        // Override: F moves to the least loaded group.
        let mut over = load.clone();
        *over.get_mut(&max_g).expect("present") -= f;
        *over.get_mut(&min_g).expect("present") += f;
        let (_, walk_max) = extreme(&walk, true);
        let (_, over_max) = extreme(&over, true);
        // A move helps when it lowers the maximum or, failing that, the total excess over
        // the bound: walking a name off the hottest group adds |F|/n to a runner-up that may
        // then be the new maximum, yet the next decision can walk the runner-up's own name.
        // Judging by the maximum alone stalled there (README walked off one group would lift
        // the Makefile group a hair above it, so nothing was ever taken).
        let now = excess(&load, limit);
        let helps = |max: f64, l: &BTreeMap<GroupId, f64>| {
            max < max_load - 1e-9 || excess(l, limit) < now - 1e-9
        };
        let (over_helps, walk_helps) = (helps(over_max, &over), helps(walk_max, &walk));
        if !over_helps && !walk_helps {
            // Moving F helps nobody; try the next name.
            taken.insert(name);
            continue;
        }
        // Equal maxima (a third group is the hottest either way): prefer the option that
        // leaves the two groups involved lower, so an override does not make the next hot spot.
        let involved = |l: &BTreeMap<GroupId, f64>| l[&max_g].max(l[&min_g]);
        let prefer_override = if over_helps != walk_helps {
            over_helps
        } else if (over_max - walk_max).abs() < 1e-9 {
            involved(&over) <= involved(&walk)
        } else {
            over_max < walk_max
        };
        let exception = if prefer_override {
            load = over;
            Exception::Override(min_g)
        } else {
            load = walk;
            Exception::PathWalk
        };
        taken.insert(name.clone());
        plan.entries.push((name, exception));
        if extreme(&load, true).1 <= start_max + 1e-9 {
            kept = (plan.entries.len(), load.clone());
        }
    }
    plan.entries.truncate(kept.0);
    plan.expected = kept.1;
    plan
}

/// Entries of `table` that can go: with every inode of the name back on the group its hash
/// picks, no group would exceed the bound. `stats` must count the name's inodes on every group
/// that holds some (their `top_names`).
pub fn shrink(
    stats: &BTreeMap<GroupId, GroupStats>,
    table: &ExceptionTable,
    router: &Router,
    epsilon: f64,
) -> Vec<String> {
    let n = stats.len();
    let mut load: BTreeMap<GroupId, f64> =
        stats.iter().map(|(g, s)| (*g, s.inodes as f64)).collect();
    let total: f64 = load.values().sum();
    let limit = total * bound(n.max(1), epsilon);
    let mut removable = Vec::new();
    for (name, _) in table.iter() {
        let home = router.home(name);
        let mut after = load.clone();
        let mut all = 0.0;
        for (g, s) in stats {
            let here = s
                .top_names
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, c)| *c as f64)
                .unwrap_or(0.0);
            *after.get_mut(g).expect("present") -= here;
            all += here;
        }
        if let Some(h) = after.get_mut(&home) {
            *h += all;
        }
        if extreme(&after, true).1 <= limit {
            load = after;
            removable.push(name.to_string());
        }
    }
    removable
}

/// How many inodes the groups hold above `limit`, summed.
fn excess(load: &BTreeMap<GroupId, f64>, limit: f64) -> f64 {
    load.values().map(|l| (l - limit).max(0.0)).sum()
}

/// The most (or least) loaded group; ties go to the lowest id.
fn extreme(load: &BTreeMap<GroupId, f64>, most: bool) -> (GroupId, f64) {
    let mut best: Option<(GroupId, f64)> = None;
    for (&g, &l) in load {
        let better = match best {
            None => true,
            Some((_, b)) => {
                if most {
                    l > b
                } else {
                    l < b
                }
            }
        };
        if better {
            best = Some((g, l));
        }
    }
    best.expect("at least one group")
}

#[cfg(test)]
mod tests {
    use saker_namespace::Ring;

    use super::*;

    /// A group, its inode count and its top names.
    type Report<'a> = (GroupId, u64, &'a [(&'a str, u64)]);

    fn stats(loads: &[Report]) -> BTreeMap<GroupId, GroupStats> {
        loads
            .iter()
            .map(|(g, inodes, names)| {
                (
                    *g,
                    GroupStats {
                        inodes: *inodes,
                        top_names: names.iter().map(|(n, c)| (n.to_string(), *c)).collect(),
                    },
                )
            })
            .collect()
    }

    #[test]
    fn a_balanced_cluster_needs_no_entry() {
        let s = stats(&[
            (1, 100, &[("a", 5)]),
            (2, 101, &[]),
            (3, 99, &[]),
            (4, 100, &[]),
        ]);
        let plan = balance(&s, &ExceptionTable::new(), 0.01, 10);
        assert!(plan.entries.is_empty());
    }

    #[test]
    fn a_name_too_big_for_any_one_group_is_path_walked() {
        // "Makefile" alone is 40% of everything: only spreading it can help.
        let s = stats(&[
            (1, 500, &[("Makefile", 400), ("x", 10)]),
            (2, 170, &[]),
            (3, 170, &[]),
            (4, 160, &[]),
        ]);
        let plan = balance(&s, &ExceptionTable::new(), 0.01, 10);
        assert_eq!(plan.entries[0], ("Makefile".into(), Exception::PathWalk));
        let total: f64 = plan.expected.values().sum();
        assert!((total - 1000.0).abs() < 1e-6, "inodes are conserved");
    }

    #[test]
    fn a_moderate_name_is_overridden_to_the_least_loaded_group() {
        let s = stats(&[
            (1, 330, &[("README", 80), ("b", 5)]),
            (2, 250, &[]),
            (3, 250, &[]),
            (4, 170, &[]),
        ]);
        let plan = balance(&s, &ExceptionTable::new(), 0.01, 10);
        assert_eq!(
            plan.entries,
            vec![("README".into(), Exception::Override(4))]
        );
        assert_eq!(plan.expected[&1], 250.0);
        assert_eq!(plan.expected[&4], 250.0);
    }

    /// Groups 1 and 2 over the bound (260), each with one big name.
    fn two_hot_groups() -> BTreeMap<GroupId, GroupStats> {
        stats(&[
            (1, 330, &[("A", 200)]),
            (2, 325, &[("B", 150)]),
            (3, 200, &[]),
            (4, 145, &[]),
        ])
    }

    #[test]
    fn a_move_that_only_lowers_the_excess_is_taken_so_the_loop_does_not_stall() {
        // Overriding A makes group 4 the hottest; walking it lifts group 2 above today's
        // maximum. Walking still lowers the excess over the bound (260), and then group 2's
        // own name B can go too (group 3 is left at 287.5, with no name to give).
        let s = two_hot_groups();
        let plan = balance(&s, &ExceptionTable::new(), 0.01, 10);
        assert_eq!(plan.entries[0], ("A".into(), Exception::PathWalk));
        assert_eq!(plan.entries.len(), 2, "{:?}", plan.entries);
        assert_eq!(plan.entries[1].0, "B");
        let max = plan.expected.values().cloned().fold(0.0, f64::max);
        assert!((max - 287.5).abs() < 1e-9, "{:?}", plan.expected);
        let total: f64 = plan.expected.values().sum();
        assert!((total - 1000.0).abs() < 1e-6, "inodes are conserved");
    }

    #[test]
    fn a_plan_cut_short_never_ends_above_its_starting_maximum() {
        // The same cluster as above with room for one decision: walking A alone would leave
        // group 2 at 375 (> 330), so nothing is decided.
        let s = two_hot_groups();
        let plan = balance(&s, &ExceptionTable::new(), 0.01, 1);
        assert!(plan.entries.is_empty(), "{:?}", plan.entries);
        assert_eq!(plan.expected[&1], 330.0);
    }

    #[test]
    fn path_walked_names_are_not_redirected_again_and_the_count_is_capped() {
        let mut table = ExceptionTable::new();
        table.set("Makefile", Exception::PathWalk);
        let s = stats(&[
            (
                1,
                600,
                &[("Makefile", 300), ("a", 50), ("b", 40), ("c", 30)],
            ),
            (2, 100, &[]),
            (3, 100, &[]),
            (4, 100, &[]),
        ]);
        let plan = balance(&s, &table, 0.0, 2);
        assert_eq!(plan.entries.len(), 2);
        assert!(plan.entries.iter().all(|(n, _)| n != "Makefile"));
        assert_eq!(plan.entries[0].0, "a", "most frequent first");
    }

    #[test]
    fn entries_no_longer_needed_are_shrunk() {
        let router = Router::new(Ring::new(&[1, 2, 3, 4], 64), ExceptionTable::new());
        let home = router.home("old");
        let mut table = ExceptionTable::new();
        table.set("old", Exception::PathWalk);
        table.set("hot", Exception::PathWalk);
        // "old" has 4 inodes left (1 per group): hashing them home is harmless. "hot" has
        // 400: all on one group would break the bound.
        let mut s: BTreeMap<GroupId, GroupStats> = BTreeMap::new();
        for g in 1..=4 {
            s.insert(
                g,
                GroupStats {
                    inodes: 1000,
                    top_names: vec![("old".into(), 1), ("hot".into(), 100)],
                },
            );
        }
        let gone = shrink(&s, &table, &router, 0.01);
        assert_eq!(gone, vec!["old".to_string()], "home of old is group {home}");
    }

    #[test]
    fn a_big_name_on_the_hottest_of_many_groups_is_walked_not_dumped_on_the_coolest() {
        // 16 groups: the hottest at 10% with a 3.8% name, the coolest at 4.6%.
        let mut s = BTreeMap::new();
        for g in 1..=16u32 {
            let inodes = match g {
                1 => 1008,
                2 => 460,
                _ => 610,
            };
            let names = if g == 1 {
                vec![("Makefile".to_string(), 383u64)]
            } else {
                vec![]
            };
            s.insert(
                g,
                GroupStats {
                    inodes,
                    top_names: names,
                },
            );
        }
        let plan = balance(&s, &ExceptionTable::new(), 0.01, 4);
        assert_eq!(plan.entries, vec![("Makefile".into(), Exception::PathWalk)]);
        assert!(plan.expected[&1] < 650.0);
    }

    #[test]
    fn an_imbalance_of_unique_names_gets_no_entries() {
        // The hottest group is over the bound, but by many names of one inode each.
        let names: Vec<(String, u64)> = (0..50).map(|i| (format!("img{i}"), 1)).collect();
        let mut s = stats(&[(2, 9000, &[]), (3, 9000, &[]), (4, 9000, &[])]);
        s.insert(
            1,
            GroupStats {
                inodes: 13000,
                top_names: names,
            },
        );
        let plan = balance(&s, &ExceptionTable::new(), 0.01, 10);
        assert!(plan.entries.is_empty(), "{:?}", plan.entries);
    }
}
