//! Chunkstores across the network: [`RemoteChunkStore`] is a [`ChunkStore`] whose chunks live
//! in another process, and [`ChunkServer`] serves any store to it through
//! [`saker_rpc::RpcServer::with_chunks`].
//!
//! Durability is the serving store's: a `put` answers after the remote store synced the chunk.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use bytes::Bytes;
use saker_rpc::{
    ChunkReply, ChunkRequest, ChunkService, ChunkWireError, CodedRead, RpcChannel, ShardName,
    MAX_LIST_PAGE,
};

use crate::ec::Layout;
use crate::error::ChunkError;
use crate::format::ShardOf;
use crate::id::ChunkId;
use crate::stats::{ChunkStats, Counters};
use crate::store::{ChunkInfo, ChunkStore};

/// A chunkstore in another process, reached over the saker RPC transport.
pub struct RemoteChunkStore {
    channel: RpcChannel,
    /// The traffic of this handle (the serving process exports the store's own totals).
    counters: Counters,
}

impl RemoteChunkStore {
    pub fn new(channel: RpcChannel) -> Self {
        Self {
            channel,
            counters: Counters::default(),
        }
    }

    /// The bytes a read request answers, counted.
    async fn read(&self, req: ChunkRequest) -> Result<Bytes, ChunkError> {
        match self.call(req).await? {
            ChunkReply::Data(bytes) => {
                self.counters.read(bytes.len() as u64);
                Ok(bytes)
            }
            other => Err(unexpected(&other)),
        }
    }

    async fn call(&self, req: ChunkRequest) -> Result<ChunkReply, ChunkError> {
        self.channel.chunk(req).await.map_err(|e| {
            if matches!(e, ChunkWireError::Corrupt { .. }) {
                self.counters.crc_failure();
            }
            from_wire(e)
        })
    }
}

#[async_trait]
impl ChunkStore for RemoteChunkStore {
    async fn put(&self, id: ChunkId, data: Bytes) -> Result<ChunkInfo, ChunkError> {
        match self.call(ChunkRequest::Put { id: id.0, data }).await? {
            ChunkReply::Put { len, crc32c } => {
                self.counters.put(len);
                Ok(ChunkInfo { len, crc32c })
            }
            other => Err(unexpected(&other)),
        }
    }

    async fn get(&self, id: ChunkId, offset: u64, len: u64) -> Result<Bytes, ChunkError> {
        self.read(ChunkRequest::Get {
            id: id.0,
            offset,
            len,
            grant: saker_rpc::capability::held(id.0),
        })
        .await
    }

    async fn put_shard(&self, of: ShardOf, data: Bytes) -> Result<ChunkInfo, ChunkError> {
        let shard = ShardName {
            chunk: of.chunk.0,
            index: of.index,
            data: of.layout.data() as u8,
            parity: of.layout.parity() as u8,
            chunk_len: of.chunk_len,
        };
        match self.call(ChunkRequest::PutShard { shard, data }).await? {
            ChunkReply::Put { len, crc32c } => {
                self.counters.put(len);
                Ok(ChunkInfo { len, crc32c })
            }
            other => Err(unexpected(&other)),
        }
    }

    async fn get_shard(
        &self,
        chunk: ChunkId,
        layout: Layout,
        index: u8,
        offset: u64,
        len: u64,
    ) -> Result<Bytes, ChunkError> {
        let req = ChunkRequest::GetShard {
            chunk: chunk.0,
            data: layout.data() as u8,
            parity: layout.parity() as u8,
            index,
            offset,
            len,
            grant: saker_rpc::capability::held(chunk.0),
        };
        self.read(req).await
    }

    async fn get_coded(
        &self,
        chunk: ChunkId,
        layout: Layout,
        stored: u64,
        offset: u64,
        len: u64,
    ) -> Result<Bytes, ChunkError> {
        let read = CodedRead {
            chunk: chunk.0,
            data: layout.data() as u8,
            parity: layout.parity() as u8,
            stored,
            offset,
            len,
        };
        let req = ChunkRequest::GetCoded {
            read,
            grant: saker_rpc::capability::held(chunk.0),
        };
        self.read(req).await
    }

    async fn delete(&self, id: ChunkId) -> Result<(), ChunkError> {
        match self.call(ChunkRequest::Delete { id: id.0 }).await? {
            ChunkReply::Done => {
                self.counters.deleted();
                Ok(())
            }
            other => Err(unexpected(&other)),
        }
    }

    async fn list_older_than(&self, older_than: SystemTime) -> Result<Vec<ChunkId>, ChunkError> {
        let unix_ns = older_than
            .duration_since(UNIX_EPOCH)
            .unwrap_or(Duration::ZERO)
            .as_nanos();
        let mut all = Vec::new();
        let mut after = None;
        loop {
            let req = ChunkRequest::ListOlderThan {
                unix_ns,
                after,
                limit: MAX_LIST_PAGE,
            };
            let ids = match self.call(req).await? {
                ChunkReply::Ids(ids) => ids,
                other => return Err(unexpected(&other)),
            };
            let next = saker_rpc::next_page(after, &ids);
            all.extend(ids.into_iter().map(ChunkId));
            if next.is_none() {
                return Ok(all);
            }
            after = next;
        }
    }

    async fn sync_to_disk(&self) -> Result<(), ChunkError> {
        match self.call(ChunkRequest::SyncToDisk).await? {
            ChunkReply::Done => Ok(()),
            other => Err(unexpected(&other)),
        }
    }

