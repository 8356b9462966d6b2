//! Runs the conformance suite against every [`ChunkStore`] implementation.

use saker_chunkstore::{conformance, DiskChunkStore, MemChunkStore};

#[tokio::test]
async fn mem_store_conforms() {
    conformance::run_all(&MemChunkStore::new()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disk_store_conforms() {
    let dir = tempfile::tempdir().unwrap();
    let store = DiskChunkStore::open(dir.path()).unwrap();
    conformance::run_all(&store).await;
}
