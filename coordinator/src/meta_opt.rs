//! Meta-OPT (Origami, ICPP'25, Algorithm 1), sans I/O: the migrations that most shorten the
//! predicted job completion time.
//!
//! Each group's request completion time (RCT) for the next window is the work it is predicted
//! to do, weighed by what each kind of work costs it ([`UnitCosts`]); the job completion time
//! (JCT) is the largest RCT, as the most loaded server finishes last (§3.2). A candidate is a
//! file name the exception table can place: on one group (its ring owner, or an override) or
//! spread by path walk, which costs most requests for it a forward (clients send a path-walked
//! name to a group chosen by its parent path, which passes it on unless it owns it). The loop tries every other placement of every candidate,
//! charges the move its own cost (each inode moved is a write at both ends), and takes the
//! move with the largest JCT reduction whose destination does not end up more than Δ above
//! its source; it repeats until the best reduction falls under the threshold. Each name moves
//! at most once per plan (the paper's "nested subtrees are no longer considered").
//!
//! Only a name's reads and writes move with it: the remote lookups, change-log work and dirty
//! marks a group does stay in its base load (they follow directories, which the table does
//! not place).

use std::collections::BTreeMap;

use saker_namespace::{Exception, GroupId};
use saker_rpc::{CostKind, Costs};

/// What one event of each kind costs a group, in one unit of time (a read: 1), and what one
/// inode's move costs at each end.
#[derive(Clone, Debug, PartialEq)]
pub struct UnitCosts {
    pub per_kind: [f64; 8],
    pub migrate_inode: f64,
}

impl Default for UnitCosts {
    /// Costs as a group's operation budget counts them (`--group-ops-limit` takes one token
    /// per request a group handles, a forward included, and one per change-log push or dirty
    /// mark message, which carries several records): what a group pays for.
    fn default() -> Self {
        let mut per_kind = [0.0; 8];
        for (kind, cost) in [
            (CostKind::Read, 1.0),
            (CostKind::Write, 1.0),
            (CostKind::Forward, 1.0),
            (CostKind::RemoteLookup, 0.0),
            (CostKind::LookupServed, 1.0),
            (CostKind::ChangePush, 0.0),
            (CostKind::ChangeApply, 0.1),
            (CostKind::DirtyMark, 0.1),
        ] {
            per_kind[kind.index()] = cost;
        }
        Self {
            per_kind,
            migrate_inode: 1.0,
        }
    }
}

impl UnitCosts {
    /// The time `costs` take.
    pub fn time(&self, costs: &Costs) -> f64 {
        CostKind::ALL
            .iter()
            .map(|k| costs.get(*k) as f64 * self.per_kind[k.index()])
            .sum()
    }
}

/// Where a name's inodes are.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Placement {
    Group(GroupId),
    /// Path-walked: by (parent id, name), over every group.
    Spread,
}

