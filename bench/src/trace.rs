//! The metadata traces `saker bench rebalance` replays, generated (seeded, deterministic):
//! a tree to build first, then the job, in phases run one after the other (a phase's ops in
//! any order, by many workers).
//!
//! - `uniform`: stats of files with unique names spread over many directories: the control,
//!   where no group is hotter than another.
//! - `hotname`: a deep-learning epoch over class directories that each hold a `label.txt`
//!   beside their images; every sample reads its image and its class's label, so half the
//!   job is one file name, which one group owns.
//! - `shift`: the same, but the hot name changes every phase (`label.txt`, then `meta.json`,
//!   then `index.txt`), as a pipeline's stages read different side files.
//! - `hotdir`: a burst of creates and stats into one directory (unique names), with the
//!   directory's own attributes read between them (`stat` of the directory, as `ls -l` or a
//!   progress check does).

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Workload {
    Uniform,
    Hotname,
    Shift,
    Hotdir,
}

/// One metadata operation on a path below the bucket.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    Mkdir(Vec<String>),
    Create(Vec<String>),
    Stat(Vec<String>),
}

impl Op {
    pub fn path(&self) -> &[String] {
        match self {
            Op::Mkdir(p) | Op::Create(p) | Op::Stat(p) => p,
        }
    }
}

#[derive(Debug, Default)]
pub struct Trace {
    /// Directories and files the job expects, parents first.
    pub setup: Vec<Op>,
    pub phases: Vec<Vec<Op>>,
}

impl Trace {
    pub fn job_ops(&self) -> usize {
        self.phases.iter().map(Vec::len).sum()
    }
}

fn path(parts: &[&str]) -> Vec<String> {
    parts.iter().map(|s| s.to_string()).collect()
}

/// How many creates back a `hotdir` stat reaches at least.
const STAT_BEHIND: usize = 256;

/// The side files of `shift`, one hot per phase (`hotname` uses the first).
pub const SIDE_FILES: [&str; 3] = ["label.txt", "meta.json", "index.txt"];

