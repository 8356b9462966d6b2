//! [`CodedReads`]: a store's reads of one file's chunks, some of them erasure-coded, through
//! plain [`ChunkStore::get`] calls, so that readers written against `get` (sealed packages,
//! ranges, streams) read coded chunks unchanged: a chunk it knows as coded is read with
//! [`ChunkStore::get_coded`] (or, through `get_parts`, [`ChunkStore::get_coded_parts`]), any
//! other as before.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::SystemTime;

use bytes::Bytes;

use crate::ec::Layout;
use crate::error::ChunkError;
use crate::id::ChunkId;
use crate::stats::ChunkStats;
use crate::store::{ChunkInfo, ChunkStore};

/// `inner`, reading the chunks of `coded` (id: layout and stored bytes) as coded.
pub struct CodedReads {
    inner: Arc<dyn ChunkStore>,
    coded: HashMap<ChunkId, (Layout, u64)>,
}

impl CodedReads {
    /// Reads through `inner`, chunks `chunks` (id, stored bytes) coded in `layout`.
    pub fn new(
        inner: Arc<dyn ChunkStore>,
        layout: Layout,
        chunks: impl IntoIterator<Item = (ChunkId, u64)>,
    ) -> Self {
        let coded = chunks
            .into_iter()
            .map(|(id, stored)| (id, (layout, stored)))
            .collect();
        Self { inner, coded }
    }
}

#[async_trait::async_trait]
impl ChunkStore for CodedReads {
    async fn put(&self, id: ChunkId, data: Bytes) -> Result<ChunkInfo, ChunkError> {
        self.inner.put(id, data).await
    }

    async fn get(&self, id: ChunkId, offset: u64, len: u64) -> Result<Bytes, ChunkError> {
        match self.coded.get(&id) {
            Some(&(layout, stored)) => self.inner.get_coded(id, layout, stored, offset, len).await,
            None => self.inner.get(id, offset, len).await,
        }
    }

    async fn get_parts(
        &self,
        id: ChunkId,
        offset: u64,
        len: u64,
    ) -> Result<Vec<Bytes>, ChunkError> {
        match self.coded.get(&id) {
            Some(&(layout, stored)) => {
                self.inner
                    .get_coded_parts(id, layout, stored, offset, len)
                    .await
            }
            None => Ok(vec![self.inner.get(id, offset, len).await?]),
        }
    }

    async fn delete(&self, id: ChunkId) -> Result<(), ChunkError> {
        self.inner.delete(id).await
    }

    async fn list_older_than(&self, older_than: SystemTime) -> Result<Vec<ChunkId>, ChunkError> {
        self.inner.list_older_than(older_than).await
    }

    fn stats(&self) -> ChunkStats {
        self.inner.stats()
    }
}
