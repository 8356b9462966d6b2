//! Fuzz targets for saker's own decoders: everything saker reads from the network or from its
//! own files, fed arbitrary bytes.
//!
//! Each target is a `fn(&[u8])` ([`TARGETS`]) that decodes its input as saker does and panics
//! only on a bug: a decoder that panics, or a value that decodes but does not encode back to
//! itself. Allocations are bounded by the input's size (a length prefix is checked against
//! the bytes that follow it before anything is reserved), which libFuzzer's `-malloc_limit_mb`
//! checks. The targets run two ways:
//!
//! - under cargo-fuzz on nightly (`fuzz/`, see `fuzz/README.md`): coverage-guided, for long
//!   sessions;
//! - on stable, in this crate's tests (`tests/corpus.rs`), as CI does: every file of the seed
//!   corpus `fuzz/corpus/<target>/` is replayed, and the `wire` and `policy` targets are
//!   smoke-fuzzed by [`smoke`], a seeded mutation driver over that corpus (not
//!   coverage-guided: it finds shallow panics, cargo-fuzz finds the rest).
//!
//! The seed corpus is generated from real encodings ([`seeds`]).

mod chunk;
mod journal;
mod policy;
mod raft;
mod records;
mod scratch;
pub mod seeds;
pub mod smoke;
mod snapshot;
mod volume;
mod wire;

pub use chunk::chunk;
pub use journal::{journal, SEGMENT_SEPARATOR};
pub use policy::policy;
pub use raft::raft;
pub use records::records;
pub use snapshot::snapshot;
pub use volume::volume;
pub use wire::wire;

/// A fuzz target: decodes its input; panics only on a bug.
pub type Target = fn(&[u8]);

/// Every target by name (the name of its cargo-fuzz target and of its corpus directory).
pub const TARGETS: &[(&str, Target)] = &[
    ("wire", wire),
    ("records", records),
    ("journal", journal),
    ("snapshot", snapshot),
    ("raft", raft),
    ("chunk", chunk),
    ("volume", volume),
    ("policy", policy),
];

/// The target called `name`.
pub fn target(name: &str) -> Option<Target> {
    TARGETS.iter().find(|(n, _)| *n == name).map(|&(_, t)| t)
}

/// The kind of input that byte `b` selects among `all` (by index, wrapping).
pub(crate) fn select<K: Copy>(all: &[K], b: u8) -> K {
    all[usize::from(b) % all.len()]
}

/// The byte that selects `kind` among `all`.
pub(crate) fn selector<K: PartialEq>(all: &[K], kind: &K) -> u8 {
    all.iter()
        .position(|k| k == kind)
        .expect("every kind is in its list") as u8
}
