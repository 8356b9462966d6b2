//! `saker bench balance`: FalconFS Tab. 3 on generated trees — how evenly filename hashing
//! spreads inodes over the MNode groups, and how few exception entries the balancer
//! (`saker_coordinator::balance`) needs to keep every group under `1/n + ε`.
//!
//! A placement simulation, not a cluster run: every inode is placed with the production
//! `Router` (ring + exception table, hash(parent id, name) for path-walked names), the groups'
//! statistics are computed from that placement (inode counts and each group's `n·⌈log2 n⌉`
//! most frequent names), and the balancer's entries are applied to the table until it asks for
//! none. Moving the inodes of a redirected name on a live cluster is not implemented.
//!
//! Trees (seeded, deterministic):
//! - `imagenet`: 1,000 class directories (`n01440764`-style) of 1,300 files each
//!   (`n01440764_10026.JPEG`-style): 1.3 M inodes, names unique.
//! - `source`: a Linux-like tree: 5,000 directories, ~14 files each; `Makefile` in 60% of the
//!   directories and `Kconfig` in 35% (as in Linux 6.8: 2,945 and 1,690 of ~4,900), one of
//!   200 common names (`README`, `mod.rs`, `index.rst`, …; Zipf-distributed) for 30% of the
//!   other files, unique names for the rest.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use rand::{Rng, SeedableRng};
use saker_coordinator::balance::{balance, bound, GroupStats};
use saker_namespace::{Exception, ExceptionTable, GroupId, Ring, Router};
use serde::Serialize;

#[derive(Args, Debug)]
pub struct BalanceBenchArgs {
    /// MNode groups.
    #[arg(long, default_value_t = 16)]
    groups: u32,
    /// Allowed excess share per group (0.01 = 1 percentage point over 1/n).
    #[arg(long, default_value_t = 0.01)]
    epsilon: f64,
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Virtual nodes per group on the ring (new namespaces use 256; older ones 64).
    #[arg(long, default_value_t = saker_mnode::RING_VNODES)]
    vnodes: u32,
    /// Balancer decisions (new or changed entries) in all.
    #[arg(long, default_value_t = 16)]
    max_entries: usize,
    /// Write the results here as JSON.
    #[arg(long)]
    json: Option<PathBuf>,
}

/// Balancer decisions applied between two rounds of statistics.
const PER_ROUND: usize = 2;

/// Inodes as (parent id, name).
type Tree = Vec<(u64, String)>;

fn imagenet(rng: &mut rand::rngs::StdRng) -> Tree {
    let mut t = Vec::with_capacity(1_301_001);
    let bucket = 2u64;
    t.push((1, "imagenet".to_string()));
    for dir in 3..1003u64 {
        let class = format!("n{:08}", rng.gen_range(1_000_000..99_999_999u64));
        t.push((bucket, class.clone()));
        for _ in 0..1300 {
            t.push((dir, format!("{class}_{}.JPEG", rng.gen_range(1..60_000u32))));
        }
    }
    t
}

const COMMON: [&str; 20] = [
    "README",
    ".gitignore",
    "mod.rs",
    "lib.rs",
    "index.rst",
    "Kbuild",
    "core.c",
    "main.c",
    "init.c",
    "Makefile.am",
    "utils.c",
    "debug.c",
    "common.h",
    "internal.h",
    "trace.h",
    "setup.c",
    "irq.c",
    "dma.c",
    "Cargo.toml",
    "config.h",
];

fn source(rng: &mut rand::rngs::StdRng) -> Tree {
    let mut t = Vec::new();
    t.push((1, "linux".to_string()));
    let mut dirs = vec![2u64];
    // 200 common names: the 20 above and numbered variants, Zipf-weighted (1/rank).
    let common: Vec<String> = (0..200)
        .map(|i| match COMMON.get(i) {
            Some(n) => n.to_string(),
            None => format!("{}-{}", COMMON[i % COMMON.len()], i / COMMON.len()),
        })
        .collect();
    let weights: Vec<f64> = (1..=200).map(|r| 1.0 / r as f64).collect();
    let wsum: f64 = weights.iter().sum();
    let mut unique = 0u64;
    for d in 0..5000u64 {
        let parent = dirs[rng.gen_range(0..dirs.len())];
        let dir = d + 3;
        t.push((parent, format!("dir{d}")));
        dirs.push(dir);
        if rng.gen_bool(0.6) {
            t.push((dir, "Makefile".into()));
        }
        if rng.gen_bool(0.35) {
            t.push((dir, "Kconfig".into()));
        }
        for _ in 0..rng.gen_range(4..24) {
            if rng.gen_bool(0.3) {
                let mut x = rng.gen_range(0.0..wsum);
                let mut pick = 0;
                for (i, w) in weights.iter().enumerate() {
                    if x < *w {
                        pick = i;
                        break;
                    }
                    x -= w;
                }
                t.push((dir, common[pick].clone()));
            } else {
                unique += 1;
                t.push((dir, format!("file{unique}.c")));
            }
        }
    }
    t
}

