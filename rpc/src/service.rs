//! The service traits: metadata (one implementation per MNode in process, one over the
//! network) and the coordinator's namespace protocols.

use async_trait::async_trait;

use crate::attr::Attr;
use crate::error::MetaError;
use crate::meta::{ClientTag, Cred, MetaRequest, MetaResponse, RemoveCond, RenameVersioning};
use crate::InodeId;

/// A metadata node (or a handle to a remote one).
#[async_trait]
pub trait MetaService: Send + Sync + 'static {
    /// Executes one operation. `tag` identifies writes for exactly-once replies; reads ignore it.
    async fn call(&self, tag: ClientTag, req: MetaRequest) -> Result<MetaResponse, MetaError>;

    /// The version of the exception table this group routes by, as of its latest reply (every
    /// reply carries it): a client holding an older table fetches the group's with
    /// `MetaRequest::Exceptions`. 0 where unknown.
    fn routing_version(&self) -> u64 {
        0
    }
}

/// The coordinator's namespace protocols: the operations that need every MNode's agreement.
#[async_trait]
pub trait CoordinatorService: Send + Sync + 'static {
    /// Removes the directory at `path` if `cond` holds across all groups (the rmdir protocol:
    /// freeze at the owner, invalidate everywhere, check, remove). `NotEmpty` if it does not.
    async fn remove_dir(&self, path: Vec<String>, cond: RemoveCond) -> Result<(), MetaError>;

    /// Renames `from` to `to`, checking `cred`'s permissions, as one logged move of the
    /// inode's record between the names' owners (two steps, rolled forward after a crash). A
    /// directory is frozen and invalidated everywhere first (its entries stay: they are keyed
    /// by its id) and may replace an empty directory; a file's path is blocked at its owner
    /// and its chunks move with it. `noreplace` refuses an existing target. Answers the moved
    /// inode.
    async fn rename(
        &self,
        from: Vec<String>,
        to: Vec<String>,
        noreplace: bool,
        cred: Cred,
        versioning: RenameVersioning,
    ) -> Result<Attr, MetaError>;

    /// chmod/chown of a directory (`set` is a `MetaRequest::SetAttr` naming one): with the
    /// path locked, the directory frozen at its owner and its dentry invalidated on every
    /// group, the owner applies the change; then it thaws. No replica keeps the old mode or
    /// owner, and a group that cannot be reached fails the change before it is made. Answers
    /// the new attributes.
    async fn set_dir_attr(&self, set: MetaRequest) -> Result<Attr, MetaError>;

    /// link(2): `to` becomes one more name of the file at `from` (which must be inode
    /// `expect` when given), checking `cred`'s permissions: the file is counted at its home
    /// group, the new name stored at its owner, and the count settled, as one logged intent
    /// finished after a crash. Answers the file's attributes.
    async fn link(
        &self,
        from: Vec<String>,
        to: Vec<String>,
        expect: Option<InodeId>,
        cred: Cred,
    ) -> Result<Attr, MetaError>;
}

/// An admin API request that another node took and authorized (signed with the root key),
/// handed to the node where what it asks for runs (the active coordinator's): its HTTP method,
/// path (with the query) and body.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct AdminCall {
    pub method: String,
    pub path: String,
    pub body: Vec<u8>,
}

/// The answer to an [`AdminCall`]: the HTTP status and body this node's admin API gave.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct AdminReply {
    pub status: u16,
    pub body: Vec<u8>,
}

/// A node's admin API, as other nodes reach it over RPC (node credentials only).
#[async_trait]
pub trait AdminService: Send + Sync + 'static {
    async fn admin(&self, call: AdminCall) -> AdminReply;
}

/// The raft traffic of a process's MNode replicas: an opaque openraft message for one group
/// (encoded and decoded by the MNode crate), answered with an opaque reply. `Err` is a
/// message the replica could not take (undecodable, no such group here), as text.
#[async_trait]
pub trait RaftService: Send + Sync + 'static {
    async fn raft(&self, group: u32, body: bytes::Bytes) -> Result<Vec<u8>, String>;
}

/// Reads of versions whose bytes live in a remote tier, for callers that do not hold the
/// tiers' keys (a library mount with a client credential): the node reads through with its
/// own. `Err` is why it could not, as text.
#[async_trait]
pub trait TierReadService: Send + Sync + 'static {
    /// Bytes `start..end` of the tiered version `tier` (`end - start` at most
    /// [`MAX_TIER_READ`]; a range past the version's end is cut there).
    async fn read(
        &self,
        tier: crate::TierRef,
        start: u64,
        end: u64,
    ) -> Result<bytes::Bytes, String>;
}

/// The most one tier read call moves.
pub const MAX_TIER_READ: u64 = 16 << 20;