    /// What this handle wrote, read and deleted (deletes of missing chunks included), and the
    /// corrupt chunks the remote store reported to it.
    fn stats(&self) -> ChunkStats {
        self.counters.snapshot()
    }
}

/// Serves a [`ChunkStore`] to remote callers.
pub struct ChunkServer(pub Arc<dyn ChunkStore>);

#[async_trait]
impl ChunkService for ChunkServer {
    async fn call(&self, req: ChunkRequest) -> Result<ChunkReply, ChunkWireError> {
        let store = &self.0;
        let reply = match req {
            ChunkRequest::Put { id, data } => {
                let info = store.put(ChunkId(id), data).await.map_err(to_wire)?;
                ChunkReply::Put {
                    len: info.len,
                    crc32c: info.crc32c,
                }
            }
            ChunkRequest::Get {
                id, offset, len, ..
            } => ChunkReply::Data(store.get(ChunkId(id), offset, len).await.map_err(to_wire)?),
            ChunkRequest::GetCoded { read, .. } => ChunkReply::Data(
                store
                    .get_coded(
                        ChunkId(read.chunk),
                        Layout::new(read.data, read.parity).map_err(to_wire)?,
                        read.stored,
                        read.offset,
                        read.len,
                    )
                    .await
                    .map_err(to_wire)?,
            ),
            ChunkRequest::PutShard { shard, data } => {
                let layout = Layout::new(shard.data, shard.parity).map_err(to_wire)?;
                let of = ShardOf {
                    chunk: ChunkId(shard.chunk),
                    index: shard.index,
                    layout,
                    chunk_len: shard.chunk_len,
                };
                let info = store.put_shard(of, data).await.map_err(to_wire)?;
                ChunkReply::Put {
                    len: info.len,
                    crc32c: info.crc32c,
                }
            }
            ChunkRequest::GetShard {
                chunk,
                data,
                parity,
                index,
                offset,
                len,
                ..
            } => ChunkReply::Data(
                store
                    .get_shard(
                        ChunkId(chunk),
                        Layout::new(data, parity).map_err(to_wire)?,
                        index,
                        offset,
                        len,
                    )
                    .await
                    .map_err(to_wire)?,
            ),
            ChunkRequest::Delete { id } => {
                store.delete(ChunkId(id)).await.map_err(to_wire)?;
                ChunkReply::Done
            }
            ChunkRequest::SyncToDisk => {
                store.sync_to_disk().await.map_err(to_wire)?;
                ChunkReply::Done
            }
            ChunkRequest::ListOlderThan {
                unix_ns,
                after,
                limit,
            } => {
                let secs = (unix_ns / 1_000_000_000).min(u64::MAX as u128) as u64;
                let nanos = (unix_ns % 1_000_000_000) as u32;
                let cut = UNIX_EPOCH + Duration::new(secs, nanos);
                let mut ids: Vec<u128> = store
                    .list_older_than(cut)
                    .await
                    .map_err(to_wire)?
                    .into_iter()
                    .map(|id| id.0)
                    .filter(|id| after.is_none_or(|a| *id > a))
                    .collect();
                ids.sort_unstable();
                ids.truncate(limit.min(MAX_LIST_PAGE) as usize);
                ChunkReply::Ids(ids)
            }
        };
        Ok(reply)
    }
}

fn to_wire(e: ChunkError) -> ChunkWireError {
    match e {
        ChunkError::NotFound(id) => ChunkWireError::NotFound(id.0),
        ChunkError::AlreadyExists(id) => ChunkWireError::AlreadyExists(id.0),
        ChunkError::Corrupt { id, detail } => ChunkWireError::Corrupt { id: id.0, detail },
        ChunkError::Io(e) => ChunkWireError::Io(e.to_string()),
        ChunkError::BadFormat(s) => ChunkWireError::BadFormat(s),
        ChunkError::Unavailable(s) => ChunkWireError::Unavailable(s),
        ChunkError::Full(s) => ChunkWireError::Full(s),
    }
}

fn from_wire(e: ChunkWireError) -> ChunkError {
    match e {
        ChunkWireError::NotFound(id) => ChunkError::NotFound(ChunkId(id)),
        ChunkWireError::AlreadyExists(id) => ChunkError::AlreadyExists(ChunkId(id)),
        ChunkWireError::Corrupt { id, detail } => ChunkError::Corrupt {
            id: ChunkId(id),
            detail,
        },
        ChunkWireError::Io(s) => ChunkError::Io(std::io::Error::other(s)),
        ChunkWireError::BadFormat(s) => ChunkError::BadFormat(s),
        ChunkWireError::Full(s) => ChunkError::Full(s),
        ChunkWireError::Unavailable(s) | ChunkWireError::Protocol(s) => ChunkError::Unavailable(s),
        ChunkWireError::Refused(s) => ChunkError::Unavailable(format!("refused: {s}")),
    }
}

fn unexpected(reply: &ChunkReply) -> ChunkError {
    let kind = match reply {
        ChunkReply::Put { .. } => "Put",
        ChunkReply::Data(_) => "Data",
        ChunkReply::Done => "Done",
        ChunkReply::Ids(_) => "Ids",
    };
    ChunkError::Unavailable(format!("chunkstore answered out of protocol ({kind})"))
}
