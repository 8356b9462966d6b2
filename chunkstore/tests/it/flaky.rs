//! [`Flaky`]: an in-memory member the tests take down and wipe, and clusters of them.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::SystemTime;

use bytes::Bytes;
use saker_chunkstore::format::ShardOf;
use saker_chunkstore::{
    ChunkError, ChunkId, ChunkInfo, ChunkStats, ChunkStore, MemChunkStore, Member,
    ReplicatedChunkStore,
};

/// A member that can be taken down (every call `Unavailable`) and wiped.
#[derive(Default)]
pub struct Flaky {
    pub inner: parking_lot::RwLock<Arc<MemChunkStore>>,
    pub down: AtomicBool,
}

impl Flaky {
    pub fn check(&self) -> Result<(), ChunkError> {
        if self.down.load(Ordering::Relaxed) {
            Err(ChunkError::Unavailable("down".into()))
        } else {
            Ok(())
        }
    }

    pub fn store(&self) -> Arc<MemChunkStore> {
        self.inner.read().clone()
    }

    pub fn wipe(&self) {
        *self.inner.write() = Arc::new(MemChunkStore::new());
    }

    pub async fn holds(&self, id: ChunkId) -> bool {
        self.store().get(id, 0, 1).await.is_ok()
    }
}

#[async_trait::async_trait]
impl ChunkStore for Flaky {
    async fn put(&self, id: ChunkId, data: Bytes) -> Result<ChunkInfo, ChunkError> {
        self.check()?;
        self.store().put(id, data).await
    }
    async fn get(&self, id: ChunkId, offset: u64, len: u64) -> Result<Bytes, ChunkError> {
        self.check()?;
        self.store().get(id, offset, len).await
    }
    async fn put_shard(&self, of: ShardOf, data: Bytes) -> Result<ChunkInfo, ChunkError> {
        self.check()?;
        self.store().put_shard(of, data).await
    }
    async fn delete(&self, id: ChunkId) -> Result<(), ChunkError> {
        self.check()?;
        self.store().delete(id).await
    }
    async fn list_older_than(&self, t: SystemTime) -> Result<Vec<ChunkId>, ChunkError> {
        self.check()?;
        self.store().list_older_than(t).await
    }
    fn stats(&self) -> ChunkStats {
        self.store().stats()
    }
}

pub fn cluster(n: usize, replicas: usize) -> (Vec<Arc<Flaky>>, ReplicatedChunkStore) {
    let flaky: Vec<Arc<Flaky>> = (0..n).map(|_| Arc::new(Flaky::default())).collect();
    let members = flaky
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let name = format!("127.0.0.1:{}", 9902 + 10 * i);
            Member::placing(name, f.clone() as Arc<dyn ChunkStore>, i == 0)
        })
        .collect();
    (flaky, ReplicatedChunkStore::new(members, replicas))
}