/// The trace of `workload` at `scale` (1.0: about ten thousand job operations).
pub fn generate(workload: Workload, scale: f64, seed: u64) -> Trace {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let n = |base: f64| ((base * scale).round() as usize).max(1);
    let mut t = Trace::default();
    match workload {
        Workload::Uniform => {
            let (dirs, files) = (n(40.0), 50);
            let mut all = Vec::new();
            for d in 0..dirs {
                let dir = format!("u{d}");
                t.setup.push(Op::Mkdir(path(&[&dir])));
                for f in 0..files {
                    let p = path(&[&dir, &format!("s{d}_{f}.bin")]);
                    t.setup.push(Op::Create(p.clone()));
                    all.push(p);
                }
            }
            let job = (0..n(12_000.0)).map(|_| Op::Stat(all[rng.gen_range(0..all.len())].clone()));
            t.phases.push(job.collect());
        }
        Workload::Hotname | Workload::Shift => {
            let (classes, images) = (n(100.0), 40);
            let sides: &[&str] = if workload == Workload::Shift {
                &SIDE_FILES
            } else {
                &SIDE_FILES[..1]
            };
            let mut samples = Vec::new();
            t.setup.push(Op::Mkdir(path(&["train"])));
            for c in 0..classes {
                let dir = format!("c{c:04}");
                t.setup.push(Op::Mkdir(path(&["train", &dir])));
                for side in sides {
                    t.setup.push(Op::Create(path(&["train", &dir, side])));
                }
                for i in 0..images {
                    let image = path(&["train", &dir, &format!("img{c}_{i}.jpg")]);
                    t.setup.push(Op::Create(image.clone()));
                    samples.push((dir.clone(), image));
                }
            }
            // An epoch per phase: every sample in a new random order, its image and the
            // phase's side file of its class.
            let epochs = if workload == Workload::Shift { 3 } else { 2 };
            for e in 0..epochs {
                let side = sides[e % sides.len()];
                samples.shuffle(&mut rng);
                let mut phase = Vec::with_capacity(samples.len() * 2);
                for (dir, image) in &samples {
                    phase.push(Op::Stat(image.clone()));
                    phase.push(Op::Stat(path(&["train", dir, side])));
                }
                t.phases.push(phase);
            }
        }
        Workload::Hotdir => {
            let (others, files) = (n(40.0), 25);
            for d in 0..others {
                let dir = format!("o{d}");
                t.setup.push(Op::Mkdir(path(&[&dir])));
                for f in 0..files {
                    t.setup
                        .push(Op::Create(path(&[&dir, &format!("o{d}_{f}.dat")])));
                }
            }
            t.setup.push(Op::Mkdir(path(&["hot"])));
            // Creates into the hot directory, each followed by a stat of a file written well
            // before it (workers take the ops in order, a few dozen in flight at most), and
            // every fourth by a stat of the directory.
            let creates = n(5_000.0);
            let mut job = Vec::with_capacity(creates * 2 + creates / 4);
            for i in 0..creates {
                job.push(Op::Create(path(&["hot", &format!("part-{i:06}.json")])));
                if i > STAT_BEHIND {
                    let j = rng.gen_range(0..i - STAT_BEHIND);
                    job.push(Op::Stat(path(&["hot", &format!("part-{j:06}.json")])));
                }
                if i % 4 == 3 {
                    job.push(Op::Stat(path(&["hot"])));
                }
            }
            t.phases.push(job);
        }
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    fn share_of(phase: &[Op], name: &str) -> f64 {
        let hits = phase
            .iter()
            .filter(|op| op.path().last().map(String::as_str) == Some(name))
            .count();
        hits as f64 / phase.len() as f64
    }

    #[test]
    fn hotname_reads_one_name_half_the_time() {
        let t = generate(Workload::Hotname, 0.1, 1);
        assert_eq!(t.phases.len(), 2);
        for phase in &t.phases {
            assert_eq!(share_of(phase, "label.txt"), 0.5);
        }
        // Every stat names something the setup created.
        let made: std::collections::HashSet<&[String]> = t.setup.iter().map(Op::path).collect();
        for op in t.phases.iter().flatten() {
            assert!(made.contains(op.path()), "{op:?}");
        }
    }

    #[test]
    fn shift_moves_the_hot_name_every_phase() {
        let t = generate(Workload::Shift, 0.1, 1);
        assert_eq!(t.phases.len(), 3);
        for (phase, side) in t.phases.iter().zip(SIDE_FILES) {
            assert_eq!(share_of(phase, side), 0.5);
            for other in SIDE_FILES.iter().filter(|s| **s != side) {
                assert_eq!(share_of(phase, other), 0.0);
            }
        }
    }

    #[test]
    fn uniform_has_no_hot_name_and_hotdir_one_hot_directory() {
        let t = generate(Workload::Uniform, 0.1, 1);
        let job = &t.phases[0];
        assert!(job.iter().all(|op| matches!(op, Op::Stat(_))));
        let mut counts = std::collections::HashMap::new();
        for op in job {
            *counts.entry(op.path().last().unwrap().clone()).or_insert(0) += 1;
        }
        assert!(*counts.values().max().unwrap() < job.len() / 20);

        let t = generate(Workload::Hotdir, 0.1, 1);
        let job = &t.phases[0];
        assert!(job.iter().all(|op| op.path()[0] == "hot"));
        // Each stat of a file comes well after its create.
        let mut created = Vec::new();
        for op in job {
            match op {
                Op::Create(p) => created.push(p.clone()),
                Op::Stat(p) if p.len() == 2 => {
                    let at = created.iter().position(|c| c == p).expect("created before");
                    assert!(at + STAT_BEHIND < created.len(), "{p:?}");
                }
                _ => {}
            }
        }
        assert_eq!(generate(Workload::Hotdir, 0.1, 1).job_ops(), t.job_ops());
    }
}
