//! The "libfs": turns full-path operations into MNode requests and file bytes into chunks.
//!
//! Used by the S3 gateway and the FUSE client. It routes each request to the MNode group that
//! owns the path's last component (hybrid indexing), creates missing parents as implicit
//! directories when an owner answers `MissingParent`, fans directory scans out to every group
//! and merges them, and moves data to and from the chunkstores.

mod cluster;
mod data;
mod encode;
mod error;
mod feed;
mod gc;
mod list;
pub mod master_keys;
pub mod metrics;
mod opened;
mod packaged_copy;
mod repair;
pub mod sealed;
mod tier_proxy;

pub use cluster::{chunk_stores, Cluster, ClusterConfig};
pub use data::{channel_stream, collect, ChunkWriter, DataStream, ReadRange, TierReader, Written};
pub use encode::Encoded;
pub use error::ClientError;
pub use gc::{
    coded_chunks, collect_garbage, now_ns, referenced_chunks, release_now, repair_chunks,
    scrub_chunks, GcReport,
};
pub use list::{buckets, ListItem, Lister};
pub use packaged_copy::first_packages;
pub use repair::{repair_degraded_chunks, repair_noted_chunks, GroupsRepairLog};
pub use saker_chunkstore::ec::Layout as EcLayout;
pub use tier_proxy::NodeTierReads;
