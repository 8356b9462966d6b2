//! Integration tests of saker-chunkstore: the conformance suite on every store, and disk-specific
//! damage and persistence checks.

mod conformance;
mod disk;
mod erasure;
mod flaky;
mod replicated;
mod volume;
mod volume_replay;
