//! The metadata node (MNode): full-path, stateless metadata operations over an inode shard.
//!
//! Requests arrive as [`saker_rpc::MetaRequest`]s. Reads are served from the applied state;
//! writes go through the [`executor`] (queue -> batch -> one raft entry of physical mutations
//! plus per-op results) and are durable when they return. The state lives in a [`store`] engine
//! under the key layout of [`keys`].

pub mod capacity;
mod changes;
mod coord_records;
mod dirty;
mod engine;
pub mod error;
mod executor;
mod feed_clock;
mod frozen;
#[cfg(feature = "fuzzing")]
pub mod fuzzing;
pub mod keys;
mod leadership;
mod lease;
pub mod load;
mod local;
mod membership;
mod metrics;
mod node;
pub mod ops;
pub mod perm;
pub mod raft;
pub mod read;
pub mod records;
mod refs;
pub mod space;
pub mod store;
mod tickets;
pub mod tikv_health;
pub mod tree;
pub mod txn;

pub use changes::Peers;
pub use error::MnodeError;
pub use executor::{ParentUpdates, DEDUPE_WINDOW};
pub use local::{LocalGroups, LOCAL_VNODES, RING_VNODES};
pub use node::{Mnode, MnodeConfig};
pub use raft::RaftPeers;
pub use store::{FjallStore, GcPart, MemStore, MetaStore, RedbStore, TikvStore};
