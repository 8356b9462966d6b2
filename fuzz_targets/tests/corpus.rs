//! The fuzz targets on stable, as CI runs them: every file of the seed corpus replayed, and a
//! short seeded smoke-fuzz of the `wire` and `policy` targets (see `saker_fuzz_targets::smoke`;
//! `SAKER_SMOKE_SECS` and `SAKER_SMOKE_SEED` change its time limit and seed). The generator of
//! the corpus is `write_seed_corpus` (ignored).

use std::time::Duration;

use saker_fuzz_targets::{seeds, smoke, target, TARGETS};

fn replay(name: &str) {
    let t = target(name).expect("a target");
    let corpus = seeds::corpus(name);
    assert!(
        !corpus.is_empty(),
        "no corpus for {name}: run write_seed_corpus"
    );
    for (path, data) in corpus {
        if std::panic::catch_unwind(|| t(&data)).is_err() {
            panic!("{name} panics on {}", path.display());
        }
    }
}

#[test]
fn corpus_wire() {
    replay("wire");
}

#[test]
fn corpus_records() {
    replay("records");
}

#[test]
fn corpus_journal() {
    replay("journal");
}

#[test]
fn corpus_snapshot() {
    replay("snapshot");
}

#[test]
fn corpus_raft() {
    replay("raft");
}

#[test]
fn corpus_chunk() {
    replay("chunk");
}

#[test]
fn corpus_volume() {
    replay("volume");
}

#[test]
fn corpus_policy() {
    replay("policy");
}

/// Smoke-fuzzes target `name` for at most `SAKER_SMOKE_SECS` (default 20 s, never more than
/// 30 s) or a run cap.
fn smoke_fuzz(name: &str) {
    let secs: u64 = std::env::var("SAKER_SMOKE_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20)
        .min(30);
    let seed: u64 = std::env::var("SAKER_SMOKE_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5a6e_7200);
    let corpus: Vec<Vec<u8>> = seeds::corpus(name).into_iter().map(|(_, d)| d).collect();
    let crashes = seeds::corpus_root().join("../artifacts").join(name);
    match smoke::run(
        target(name).expect("a target"),
        &corpus,
        seed,
        2_000_000,
        Duration::from_secs(secs),
        Some(&crashes),
    ) {
        Ok(report) => eprintln!("{name}: {} runs without a panic", report.runs),
        Err(f) => panic!(
            "{name} panics on an input (seed {seed}), saved as {:?}: {:02x?}",
            f.saved, f.input
        ),
    }
}

#[test]
fn smoke_wire() {
    smoke_fuzz("wire");
}

#[test]
fn smoke_policy() {
    smoke_fuzz("policy");
}

/// Writes the seed corpus (`fuzz/corpus/<target>/seed-*`) from real encodings, replacing the
/// seeds written before (inputs cargo-fuzz added, and regressions, stay).
#[test]
#[ignore = "generator: run by hand after a change of an encoding"]
fn write_seed_corpus() {
    for &(name, t) in TARGETS {
        let dir = seeds::corpus_root().join(name);
        std::fs::create_dir_all(&dir).unwrap();
        for e in std::fs::read_dir(&dir).unwrap() {
            let path = e.unwrap().path();
            if path
                .file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("seed-")
            {
                std::fs::remove_file(path).unwrap();
            }
        }
        for data in seeds::seeds(name) {
            t(&data);
            std::fs::write(dir.join(seeds::file_name(&data)), &data).unwrap();
        }
    }
}