/// A name the plan may move.
#[derive(Clone, Debug, PartialEq)]
pub struct Candidate {
    pub name: String,
    pub placement: Placement,
    /// Where the ring puts it (a placement there needs no table entry).
    pub home: GroupId,
    /// Requests for it predicted in the window.
    pub reads: f64,
    pub writes: f64,
    /// Inodes a change of placement moves.
    pub inodes: u64,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Params {
    pub units: UnitCosts,
    /// Δ, as a fraction of the mean group RCT: a move may not leave its destination more than
    /// this above its source.
    pub delta: f64,
    /// A move must cut the JCT by at least this fraction of it.
    pub threshold: f64,
    pub max_moves: usize,
}

impl Default for Params {
    fn default() -> Self {
        Self {
            units: UnitCosts::default(),
            delta: 0.5,
            threshold: 0.02,
            max_moves: 8,
        }
    }
}

/// One move of the plan.
#[derive(Clone, Debug, PartialEq)]
pub struct Decision {
    pub name: String,
    /// Its name's ring owner.
    pub home: GroupId,
    pub from: Placement,
    pub to: Placement,
    /// Its JCT reduction (its own cost counted).
    pub benefit: f64,
    pub jct_before: f64,
    pub jct_after: f64,
}

impl Decision {
    /// The table entry the move needs: none back on the ring owner, else an override or a
    /// path walk.
    pub fn exception(&self) -> Option<Exception> {
        match self.to {
            Placement::Spread => Some(Exception::PathWalk),
            Placement::Group(g) if g == self.home => None,
            Placement::Group(g) => Some(Exception::Override(g)),
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Plan {
    pub decisions: Vec<Decision>,
    /// Each group's RCT before and after the plan (its moves' costs included).
    pub before: BTreeMap<GroupId, f64>,
    pub after: BTreeMap<GroupId, f64>,
}

impl Plan {
    pub fn jct_before(&self) -> f64 {
        jct(&self.before)
    }

    pub fn jct_after(&self) -> f64 {
        jct(&self.after)
    }
}

/// The largest RCT.
pub fn jct(rct: &BTreeMap<GroupId, f64>) -> f64 {
    rct.values().copied().fold(0.0, f64::max)
}

/// What `c` placed at `p` adds to each group (`sign` -1 takes it away).
fn place(
    rct: &mut BTreeMap<GroupId, f64>,
    c: &Candidate,
    p: Placement,
    params: &Params,
    sign: f64,
) {
    let u = &params.units.per_kind;
    let work = c.reads * u[CostKind::Read.index()] + c.writes * u[CostKind::Write.index()];
    match p {
        Placement::Group(g) => *rct.entry(g).or_default() += sign * work,
        Placement::Spread => {
            // Each group serves its share, and forwards the requests that reach it for the
            // other groups' shares.
            let n = rct.len().max(1) as f64;
            let forwards = (c.reads + c.writes) * (n - 1.0) / n;
            let each = work / n + forwards / n * u[CostKind::Forward.index()];
            for v in rct.values_mut() {
                *v += sign * each;
            }
        }
    }
}

/// The cost of moving `c`'s inodes from `from` to `to`: each inode leaving a group is a write
/// there, each one arriving is a write at its new group.
fn charge_move(
    rct: &mut BTreeMap<GroupId, f64>,
    c: &Candidate,
    from: Placement,
    to: Placement,
    params: &Params,
) {
    let n = rct.len().max(1) as f64;
    let unit = c.inodes as f64 * params.units.migrate_inode;
    let share = |p: Placement, g: GroupId| match p {
        Placement::Group(h) => f64::from(u8::from(h == g)),
        Placement::Spread => 1.0 / n,
    };
    for (g, v) in rct.iter_mut() {
        let (was, will) = (share(from, *g), share(to, *g));
        // What leaves g and what arrives there.
        *v += unit * ((was - will).max(0.0) + (will - was).max(0.0));
    }
}

/// The groups that lose work in a move, and those that gain it.
fn ends(from: Placement, to: Placement, groups: &[GroupId]) -> (Vec<GroupId>, Vec<GroupId>) {
    let all = || groups.to_vec();
    match (from, to) {
        (Placement::Group(a), Placement::Group(b)) => (vec![a], vec![b]),
        (Placement::Group(a), Placement::Spread) => {
            (vec![a], all().into_iter().filter(|g| *g != a).collect())
        }
        (Placement::Spread, Placement::Group(b)) => {
            (all().into_iter().filter(|g| *g != b).collect(), vec![b])
        }
        (Placement::Spread, Placement::Spread) => (vec![], vec![]),
    }
}

/// Algorithm 1 over `rct` (each group's predicted RCT, every candidate's current work
/// included) and `candidates`.
pub fn meta_opt(rct: &BTreeMap<GroupId, f64>, candidates: &[Candidate], params: &Params) -> Plan {
    let mut plan = Plan {
        before: rct.clone(),
        after: rct.clone(),
        decisions: Vec::new(),
    };
    let groups: Vec<GroupId> = rct.keys().copied().collect();
    if groups.len() < 2 {
        return plan;
    }
    let mut moved = vec![false; candidates.len()];
    let mut placements: Vec<Placement> = candidates.iter().map(|c| c.placement).collect();
    while plan.decisions.len() < params.max_moves {
        let t = jct(&plan.after);
        let mean = plan.after.values().sum::<f64>() / groups.len() as f64;
        let delta = params.delta * mean;
        let mut best: Option<(f64, usize, Placement, BTreeMap<GroupId, f64>)> = None;
        for (i, c) in candidates.iter().enumerate() {
            if moved[i] {
                continue;
            }
            let from = placements[i];
            let targets = groups
                .iter()
                .map(|g| Placement::Group(*g))
                .chain([Placement::Spread])
                .filter(|p| *p != from);
            for to in targets {
                let mut m = plan.after.clone();
                place(&mut m, c, from, params, -1.0);
                place(&mut m, c, to, params, 1.0);
                charge_move(&mut m, c, from, to, params);
                let t2 = jct(&m);
                let (sources, dests) = ends(from, to, &groups);
                let lowest_source = sources.iter().map(|g| m[g]).fold(f64::INFINITY, f64::min);
                let highest_dest = dests.iter().map(|g| m[g]).fold(f64::NEG_INFINITY, f64::max);
                if t2 >= t || highest_dest - lowest_source >= delta {
                    continue;
                }
                let benefit = t - t2;
                if best.as_ref().is_none_or(|b| benefit > b.0) {
                    best = Some((benefit, i, to, m));
                }
            }
        }
        let Some((benefit, i, to, m)) = best else {
            break;
        };
        if benefit < params.threshold * t {
            break;
        }
        plan.decisions.push(Decision {
            name: candidates[i].name.clone(),
            home: candidates[i].home,
            from: placements[i],
            to,
            benefit,
            jct_before: t,
            jct_after: jct(&m),
        });
        plan.after = m;
        placements[i] = to;
        moved[i] = true;
    }
    plan
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cand(name: &str, g: GroupId, reads: f64, writes: f64, inodes: u64) -> Candidate {
        Candidate {
            name: name.into(),
            placement: Placement::Group(g),
            home: g,
            reads,
            writes,
            inodes,
        }
    }

    fn loads(v: &[(GroupId, f64)]) -> BTreeMap<GroupId, f64> {
        v.iter().copied().collect()
    }

    #[test]
    fn a_hot_name_moves_to_the_idle_group() {
        // Group 1 does 1000 units, 600 of them for `hot`; group 2 does 200.
        let rct = loads(&[(1, 1000.0), (2, 200.0)]);
        let c = [
            cand("hot", 1, 600.0, 0.0, 10),
            cand("cold", 1, 50.0, 0.0, 10),
        ];
        let plan = meta_opt(
            &rct,
            &c,
            &Params {
                delta: 1.0,
                ..Params::default()
            },
        );
        // Moving `hot` leaves 400+10 vs 800+10 (each end writes its 10 inodes): the
        // destination ends above the source, but by less than Δ (the mean, 600). Nothing
        // else helps after that.
        assert_eq!(plan.decisions[0].name, "hot");
        assert_eq!(plan.decisions[0].to, Placement::Group(2));
        assert!((plan.decisions[0].jct_after - 810.0).abs() < 1e-9);
        assert!(plan.jct_after() < plan.jct_before());
        assert_eq!(plan.decisions[0].exception(), Some(Exception::Override(2)));
        assert_eq!(plan.decisions.len(), 1, "{plan:?}");
    }

    #[test]
    fn delta_refuses_a_move_that_only_swaps_the_hot_spot() {
        // Moving `hot` lowers the JCT (1000 to 810) but leaves group 2 400 above group 1:
        // refused under a Δ of 5% of the mean (30), where spreading it (855 and 655) is
        // taken instead; under a Δ of the mean the move, which gains more, is taken.
        let rct = loads(&[(1, 1000.0), (2, 200.0)]);
        let c = [cand("hot", 1, 0.0, 600.0, 10)];
        let tight = Params {
            delta: 0.05,
            ..Params::default()
        };
        let plan = meta_opt(&rct, &c, &tight);
        assert_eq!(plan.decisions.len(), 1, "{plan:?}");
        assert_eq!(plan.decisions[0].to, Placement::Spread);
        assert!((plan.jct_after() - 855.0).abs() < 1e-9);
        let loose = Params {
            delta: 1.0,
            ..Params::default()
        };
        assert_eq!(
            meta_opt(&rct, &c, &loose).decisions[0].to,
            Placement::Group(2)
        );
    }

    #[test]
    fn a_spread_name_pays_forwards() {
        let mut rct = loads(&[(1, 0.0), (2, 0.0), (3, 0.0), (4, 0.0)]);
        let c = cand("label.txt", 3, 400.0, 0.0, 0);
        place(&mut rct, &c, Placement::Spread, &Params::default(), 1.0);
        // 100 reads served by each group, and 300 forwards (the requests that reached a
        // group not owning their inode) spread over the four.
        assert_eq!(
            rct,
            loads(&[(1, 175.0), (2, 175.0), (3, 175.0), (4, 175.0)])
        );
        place(&mut rct, &c, Placement::Spread, &Params::default(), -1.0);
        assert_eq!(jct(&rct), 0.0);
    }

    #[test]
    fn a_hot_name_spreads_when_no_single_group_can_take_it() {
        // Four groups at 100 each, but `label.txt` adds 2000 reads on group 3: no single
        // group can take it without becoming the new JCT; spread, each group serves 500 and
        // forwards 375.
        let rct = loads(&[(1, 100.0), (2, 100.0), (3, 2100.0), (4, 100.0)]);
        let c = [cand("label.txt", 3, 2000.0, 0.0, 100)];
        let plan = meta_opt(&rct, &c, &Params::default());
        assert_eq!(plan.decisions.len(), 1, "{plan:?}");
        assert_eq!(plan.decisions[0].to, Placement::Spread);
        assert_eq!(plan.decisions[0].exception(), Some(Exception::PathWalk));
        // 975 each, plus the move: 75 inodes leave group 3, 25 arrive at each other group.
        let want = loads(&[(1, 1000.0), (2, 1000.0), (3, 1050.0), (4, 1000.0)]);
        for (g, v) in &plan.after {
            assert!((v - want[g]).abs() < 1e-9, "{:?}", plan.after);
        }
        assert!((plan.decisions[0].benefit - 1050.0).abs() < 1e-9);
    }

    #[test]
    fn a_move_that_costs_more_than_it_saves_is_not_taken() {
        // Moving `cold` would even the load a little, but its 10,000 inodes cost more than
        // that in the window.
        let rct = loads(&[(1, 1100.0), (2, 1000.0)]);
        let c = [cand("cold", 1, 100.0, 0.0, 10_000)];
        let plan = meta_opt(&rct, &c, &Params::default());
        assert!(plan.decisions.is_empty());
        assert_eq!(plan.after, rct);
    }

    #[test]
    fn a_cooled_spread_name_comes_back_home() {
        // `label.txt` was path-walked when it was hot; now it is cooler (90 reads: 30 served
        // and 20 forwarded per group), and groups 1 and 2 are busy with other work: on group
        // 3 alone it costs 90 there and saves the forwards elsewhere.
        let rct = loads(&[(1, 550.0), (2, 550.0), (3, 250.0)]);
        let c = [Candidate {
            name: "label.txt".into(),
            placement: Placement::Spread,
            home: 3,
            reads: 90.0,
            writes: 0.0,
            inodes: 30,
        }];
        let plan = meta_opt(&rct, &c, &Params::default());
        assert_eq!(plan.decisions.len(), 1, "{plan:?}");
        let d = &plan.decisions[0];
        assert_eq!(d.to, Placement::Group(3));
        // Groups 1 and 2 each shed 50 and send 10 inodes: 510.
        assert!((d.benefit - 40.0).abs() < 1e-9, "{d:?}");
        // Back on its ring owner it needs no entry.
        assert_eq!(d.exception(), None);
    }

    #[test]
    fn balanced_groups_get_no_plan() {
        let rct = loads(&[(1, 500.0), (2, 500.0), (3, 500.0)]);
        let c = [cand("a", 1, 100.0, 0.0, 5), cand("b", 2, 100.0, 0.0, 5)];
        assert!(meta_opt(&rct, &c, &Params::default()).decisions.is_empty());
    }
}
