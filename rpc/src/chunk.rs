//! The chunk service as it crosses the network: requests, replies and errors of a remote
//! chunkstore, and the [`ChunkService`] trait its server side implements.
//!
//! The storage trait itself (`ChunkStore`) lives in the chunkstore crate, which depends on this
//! one; that crate adapts a store to [`ChunkService`] for [`RpcServer`](crate::RpcServer) and
//! implements `ChunkStore` over [`RpcChannel::chunk`](crate::RpcChannel::chunk).

use async_trait::async_trait;
use bytes::Bytes;
use serde::{Deserialize, Serialize};

/// The most chunk ids one listing page may ask for (1.6 MiB of ids).
pub const MAX_LIST_PAGE: u32 = 100_000;

/// Where the page after `page` (asked for above `after`) starts: above its last id if it was
/// full, `None` once it was the last. A full page that does not move on (a broken peer) is
/// taken as the last.
pub fn next_page(after: Option<u128>, page: &[u128]) -> Option<u128> {
    let last = *page.last()?;
    (page.len() >= MAX_LIST_PAGE as usize && after.is_none_or(|a| last > a)).then_some(last)
}

/// What an RPC endpoint that runs no chunkstore answers a chunk request with.
pub const NO_CHUNKSTORE: &str = "no chunkstore is served at this address";

/// One operation on a remote chunkstore. Chunk ids are the 128-bit random ids of `ChunkRef`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ChunkRequest {
    /// Store durably; an existing id is `AlreadyExists`.
    Put { id: u128, data: Bytes },
    /// Read `len` bytes at `offset` (clamped to the chunk's end), CRC-checked. A client's
    /// read shows the grant its MNode gave it for the chunk ([`crate::capability`]).
    Get {
        id: u128,
        offset: u64,
        len: u64,
        grant: Option<crate::capability::ChunkGrant>,
    },
    /// Delete; a missing chunk is fine.
    Delete { id: u128 },
    /// Ids of chunks last modified before `unix_ns` (nanoseconds since the Unix epoch, by the
    /// caller's clock; the leak scrub's cut-off is hours in the past, far above clock skew), in
    /// pages: the at most `limit` (up to [`MAX_LIST_PAGE`]) smallest ids above `after`, in
    /// order; a shorter page is the last.
    ListOlderThan {
        unix_ns: u128,
        after: Option<u128>,
        limit: u32,
    },
    /// Make every chunk put so far durable on disk (answered at once where each put is).
    SyncToDisk,
    /// Store `data` durably as shard `shard.index` of an erasure-coded chunk (stored under an
    /// id derived from both, in the shard format); an existing shard is `AlreadyExists`.
    PutShard { shard: ShardName, data: Bytes },
    /// Read `len` bytes at `offset` of shard `index` of erasure-coded chunk `chunk`, as `Get`
    /// reads a chunk; a client's read shows its grant for the chunk.
    GetShard {
        chunk: u128,
        data: u8,
        parity: u8,
        index: u8,
        offset: u64,
        len: u64,
        grant: Option<crate::capability::ChunkGrant>,
    },
    /// Read bytes of an erasure-coded chunk whose shards are all behind this endpoint (an
    /// all-in-one server's several chunk directories), rebuilt there if need be; a client's
    /// read shows its grant for the chunk.
    GetCoded {
        read: CodedRead,
        grant: Option<crate::capability::ChunkGrant>,
    },
}

/// Bytes of an erasure-coded chunk read by the store that coded it ([`ChunkRequest::GetCoded`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CodedRead {
    pub chunk: u128,
    pub data: u8,
    pub parity: u8,
    /// The chunk's stored length.
    pub stored: u64,
    pub offset: u64,
    pub len: u64,
}

/// Which shard of which erasure-coded chunk ([`ChunkRequest::PutShard`]): the chunk, the shard's
/// index (data shards first), the layout (`data` + `parity` shards) and the chunk's length.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardName {
    pub chunk: u128,
    pub index: u8,
    pub data: u8,
    pub parity: u8,
    pub chunk_len: u64,
}

/// A successful answer; which variant follows from the request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ChunkReply {
    Put { len: u64, crc32c: u32 },
    Data(Bytes),
    Done,
    Ids(Vec<u128>),
}

