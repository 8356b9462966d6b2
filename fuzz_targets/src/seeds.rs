//! The seed corpus: real encodings of every input kind, written to `fuzz/corpus/<target>/`
//! by `cargo test -p saker-fuzz-targets -- --ignored write_seed_corpus` and committed.
//! Each file is named by a hash of its bytes, as cargo-fuzz names what it adds.

use std::path::{Path, PathBuf};

/// The directory of the corpus of every target: `fuzz/corpus` in the workspace.
pub fn corpus_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus")
}

/// The seed inputs of target `name`.
pub fn seeds(name: &str) -> Vec<Vec<u8>> {
    match name {
        "wire" => {
            use saker_rpc::transport::fuzzing::{check_body, Kind};
            let version = saker_rpc::transport::WIRE_VERSION;
            spread(Kind::ALL.iter().flat_map(|&kind| {
                zero_filled(&[version], |b| check_body(kind, b))
                    .into_iter()
                    .map(move |body| [&[crate::selector(&Kind::ALL, &kind)][..], &body].concat())
            }))
        }
        "records" => {
            use saker_mnode::fuzzing::{record, record_seeds, Record};
            let found = Record::ALL.iter().flat_map(|&kind| {
                [1, 3]
                    .iter()
                    .flat_map(move |&v| zero_filled(&[v], move |b| record(kind, b)))
                    .map(move |bytes| (kind, bytes))
            });
            let input = |(kind, bytes): (Record, Vec<u8>)| {
                [&[crate::selector(&Record::ALL, &kind)][..], &bytes].concat()
            };
            let mut out = spread(found.map(input));
            out.extend(record_seeds().into_iter().map(input));
            out
        }
        "journal" => saker_mnode::fuzzing::journal_seeds()
            .iter()
            .map(|segments| crate::journal::join(segments))
            .collect(),
        "snapshot" => saker_mnode::fuzzing::snapshot_seeds(),
        "raft" => saker_mnode::fuzzing::raft_seeds(),
        "chunk" => crate::chunk::seeds(),
        "volume" => crate::volume::seeds(),
        "policy" => crate::policy::seeds(),
        other => panic!("no target {other}"),
    }
}

/// The canonical encodings (as `decode` returns them) of what `prefix`, then a variant index
/// at the start or after up to six zero fields, then zeros, decode to: every variant of an
/// enum near the start of a type, with every other field zero, empty or its first variant.
fn zero_filled(prefix: &[u8], decode: impl Fn(&[u8]) -> Option<Vec<u8>>) -> Vec<Vec<u8>> {
    let mut found = std::collections::BTreeSet::new();
    for skip in 0..7 {
        for variant in 0..128u8 {
            let mut input = prefix.to_vec();
            input.extend(std::iter::repeat_n(0, skip));
            input.push(variant);
            input.extend([0; 48]);
            found.extend(decode(&input));
        }
    }
    found.into_iter().collect()
}

/// At most [`PER_KIND`] of the inputs of each kind (their first byte), spread over them: the
/// generators find one per enum variant, thousands in all, and the fuzzer finds the rest
/// from a few.
fn spread(inputs: impl Iterator<Item = Vec<u8>>) -> Vec<Vec<u8>> {
    let mut by_kind = std::collections::BTreeMap::<u8, Vec<Vec<u8>>>::new();
    for input in inputs {
        by_kind.entry(input[0]).or_default().push(input);
    }
    by_kind
        .into_values()
        .flat_map(|all| {
            let step = all.len().div_ceil(PER_KIND);
            all.into_iter().step_by(step.max(1))
        })
        .collect()
}

/// Seeds kept per kind of input (see [`spread`]).
const PER_KIND: usize = 4;

/// The file name of corpus input `data`: its FNV-1a hash in hex.
pub fn file_name(data: &[u8]) -> String {
    let hash = data.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    format!("seed-{hash:016x}")
}

/// The inputs in the corpus directory of target `name`, with their paths, in name order.
pub fn corpus(name: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = corpus_root().join(name);
    let mut files: Vec<PathBuf> = match std::fs::read_dir(&dir) {
        Ok(entries) => entries.map(|e| e.expect("corpus entry").path()).collect(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => panic!("corpus {dir:?}: {e}"),
    };
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let data = std::fs::read(&p).expect("corpus file");
            (p, data)
        })
        .collect()
}