/// Inodes per group and, per group, the count of every name.
fn place(tree: &Tree, router: &Router) -> BTreeMap<GroupId, BTreeMap<String, u64>> {
    let mut out: BTreeMap<GroupId, BTreeMap<String, u64>> = router
        .ring()
        .groups()
        .iter()
        .map(|g| (*g, BTreeMap::new()))
        .collect();
    for (pid, name) in tree {
        let g = router.owner(*pid, name);
        *out.get_mut(&g)
            .expect("the ring's groups")
            .entry(name.clone())
            .or_default() += 1;
    }
    out
}

fn stats(
    placed: &BTreeMap<GroupId, BTreeMap<String, u64>>,
    top: usize,
) -> BTreeMap<GroupId, GroupStats> {
    placed
        .iter()
        .map(|(g, names)| {
            let mut v: Vec<(String, u64)> = names.iter().map(|(n, c)| (n.clone(), *c)).collect();
            v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
            v.truncate(top);
            (
                *g,
                GroupStats {
                    inodes: names.values().sum(),
                    top_names: v,
                },
            )
        })
        .collect()
}

#[derive(Serialize)]
struct Shares {
    max_share: f64,
    min_share: f64,
}

fn shares(placed: &BTreeMap<GroupId, BTreeMap<String, u64>>) -> Shares {
    let counts: Vec<u64> = placed.values().map(|m| m.values().sum()).collect();
    let total: u64 = counts.iter().sum();
    let share = |c: u64| c as f64 / total.max(1) as f64;
    Shares {
        max_share: share(*counts.iter().max().unwrap_or(&0)),
        min_share: share(*counts.iter().min().unwrap_or(&0)),
    }
}

#[derive(Serialize)]
struct TreeResult {
    tree: &'static str,
    inodes: usize,
    groups: u32,
    vnodes: u32,
    epsilon: f64,
    bound_share: f64,
    before: Shares,
    after: Shares,
    entries: Vec<(String, String)>,
}

fn run_tree(name: &'static str, tree: &Tree, args: &BalanceBenchArgs) -> TreeResult {
    let ids: Vec<GroupId> = (1..=args.groups).collect();
    let mut router = Router::new(Ring::new(&ids, args.vnodes), ExceptionTable::new());
    let n = args.groups as usize;
    let top = n * (usize::BITS - (n.max(2) - 1).leading_zeros()) as usize;
    let mut placed = place(tree, &router);
    let before = shares(&placed);
    let mut table = ExceptionTable::new();
    let mut decisions = 0;
    // The coordinator's loop: statistics -> plan -> entries (inodes move) -> statistics.
    for _round in 0..64 {
        // A few decisions a round, then fresh statistics (the plan's own predictions drift as
        // the lists it ranks names by go stale).
        let left = args.max_entries.saturating_sub(decisions).min(PER_ROUND);
        let plan = balance(&stats(&placed, top), &table, args.epsilon, left);
        if plan.entries.is_empty() {
            break;
        }
        for (name, e) in plan.entries {
            decisions += 1;
            table.set(name, e);
        }
        router.set_exceptions(table.clone());
        placed = place(tree, &router);
    }
    let entries = table
        .iter()
        .map(|(name, e)| {
            let text = match e {
                Exception::PathWalk => "path-walk".to_string(),
                Exception::Override(g) => format!("override -> {g}"),
            };
            (name.to_string(), text)
        })
        .collect();
    TreeResult {
        tree: name,
        inodes: tree.len(),
        groups: args.groups,
        vnodes: args.vnodes,
        epsilon: args.epsilon,
        bound_share: bound(n, args.epsilon),
        before,
        after: shares(&placed),
        entries,
    }
}

pub async fn run(args: BalanceBenchArgs) -> anyhow::Result<()> {
    anyhow::ensure!(args.groups >= 2, "--groups must be at least 2");
    let mut rng = rand::rngs::StdRng::seed_from_u64(args.seed);
    let trees: [(&'static str, Tree); 2] = [
        ("imagenet", imagenet(&mut rng)),
        ("source", source(&mut rng)),
    ];
    println!(
        "{} groups, {} virtual nodes each, epsilon {}",
        args.groups, args.vnodes, args.epsilon
    );
    println!(
        "{:<10} {:>9} {:>10} {:>10} {:>10} {:>10} {:>8}  entries",
        "tree", "inodes", "max before", "min before", "max after", "min after", "bound"
    );
    let mut results = Vec::new();
    for (name, tree) in &trees {
        let r = run_tree(name, tree, &args);
        println!(
            "{:<10} {:>9} {:>9.2}% {:>9.2}% {:>9.2}% {:>9.2}% {:>7.2}%  {:?}",
            r.tree,
            r.inodes,
            r.before.max_share * 100.0,
            r.before.min_share * 100.0,
            r.after.max_share * 100.0,
            r.after.min_share * 100.0,
            r.bound_share * 100.0,
            r.entries
        );
        results.push(r);
    }
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_vec_pretty(&results)?)
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}
