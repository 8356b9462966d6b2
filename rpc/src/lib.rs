//! Wire types and service traits shared by every saker role.
//!
//! Every message that crosses a role boundary is defined here, once. In-process roles call the
//! same traits as remote ones, so the all-in-one server and a multi-process cluster run the same
//! code paths.

pub mod attr;
pub mod auth;
pub mod capability;
pub mod chunk;
mod cluster_map;
pub mod error;
pub mod fail_point;
pub mod meta;
mod metrics;
mod replicas;
pub mod service;
pub mod tls;
pub mod trace_context;
pub mod transport;

pub use attr::{
    check_tier_name, chunk_for, chunk_of, ec_class, ec_class_name, shard_id, Attr, Checksums,
    ChunkRef, Coded, Entry, FileKind, Layout, ObjectMeta, PartInfo, Restored, Sse, TierRef,
};
pub use capability::{CommitReceipt, FreshKey};
pub use chunk::{
    next_page, ChunkReply, ChunkRequest, ChunkService, ChunkWireError, CodedRead, ShardName,
    MAX_LIST_PAGE, NO_CHUNKSTORE,
};
pub use cluster_map::{ClusterMap, Endpoints, MapSource};
pub use error::MetaError;
pub use meta::{
    access, check_cond, ClientTag, CostKind, Costs, Cred, DefaultLock, Dentry, DirChange, DirUsage,
    EtagCond, GroupCounters, LoadWindow, LockConfig, LockMode, MetaRequest, MetaResponse,
    NewObject, ObjectLock, ObjectView, PartRecord, RemoveCond, ReplicaStatus, Retention,
    ScanReader, SealedRecord, SetTime, UploadInfo, Want, WriteCond, XattrMode, CHUNKSTORES_RECORD,
    MAX_PAGE,
};
pub use meta::{is_sse_s3, CommitSeal, PlainKey, SseKeys};
pub use meta::{
    sealed_record, BucketWrites, BucketWritesCache, Decided, SealedWrites, SettingsRequest,
    NOTIFICATION_RECORD, SEALED_RECORD, SETTINGS_REFRESH,
};
pub use meta::{
    version_id, version_inode, RenameVersioning, VersionEntry, VersionKind, Versioning,
    NULL_VERSION,
};
pub use meta::{
    FeedEvent, FeedKind, FeedPage, FeedRequest, FeedSettings, DEFAULT_FEED_CAP, MAX_FEED_PAGE,
};
pub use replicas::{raft_status, Replica, ReplicaSet, FAILOVER_WAIT};
pub use service::{
    AdminCall, AdminReply, AdminService, CoordinatorService, MetaService, RaftService,
    TierReadService, MAX_TIER_READ,
};
pub use transport::{
    fetch_cluster_map, group_services, replica_sets, ChannelPool, RemoteCoordinator, RemoteMeta,
    RpcChannel, RpcServer, ServedGroups,
};

/// When an acknowledged write is durable: the same setting for the MNodes' raft log journal
/// and the chunkstores' volumes of a process.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Durability {
    /// On disk before it is acknowledged (a synchronous write or an fdatasync per group
    /// commit): survives a power loss.
    #[default]
    Disk,
    /// Written to the kernel before it is acknowledged, on disk within
    /// [`BACKGROUND_SYNC`] or at the next fsync(2) through a mount: survives a crash
    /// (kill -9) of any saker process, not a power loss or a kernel crash. What a local file
    /// system gives a write that is not fsynced, and JuiceFS on SQLite by default.
    Process,
}

/// How often a process in [`Durability::Process`] syncs what it wrote to disk.
pub const BACKGROUND_SYNC: std::time::Duration = std::time::Duration::from_secs(1);

/// Starts thread `name`, which calls `sync` on `target` every [`BACKGROUND_SYNC`] and ends once
/// `target` is dropped: the background sync of [`Durability::Process`] (the raft log journal's,
/// the chunk volumes').
pub fn spawn_background_sync<T: Send + Sync + 'static>(
    name: &str,
    target: std::sync::Weak<T>,
    sync: impl Fn(&T) + Send + 'static,
) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || loop {
            std::thread::sleep(BACKGROUND_SYNC);
            let Some(target) = target.upgrade() else {
                return;
            };
            sync(&target);
        })
        .map(drop)
}

impl std::str::FromStr for Durability {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "disk" => Ok(Durability::Disk),
            "process" => Ok(Durability::Process),
            other => Err(format!("durability is disk or process, not {other:?}")),
        }
    }
}

/// Inode number. Id 1 is the root directory; ids are allocated per MNode group.
pub type InodeId = u64;
