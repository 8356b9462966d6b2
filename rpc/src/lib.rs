//! Wire types and service traits shared by every saker role.
//!
//! Every message that crosses a role boundary is defined here, once. In-process roles call the
//! same traits as remote ones, so the all-in-one server and a multi-process cluster run the same
//! code paths.

pub mod attr;
pub mod chunk;
mod cluster_map;
pub mod error;
pub mod meta;
pub mod service;
pub mod transport;

pub use attr::{Attr, Checksums, ChunkRef, Entry, FileKind, Layout, ObjectMeta, PartInfo};
pub use chunk::{ChunkReply, ChunkRequest, ChunkService, ChunkWireError};
pub use cluster_map::{ClusterMap, Endpoints};
pub use error::MetaError;
pub use meta::{
    access, ClientTag, Cred, Dentry, DirChange, DirUsage, GroupCounters, MetaRequest, MetaResponse,
    NewObject, ObjectView, PartRecord, RemoveCond, SetTime, UploadInfo, Want, XattrMode,
};
pub use service::{CoordinatorService, MetaService};
pub use transport::{fetch_cluster_map, RemoteCoordinator, RemoteMeta, RpcChannel, RpcServer};

/// Inode number. Id 1 is the root directory; ids are allocated per MNode group.
pub type InodeId = u64;