/// Why a chunk operation failed, as it travels back.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum ChunkWireError {
    #[error("chunk {0:032x} not found")]
    NotFound(u128),
    #[error("chunk {0:032x} already exists")]
    AlreadyExists(u128),
    #[error("chunk {id:032x} is corrupt: {detail}")]
    Corrupt { id: u128, detail: String },
    #[error("chunkstore I/O error: {0}")]
    Io(String),
    #[error("bad format: {0}")]
    BadFormat(String),
    /// The chunkstore's disk is full: nothing was stored.
    #[error("no space left on the chunkstore: {0}")]
    Full(String),
    /// The request did not reach the chunkstore, or its answer did not come back.
    #[error("chunkstore unavailable: {0}")]
    Unavailable(String),
    /// The caller's cluster credential does not allow this request.
    #[error("chunkstore request refused: {0}")]
    Refused(String),
    /// The answer does not fit the request (a peer speaking another protocol).
    #[error("unexpected chunkstore reply: {0}")]
    Protocol(String),
}

impl ChunkRequest {
    /// Whether a client credential may send it: reads, writes and syncs of chunks, reads of
    /// shards (deletes and listings are the GC's, shards written by the nodes' encoder).
    pub fn client_allowed(&self) -> bool {
        matches!(
            self,
            ChunkRequest::Put { .. }
                | ChunkRequest::Get { .. }
                | ChunkRequest::GetShard { .. }
                | ChunkRequest::GetCoded { .. }
                | ChunkRequest::SyncToDisk
        )
    }

    /// How long the call may take before its caller gives up on it (a store that took the
    /// connection but hangs, say on a dying disk): `base` for small requests, plus a second
    /// per [`DEADLINE_RATE`] bytes moved, and a minute for a listing of every chunk.
    pub fn deadline(&self, base: std::time::Duration) -> std::time::Duration {
        let moved = match self {
            ChunkRequest::Put { data, .. } | ChunkRequest::PutShard { data, .. } => {
                data.len() as u64
            }
            ChunkRequest::Get { len, .. } | ChunkRequest::GetShard { len, .. } => {
                (*len).min(DEADLINE_MAX_CHUNK)
            }
            ChunkRequest::GetCoded { read, .. } => read.len.min(DEADLINE_MAX_CHUNK),
            ChunkRequest::ListOlderThan { .. } => return base.max(LIST_DEADLINE),
            ChunkRequest::Delete { .. } | ChunkRequest::SyncToDisk => 0,
        };
        transfer_deadline(base, moved)
    }

    /// The request's name in metrics and spans.
    pub fn op_name(&self) -> &'static str {
        match self {
            ChunkRequest::Put { .. } => "put",
            ChunkRequest::Get { .. } => "get",
            ChunkRequest::Delete { .. } => "delete",
            ChunkRequest::ListOlderThan { .. } => "list_older_than",
            ChunkRequest::SyncToDisk => "sync_to_disk",
            ChunkRequest::PutShard { .. } => "put_shard",
            ChunkRequest::GetShard { .. } => "get_shard",
            ChunkRequest::GetCoded { .. } => "get_coded",
        }
    }
}

/// How long a chunk call may take beyond its transfer ([`ChunkRequest::deadline`]).
pub const CHUNK_DEADLINE: std::time::Duration = std::time::Duration::from_secs(10);
/// How long a call that moves `bytes` may take: `base`, plus a second per
/// [`DEADLINE_RATE`] bytes.
pub fn transfer_deadline(base: std::time::Duration, bytes: u64) -> std::time::Duration {
    base + std::time::Duration::from_secs_f64(bytes as f64 / DEADLINE_RATE as f64)
}

/// The slowest transfer a chunk call is given time for, in bytes per second.
pub const DEADLINE_RATE: u64 = 1 << 20;
/// The most a read moves (a read of a whole chunk asks for `u64::MAX`).
const DEADLINE_MAX_CHUNK: u64 = 64 << 20;
/// How long listing every chunk of a store may take.
const LIST_DEADLINE: std::time::Duration = std::time::Duration::from_secs(60);

/// The server side of a remote chunkstore.
#[async_trait]
pub trait ChunkService: Send + Sync + 'static {
    async fn call(&self, req: ChunkRequest) -> Result<ChunkReply, ChunkWireError>;
}
