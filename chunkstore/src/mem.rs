//! [`MemChunkStore`]: an in-memory chunk store with the same semantics as the disk one, for
//! unit tests of other crates. Nothing is persisted and nothing can be corrupt.

use std::collections::HashMap;
use std::time::SystemTime;

use bytes::Bytes;
use parking_lot::Mutex;

use crate::error::ChunkError;
use crate::format::ShardOf;
use crate::id::ChunkId;
use crate::stats::{ChunkStats, Counters};
use crate::store::{ChunkInfo, ChunkStore};

#[derive(Debug)]
struct MemChunk {
    data: Bytes,
    modified: SystemTime,
}

/// In-memory [`ChunkStore`].
#[derive(Debug, Default)]
pub struct MemChunkStore {
    chunks: Mutex<HashMap<ChunkId, MemChunk>>,
    counters: Counters,
}

impl MemChunkStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of chunks stored.
    pub fn len(&self) -> usize {
        self.chunks.lock().len()
    }

    /// Whether no chunk is stored.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every chunk held, and its bytes (a test's snapshot of a store it then wipes).
    pub fn contents(&self) -> Vec<(ChunkId, Bytes)> {
        let chunks = self.chunks.lock();
        chunks.iter().map(|(id, c)| (*id, c.data.clone())).collect()
    }

    /// Drops every chunk (a lost disk).
    pub fn clear(&self) {
        self.chunks.lock().clear();
    }
}

#[async_trait::async_trait]
impl ChunkStore for MemChunkStore {
    async fn put(&self, id: ChunkId, data: Bytes) -> Result<ChunkInfo, ChunkError> {
        let info = ChunkInfo {
            len: data.len() as u64,
            crc32c: crc32c::crc32c(&data),
        };
        {
            let mut chunks = self.chunks.lock();
            if chunks.contains_key(&id) {
                return Err(ChunkError::AlreadyExists(id));
            }
            chunks.insert(
                id,
                MemChunk {
                    data,
                    modified: SystemTime::now(),
                },
            );
        }
        self.counters.put(info.len);
        Ok(info)
    }

    async fn put_shard(&self, of: ShardOf, data: Bytes) -> Result<ChunkInfo, ChunkError> {
        crate::ec::check_shard_len(&of, data.len() as u64)?;
        self.put(crate::ec::shard_id(of.chunk, of.layout, of.index), data)
            .await
    }

    async fn get(&self, id: ChunkId, offset: u64, len: u64) -> Result<Bytes, ChunkError> {
        let data = match self.chunks.lock().get(&id) {
            Some(chunk) => chunk.data.clone(),
            None => return Err(ChunkError::NotFound(id)),
        };
        let data_len = data.len() as u64;
        let start = offset.min(data_len);
        let end = offset.saturating_add(len).min(data_len);
        // Both are at most data.len(), a usize.
        let out = data.slice(start as usize..end as usize);
        self.counters.read(out.len() as u64);
        Ok(out)
    }

    async fn delete(&self, id: ChunkId) -> Result<(), ChunkError> {
        if self.chunks.lock().remove(&id).is_some() {
            self.counters.deleted();
        }
        Ok(())
    }

    async fn list_older_than(&self, older_than: SystemTime) -> Result<Vec<ChunkId>, ChunkError> {
        let mut ids: Vec<ChunkId> = self
            .chunks
            .lock()
            .iter()
            .filter(|(_, chunk)| chunk.modified < older_than)
            .map(|(id, _)| *id)
            .collect();
        ids.sort_unstable();
        Ok(ids)
    }

    fn stats(&self) -> ChunkStats {
        self.counters.snapshot()
    }
}
