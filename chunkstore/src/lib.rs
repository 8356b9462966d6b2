//! Chunk storage for saker: immutable, CRC32C-checked chunks of file data on local disk.
//!
//! A chunk is written once under a random 128-bit [`ChunkId`] chosen by the writer, read by range
//! and deleted when the metadata record that referenced it drops the reference (after a grace
//! period; a periodic scrub removes leaks found with [`ChunkStore::list_older_than`]).
//!
//! - [`ChunkStore`]: the storage trait every backend implements.
//! - [`DiskChunkStore`]: chunks on local disk, small ones in append-only volumes ([`volume`]),
//!   the rest one file per chunk (layout in [`disk`], file format in [`format`](mod@format)).
//! - [`MemChunkStore`]: in-memory backend with the same semantics, for tests of other crates.
//! - [`RemoteChunkStore`]: a store in another process; [`ChunkServer`] serves one to it.
//! - [`ReplicatedChunkStore`]: every chunk on several stores (placement, quorum writes, read
//!   repair, repair passes).
//! - [`ec`]: erasure coding of a chunk into k data and m parity shards; [`coded_reads`]: a
//!   file's coded chunks read through plain `get` calls.
//! - [`conformance`]: the suite every backend must pass.

pub mod coded_reads;
pub mod conformance;
mod direct;
pub mod disk;
pub mod ec;
pub mod error;
pub mod format;
pub mod id;
mod image;
mod mapped;
pub mod mem;
pub mod members;
pub mod placement;
pub mod progress;
pub mod remote;
pub mod replicated;
pub mod stats;
pub mod store;
pub mod volume;

pub use coded_reads::CodedReads;
pub use disk::{reads_in_place, DiskChunkStore, SMALL_CHUNK_MAX};
pub use error::ChunkError;
pub use format::BLOCK_SIZE;
pub use id::ChunkId;
pub use mem::MemChunkStore;
pub use remote::{ChunkServer, RemoteChunkStore};
pub use replicated::{Member, MemberInfo, RepairLog, ReplicatedChunkStore};
pub use stats::ChunkStats;
pub use store::{ChunkInfo, ChunkStore, CodedChunk, Pace, RepairReport, ScrubReport};
